# Two commands do all set-up on a fresh Debian machine with Python 3.11, 3.12 or 3.13:
#   make demo   run the main job on bundled real data (no cluster, no Prometheus)
#   make test   install everything the tests need and run them
#   make test-fast  the pure and in-process tests only, for the edit-test loop (under a minute)
#   make e2e    the e2e tier: a real control plane built from Go modules (needs Go; see docs/e2e.md)
# The first of python3.11, python3.12, python3.13, python3 found is used (PYTHON=... to choose;
# a PYTHON other than the one .venv was made with makes .venv again, with a message).
PYTHON ?= $(shell for p in python3.11 python3.12 python3.13 python3; do command -v $$p && break; done)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PIP    := $(BIN)/python -m pip
UV     := $(BIN)/uv
LOCKED := requirements/build.txt requirements/test.txt
REQS   := build runtime test
UV_EXPORT := --frozen --quiet --format requirements.txt --no-emit-project --no-default-groups
EXPORT_build := --only-group build-tools
EXPORT_test := --extra test
SBOM   ?= sbom.cdx.json
RENDERED ?= rendered
APT_GET := $(shell command -v apt-get)
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: demo test test-fast lint lock lock-check sbom schema module-map venv system-deps bench clean render e2e-bins e2e FORCE

# A PYTHON given on the command line or in the environment that is not the one .venv was made
# with (another installation or version) makes .venv again, and says so; without PYTHON the
# existing .venv is used as it is.
PY_ID := import os, sys; print(os.path.realpath(sys.base_prefix), sys.version.split()[0])
ifneq ($(filter command line environment,$(origin PYTHON)),)
WANT_PY := $(shell $(PYTHON) -c '$(PY_ID)' 2>/dev/null)
HAVE_PY := $(shell test -x $(BIN)/python && $(BIN)/python -c '$(PY_ID)' 2>/dev/null)
ifneq ($(HAVE_PY),)
ifneq ($(WANT_PY),$(HAVE_PY))
VENV_STALE := FORCE
endif
endif
endif

venv: $(STAMP)

# $(call heartbeat,WHAT,COMMAND): run COMMAND, printing "WHAT: still at it (N s)" every
# HEARTBEAT seconds while it runs (pip is silent for a minute while it installs what it fetched).
HEARTBEAT ?= 10
heartbeat = ( trap 'kill $$s 2>/dev/null; exit 0' TERM; n=0; \
  while :; do sleep $(HEARTBEAT) & s=$$!; wait $$s; n=$$((n + $(HEARTBEAT))); \
  echo "$(1): still at it ($$n s)"; done ) & beat=$$!; \
  $(2); rc=$$?; kill $$beat 2>/dev/null; wait $$beat 2>/dev/null; exit $$rc

# The virtualenv is installed from the lock (requirements/*.txt, exported from uv.lock by
# `make lock`), every file checked against its hash: first the build tools, then the locked
# dependencies, then the package itself, editable and without dependencies. Each step says what it
# does; pip prints each package it fetches. setuptools' "Editable installation" notice (a
# warning block on every editable install) is filtered by its message.
$(STAMP): pyproject.toml $(LOCKED) $(VENV_STALE)
	@test -n "$(PYTHON)" || { echo "no python3 found; install Python 3.11, 3.12 or 3.13" >&2; exit 1; }
	@$(PYTHON) -c 'import sys; v = sys.version_info[:2]; sys.exit(0 if (3, 11) <= v <= (3, 13) else "Python 3.11, 3.12 or 3.13 is required; $(PYTHON) is " + sys.version.split()[0] + " (run make PYTHON=/path/to/python3.12 ...)")'
	@if [ -n "$(VENV_STALE)" ]; then \
	  echo "PYTHON=$(PYTHON) is Python $(lastword $(WANT_PY)) ($(firstword $(WANT_PY))), but $(VENV) was made with Python $(lastword $(HAVE_PY)) ($(firstword $(HAVE_PY))): making $(VENV) again" >&2; \
	  rm -rf $(VENV); \
	fi
	@echo "venv: $(VENV) with $$($(PYTHON) -c 'import sys; print(sys.executable, sys.version.split()[0])')"
	@if ! test -x $(BIN)/python; then $(call heartbeat,venv: creating,$(PYTHON) -m venv $(VENV)); fi
	@echo "venv: build tools from requirements/build.txt (pip, setuptools, wheel)"
	@$(call heartbeat,venv: build tools,$(PIP) install --quiet --require-hashes -r requirements/build.txt)
	@echo "venv: $$(grep -c '^[a-z0-9]' requirements/test.txt) locked packages from requirements/test.txt (a few minutes on a fresh machine)"
	@$(call heartbeat,venv: installing,$(PIP) install --require-hashes -r requirements/test.txt)
	@echo "venv: predictive-headroom itself (editable, no dependencies)"
	@PYTHONWARNINGS='ignore:Editable installation' $(PIP) install --quiet --no-deps --no-build-isolation -e .
	@$(PIP) check >/dev/null || { $(PIP) check; echo "if pyproject.toml asks for more than the lock holds: make lock" >&2; exit 1; }
	@touch $(STAMP)
	@echo "venv: ready"

