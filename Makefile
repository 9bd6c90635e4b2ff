# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
## PYTHON: the venv's interpreter. Debian's own python3 where it has its venv module: Debian
## builds it with profile-guided and link-time optimisation, which a plain source build (pyenv's
## default, the first python3 on this machine's PATH) lacks; the same Python code runs about a
## sixth fewer instructions on it (callgrind: a loop 19% fewer, importing pandas, snakemake and
## matplotlib 16% fewer), and the suite's time is mostly Python. Elsewhere (or if it is older
## than pyproject.toml's 3.11): python3.
SYSTEM_PYTHON := /usr/bin/python3
SYSTEM_PYTHON_OK := import sys, ensurepip, venv; sys.exit(sys.version_info < (3, 11))
PYTHON ?= $(if $(shell $(SYSTEM_PYTHON) -c '$(SYSTEM_PYTHON_OK)' 2>/dev/null && echo y),$(SYSTEM_PYTHON),python3)
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SNAKEMAKE := PATH=$(abspath $(BIN)):$$PATH $(BIN)/snakemake
CAMPAIGN ?= demo

.PHONY: demo screenshot test test-quick test-unit lint format bench sysdeps versitygw clean launch \
	launch-status launch-follow profiles

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

## screenshot: README's picture of the report's first screen (docs/report-first-screen.png),
## taken from the demo's report by headless Chromium: run after make demo
screenshot:
	bash scripts/report-screenshot.sh results/$(CAMPAIGN)/report.html docs/report-first-screen.png

## profiles: link the site profiles (profiles/<site>) where `snakemake --profile <site>` finds
## them ($XDG_CONFIG_HOME/snakemake); never replaces a profile of that name that is not ours
profiles:
	@$(if $(wildcard $(BIN)/python),$(BIN)/python,$(PYTHON)) scripts/link-profiles.py

## versitygw: the second S3 server of the tests (an independent gateway that checks
## signatures), built from source with Go once into a cache outside the checkout; without Go
## it says so and the tests against it are skipped with that reason
CLOUDBENCH_CACHE ?= $(HOME)/.cache/cloudbench
export CLOUDBENCH_CACHE  # tests/infra/s3.py looks there too
VERSITYGW_VERSION := v1.8.0
VERSITYGW := $(CLOUDBENCH_CACHE)/versitygw-$(VERSITYGW_VERSION)/versitygw
versitygw:
	@if [ -x $(VERSITYGW) ]; then echo "versitygw: already built ($(VERSITYGW))"; \
	elif command -v go >/dev/null 2>&1 || [ -x /usr/local/go/bin/go ]; then \
		echo "versitygw: building $(VERSITYGW_VERSION) with Go (a few minutes, once)"; \
		GOBIN=$(dir $(VERSITYGW)) PATH=$$PATH:/usr/local/go/bin \
			go install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION) \
			|| echo "versitygw: WARNING: build failed (tests against it are skipped)"; \
	else echo "versitygw: WARNING: no Go toolchain (tests against it are skipped)"; fi

## sysdeps: Debian packages the tests use (xxhash, slurm, munge, torque, sshd, faketime, chromium)
sysdeps:
	bash scripts/install-sysdeps.sh

# Tiers (tests/conftest.py; every test carries one mark): unit (pure functions), quick
# (starts processes or servers), full (campaigns, schedulers, browsers). docs/testing.md
# says what each runs and how a test checks a rate or a time at any machine speed.
PYTEST := $(BIN)/python -m pytest
# Python keeps compiled modules (and pytest its rewritten test modules) in __pycache__, as it
# does by default: an environment that turns that off makes every pytest worker and every
# job's process compile them again (about 3 CPU-seconds for each worker's collection)
unexport PYTHONDONTWRITEBYTECODE
## TEST_WORKERS: pytest-xdist workers for make test. Much of a full test's time is spent
## waiting (on a link's tokens, a stall limit, Slurm's polls, process start-up), so five keep
## two cores busy (.ci/run prints each worker's busy and idle seconds). Every test of a file
## runs on one worker (a module's campaign is made once), files with a full test handed out
## first (tests/conftest.py)
TEST_WORKERS ?= 5
## ARGS: more pytest arguments, e.g. make test-quick ARGS="-k probe -x"
ARGS ?=

## test: the whole suite (installs what it needs); the demo campaign is made once for all
## workers, in a directory of its own removed at the end
test: $(STAMP) sysdeps versitygw
	@demo=$$(mktemp -d) && trap 'rm -rf "$$demo"' EXIT && \
	CLOUDBENCH_DEMO_DIR=$$demo/demo $(PYTEST) -n $(TEST_WORKERS) --dist loadfile \
		--no-loadscope-reorder $(ARGS)

## test-quick: the inner loop (goal: under a minute): unit and quick tests, no end-to-end
## campaigns, schedulers or browsers
test-quick: $(STAMP)
	$(PYTEST) -m "unit or quick" -n 2 $(ARGS)

## test-unit: pure functions only, no process started (goal: 15 s); two workers, one per
## core: 18 s where one took 31 s (779 tests, 2026-11-28)
test-unit: $(STAMP)
	$(PYTEST) -m unit -n 2 $(ARGS)

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
## study's bash procedure (results/bench/bench.md); one comparison: make bench ONLY=end-to-end.
## Every step also runs the version in COMPARE (a commit or a checkout; by default the last
## landed one, named in bench/compare-ref) side by side: its figures fill the `previous` column
COMPARE ?= $(shell cat bench/compare-ref 2>/dev/null)
bench: $(STAMP) versitygw
	PATH=$(abspath $(BIN)):$$PATH $(BIN)/python -m bench --out results/bench \
		$(if $(ONLY),--only $(ONLY)) $(if $(COMPARE),--compare $(COMPARE))

clean:
	rm -rf results/demo scratch .snakemake

## launch: start every site's run of a multi-site campaign over ssh (CONFIG=config/<campaign>.yaml)
## and return (each run goes on without a connection: docs/several-centres.md); WAIT=1 then
## follows them and builds the report here when all have ended
## launch-status: each site's progress, read from the remote (no ssh)
## launch-follow: follow the sites' progress; when all have ended, aggregate and report here
LAUNCH := PATH=$(abspath $(BIN)):$$PATH $(BIN)/python -m cloudbench launch
launch: $(STAMP)
	$(LAUNCH) $(CONFIG) $(if $(WAIT),--wait)
launch-status: $(STAMP)
	$(LAUNCH) --status $(CONFIG)
launch-follow: $(STAMP)
	$(LAUNCH) --follow $(CONFIG)
