"""In: observations from the collectors. Out: consistent snapshots for the evaluation and
the views (``store``), the commit windows and log-end history as numpy arrays (``windows``),
and the snapshot that carries them across restarts (``snapshot``)."""
