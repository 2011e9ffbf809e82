# The two commands of the README:
#   make train   set up what training needs, train the DSNN on MNIST (the main job; MNIST
#                ships inside the package, so no download is needed)
#   make test    set up everything (training, test and cross-check extras), run the test suite
# Set-up is idempotent: a virtual environment in .venv with popsnn built from source; `make
# test` adds pytest, hypothesis, and the CPU build of PyTorch 2.13.0 with snnTorch for the
# cross-check.
#   make data    fetch Fashion-MNIST without root (Debian's dataset-fashion-mnist package,
#                unpacked into $(DATA_DIR)/fashion-mnist, where popsnn looks for it)
#   make event-data ARCHIVES="Train.zip Test.zip shd_train.h5.zip shd_test.h5.zip"
#                check the published N-MNIST / SHD archives (MD5), unpack and validate them
#                into $(DATA_DIR)/nmnist and $(DATA_DIR)/shd (no registry carries them: docs/data.md)
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
TRAIN_ARGS ?=
# popsnn.data.user_data_dir(): $POPSNN_DATA, else $XDG_DATA_HOME/popsnn, else ~/.local/share/popsnn
DATA_DIR ?= $(or $(POPSNN_DATA),$(or $(XDG_DATA_HOME),$(HOME)/.local/share)/popsnn)

.PHONY: setup setup-test train test data event-data clean

$(PY):
	$(PYTHON) -m venv $(VENV)

setup: $(PY)
	$(PY) -m pip install --quiet .

setup-test: $(PY)
	# The CPU wheel of torch first, pinned, so nothing resolves to a CUDA build.
	$(PY) -m pip install --quiet "torch==2.13.0"
	$(PY) -m pip install --quiet ".[test,crosscheck]"

train: setup
	$(PY) -m popsnn train $(TRAIN_ARGS)

test: setup-test
	$(PY) -m pytest -q

data:
	@command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || \
	  { echo "make data: needs apt-get and dpkg-deb (Debian/Ubuntu); else download Fashion-MNIST's IDX files into $(DATA_DIR)/fashion-mnist"; exit 1; }
	rm -rf $(DATA_DIR)/.deb && mkdir -p $(DATA_DIR)/.deb
	cd $(DATA_DIR)/.deb && apt-get download dataset-fashion-mnist
	dpkg-deb -x $(DATA_DIR)/.deb/dataset-fashion-mnist_*.deb $(DATA_DIR)/.deb/root
	rm -rf $(DATA_DIR)/fashion-mnist
	mv $(DATA_DIR)/.deb/root/usr/share/datasets/fashion-mnist $(DATA_DIR)/fashion-mnist
	rm -rf $(DATA_DIR)/.deb
	@echo "Fashion-MNIST is in $(DATA_DIR)/fashion-mnist"

event-data: setup
	@test -n "$(ARCHIVES)" || { echo 'make event-data: name the archives, e.g. ARCHIVES="Train.zip Test.zip shd_train.h5.zip shd_test.h5.zip" (see docs/data.md)'; exit 1; }
	$(PY) -m popsnn.event_data $(ARCHIVES)

clean:
	rm -rf build $(VENV)
