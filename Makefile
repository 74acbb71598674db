# Quick start (see README.md):  make run   |   make test
# Each target sets up its own virtual environment in .venv on first use.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# A CPU build of torch for the tests (the torch adapters and torch-CPU paths); `make test TORCH=` skips it.
TORCH  ?= torch==2.13.0
EXTRAS ?= test,cpu,dtypes,docs
# `make ext` builds for the interpreter that will import it: the venv's when there is one.
EXT_PY ?= $(if $(wildcard $(PY)),$(PY),$(PYTHON))

.PHONY: run test test-pure ext venv gpu-test bench docs bindings bindings-check clean

# The install is shown as it goes (one line per package pip collects and installs), not silenced.
PIP_SHOW ?= --progress-bar off

$(VENV)/.installed: pyproject.toml
	@echo "== [1/3] creating the virtual environment $(VENV) (once; 'make clean' removes it)"
	$(PYTHON) -m venv $(VENV)
	@echo "== [2/3] upgrading pip"
	$(PY) -m pip install $(PIP_SHOW) --upgrade pip
	@echo "== [3/3] installing this checkout (editable) with the extras [$(EXTRAS)] and $(or $(TORCH),no torch):"
	@echo "==       the CUDA math wheels, scipy, pytest, sphinx, torch -- about 2 minutes on a fresh machine"
	$(PY) -m pip install $(PIP_SHOW) -e '.[$(EXTRAS)]' $(TORCH)
	@echo "== installed into $(VENV)"
	touch $@

venv: $(VENV)/.installed

run: venv            ## environment report + self-test (GPU when present, CPU otherwise)
	$(PY) -m nvmath

test: venv           ## the test suite (GPU tests skip with a reason when there is no GPU)
	$(PY) -m pytest tests -q

test-pure: venv      ## the suite again on the pure-Python call path (the compiled one disabled)
	NVMATH_PURE_PYTHON=1 $(PY) -m pytest tests -q

ext:                 ## build the optional compiled hot path (nvmath/_fastcall.c) in place; needs a C compiler
	$(EXT_PY) setup.py build_ext --inplace || $(EXT_PY) tools/build_fastcall.py

gpu-test:            ## on the GPU machine (no registry there): run from the source tree
	PYTHONUNBUFFERED=1 PYTHONPATH=. python3 -m pytest tests -q -x -p no:cacheprovider -m "not slow"

# `make bench`: a quick run of one suite (SUITE=matmul|fft|solvers|generic|ceilings|overhead|torch).
# Without a GPU only the CPU cases run and nothing is written unless BENCH_ARGS has --out DIR.
SUITE      ?= generic
BENCH_ARGS ?= --quick
bench: venv          ## a quick benchmark run: make bench SUITE=matmul BENCH_ARGS="--out /tmp/bench"
	@$(PY) -c "import matplotlib, rich" 2>/dev/null || { echo "== installing the bench extra (matplotlib, rich)"; \
		$(PY) -m pip install $(PIP_SHOW) -e '.[bench]'; }
	$(PY) -m benchmarks $(SUITE) $(BENCH_ARGS)

docs: venv
	$(PY) -m sphinx.cmd.build -W --keep-going -b html docs docs/_build/html

bindings: venv       ## regenerate nvmath/bindings from the pinned NVIDIA headers
	$(PY) -m pip install -q -r tools/bindings-requirements.txt
	$(PY) -m pip install -q --no-deps -r tools/bindings-requirements-nodeps.txt
	$(PY) tools/gen_bindings.py

bindings-check: venv
	$(PY) -m pip install -q -r tools/bindings-requirements.txt
	$(PY) -m pip install -q --no-deps -r tools/bindings-requirements-nodeps.txt
	$(PY) tools/check_bindings.py

clean:
	rm -rf $(VENV) docs/_build .pytest_cache build nvmath/_fastcall.*.so
