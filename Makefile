# Two commands matter on a fresh machine (Python 3.11 only):
#   make up    install into .venv and start Antler on the embedded defaults
#   make test  install into .venv and run lint and the whole test suite
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

# The suite starts hundreds of Python processes (stacks, runners, CLI verbs): they must be able to keep
# the bytecode they compile, whatever the shell says (PYTHONDONTWRITEBYTECODE=1 doubles every start's import cost).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install debian bwrap toolbox postgres chromium fuse oidc-idp up test lint format clean

# The sandbox isolates commands with bubblewrap (Debian package); without it they run unisolated.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo -n)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --no-compile -e '.[dev]'
	@# pip compiles the packages' bytecode on one core; compileall uses every core (half the time on two).
	@$(BIN)/python -m compileall -qq -j 0 "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" || true
	@touch $(STAMP)

# The Python packages and the Debian ones (apt-get, one at a time) download side by side; then the
# toolbox and the sign-on tests' identity provider (npm), side by side too.
install:
	@$(MAKE) --no-print-directory -j2 $(STAMP) debian
	@$(MAKE) --no-print-directory -j2 toolbox oidc-idp

debian:
	@env -u MAKEFLAGS -u MFLAGS $(MAKE) --no-print-directory bwrap postgres chromium fuse  # dpkg takes one at a time

bwrap:
	@command -v bwrap >/dev/null 2>&1 || { \
	  echo "installing bubblewrap for the sandbox ..."; \
	  $(SUDO) apt-get install -y -q bubblewrap >/dev/null 2>&1 || \
	  { $(SUDO) apt-get update -q >/dev/null 2>&1 && $(SUDO) apt-get install -y -q bubblewrap >/dev/null 2>&1; } || \
	  echo "warning: could not install bubblewrap; sandboxed commands will run WITHOUT isolation"; }

# The sandbox's toolbox (pandas, matplotlib, python-pptx, ...: sandbox.toolbox in config.yaml) in the venv
# (.venv/share/antler/toolbox), which every data dir of this checkout uses (and `make clean` removes);
# a no-op when it was built for the same package list. The tests' sandboxes use it too.
toolbox: $(STAMP)
	@$(BIN)/antler sandbox install || \
	  echo "warning: no sandbox toolbox; sandboxed python3 has only its standard library (see antler sandbox doctor)"

# PostgreSQL (Debian package) for the shared-checkpoint tests: they start their own throwaway server.
postgres:
	@command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  echo "installing PostgreSQL for the checkpoint tests ..."; \
	  $(SUDO) apt-get install -y -q --no-install-recommends postgresql >/dev/null 2>&1 || \
	  { $(SUDO) apt-get update -q >/dev/null 2>&1 && \
	    $(SUDO) apt-get install -y -q --no-install-recommends postgresql >/dev/null 2>&1; } || \
	  echo "warning: could not install PostgreSQL; the postgres checkpoint tests will fail"; }

# The web UI's end-to-end tests drive Debian's Chromium through Playwright (which cannot download
# its own browsers here); users of Antler never need it.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing chromium for the web UI tests ..."; \
	  $(SUDO) apt-get install -y -q chromium >/dev/null 2>&1 || \
	  { $(SUDO) apt-get update -q >/dev/null 2>&1 && $(SUDO) apt-get install -y -q chromium >/dev/null 2>&1; } || \
	  echo "warning: could not install chromium; the web UI tests (tests/webui) cannot run"; }

# libfuse3 and fusermount3 for the power-loss tests: the JetStream store on a filesystem layer that
# forgets what was not fsynced (tests/support/lazyfs.py); users of Antler never need it.
fuse:
	@command -v fusermount3 >/dev/null 2>&1 || { \
	  echo "installing fuse3 for the power-loss tests ..."; \
	  $(SUDO) apt-get install -y -q fuse3 >/dev/null 2>&1 || \
	  { $(SUDO) apt-get update -q >/dev/null 2>&1 && $(SUDO) apt-get install -y -q fuse3 >/dev/null 2>&1; } || \
	  echo "warning: could not install fuse3; the power-loss tests will be skipped"; }

# The single sign-on tests sign in through a real OpenID provider: panva's oidc-provider (npm), run by
# node on loopback (tests/support/oidc_idp, its node_modules ignored by git); users never need it.
IDP_DIR := tests/support/oidc_idp
oidc-idp:
	@command -v npm >/dev/null 2>&1 || { \
	  echo "installing node and npm for the single sign-on tests ..."; \
	  $(SUDO) apt-get install -y -q nodejs npm >/dev/null 2>&1 || \
	  { $(SUDO) apt-get update -q >/dev/null 2>&1 && $(SUDO) apt-get install -y -q nodejs npm >/dev/null 2>&1; } || \
	  echo "warning: could not install node; the single sign-on tests cannot run"; }
	@test -d $(IDP_DIR)/node_modules/oidc-provider || ! command -v npm >/dev/null 2>&1 || \
	  (cd $(IDP_DIR) && npm ci --no-audit --no-fund --loglevel=error) || \
	  echo "warning: could not install oidc-provider from npm; the single sign-on tests cannot run"

up: install
	$(BIN)/antler up

# pytest: the slowest 30 printed at the end; five workers on two cores, each with its own nats-server
# (the machine stays ~15 % idle with four, whose tests often wait on timers and other processes:
# five finished in 637 s against 648-676 s for four on a fresh clone with one core busy). mypy (~40 s of one core on a new clone) starts as soon as the Python packages
# are in, beside the rest of the install (the toolbox and the identity provider: downloads, mostly)
# and lint, then goes on beside the tests at a lower priority; its verdict is printed, and counted,
# once they end.
test: $(STAMP)
	@out=$$(mktemp); $(BIN)/mypy >"$$out" 2>&1 & mypy=$$!; status=0; \
	$(MAKE) --no-print-directory install && $(BIN)/ruff check . && $(BIN)/ruff format --check . || status=$$?; \
	if [ $$status = 0 ]; then \
	  renice -n 10 -p $$mypy >/dev/null 2>&1 || true; \
	  $(BIN)/pytest -n 5 --dist loadgroup --durations=30; status=$$?; \
	fi; \
	wait $$mypy; typed=$$?; echo "mypy:"; cat "$$out"; rm -f "$$out"; \
	test $$status = 0 && test $$typed = 0

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
