"""Acting on failover plans: the ``kafka-monitor failover plan|apply`` commands (the plans
themselves are made in :mod:`monitor.ingest.failover`)."""
