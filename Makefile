# Two commands: `make run` (the main job) and `make test`. Both bootstrap .venv themselves.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.exactness-installed
KERNEL := exactness

# Jupyter, IPython and matplotlib keep their state inside the project, never in $HOME.
STATE := $(CURDIR)/.state
export JUPYTER_CONFIG_DIR := $(STATE)/jupyter/config
export JUPYTER_DATA_DIR := $(STATE)/jupyter/data
export JUPYTER_RUNTIME_DIR := $(STATE)/jupyter/runtime
export JUPYTER_PLATFORM_DIRS := 1
export IPYTHONDIR := $(STATE)/ipython
export MPLCONFIGDIR := $(STATE)/matplotlib
export XDG_CONFIG_HOME := $(STATE)/xdg/config
export XDG_CACHE_HOME := $(STATE)/xdg/cache

.PHONY: install run test test-fast lab bench clean-state

# Re-installs only when pyproject.toml changed since the last install (seconds when nothing did).
$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	mkdir -p $(IPYTHONDIR) $(MPLCONFIGDIR) $(JUPYTER_CONFIG_DIR) $(JUPYTER_DATA_DIR)  # else IPython warns they are not writable
	$(PY) -m ipykernel install --sys-prefix --name $(KERNEL) --display-name "Python (exactness)" >/dev/null
	touch $(STAMP)

install: $(STAMP)

run: install
	$(VENV)/bin/exactness run all

test: install
	@command -v chromium >/dev/null || { echo "installing Debian's chromium for the browser tests"; \
	  (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || echo "chromium could not be installed; browser tests will be skipped outside CI"; }
	$(PY) -m pytest

# The fast tier for a change in progress (no smoke batch, browser or benchmark); CI and `make test` run everything.
test-fast: install
	$(PY) -m pytest -m "not slow"

# etc/jupyter/jupyter_server_config.py: checkpoints under .state/, no 500 when a page closes while its kernel
# starts. The runtime folder (the server's token, the kernels' keys) is the user's only: 0700, and umask 077
# because the server writes jpserver-<pid>-open.html (its URL with the token) with the umask's mode.
# LAB_ARGS: more flags for the server (the browser test passes a port and a token).
lab: export JUPYTER_CONFIG_PATH := $(CURDIR)/etc/jupyter
lab: install
	mkdir -p -m 700 $(JUPYTER_RUNTIME_DIR) && chmod 700 $(JUPYTER_RUNTIME_DIR)
	umask 077 && $(VENV)/bin/jupyter lab --notebook-dir=notebooks --allow-root --no-browser \
	  --MappingKernelManager.default_kernel_name=$(KERNEL) $(LAB_ARGS)

clean-state:
	rm -rf $(STATE)

# Speed claims as measured ratios (hours on 2 cores: the paper presets, 10 and 60 s of DAC audio); not part of the tests.
bench: install
	$(PY) -m exactness.bench
