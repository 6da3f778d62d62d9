"""The development rig, not used by the service: a real local Kafka 0.9 with workloads
(``localkafka``) and the ``make demo`` scenario (``demo``)."""
