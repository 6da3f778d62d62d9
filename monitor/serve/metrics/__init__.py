"""Prometheus families rendered from the cached results: consumer lag and status
(``lag``) and broker and cluster health (``health``). Probe families live with the probes."""
