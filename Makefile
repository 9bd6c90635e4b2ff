# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SNAKEMAKE := PATH=$(abspath $(BIN)):$$PATH $(BIN)/snakemake
CAMPAIGN ?= demo

.PHONY: demo test test-quick test-unit lint format bench sysdeps versitygw clean launch \
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

# Tiers (tests/conftest.py gives each test one): unit (pure functions), quick (starts
# processes or servers), full (campaigns, schedulers, browsers). Tests marked `rates` check
# measured rates against a bandwidth cap: they run first and alone (scripts/test-suite.sh).
PYTEST := $(BIN)/python -m pytest
## TEST_WORKERS: pytest-xdist workers for the tests that do not check rates (2 cores here;
## much of their time is spent waiting on capped transfers, Slurm polls and process
## start-up). Four: the two cores are busy throughout (vmstat, 2026-11-25); six were no
## faster on a quiet machine (2026-11-26: 649 s against 624 s, docs/testing.md)
TEST_WORKERS ?= 4
## RATES_WORKERS: the tests that check rates against a bandwidth cap (a few MB/s each, a
## quarter of a core each, with bursts of CPU-bound work: campaigns, reports) run this many
## at a time. One: on this machine at half its usual speed (2026-11-28, s48c), two at a time
## alone failed twice, a tuned setting at 0.877 of its link beside the eight-occurrence
## series' reports, a pbsdsh pair under 0.9 of its cap beside another Slurm campaign; with
## three (ci11, ci7) a 2-client upload reached 7.45 of its 8.39 MB/s
RATES_WORKERS ?= 1
## ARGS: more pytest arguments, e.g. make test-quick ARGS="-k probe -x"
ARGS ?=

## test: the whole suite (installs what it needs): the tests that check rates (marked
## `rates`) RATES_WORKERS at a time, first and alone, then every other test TEST_WORKERS at
## a time (scripts/test-suite.sh); at the end the ten slowest and the counts
test: $(STAMP) sysdeps versitygw
	@bash scripts/test-suite.sh "$(PYTEST)" $(RATES_WORKERS) $(TEST_WORKERS) $(ARGS)

## test-quick: the inner loop (under 2 minutes): unit and quick tests, no end-to-end
## campaigns, schedulers or browsers
test-quick: $(STAMP)
	$(PYTEST) -m "unit or quick" -n 2 $(ARGS)

## test-unit: pure functions only, no process started (seconds)
test-unit: $(STAMP)
	$(PYTEST) -m unit $(ARGS)

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
