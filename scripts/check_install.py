"""Exit 0 when qgc is installed from this checkout with everything it needs."""

import importlib
import sys
from pathlib import Path

NEEDED = ("xdsl", "lark", "numpy", "transformers", "safetensors", "tqdm",
          "pytest", "xdist", "hypothesis", "lit", "filecheck")

try:
    for name in NEEDED:
        importlib.import_module(name)
    import qgc
except ImportError:
    sys.exit(1)
here = Path(__file__).resolve().parents[1] / "qgc"
sys.exit(0 if Path(qgc.__file__).resolve().parent == here else 1)
