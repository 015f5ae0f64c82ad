# Every target sets itself up: a fresh clone needs only python3 (>= 3.11) and make.
VENV   ?= .venv
PY     := $(VENV)/bin/python
BUILD  := build
# Keep Jupyter and IPython state inside the build tree (TOOLCHAIN.md §9).
export JUPYTER_CONFIG_DIR  := $(CURDIR)/$(BUILD)/.jhome/config
export JUPYTER_DATA_DIR    := $(CURDIR)/$(BUILD)/.jhome/data
export JUPYTER_RUNTIME_DIR := $(CURDIR)/$(BUILD)/.jhome/runtime
export IPYTHONDIR          := $(CURDIR)/$(BUILD)/.jhome/ipython
export JUPYTER_PLATFORM_DIRS := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: test demo install clean

$(VENV)/.installed-%: pyproject.toml
	mkdir -p $(IPYTHONDIR) $(JUPYTER_CONFIG_DIR) $(JUPYTER_DATA_DIR) $(JUPYTER_RUNTIME_DIR)
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q -e '.[$*]'
	touch $@

install: $(VENV)/.installed-test

## make test: set up .venv with the test extras and run every test
test: $(VENV)/.installed-test
	$(PY) -m pytest -q

## make demo: set up .venv and execute notebooks/quickstart.ipynb headless into build/
demo: $(VENV)/.installed-demo
	$(PY) notebooks/execute.py notebooks/quickstart.ipynb --out $(BUILD)

clean:
	rm -rf $(BUILD) $(VENV)
