# The two commands a newcomer needs:   make demo   and   make test
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: setup demo test lint typecheck bench clean

setup: $(STAMP) .cache/kafka-0.9.0.1/libs
	$(BIN)/python -m monitor.collectors.jmx_launcher --build

$(STAMP): pyproject.toml
	scripts/install-system-deps.sh
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

.cache/kafka-0.9.0.1/libs: | $(STAMP)
	$(BIN)/python -m monitor.localkafka.dist

## A local Kafka with a demo workload, monitored; Ctrl-C stops everything.
demo: setup
	$(BIN)/kafka-monitor demo

## Set up and run the whole test suite (real Kafka brokers included).
test: setup
	$(BIN)/pytest

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

typecheck: setup
	$(BIN)/mypy monitor

clean:
	rm -rf $(VENV) .cache .pytest_cache .ruff_cache .mypy_cache
