"""Shared fixtures: the real Kafka 0.9 cluster(s) and librdkafka's mock cluster."""

pytest_plugins = ["tests.harness.kafka_fixtures", "tests.harness.mock_fixtures"]
