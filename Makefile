# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SNAKEMAKE := PATH=$(abspath $(BIN)):$$PATH $(BIN)/snakemake
CAMPAIGN ?= demo

.PHONY: demo test test-quick lint format bench sysdeps clean launch profiles

$(STAMP): pyproject.toml envs/awscli.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	# The AWS CLI in a venv of its own (its docutils pin conflicts with snakemake's)
	test -x $(VENV)/awscli/bin/python || $(BIN)/python -m venv $(VENV)/awscli
	$(VENV)/awscli/bin/python -m pip install -q -r envs/awscli.txt
	touch $@

## demo: run the default campaign on this machine and build its report
demo: $(STAMP)
	$(SNAKEMAKE) --profile profiles/local
	$(SNAKEMAKE) --profile profiles/local --report results/$(CAMPAIGN)/report.html
	@echo "report: results/$(CAMPAIGN)/report.html  table: results/$(CAMPAIGN)/transfers.tsv"

## profiles: link the site profiles (profiles/<site>) where `snakemake --profile <site>` finds
## them ($XDG_CONFIG_HOME/snakemake); never replaces a profile of that name that is not ours
profiles:
	@$(if $(wildcard $(BIN)/python),$(BIN)/python,$(PYTHON)) scripts/link-profiles.py

## sysdeps: Debian packages the tests use (xxhash, slurm, munge, torque wrappers, sshd, chromium)
sysdeps:
	bash scripts/install-sysdeps.sh

## test: the whole suite (installs what it needs)
test: $(STAMP) sysdeps
	$(BIN)/python -m pytest

## test-quick: the inner loop: no end-to-end campaigns, schedulers or browsers
test-quick: $(STAMP)
	$(BIN)/python -m pytest -m "not slow and not scheduler and not browser"

lint: $(STAMP)
	$(BIN)/ruff check workflow tests bench
	$(BIN)/ruff format --check workflow tests bench
	$(BIN)/snakefmt --check workflow
	$(SNAKEMAKE) --lint --profile profiles/local

format: $(STAMP)
	$(BIN)/ruff format workflow tests bench
	$(BIN)/ruff check --fix workflow tests bench
	$(BIN)/snakefmt workflow

## bench: the data steps against the tools they stand in for, and the whole job against the
## study's bash procedure (results/bench/bench.md); one comparison: make bench ONLY=end-to-end
bench: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python -m bench --out results/bench $(if $(ONLY),--only $(ONLY))

clean:
	rm -rf results/demo scratch .snakemake

## launch: run a multi-site campaign over ssh (CONFIG=config/<campaign>.yaml), then its report
launch: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python -m cloudbench launch $(CONFIG)
