"""Pictures drawn on the server as SVG: a run's steps as a DAG, and throughput per minute.

SVG written as text keeps the dashboard free of a JavaScript build and of a chart
library: the page is complete as the server sends it, a screenshot or a browser
without scripts shows the same thing. Every text that comes from the database
(step names, statuses) goes through :func:`html.escape`; the pictures are put in
the page with Jinja2's ``|safe`` only because of that.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

from cairnflow.store import ThroughputBucket

from ._format import clock as _clock

__all__ = ["DagNode", "dag_svg", "throughput_svg"]

_NODE_W, _NODE_H, _GAP_X, _GAP_Y, _PAD = 168, 54, 56, 18, 12

STATUS_COLOURS: Mapping[str, str] = {
    "succeeded": "#2e7d32",
    "failed": "#c62828",
    "cancelled": "#6d4c41",
    "discarded": "#6d4c41",
    "running": "#1565c0",
    "ready": "#0277bd",
    "queued": "#0277bd",
    "scheduled": "#7b1fa2",
    "pending": "#7b1fa2",
    "sleeping": "#ef6c00",
    "waiting": "#ef6c00",
    "blocked": "#757575",
    "timed_out": "#f9a825",  # a wait that took its on_timeout branch (Cap.WAIT_BRANCH)
    "skipped": "#9e9e9e",  # a branch not taken, a compensation not needed
}
"""One colour per run and step status, shared by the pictures and the CSS badges."""


@dataclass(frozen=True, slots=True)
class DagNode:
    """One step as the picture shows it."""

    name: str
    status: str
    parents: tuple[str, ...]
    attempts: int


def _depths(nodes: Sequence[DagNode]) -> dict[str, int]:
    """Each step's column: the longest chain of parents before it (parents unknown: 0)."""
    by_name = {node.name: node for node in nodes}
    depth: dict[str, int] = {}

    def visit(name: str, seen: frozenset[str]) -> int:
        if name in depth:
            return depth[name]
        node = by_name[name]
        parents = [p for p in node.parents if p in by_name and p not in seen]
        found = 1 + max((visit(p, seen | {name}) for p in parents), default=-1)
        depth[name] = found
        return found

    for node in nodes:
        visit(node.name, frozenset())
    return depth


def dag_svg(nodes: Sequence[DagNode]) -> str:
    """The steps as boxes in columns by depth, an arrow from each parent to its child."""
    if not nodes:
        return ""
    depth = _depths(nodes)
    columns: dict[int, list[DagNode]] = {}
    for node in nodes:
        columns.setdefault(depth[node.name], []).append(node)
    place: dict[str, tuple[int, int]] = {}
    for column, members in columns.items():
        for row, node in enumerate(members):
            x = _PAD + column * (_NODE_W + _GAP_X)
            y = _PAD + row * (_NODE_H + _GAP_Y)
            place[node.name] = (x, y)
    width = _PAD * 2 + len(columns) * (_NODE_W + _GAP_X) - _GAP_X
    height = _PAD * 2 + max(len(m) for m in columns.values()) * (_NODE_H + _GAP_Y) - _GAP_Y
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="dag" role="img" '
        f'aria-label="steps of the run" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" '
        'fill="#90a4ae"/></marker></defs>',
    ]
    for node in nodes:
        x2, y2 = place[node.name]
        for parent in node.parents:
            if parent not in place:
                continue
            x1, y1 = place[parent]
            sx, sy, ex, ey = x1 + _NODE_W, y1 + _NODE_H // 2, x2, y2 + _NODE_H // 2
            mid = (sx + ex) // 2
            parts.append(
                f'<path d="M {sx} {sy} C {mid} {sy}, {mid} {ey}, {ex} {ey}" fill="none" '
                f'stroke="#90a4ae" stroke-width="1.5" marker-end="url(#arrow)"/>'
            )
    for node in nodes:
        x, y = place[node.name]
        colour = STATUS_COLOURS.get(node.status, "#455a64")
        name = node.name if len(node.name) <= 20 else node.name[:19] + "\u2026"
        tries = f" \u00b7 {node.attempts} attempt{'s' if node.attempts != 1 else ''}"
        parts.append(
            f'<g class="dag-node" data-step="{escape(node.name)}" '
            f'data-status="{escape(node.status)}">'
            f"<title>{escape(node.name)}: {escape(node.status)}</title>"
            f'<a href="#step-{escape(node.name)}">'
            f'<rect x="{x}" y="{y}" width="{_NODE_W}" height="{_NODE_H}" rx="8" '
            f'fill="#fff" stroke="{colour}" stroke-width="2"/>'
            f'<rect x="{x}" y="{y}" width="6" height="{_NODE_H}" rx="3" fill="{colour}"/>'
            f'<text x="{x + 16}" y="{y + 22}" class="dag-name">{escape(name)}</text>'
            f'<text x="{x + 16}" y="{y + 41}" class="dag-status" fill="{colour}">'
            f"{escape(node.status)}{tries}</text></a></g>"
        )
    parts.append("</svg>")
    return "".join(parts)


