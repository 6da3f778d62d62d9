"""The status page for people: cached results in (the evaluation, the store's offsets and
health, the lag history, the probes), HTML out at ``/`` and ``/ui/...``; no request reaches
Kafka."""
