"""In: the store's snapshot, every ``evaluator.interval``. Out: cached per-cluster
results (``job``) the HTTP API, the metrics and the recorder read; broker and cluster health
(``cluster_health``)."""
