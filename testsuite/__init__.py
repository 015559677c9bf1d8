"""qgc's test suite: lit tests (driven by lit.cfg) and Python test helpers (gen/)."""