# uv.lock from pyproject.toml (for Python 3.11-3.13 on every platform; versions already locked
# stay unless pyproject.toml rules them out, UPGRADE=1 moves every package to its newest), then the
# hashed requirement files pip installs, exported from it: requirements/build.txt (the build tools),
# runtime.txt (the image) and test.txt (make venv). `make lock-check` fails when any is stale.
# These need only uv (from the locked test set), not a .venv up to date with pyproject.toml: a
# new dependency is locked before the venv can install it.
$(UV):
	-@$(MAKE) --no-print-directory venv
	@test -x $(UV)

lock: | $(UV)
	$(UV) lock $(if $(UPGRADE),--upgrade)
	$(foreach f,$(REQS),$(UV) export $(UV_EXPORT) $(EXPORT_$(f)) > requirements/$(f).txt &&) true

lock-check: | $(UV)
	@$(UV) lock --check --quiet || { echo "uv.lock does not match pyproject.toml: run make lock" >&2; exit 1; }
	@$(foreach f,$(REQS),$(UV) export $(UV_EXPORT) $(EXPORT_$(f)) | cmp -s - requirements/$(f).txt || { echo "requirements/$(f).txt is not what uv.lock exports: run make lock" >&2; exit 1; };)
	@echo "lock: uv.lock and requirements/*.txt match pyproject.toml"

# A CycloneDX SBOM of what the image installs: the locked runtime set and its build tools.
sbom: | $(UV)
	$(UV) export --frozen --quiet --no-default-groups --group build-tools --format cyclonedx1.5 -o $(SBOM)
	@echo "sbom: $(SBOM) ($$(grep -c '"purl"' $(SBOM)) packages)"

# Debian packages the tests use as real components: Prometheus (+promtool) and Chromium.
system-deps:
	@missing=""; \
	command -v prometheus >/dev/null && command -v promtool >/dev/null || missing="$$missing prometheus"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(call heartbeat,system-deps: installing$$missing,$(SUDO) $(APT_GET) update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) $(APT_GET) install -y -qq --no-install-recommends $$missing >/dev/null); \
	fi

demo: $(STAMP)
	@echo "demo: predictive-headroom demo --out demo-out (forecast, plan, backtest, report; a few minutes)"
	@$(BIN)/predictive-headroom demo --out demo-out

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The chart's values.schema.json is generated from the policy models; a test fails when stale.
# The time zone names come from the installed tzdata (zones.txt), so every install agrees.
schema: $(STAMP)
	$(BIN)/python -m predictive_headroom.policy.zones > predictive_headroom/policy/zones.txt
	$(BIN)/python -m predictive_headroom.policy.chart > deploy/helm/predictive-headroom/values.schema.json

# The whole suite on TEST_WORKERS processes (pytest-xdist; TEST_WORKERS=0 runs it in one).
TEST_WORKERS ?= 2
test: lock-check $(STAMP) system-deps lint
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS)

# No Prometheus, no browser, nothing marked slow (pyproject's markers say what each means).
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow and not prometheus and not browser"

# The e2e tier (docs/e2e.md): etcd, kube-apiserver, kube-scheduler, kube-controller-manager and
# kwok built from their Go modules into a cache outside the repository (a second run builds
# nothing), then tests/e2e against them. `make test` neither collects tests/e2e nor needs Go.
e2e-bins:
	bash tests/e2e/build.sh >/dev/null

e2e: $(STAMP) e2e-bins
	PH_E2E=1 $(BIN)/python -m pytest -q tests/e2e --basetemp=$${TMPDIR:-/tmp}/predictive-headroom-e2e-$$(printf %s "$(CURDIR)" | sha256sum | cut -c1-8)

# The chart and the kustomize base as the cluster would get them, without helm or kubectl
# (Helm's own template engine through helm-python-sdk): make render [VALUES=my-values.yaml]
# [API_SERVER=172.18.0.2/32: the API server's address, which a render without a cluster cannot look up].
render: $(STAMP)
	$(BIN)/python tests/deploy_render.py --out $(RENDERED) $(if $(VALUES),-f $(VALUES)) $(if $(API_SERVER),--api-server $(API_SERVER))

bench: $(STAMP)
	$(BIN)/python bench/run.py

FORCE:

clean:
	rm -rf $(VENV) demo-out rendered .pytest_cache $(SBOM)

# docs/development.md's module map, from each module's docstring (a test fails when stale).
module-map: $(STAMP)
	$(BIN)/python tests/module_map.py --write
