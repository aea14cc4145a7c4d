# Every target bootstraps .venv itself, so a fresh clone needs only `make demo` or `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PACKAGES := reactor stores migration
OPENSSL_H := /usr/include/openssl/sha.h

.PHONY: demo eval test upgrade lint typecheck pytest bench bench-peers screenshots clean

# Python's bytecode caches are written on first import, whatever the shell says: with
# PYTHONDONTWRITEBYTECODE set (as container images often do) each of the suite's
# hundreds of Python processes compiled every module it imported again, ~1 s each.
unexport PYTHONDONTWRITEBYTECODE

# The environment is exactly uv.lock (`uv sync --locked`: it fails when pyproject.toml
# and the lock disagree, and never moves a version), so a fresh clone tests what was
# tested. --inexact keeps what is not in the lock (pip, and uv itself as pip put it).
# Where uv cannot be installed, pip installs from pyproject.toml's ranges instead.
# setup.py and the C source build reactor's one compiled module (optional: where it cannot
# be built, reactor runs as pure Python; tests/reactor/test_chainlink.py says so here). It
# needs OpenSSL's headers: installed with apt when missing, as Chromium is below.
$(STAMP): pyproject.toml uv.lock setup.py reactor/_recording/_chainlink.c | $(OPENSSL_H)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	if $(PY) -m pip install --quiet uv; then \
		UV_PROJECT_ENVIRONMENT=$(VENV) $(PY) -m uv sync --quiet --locked --inexact \
			--python $(PY) --extra dev --extra all; \
	else \
		$(PY) -m pip install --quiet -e '.[dev,all]'; \
	fi
	touch $(STAMP)

# Moves the lock to the newest versions pyproject.toml allows, installs them and runs the
# suite: commit uv.lock only when it passes.
upgrade:
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet uv
	$(PY) -m uv lock --upgrade
	rm -f $(STAMP)
	$(MAKE) --no-print-directory test

demo: $(STAMP)
	$(PY) -m examples.trading_bot

# The bot's recorded runs as a regression suite: which decisions a stricter trader flips.
eval: $(STAMP)
	$(PY) -m examples.trading_bot.evaluate

# mypy checks beside pytest: the suite leaves part of the cores idle while its tests wait
# on servers and subprocesses, and mypy fits there (a cold mypy alone takes ~1 min).
test: lint
	$(MAKE) --no-print-directory -j2 typecheck pytest

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports

typecheck: $(STAMP)
	$(PY) -m mypy $(PACKAGES) tests examples bench

# Tests run on three processes on the two cores: many wait on subprocesses, servers and
# the network (quiet: 8 min 42 s with 3, 9 min 44 s with 2, 9 min 33 s with 4).
PYTEST_WORKERS ?= 3

# The web UI's browser tests drive Debian's Chromium (never a browser Playwright
# downloads): installed with apt when missing (tests/service/browser.py does the same
# when pytest is run directly).
CHROMIUM := /usr/bin/chromium
SUDO := $(if $(filter 0,$(shell id -u)),,sudo -n)
APT_CHROMIUM := DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y --no-install-recommends chromium

$(CHROMIUM):
	$(APT_CHROMIUM) || ($(SUDO) apt-get update && $(APT_CHROMIUM))

APT_OPENSSL := DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y --no-install-recommends libssl-dev

$(OPENSSL_H):
	$(APT_OPENSSL) || ($(SUDO) apt-get update && $(APT_OPENSSL)) || \
		echo "no OpenSSL headers: reactor's hash-chain loop will run as pure Python"

pytest: $(STAMP) $(CHROMIUM)
	$(PY) -m pytest -q -n $(PYTEST_WORKERS)

# The web UI's screenshots in docs/images/ (docs/web.md), taken by the same Playwright
# and Chromium as the browser tests; the workers page needs redis-server too.
screenshots: $(STAMP) $(CHROMIUM)
	command -v redis-server >/dev/null || $(SUDO) apt-get install -y --no-install-recommends redis-server
	$(PY) docs/images/make_screenshots.py

bench: $(STAMP)
	$(PY) -m bench --write BENCHMARKS.md

# Peer frameworks get their own virtualenv: never installed into the project's.
PEERS_VENV := .venv-peers
PEERS_STAMP := $(PEERS_VENV)/.installed

$(PEERS_STAMP): bench/peers/requirements.txt
	test -x $(PEERS_VENV)/bin/python || $(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(PEERS_VENV)/bin/python -m pip install --quiet -r bench/peers/requirements.txt
	touch $(PEERS_STAMP)

bench-peers: $(STAMP) $(PEERS_STAMP)
	$(PY) -m bench.compare --python $(PEERS_VENV)/bin/python

clean:
	rm -rf $(VENV) $(PEERS_VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis
