# Every target sets itself up: a fresh clone needs only python3 (>= 3.11) and make.
VENV   ?= .venv
# The interpreter a new $(VENV) is made with (make test-pythons sets it for each of its virtualenvs).
BASE_PYTHON ?= python3
PY     := $(VENV)/bin/python
BUILD  := build
# Keep Jupyter and IPython state inside the build tree (TOOLCHAIN.md §9).
export JUPYTER_CONFIG_DIR  := $(CURDIR)/$(BUILD)/.jhome/config
export JUPYTER_DATA_DIR    := $(CURDIR)/$(BUILD)/.jhome/data
export JUPYTER_RUNTIME_DIR := $(CURDIR)/$(BUILD)/.jhome/runtime
export IPYTHONDIR          := $(CURDIR)/$(BUILD)/.jhome/ipython
export JUPYTER_PLATFORM_DIRS := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1
# npm builds the JupyterLab extension (labextension/) during the install; its cache lives in the build tree too.
export npm_config_cache := $(CURDIR)/$(BUILD)/.npm
export npm_config_update_notifier := false
export npm_config_fund := false
export npm_config_audit := false
LABEXT_OUT := src/ipyagent/labextension
LIVE_OUT   := src/ipyagent/notebook/static
LABEXT_SRC := labextension/package.json labextension/package-lock.json labextension/tsconfig.json \
              $(wildcard labextension/src/*.ts labextension/style/*) src/ipyagent/notebook/render/policy.json \
              labextension/scripts/build_live.mjs
# The reference MCP servers the tests run (server-everything, server-filesystem), pinned in tests/support/mcp_npm/.
MCP_NPM    := $(BUILD)/mcp-servers

.PHONY: test test-pythons test-browser browser-deps demo bench mutation install clean

# The install runs the build hook (pyproject.toml), which builds the labextension with npm when its
# output is missing and copies it where JupyterLab finds it, editable install included. An output
# older than its sources is removed first, so it is rebuilt; an install that did not build it (a TypeScript
# error: the editable install carries on without it) stops here.
$(VENV)/.installed-%: pyproject.toml $(LABEXT_SRC)
	mkdir -p $(IPYTHONDIR) $(JUPYTER_CONFIG_DIR) $(JUPYTER_DATA_DIR) $(JUPYTER_RUNTIME_DIR)
	test -x $(PY) || $(BASE_PYTHON) -m venv $(VENV)
	if [ -f $(LABEXT_OUT)/package.json ] && [ -n "$$(find $(LABEXT_SRC) -newer $(LABEXT_OUT)/package.json)" ]; then rm -rf $(LABEXT_OUT) $(LIVE_OUT); fi
	$(PY) -m pip install -q -e '.[$*]'
	@test -f $(LABEXT_OUT)/package.json || { echo "make: the JupyterLab extension did not build (the editable install \
	goes on without it); see npm's errors with: $(PY) -m pip install -v -e '.[$*]'"; exit 1; }
	touch $@

# npm ci into build/mcp-servers: the exact versions of the lock file, no install scripts run.
$(MCP_NPM)/.installed: tests/support/mcp_npm/package.json tests/support/mcp_npm/package-lock.json
	mkdir -p $(MCP_NPM)
	cp tests/support/mcp_npm/package.json tests/support/mcp_npm/package-lock.json $(MCP_NPM)/
	cd $(MCP_NPM) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $@

install: $(VENV)/.installed-test $(MCP_NPM)/.installed

## make test: set up .venv (test extras, labextension) and Chromium, then run the unit/notebook suite and
## the browser suite, each its own pytest process (TOOLCHAIN.md §8, failure 7); fails if either fails
test: $(VENV)/.installed-test $(MCP_NPM)/.installed browser-deps
	$(PY) -m pytest -q; unit=$$?; \
	$(PY) -m pytest -q -m browser tests/browser; browser=$$?; \
	exit $$(( unit || browser ))

## make test-pythons: the unit/notebook suite on each Python of PYTHONS found (python3.X on PATH, else pyenv's
## newest 3.X), each in its own virtualenv build/py3.X (installed once, like .venv); an absent one is named, not
## tested. One of them: make test-pythons PYTHONS=3.13. Those in RAN (CI: the one make test just ran the suite on)
## are named and not run again. Fails if a suite fails.
PYTHONS ?= 3.11 3.12 3.13
RAN ?=
test-pythons: $(VENV)/.installed-test $(MCP_NPM)/.installed
	@tested=; absent=; failed=; \
	for v in $(PYTHONS); do \
	  case " $(RAN) " in *" $$v "*) echo "== Python $$v: its suite already ran (make test), not run again"; continue;; esac; \
	  py=$$(command -v python$$v) && $$py -c '' 2>/dev/null \
	    || py=$$(ls -d "$$(pyenv root 2>/dev/null)"/versions/$$v.*/bin/python$$v 2>/dev/null | sort -V | tail -n 1); \
	  if [ -z "$$py" ]; then echo "make test-pythons: Python $$v not found (PATH or pyenv): not tested" >&2; \
	    absent="$$absent $$v"; continue; fi; \
	  echo "== Python $$v: $$py, virtualenv $(BUILD)/py$$v"; tested="$$tested $$v"; \
	  $(MAKE) --no-print-directory VENV=$(BUILD)/py$$v BASE_PYTHON=$$py $(BUILD)/py$$v/.installed-test \
	    && $(BUILD)/py$$v/bin/python -m pytest -q || failed="$$failed $$v"; \
	done; \
	echo "make test-pythons: tested:$${tested:- none}; failed:$${failed:- none}; not found:$${absent:- none}"; \
	[ -z "$$failed" ]

