"""Ground truth for scoring alerts: which groups had which fault when, over a recording.

A label file (YAML or JSON) lists the groups to score. Each group is scored from ``start`` to
``end`` (unix seconds; before ``start`` its consumers were warming up and nothing is judged)
and has incident ``windows``: a fault from ``start`` to ``end`` (``end`` omitted: until the
group's end). Everything outside the windows is healthy time, where any alarm is false::

    version: 1
    groups:
      - cluster: prod
        group: billing
        scenario: consumer gone          # the row of the score table
        variant: commits every 5s        # optional: what distinguishes groups of one scenario
        start: 1764130000
        end: 1764131500
        windows:
          - fault: consumer gone
            start: 1764130360
            end: 1764131080             # the consumer came back: alarms should clear
            expect: [STOP]              # the statuses that name this fault
            tolerate: [WARN]            # not the name, but not wrong on the way to it

During a window any alarm detects the fault (a threshold alert has no status); for rule sets
that give statuses, an alarm whose status is neither expected nor tolerated is counted as a
wrong diagnosis. An alarm still on when a window ends is the time to clear, not a false alarm.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

AlarmStatus = Literal["WARN", "STALL", "STOP", "REWIND"]

__all__ = ["AlarmStatus", "GroupLabels", "LabelError", "Labels", "Window", "load_labels"]


class LabelError(ValueError):
    """A label file that cannot be used; the message names the file and the key."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Window(_Model):
    """One incident: a fault, when it started and ended, and the statuses that name it."""

    fault: str
    start: float
    end: float | None = None
    expect: list[AlarmStatus] = Field(min_length=1)
    tolerate: list[AlarmStatus] = Field(default_factory=list)

    @model_validator(mode="after")
    def _ordered(self) -> Window:
        if self.end is not None and self.end < self.start:
            raise ValueError("end is before start")
        return self


class GroupLabels(_Model):
    """A group's scored span and its incidents (none: healthy throughout)."""

    cluster: str
    group: str
    scenario: str
    variant: str = ""
    start: float
    end: float
    windows: list[Window] = Field(default_factory=list)

    @model_validator(mode="after")
    def _inside(self) -> GroupLabels:
        if self.end <= self.start:
            raise ValueError("end is not after start")
        for i, w in enumerate(self.windows):
            if not self.start <= w.start <= self.end:
                raise ValueError(f"windows[{i}].start is outside the group's start..end")
        return self

    def window_end(self, w: Window) -> float:
        return self.end if w.end is None else min(w.end, self.end)


class Labels(_Model):
    version: Literal[1] = 1
    groups: list[GroupLabels]

    @model_validator(mode="after")
    def _unique(self) -> Labels:
        seen: set[tuple[str, str]] = set()
        for g in self.groups:
            key = (g.cluster, g.group)
            if key in seen:
                raise ValueError(f"group {g.group!r} of cluster {g.cluster!r} is labelled twice")
            seen.add(key)
        return self

    def dump(self, path: str | Path) -> None:
        Path(path).write_text(yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False))


def load_labels(path: str | Path) -> Labels:
    """Read and check a label file; errors name the file and the offending key."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise LabelError(f"{p}: cannot read: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        kind = "JSON" if p.suffix == ".json" else "YAML"
        raise LabelError(f"{p}: not valid {kind}: {exc}") from None
    try:
        return Labels.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "(top level)"
        raise LabelError(f"{p}: {where}: {first['msg']}") from None
