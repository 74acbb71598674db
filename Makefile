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

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[$(EXTRAS)]' $(TORCH)
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
