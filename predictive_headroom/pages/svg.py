"""Matplotlib figures as inline SVG for the pages: fonts as text, stable ids, sized by the page's CSS."""

from __future__ import annotations

import io
import re

import matplotlib
from markupsafe import Markup, escape
from matplotlib.figure import Figure

RC = {
    "svg.fonttype": "none",
    "font.family": "DejaVu Sans",
    "font.size": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
"""matplotlib settings every page plot is drawn with (use with `matplotlib.rc_context`)."""


def figure_svg(fig: Figure, salt: str, label: str) -> Markup:
    """The figure as an `<svg>` element labelled for screen readers; `salt` keeps ids unique within a page."""
    buf = io.StringIO()
    with matplotlib.rc_context({**RC, "svg.hashsalt": salt}):
        fig.savefig(buf, format="svg")
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    return Markup(
        re.sub(
            r'<svg([^>]*?) width="[^"]*" height="[^"]*"',
            rf'<svg\1 role="img" aria-label="{escape(label)}"',
            text,
            count=1,
        )
    )
