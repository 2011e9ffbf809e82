# The two commands of the README:
#   make train   set up everything, train the DSNN on MNIST (the main job; MNIST ships
#                inside the package, so no download is needed)
#   make test    set up everything, run the test suite
# Set-up is idempotent: a virtual environment in .venv with popsnn built from source,
# the CPU build of PyTorch 2.13.0 and snnTorch for the cross-check.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
TRAIN_ARGS ?=

.PHONY: setup train test clean

$(PY):
	$(PYTHON) -m venv $(VENV)

setup: $(PY)
	# The CPU wheel of torch first, pinned, so nothing resolves to a CUDA build.
	$(PY) -m pip install --quiet "torch==2.13.0"
	$(PY) -m pip install --quiet ".[test,crosscheck]"

train: setup
	$(PY) -m popsnn train $(TRAIN_ARGS)

test: setup
	$(PY) -m pytest -q

clean:
	rm -rf build $(VENV)