_CHART_W, _CHART_H, _LEFT, _BOTTOM, _TOP = 900, 240, 44, 28, 12


def throughput_svg(buckets: Sequence[ThroughputBucket], width_ns: int) -> str:
    """Completed (green) and failed (red) runs per bucket, stacked bars, oldest on the left."""
    if not buckets:
        return ""
    peak = max(1, *(b.succeeded + b.failed for b in buckets))
    top = _nice(peak)
    plot_w = _CHART_W - _LEFT - 8
    plot_h = _CHART_H - _BOTTOM - _TOP
    step = plot_w / len(buckets)
    bar = max(step * 0.8, 1.0)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
        f'aria-label="runs finished per bucket" width="{_CHART_W}" height="{_CHART_H}" '
        f'viewBox="0 0 {_CHART_W} {_CHART_H}">'
    ]
    for i in range(5):
        value = top * i / 4
        y = _TOP + plot_h - plot_h * i / 4
        parts.append(
            f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{_CHART_W - 8}" y2="{y:.1f}" stroke="#eceff1"/>'
            f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" class="axis">'
            f"{value:g}</text>"
        )
    for index, bucket in enumerate(buckets):
        x = _LEFT + index * step + (step - bar) / 2
        ok_h = plot_h * bucket.succeeded / top
        bad_h = plot_h * bucket.failed / top
        base = _TOP + plot_h
        label = f"{_clock(bucket.start)}: {bucket.succeeded} succeeded, {bucket.failed} failed"
        parts.append(f"<g><title>{escape(label)}</title>")
        if ok_h:
            parts.append(
                f'<rect class="ok" x="{x:.1f}" y="{base - ok_h:.1f}" width="{bar:.1f}" '
                f'height="{ok_h:.1f}" fill="{STATUS_COLOURS["succeeded"]}"/>'
            )
        if bad_h:
            parts.append(
                f'<rect class="bad" x="{x:.1f}" y="{base - ok_h - bad_h:.1f}" '
                f'width="{bar:.1f}" height="{bad_h:.1f}" fill="{STATUS_COLOURS["failed"]}"/>'
            )
        parts.append("</g>")
    every = max(len(buckets) // 6, 1)
    for index in range(0, len(buckets), every):
        x = _LEFT + index * step
        parts.append(
            f'<text x="{x:.1f}" y="{_CHART_H - 8}" class="axis">'
            f"{_clock(buckets[index].start)}</text>"
        )
    parts.append(
        f'<line x1="{_LEFT}" y1="{_TOP + plot_h}" x2="{_CHART_W - 8}" y2="{_TOP + plot_h}" '
        f'stroke="#90a4ae"/></svg>'
    )
    return "".join(parts)


def _nice(peak: int) -> int:
    """The axis top: the smallest of 1, 2, 5 times a power of ten at or above ``peak``."""
    scale = 1
    while True:
        for factor in (1, 2, 5):
            if factor * scale >= peak:
                return factor * scale
        scale *= 10
