# Synapsia: `make run` serves the app on the embedded default; `make test` runs every check.
# Only Python 3.11+ and make are needed; everything else is installed into .venv.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
# Bob's agent in the practice room: negotiator, or adversary to watch the boundaries hold.
GUEST ?= negotiator

# The services pass of `make test` (production profile against PostgreSQL + Redis).
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/test
TEST_REDIS_URL ?= redis://127.0.0.1:6379/15
SERVICES_ENV := DATABASE_URL=$(TEST_DATABASE_URL) REDIS_URL=$(TEST_REDIS_URL) \
	SYNAPSIA_TEST_SERVICES=1 SYNAPSIA_SECURE_SSL_REDIRECT=false SYNAPSIA_CONN_MAX_AGE=0 \
	SYNAPSIA_SECRET_KEY=test-only-key-for-the-services-pass-of-make-test-not-for-deploys \
	SYNAPSIA_LEDGER_SIGNING_KEY=c3luYXBzaWEtdGVzdC1vbmx5LWxlZGdlci1zZWVkISE= \
	SYNAPSIA_VAULT_KEY=dGVzdC1vbmx5IHZhdWx0IGtleSwgMzIrIGJ5dGVzLi50ZXN0LW9ubHkgdmF1bHQga2V5LCAzMisgYnl0ZXMuLg

.PHONY: run serve test lint typecheck schemas bench eval soak clean

$(STAMP): pyproject.toml requirements/constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Synapsia needs Python 3.11 or newer (found %s); set PYTHON=/path/to/python3.11" % sys.version.split()[0])'
	@echo "==> creating $(VENV) and installing pinned dependencies (first run takes a minute)"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c requirements/constraints.txt -e '.[dev]'
	@touch $(STAMP)

# The practice room: two demo owners, their agents negotiating a dinner, served for the browser.
run: $(STAMP)
	@mkdir -p var
	$(PY) manage.py migrate --no-input
	$(PY) manage.py demo --bind $(HOST) --port $(PORT) --guest $(GUEST)

# Only the server (no practice room, no agents).
serve: $(STAMP)
	@mkdir -p var
	$(PY) manage.py migrate --no-input
	@echo "==> serving Synapsia on http://$(HOST):$(PORT)/ (Ctrl-C stops)"
	$(VENV)/bin/daphne -b $(HOST) -p $(PORT) --websocket-max-message-size 1048576 synapsia.asgi:application

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .

# The two passes (embedded; PostgreSQL + Redis) run side by side: tests/run_passes.py.
test: lint typecheck
	@mkdir -p var
	@$(SERVICES_ENV) $(PY) manage.py collectstatic --no-input -v0
	@$(PY) tests/run_passes.py -- $(SERVICES_ENV)

typecheck: $(STAMP)
	$(PY) -m mypy .

schemas: $(STAMP)
	$(PY) manage.py protocol_schemas

bench: $(STAMP)
	$(PY) -m bench

# The reference negotiators in generated scenarios against exhaustive ground truth (held-out
# seeds 1000-1199; real rooms, real Daphne; a few minutes). Not part of make test.
eval: $(STAMP)
	@mkdir -p var/eval
	$(PY) -m bench.eval --json var/eval/held-out.json

# A bounded soak of the production profile (throwaway PostgreSQL db soak_synapsia, Redis db 11;
# two Daphnes, a worker, one beat; one Daphne SIGKILLed part-way, its agents moving to the other;
# a few minutes): bench/soak.py. Not part of make test.
SOAK_ARGS ?=
soak: $(STAMP)
	@mkdir -p var/soak
	$(PY) -m bench.soak --json var/soak/soak.json $(SOAK_ARGS)

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache
