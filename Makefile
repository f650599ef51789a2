# Two commands do all set-up on a fresh Debian machine with Python 3.11:
#   make demo   run the main job on bundled real data (no cluster, no Prometheus)
#   make test   install everything the tests need and run them
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
APT_GET := $(shell command -v apt-get)
SUDO   := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: demo test lint venv system-deps bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Python 3.11 is required, found " + sys.version.split()[0]'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# Debian packages the tests use as real components: Prometheus (+promtool) and Chromium.
system-deps:
	@missing=""; \
	command -v prometheus >/dev/null && command -v promtool >/dev/null || missing="$$missing prometheus"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  $(SUDO) $(APT_GET) update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) $(APT_GET) install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

demo: $(STAMP)
	$(BIN)/predictive-headroom demo --out demo-out

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: $(STAMP) system-deps lint
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) demo-out .pytest_cache
