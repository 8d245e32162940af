# The two set-up commands: `make run` and `make test`. Everything else is a helper.
VENV   := .venv
BIN    := $(VENV)/bin
# The interpreter the venv is made with (PYTHON=… chooses one): `python3`, unless that
# one runs on a shared libpython (pyenv's builds with --enable-shared, for one) and the
# system's (SYSTEM_PYTHON) is a 3.11 or newer that does not and can make a venv: it runs
# Python code faster (a loop: a fifth less CPU; the suite, much of it git's and other
# programs' CPU: 4 to 17 % less in three pairs of runs; docs/testing.md). Asked only
# while there is no venv yet.
SYSTEM_PYTHON := /usr/bin/python3
ifeq ($(origin PYTHON),undefined)
PYTHON := python3
ifeq ($(wildcard $(BIN)/python),)
PYTHON := $(shell shared() { "$$1" -c "import sys; sys.exit(0 if any('/libpython' in l for l in open('/proc/self/maps')) else 1)" 2>/dev/null; }; \
	s='$(SYSTEM_PYTHON)'; shared python3 && [ -x "$$s" ] && ! shared "$$s" && \
	"$$s" -c 'import sys, ensurepip; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null && \
	echo "$$s" || echo python3)
endif
endif
STAMP  := $(VENV)/.installed-stamp
BIND   ?= 127.0.0.1:8000
PYTEST_ARGS ?=
# Test processes: twice the cores, at most the cores and four more (a test waits on git,
# its fake servers and the processes it starts about half its time: on 2 cores, four
# processes ran the suite in 4 min 29 s where two took 5 min 27 s; docs/testing.md).
# TEST_PROCESSES=0 runs the suite in one process.
CORES := $(shell nproc 2>/dev/null || echo 2)
TEST_PROCESSES ?= $(shell c=$(CORES); echo $$(( c * 2 < c + 4 ? c * 2 : c + 4 )))
# The tests' temporary files (the fake GitHub's repositories, the reviews' clones and
# checkouts, SQLite files: about 110 MB at the busiest) go to memory when the machine has
# a tmpfs at /dev/shm with 4 GiB free: on a disk, making and removing them cost a run
# about a fifth of its system CPU and 4 to 8 % of its time (docs/testing.md). TEST_TMPDIR=DIR
# puts them in DIR; TEST_TMPDIR= leaves TMPDIR as it is.
# (Worked out once, not at each use: `?=` would ask `df` again every time it is read.)
ifeq ($(origin TEST_TMPDIR),undefined)
TEST_TMPDIR := $(shell d=/dev/shm; free=$$(df -Pk $$d 2>/dev/null | awk 'NR==2 {print $$4}'); \
	[ -d $$d ] && [ -w $$d ] && [ "$${free:-0}" -ge 4194304 ] && echo $$d/tasuku-tests-$$(id -u))
endif

# What runs the tests with TMPDIR at TEST_TMPDIR (made if need be, for this user alone).
TEST_TMP = $(if $(TEST_TMPDIR),mkdir -p -m 700 '$(TEST_TMPDIR)' && { [ -O '$(TEST_TMPDIR)' ] || \
	{ echo "$(TEST_TMPDIR) belongs to another user: set TEST_TMPDIR to a folder of yours"; exit 1; }; } && \
	TMPDIR='$(TEST_TMPDIR)')

.PHONY: run test test-fast install key lint check clean

$(STAMP): pyproject.toml
	@test -n '$(strip $(PYTHON))' || { echo "PYTHON is empty: name an interpreter (PYTHON=python3.12), or leave it out."; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || \
		{ echo "Tasuku needs Python 3.11 or newer (found: $$($(PYTHON) --version 2>&1))."; exit 1; }
	@test -x $(BIN)/python || { echo "Making $(VENV) with $(PYTHON) ($$($(PYTHON) --version 2>&1); PYTHON=... chooses another)"; \
		$(PYTHON) -m venv $(VENV); }
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP) key

## A SECRET_KEY in .env unless one is set (tasuku/devkey.py): Tasuku refuses to start
## without one. In production, set it yourself (README, *Deploy*).
key:
	@$(PYTHON) -m tasuku.devkey

## Run Tasuku on its embedded defaults (SQLite, static reviewer, local runner).
## BIND=host:port serves elsewhere (and is the URL in links, unless TASUKU_BASE_URL is set).
run: export TASUKU_BIND = $(BIND)
run: $(STAMP) key
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py collectstatic --noinput --verbosity 0
	$(BIN)/python manage.py ensure_admin
	$(BIN)/python manage.py serve --bind $(BIND)

## Run the whole test suite (DATABASE_URL picks the database; SQLite by default), on one
## process a core (each with a test database of its own).
# Compiled modules are kept (a host may set PYTHONDONTWRITEBYTECODE): otherwise every
# test process and every process a test starts compiles the project afresh.
test: export PYTHONDONTWRITEBYTECODE =
test: $(STAMP)
	$(TEST_TMP) $(BIN)/python -m pytest -n $(TEST_PROCESSES) $(if $(filter 0,$(TEST_PROCESSES)),,--dist worksteal) $(PYTEST_ARGS)

## The inner loop: every test that starts no process and drives no browser (tests/fast.py;
## docs/testing.md), in well under a minute. `make test` stays the verdict.
test-fast: export PYTHONDONTWRITEBYTECODE =
test-fast: $(STAMP)
	$(TEST_TMP) $(BIN)/python -m pytest -n $(TEST_PROCESSES) $(if $(filter 0,$(TEST_PROCESSES)),,--dist worksteal) -q --fast $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache

check: $(STAMP)
	$(BIN)/python manage.py check

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache staticfiles .test-db.sqlite3*