## make test-browser: only the browser suite (JupyterLab in headless Chromium); screenshots in build/screenshots/
test-browser: $(VENV)/.installed-test $(MCP_NPM)/.installed browser-deps
	$(PY) -m pytest -q -m browser tests/browser

# Debian's Chromium, driven by Playwright (no browser download). Installed when missing (needs root, as in CI).
browser-deps:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" != 0 ]; then echo "make: Chromium is missing: install it as root (apt-get install chromium)" >&2; exit 1; fi; \
	  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; }

## make demo: set up .venv and execute notebooks/quickstart.ipynb headless into build/
demo: $(VENV)/.installed-demo
	$(PY) notebooks/execute.py notebooks/quickstart.ipynb --out $(BUILD)

## make bench: set up .venv with the bench extras (the peers) and run benchmarks/: a table each, JSON in build/bench/
## (stream decode also counts instructions with callgrind when valgrind is there)
bench: $(VENV)/.installed-bench
	$(PY) benchmarks/stream_decode.py $$(command -v valgrind >/dev/null && echo --instructions)
	for b in render_path import_load compare_wall summarize_context evaluate_matrix compare_view_bytes saved_evaluation; do $(PY) benchmarks/$$b.py || exit 1; done

## make mutation: mutmut over the driver template and its reading of a reply (decode.py), OpenAI Chat, the stream
## aggregator, the agent loop with its structured-output and ReAct helpers, core/ and agent/evaluation/
## ([tool.mutmut] in pyproject.toml), with the fast tests that pin their decisions; prints the kill rate
## (.ci/mutation_report.py). Not part of make test. Some 10,000 mutants: hours on two cores, so run it a module
## (mutmut's mutant-name glob) at a time, with the tests of its layer (TESTS replaces [tool.mutmut]'s wide
## selection for the run): make mutation MUTANTS='ipyagent.core.redact*' TESTS=tests/core/
## Each module run is kept in the repository, .ci/mutation-results/<module>.txt, stamped with the sha256 of the
## source it ran on (.ci/mutation_run.py); the report reads them all and names a module changed since as stale.
## The tests read ../shared/fixtures from the project's parent; mutants/ (mutmut's copy) is one level down, so a
## link ./shared -> ../shared is made for it.
## It runs on Python 3.12 or later (its own virtualenv, build/mutation-venv): on Python 3.11.7 mutmut's test
## statistics crashed the process (SIGSEGV in ContextVar.set, in the evaluation tests' threads), on 3.12 not.
## A python3.12 on PATH that does not run (a pyenv shim for a version not selected) is passed over for
## pyenv's own. MUTATION_PYTHON=/path/to/python3.12 chooses it. It runs niced, two workers: the machine is shared.
MUTANTS ?=
TESTS ?=
MUTATION_PYTHON ?= $(shell for v in 3.12 3.13 3.14; do p=$$(command -v python$$v) && "$$p" -c '' 2>/dev/null \
  || p=$$(ls -d "$$(pyenv root 2>/dev/null)"/versions/$$v.*/bin/python$$v 2>/dev/null | sort -V | tail -n 1); \
  [ -n "$$p" ] && { echo $$p; break; }; done)
MUT_VENV := $(BUILD)/mutation-venv
mutation:
	@test -n "$(MUTATION_PYTHON)" || { echo "make mutation: needs Python 3.12 or later (python3.12 on PATH or \
	pyenv); name it with MUTATION_PYTHON=..."; exit 1; }
	$(MAKE) --no-print-directory VENV=$(MUT_VENV) BASE_PYTHON=$(MUTATION_PYTHON) $(MUT_VENV)/.installed-mutation
	test -e shared || ln -s ../shared shared
	nice -n 19 $(MUT_VENV)/bin/python .ci/mutation_run.py $(foreach t,$(TESTS),--tests $(t)) $(MUTANTS) \
	  > $(BUILD)/mutation.log 2>&1 || { tail -n 20 $(BUILD)/mutation.log; exit 1; }
	$(MUT_VENV)/bin/python .ci/mutation_report.py

clean:
	rm -rf $(BUILD) $(VENV) mutants
