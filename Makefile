# The two commands:  make run  (the portal with demo data)  ·  make test  (the whole suite)
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check -q

.PHONY: run test test-fast lint format messages check-deploy clean slurm-up slurm-down

$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.runtime: requirements.txt | $(PY)
	$(PIP) install -r requirements.txt
	touch $@

$(VENV)/.dev: requirements.txt requirements-dev.txt $(VENV)/.runtime
	$(PIP) install -r requirements-dev.txt
	touch $@

## run: set up a virtualenv, migrate, create the demo organisation, start web + worker + beat
run: $(VENV)/.runtime
	$(PY) manage.py runportal --demo

## test: the whole suite (SQLite by default; PostgreSQL when DATABASE_URL points there)
test: $(VENV)/.dev
	$(PY) -m pytest -n auto --dist loadfile --no-loadscope-reorder --create-db $(PYTEST_ARGS)

## test-fast: everything but the browser and worker-process tests, reusing the test database
test-fast: $(VENV)/.dev
	$(PY) -m pytest -m "not e2e and not broker" $(PYTEST_ARGS)

## lint: ruff, and the architecture contracts in pyproject.toml (import-linter)
lint: $(VENV)/.dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

format: $(VENV)/.dev
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

## messages: refresh the zh-Hans catalog (needs GNU gettext) and compile it
messages: $(VENV)/.dev
	$(PY) manage.py makemessages -l zh_Hans --no-location --no-obsolete -i ".venv/*" -i "var/*" -i "tests/*" -i "bench/*"
	$(PY) manage.py compilemessages -l zh_Hans -i ".venv" -i "var"

check-deploy: $(VENV)/.runtime
	PORTAL_ENV=production SECRET_KEY=$$($(PY) -c "import secrets; print(secrets.token_urlsafe(64))") \
	ALLOWED_HOSTS=portal.example.com $(PY) manage.py check --deploy --fail-level WARNING

clean:
	rm -rf $(VENV) var .pytest_cache .ruff_cache

## slurm-up / slurm-down: a one-machine Slurm with accounting (needs slurm-wlm, slurmdbd, munge, MariaDB)
slurm-up:
	scripts/slurm-local.sh start
	@scripts/slurm-local.sh env

slurm-down:
	scripts/slurm-local.sh stop
