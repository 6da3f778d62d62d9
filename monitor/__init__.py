"""Kafka monitoring and consumer-lag evaluation service."""

__version__ = "0.1.0"
