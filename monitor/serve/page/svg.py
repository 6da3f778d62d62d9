"""Lag-over-time pictures as inline SVG, drawn on the server: no chart library, no script, and
the page reads the same with JavaScript off. Gaps (no round in a bucket) break the line.
Coordinates are computed for all rows at once with numpy (a thousand sparklines of 120 points
each are the overview's bulk)."""

from __future__ import annotations

from html import escape

import numpy as np
import numpy.typing as npt

from monitor.evaluate.history import SPAN


def _label(row: npt.NDArray[np.floating]) -> tuple[str, float]:
    finite = row[np.isfinite(row)]
    if finite.size == 0:
        return "no lag history yet", 0.0
    top = float(finite.max())
    return (f"lag over the last hour: at most {top:.0f} s, latest {float(finite[-1]):.0f} s",
            top)


def _shapes(xs: list[str], ys: list[str], ok: list[bool]) -> str:
    """Polylines over the runs of consecutive points with a value (a lone point: a dot)."""
    out: list[str] = []
    run: list[str] = []

    def flush() -> None:
        if len(run) == 1:
            x, y = run[0].split(",")
            out.append(f'<circle cx="{x}" cy="{y}" r="1.5"/>')
        elif run:
            out.append(f'<polyline points="{" ".join(run)}"/>')
        run.clear()

    for x, y, good in zip(xs, ys, ok, strict=True):
        if good:
            run.append(f"{x},{y}")
        else:
            flush()
    flush()
    return "".join(out)


def _plot(times: npt.NDArray[np.float64], values: npt.NDArray[np.floating], now: float,
          width: float, height: float, dx: float = 0.0, dy: float = 0.0) -> list[str]:
    """Each row's shapes, x over the last SPAN seconds, y scaled to the row's own maximum."""
    keep = times >= now - SPAN
    times, values = times[keep], values[:, keep]
    xs = [f"{x:g}" for x in np.round(dx + width * np.clip(1 - (now - times) / SPAN, 0, 1), 1)]
    with np.errstate(invalid="ignore", divide="ignore", all="ignore"):
        top = np.nanmax(np.where(np.isfinite(values), values, np.nan), axis=1, initial=0.0)
        scale = np.where(top > 0, height / np.where(top > 0, top, 1), 0.0)
        ys = np.round(dy + height - values * scale[:, None], 1)
    ok = np.isfinite(values)
    return [_shapes(xs, [f"{y:g}" for y in row.tolist()], good.tolist())
            for row, good in zip(ys, ok, strict=True)]


def sparklines(times: npt.NDArray[np.float64], values: npt.NDArray[np.floating],
               now: float) -> list[str]:
    """One 120 x 24 line of lag seconds over the last hour per row, described for screen
    readers."""
    width, height = 120, 24
    out = []
    for row, shapes in zip(values, _plot(times, values, now, width, height - 2, 0, 1),
                           strict=True):
        label, _ = _label(row)
        out.append(f'<svg class="spark" viewBox="0 0 {width} {height}" width="{width}" '
                   f'height="{height}" role="img" aria-label="{escape(label)}">'
                   f"<title>{escape(label)}</title>{shapes}</svg>")
    return out


def chart(times: npt.NDArray[np.float64], row: npt.NDArray[np.floating], now: float) -> str:
    """A larger chart of one row of lag seconds over the last hour, its scale written out."""
    width, height, left, bottom = 640.0, 180.0, 56.0, 20.0
    label, top = _label(row)
    plot_w, plot_h = width - left - 8, height - bottom - 8
    (shapes,) = _plot(times, row[None, :], now, plot_w, plot_h, left, 8)
    axis = (f'<line class="axis" x1="{left}" y1="8" x2="{left}" y2="{8 + plot_h}"/>'
            f'<line class="axis" x1="{left}" y1="{8 + plot_h}" x2="{width - 8}" '
            f'y2="{8 + plot_h}"/>'
            f'<text x="{left - 4}" y="14" text-anchor="end">{top:.0f} s</text>'
            f'<text x="{left - 4}" y="{8 + plot_h}" text-anchor="end">0 s</text>'
            f'<text x="{left}" y="{height - 4}">−60 min</text>'
            f'<text x="{left + plot_w / 2}" y="{height - 4}" text-anchor="middle">−30 min</text>'
            f'<text x="{width - 8}" y="{height - 4}" text-anchor="end">now</text>')
    return (f'<svg class="chart" viewBox="0 0 {width:.0f} {height:.0f}" role="img" '
            f'aria-label="{escape(label)}"><title>{escape(label)}</title>{axis}{shapes}</svg>')
