"""Where the reference data lies: ``../shared/reference`` beside the checkout (as in CI), or
``KAFKA_MONITOR_REFERENCE_DIR``. Tests that read it fail, never skip, when it is missing."""

from __future__ import annotations

import os
from pathlib import Path

from tests.harness.tools import ROOT

__all__ = ["REFERENCE_DIR"]

REFERENCE_DIR = Path(os.environ.get("KAFKA_MONITOR_REFERENCE_DIR",
                                    ROOT.parent / "shared" / "reference"))
