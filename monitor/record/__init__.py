"""Observations and verdicts to Parquet for backtests (``recorder``), through the row
codec the Spark pipeline reads back (``rows``); no Spark here."""
