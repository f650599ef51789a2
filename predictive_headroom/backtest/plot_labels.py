"""Labels on the backtest's plots kept readable: each moved to the first nearby place clear of the
others, the axes' own text and the strategies' points, labels of one place merged, a thin leader
line to a label moved away; one that fits nowhere hidden (the tables still list it).
"""

from __future__ import annotations

import math
from typing import Any

from matplotlib.collections import PathCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.text import Annotation, Text
from matplotlib.transforms import Bbox

_NUDGES = (
    [(3, 4), (3, -9)]
    + [(3, sign * (4 + 9 * k)) for k in range(1, 8) for sign in (1, -1)]
    + [(-30, 4), (-30, -9)]
    + [(-30, sign * (4 + 9 * k)) for k in range(1, 8) for sign in (1, -1)]
)
"""Offsets (points) a label may take, nearest first: beside its point, then stacked further up
or down, then to its left (a point at the right edge), so close dial settings (q=0.5, 0.7, 0.8 a hair apart in cost) each keep a readable label."""


def _text_box(t: Text, renderer: Any) -> Bbox:
    """The box of a label's text alone (an annotation's own extent includes its leader line),
    a little padded."""
    if isinstance(t, Annotation):
        t.update_positions(renderer)
    return Text.get_window_extent(t, renderer).expanded(1.05, 1.15)


def _merge_coinciding(labels: list[Annotation]) -> list[Annotation]:
    """Labels of one sweep whose points fall within a few pixels of each other become one label
    ('q=0.5, 0.7, 0.8' for settings that cost and leave unserved the same); the others are hidden.
    Returns the labels still shown."""
    groups: list[list[Annotation]] = []
    for t in labels:
        key = (t.get_color(), t.get_text().split("=", 1)[0])
        at = t.axes.transData.transform(t.xy)
        for group in groups:
            first = group[0]
            if (first.get_color(), first.get_text().split("=", 1)[0]) == key and (
                abs(first.axes.transData.transform(first.xy) - at) <= _SAME_POINT_PX
            ).all():
                group.append(t)
                break
        else:
            groups.append([t])
    for group in groups:
        if len(group) > 1:
            prefix = group[0].get_text().split("=", 1)[0]
            group[0].set_text(
                f"{prefix}=" + ", ".join(t.get_text().split("=", 1)[1] for t in group)
            )
            for t in group[1:]:
                t.set_visible(False)
    return [group[0] for group in groups]


_SAME_POINT_PX = 4.0


def _marker_boxes(markers: list[PathCollection], renderer: Any) -> list[Bbox]:
    """The pixel box of each strategy's point, with `_MARKER_PAD` points of room around it."""
    boxes = []
    for m in markers:
        half = (math.sqrt(float(m.get_sizes()[0])) / 2 + _MARKER_PAD) * renderer.points_to_pixels(1)
        for x, y in m.get_offset_transform().transform(m.get_offsets()):
            boxes.append(Bbox.from_extents(x - half, y - half, x + half, y + half))
    return boxes


_MARKER_PAD = 2.0


# Long on purpose: one placement loop (measure, try each nudge, keep the first clear one) read top to bottom.
def declutter(
    fig: Figure, fixed: list[Text], *groups: list[Annotation], markers: list[PathCollection] = ()
) -> None:
    """Move each label, group by group and leftmost first within a group, to the first offset in
    `_NUDGES` where its box lies inside the axes and overlaps no label placed before it (nor the
    fixed ones, the axis labels, ticks and legend, nor a strategy's point in `markers`: a dial
    label never sits on the forecast's marker), with a thin leader line (under the labels) when
    it moved away; a label that fits nowhere is hidden (the tables still list it). Layout is
    settled first and the labels kept out of it, so the boxes measured here are where they are
    drawn."""
    if not any(groups):
        return
    for t in (t for group in groups for t in group):
        t.set_in_layout(False)
    fig.draw_without_rendering()
    renderer = fig._get_renderer()
    groups = tuple(_merge_coinciding(group) for group in groups)
    ax = next(t for group in groups for t in group).axes
    inside = ax.get_window_extent(renderer)
    fixed = [
        *fixed,
        ax.xaxis.label,
        ax.yaxis.label,
        *ax.get_xticklabels(),
        *ax.get_yticklabels(),
    ]
    placed = [_text_box(t, renderer) for t in fixed if t.get_visible() and t.get_text()]
    legend = ax.get_legend()
    if legend is not None:
        placed.append(legend.get_window_extent(renderer))
    placed += _marker_boxes(list(markers), renderer)
    scale = fig.dpi / 72
    leaders: list[tuple[Annotation, tuple[float, float]]] = []
    for t in (t for group in groups for t in sorted(group, key=lambda a: a.xy[0])):
        home = t.xyann
        for dx, dy in [home] + [n for n in _NUDGES if n != home]:
            t.xyann = (dx, dy)
            box = _text_box(t, renderer)
            within = (
                box.x0 >= inside.x0
                and box.x1 <= inside.x1
                and box.y0 >= inside.y0
                and box.y1 <= inside.y1
            )
            if within and not any(box.overlaps(other) for other in placed):
                placed.append(box)
                if abs(dy - home[1]) * scale > 6:
                    leaders.append((t, (box.x0, box.y0 if dy > 0 else box.y1)))
                break
        else:
            t.set_visible(False)
    ax.set_xlim(ax.get_xlim())  # the leaders must not widen the axes
    ax.set_ylim(ax.get_ylim())
    to_data = ax.transData.inverted()
    for t, corner in leaders:
        (x, y) = to_data.transform(corner)
        ax.add_line(
            Line2D(
                [t.xy[0], x], [t.xy[1], y], color=t.get_color(), linewidth=0.4, alpha=0.7, zorder=4
            )
        )
