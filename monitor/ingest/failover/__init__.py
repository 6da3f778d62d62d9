"""Failover between mirrored clusters: each group's position translated to the destination by
record timestamp and verified record by record (``planner.py``), kept current by the service
(``collector.py``) over both clusters' clients (``reads.py``)."""
