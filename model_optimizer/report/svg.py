"""Inline SVG charts for the HTML report: points with 95% intervals, an optional fitted band,
the chosen value marked. No JavaScript, no fonts or files from outside the page."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

WIDTH, HEIGHT = 640, 300
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 16, 44


@dataclass(frozen=True)
class Point:
    """One measured value: ``y`` with its 95% interval [low, high] (None: no interval)."""

    x: float
    y: float
    low: float | None = None
    high: float | None = None
    label: str = ""


@dataclass(frozen=True)
class Band:
    """A fitted curve with its band: three series over the same x values."""

    xs: Sequence[float]
    mid: Sequence[float]
    low: Sequence[float]
    high: Sequence[float]


def _log_axis(xs: Sequence[float]) -> bool:
    positive = [x for x in xs if x > 0]
    return len(positive) == len(xs) and bool(positive) and max(positive) / min(positive) >= 8


class _Scale:
    """Maps data to pixels (log2 on x when the values span a factor of 8 or more)."""

    def __init__(self, xs: Sequence[float], ys: Sequence[float]):
        self.log = _log_axis(xs)
        tx = [self._tx(x) for x in xs]
        self.x0, self.x1 = min(tx), max(tx)
        if self.x0 == self.x1:
            self.x0, self.x1 = self.x0 - 1, self.x1 + 1
        self.y0, self.y1 = 0.0, max(ys) * 1.08 if ys and max(ys) > 0 else 1.0

    def _tx(self, x: float) -> float:
        return math.log2(x) if self.log else x

    def px(self, x: float) -> float:
        span = WIDTH - LEFT - RIGHT
        return LEFT + (self._tx(x) - self.x0) / (self.x1 - self.x0) * span

    def py(self, y: float) -> float:
        span = HEIGHT - TOP - BOTTOM
        clipped = min(max(y, self.y0), self.y1)
        return TOP + span - (clipped - self.y0) / (self.y1 - self.y0) * span


def _axes(scale: _Scale, x_ticks: Sequence[float], x_label: str, y_label: str) -> list[str]:
    base = HEIGHT - BOTTOM
    out = [f'<line class="axis" x1="{LEFT}" y1="{base}" x2="{WIDTH - RIGHT}" y2="{base}"/>',
           f'<line class="axis" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{base}"/>']
    for x in x_ticks:
        px = scale.px(x)
        out.append(f'<text class="tick" x="{px:.1f}" y="{base + 14}" '
                   f'text-anchor="middle">{_num(x)}</text>')
    for i in range(5):
        y = scale.y0 + (scale.y1 - scale.y0) * i / 4
        py = scale.py(y)
        out.append(f'<line class="grid" x1="{LEFT}" y1="{py:.1f}" x2="{WIDTH - RIGHT}" '
                   f'y2="{py:.1f}"/><text class="tick" x="{LEFT - 6}" y="{py + 4:.1f}" '
                   f'text-anchor="end">{_num(y)}</text>')
    out.append(f'<text class="label" x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 6}" '
               f'text-anchor="middle">{escape(x_label)}</text>')
    out.append(f'<text class="label" transform="rotate(-90)" x="{-(TOP + base) / 2}" y="14" '
               f'text-anchor="middle">{escape(y_label)}</text>')
    return out


def _num(value: float) -> str:
    if abs(value) >= 100 or float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:,.1f}"


def _band(scale: _Scale, band: Band) -> list[str]:
    def line(ys: Sequence[float]) -> list[str]:
        return [f"{scale.px(x):.1f},{scale.py(y):.1f}" for x, y in zip(band.xs, ys, strict=True)]

    upper, lower, mid = line(band.high), line(band.low), line(band.mid)
    return [f'<polygon class="band" points="{" ".join(upper + lower[::-1])}"/>',
            f'<polyline class="fit" points="{" ".join(mid)}"/>']


def _point(scale: _Scale, point: Point) -> list[str]:
    px, py = scale.px(point.x), scale.py(point.y)
    out = []
    if point.low is not None and point.high is not None:
        lo, hi = scale.py(point.low), scale.py(point.high)
        out.append(f'<line class="err" x1="{px:.1f}" y1="{lo:.1f}" x2="{px:.1f}" y2="{hi:.1f}"/>')
        for y in (lo, hi):
            out.append(f'<line class="err" x1="{px - 4:.1f}" y1="{y:.1f}" x2="{px + 4:.1f}" '
                       f'y2="{y:.1f}"/>')
    title = escape(point.label or f"{_num(point.x)}: {_num(point.y)}")
    out.append(f'<circle class="pt" cx="{px:.1f}" cy="{py:.1f}" r="3.5"><title>{title}'
               f'</title></circle>')
    return out


def curve_chart(points: Sequence[Point], *, x_label: str, y_label: str,
                chosen: float | None = None, band: Band | None = None,
                title: str = "") -> str:
    """An SVG chart of ``points`` (sorted by x, never joined in measurement order), their
    intervals as error bars, an optional fitted ``band`` and the ``chosen`` x marked."""
    if not points:
        return '<p class="muted">no measured points</p>'
    ordered = sorted(points, key=lambda p: p.x)
    ys = [p.high if p.high is not None else p.y for p in ordered]
    if band is not None:
        ys += list(band.high)
    scale = _Scale([p.x for p in ordered], ys)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
             f'role="img" aria-label="{escape(title or y_label)}" class="chart">']
    parts += _axes(scale, sorted({p.x for p in ordered}), x_label, y_label)
    if band is not None and len(band.xs) > 1:
        parts += _band(scale, band)
    if chosen is not None:
        px = scale.px(chosen)
        right = px > WIDTH - RIGHT - 90   # near the right edge: the label goes left
        anchor, offset = ("end", -4) if right else ("start", 4)
        parts.append(f'<line class="chosen" x1="{px:.1f}" y1="{TOP}" x2="{px:.1f}" '
                     f'y2="{HEIGHT - BOTTOM}"/><text class="chosen-label" '
                     f'x="{px + offset:.1f}" y="{TOP + 12}" text-anchor="{anchor}">'
                     f'chosen {_num(chosen)}</text>')
    for point in ordered:
        parts += _point(scale, point)
    parts.append("</svg>")
    return "".join(parts)
