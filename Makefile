# qgc — `make help` lists the targets.
PYTHON ?= python3
PIP ?= $(PYTHON) -m pip
LIT_JOBS ?= 2
DOT = examples/dot
SHARED ?= $(or $(QGC_SHARED),../shared)

.PHONY: help install demo demo-2b test test-full test-py test-lit lint docs ptx bench bench-tokens

help: ## list the targets
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

install: ## install qgc and its test tools, CPU torch first; skips what is there
	@$(PYTHON) -c "import torch" 2>/dev/null || $(PIP) install -q torch==2.13.0
	@$(PYTHON) scripts/check_install.py 2>/dev/null || $(PIP) install -q -e '.[test]'

demo: install ## compile the dot product, run it on the compiled weights, verify it (< 1 min)
	qgc $(DOT)/dot.ptx --emit=simt
	qgc $(DOT)/dot.ptx --stats --launch $(DOT)/launch.json
	qgc run $(DOT)/dot.ptx --launch $(DOT)/launch.json --engine simt
	qgc run $(DOT)/dot.ptx --launch $(DOT)/launch.json --engine compact --stats
	qgc run $(DOT)/dot.ptx --launch $(DOT)/launch.json --engine compact --verify \
	    --base-config small

demo-2b: install ## the dot product verified by the whole merged 2B stand-in in bfloat16 (1-2½ min, 10 GB)
	qgc run $(DOT)/dot.ptx --launch $(DOT)/launch.json --engine compact --verify \
	    --dtype bfloat16

test: install ## run every test: pytest, then lit
	$(MAKE) --no-print-directory test-py test-lit

test-full: install ## every test, with the long runs CI leaves out (every kernel at every level)
	$(PYTHON) -m pytest -m ''
	$(MAKE) --no-print-directory test-lit

test-py: ## pytest only
	$(PYTHON) -m pytest

test-lit: ## lit + FileCheck only
	lit -j $(LIT_JOBS) testsuite

lint: install ## ruff over the sources
	ruff check qgc dialects passes runtime tests bench

bench: install ## seconds per dot-product launch per engine, as ratios to ref (BENCH_ARGS=--model)
	$(PYTHON) bench/engines.py $(BENCH_ARGS)

bench-tokens: install ## tokens/s of every engine, model decode/generate/replay included (BENCH_ARGS='--config 2b --dtype bfloat16')
	$(PYTHON) bench/tokens.py $(BENCH_ARGS)

docs: install ## regenerate docs/ptx-coverage.md from the code
	$(PYTHON) -m qgc.coverage_doc examples $(SHARED)/kernels > docs/ptx-coverage.md.tmp \
		|| { rm -f docs/ptx-coverage.md.tmp; exit 2; }
	mv docs/ptx-coverage.md.tmp docs/ptx-coverage.md

ptx: ## regenerate the examples' nvcc and clang PTX (where the compilers exist)
	$(MAKE) -C examples ptx
