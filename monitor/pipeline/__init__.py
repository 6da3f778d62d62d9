"""The data pipeline: the service's observations as rows (:mod:`monitor.record.rows`), replayed
through the same store, windows and rules (``replay``), on Spark as a streaming job
(``stream``) and as a backtest over a recording (``backtest``).

Only ``stream``, ``backtest`` and ``spark`` import pyspark, and only when called: the service
(which writes recordings with :mod:`monitor.record.recorder`) never needs it.
"""
