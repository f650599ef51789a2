"""What a reader's eye checks on a page, measured in Chromium: JavaScript probes for
`browser_cdp.visit` that return element boxes (client pixels: left, top, right, bottom), and the
checks on them (the page fits its window, wide tables scroll in their own box, chart labels
overlap neither each other, nor ticks, nor plotted lines, and stay inside their chart)."""

from __future__ import annotations

import json
import re
from typing import Any

_BOX = (
    "const box = e => { const b = e.getBoundingClientRect();"
    " return [b.left, b.top, b.right, b.bottom]; };"
)

PAGE_WIDTH = f"""(() => {{ {_BOX}
  return {{
    viewport: window.innerWidth,
    scroll_width: document.documentElement.scrollWidth,
    main: box(document.querySelector('main')),
    tables: [...document.querySelectorAll('table')].map(t => {{
      const s = t.closest('.scroll');
      return {{id: t.id || t.className, box: box(t), scroller: s ? box(s) : null,
               overflow: s ? getComputedStyle(s).overflowX : null}};
    }}),
  }};
}})()"""
"""The window's width, the page's scroll width, and each table's box and scrolling box."""


def chart(selector: str) -> str:
    """A probe of the first matplotlib SVG chart under `selector`: its box, its axes' box, every
    text with its box and kind (tick, axis label, legend or label), and points along each plotted
    line (the centre of each marker as a one-point line)."""
    return f"""(() => {{ {_BOX}
  const svg = document.querySelector({json.dumps(selector)});
  svg.scrollIntoView();
  const axes = svg.querySelector('g[id^="axes"] > g[id^="patch"] > path');
  const kind = t => t.closest('g[id^="legend"]') ? 'legend'
    : t.closest('g[id^="xtick"],g[id^="ytick"]') ? 'tick'
    : t.closest('g[id^="matplotlib.axis"]') ? 'axis' : 'label';
  const texts = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim())
    .map(t => ({{text: t.textContent, box: box(t), kind: kind(t)}}));
  const plotted = e => !e.closest('g[id^="xtick"],g[id^="ytick"],g[id^="legend"]');
  const markers = [...svg.querySelectorAll('g[id^="line2d"] use, g[id^="PathCollection"] use')]
    .filter(plotted).map(u => {{ const b = u.getBoundingClientRect();
      return [[(b.left + b.right) / 2, (b.top + b.bottom) / 2]]; }});
  const lines = [...svg.querySelectorAll('g[id^="line2d"] > path')]
    .filter(p => plotted(p) && (p.getAttribute('d') || '').trim().includes('L'))
    .map(p => {{
      const n = p.getTotalLength(), m = p.getScreenCTM(), points = [];
      for (let k = 0; k <= 600; k++) {{
        const q = p.getPointAtLength(n * k / 600).matrixTransform(m);
        points.push([q.x, q.y]);
      }}
      return points;
    }});
  return {{svg: box(svg), axes: axes ? box(axes) : null, texts,
           lines: [...lines, ...markers]}};
}})()"""


BURST_CHART = f"""(() => {{ {_BOX}
  const svg = document.querySelector('section.burst svg');
  svg.scrollIntoView();
  const m = svg.getScreenCTM();
  const demand = svg.querySelector('polyline.demand');
  const stacks = [...demand.points].map(p => {{
    const q = new DOMPoint(p.x, p.y).matrixTransform(m);
    return document.elementsFromPoint(q.x, q.y).filter(e => e.closest('svg') === svg)
      .map(e => e.getAttribute('class')).filter(c => c);
  }});
  return {{svg: box(svg), texts: [...svg.querySelectorAll('text')]
    .map(t => ({{text: t.textContent, box: box(t)}})), demand_stacks: stacks}};
}})()"""
"""The burst chart's box, its texts' boxes, and at each point of the demand line the chart's
drawn elements there, topmost first (by class: demand, asked, band, ...)."""


GLOSSARY_SEEN = """(() => ({
  terms: [...document.querySelectorAll('#glossary dt')].map(e => e.textContent),
  titled: [...document.querySelectorAll('[title]')].map(e => [e.textContent.trim(), e.title]),
}))()"""
"""The words the page's legend defines, and every element with a hover title."""


def overlap(a: list[float], b: list[float], slack: float = 0.5) -> bool:
    """Whether two boxes overlap by more than `slack` pixels both ways."""
    return min(a[2], b[2]) - max(a[0], b[0]) > slack and min(a[3], b[3]) - max(a[1], b[1]) > slack


def inside(a: list[float], b: list[float], slack: float = 0.5) -> bool:
    """Whether box `a` lies within box `b`."""
    return (
        a[0] >= b[0] - slack
        and a[1] >= b[1] - slack
        and a[2] <= b[2] + slack
        and a[3] <= b[3] + slack
    )


def page_fits(seen: dict[str, Any]) -> list[str]:
    """What does not fit a window of `viewport` pixels: the page's width, and each table that is
    wider than the page's column without a scrolling box of its own."""
    problems = []
    if seen["scroll_width"] > seen["viewport"]:
        problems.append(f"the page is {seen['scroll_width']} px wide in {seen['viewport']} px")
    right = seen["main"][2]
    for table in seen["tables"]:
        if table["box"][2] <= right + 0.5:
            continue
        scroller = table["scroller"]
        if scroller is None or table["overflow"] not in ("auto", "scroll"):
            problems.append(
                f"table {table['id']!r} runs to {table['box'][2]:.0f} px, no scroll box"
            )
        elif scroller[2] > right + 0.5:
            problems.append(f"the scroll box of table {table['id']!r} runs past the page")
    return problems


def label_clashes(seen: dict[str, Any]) -> list[tuple[str, str]]:
    """Pairs of texts of a chart that overlap, where one of them is a label on the plot."""
    texts = seen["texts"]
    return [
        (a["text"], b["text"])
        for k, a in enumerate(texts)
        for b in texts[k + 1 :]
        if "label" in (a["kind"], b["kind"])
        and {a["kind"], b["kind"]} != {"legend"}
        and overlap(a["box"], b["box"])
    ]


def labels_on_lines(seen: dict[str, Any]) -> list[str]:
    """Labels on the plot with a plotted line (or point) running through their text."""
    return [
        t["text"]
        for t in seen["texts"]
        if t["kind"] == "label"
        and any(
            t["box"][0] < x < t["box"][2] and t["box"][1] < y < t["box"][3]
            for line in seen["lines"]
            for x, y in line
        )
    ]


def demand_hidden(seen: dict[str, Any]) -> int:
    """Points of the demand line where another line is drawn over it, or where it is not hit."""
    return sum(
        1
        for stack in seen["demand_stacks"]
        if "demand" not in stack or (stack.index("demand") > 0 and stack[0] != "band")
    )


HEADERS = """(() => [...document.querySelectorAll('thead th, .card .k')]
  .map(e => [e.textContent.trim(), e.getAttribute('title') || '']))()"""
"""Every column header and card title of the page, with its hover title."""

CARDS = f"""(() => {{ {_BOX}
  return [...document.querySelectorAll('.card')].map(c => ({{
    title: c.querySelector('.k').textContent.trim(),
    value: c.querySelector('.v').textContent.replace(/\\s+/g, ' ').trim(),
    card: box(c), shown: box(c.querySelector('.v')), scroll: c.querySelector('.v').scrollWidth,
    width: c.querySelector('.v').clientWidth,
  }})); }})()"""
"""Each headline card: its title, the value as shown (its unit included), and their boxes."""

_BARE = re.compile(r"^[-+]?[\d,.]+$")


def bare_cards(cards: list[dict[str, Any]]) -> list[str]:
    """Cards whose value is a bare number (no unit, no %, no currency): '18,736' of what?"""
    return [f"{c['title']}: {c['value']}" for c in cards if _BARE.match(c["value"])]


def overflowing_cards(cards: list[dict[str, Any]]) -> list[str]:
    """Cards whose value (with its unit) runs out of the card."""
    return [
        f"{c['title']}: {c['value']}"
        for c in cards
        if c["shown"][2] > c["card"][2] + 0.5 or c["scroll"] > c["width"] + 1
    ]


FIGURES = """(() => [...document.querySelectorAll('figure')].map(f => {
  const svg = f.querySelector('svg'), style = getComputedStyle(f);
  const inner = f.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  return {id: f.id || (f.closest('section') || {id: ''}).id, inner,
          svg: svg ? svg.getBoundingClientRect().width : 0};
}))()"""
"""Each figure's content width and the width its chart takes in it."""


def style_of(selector: str) -> str:
    """A probe of the computed background and border colour of the first element at `selector`
    (null when there is none)."""
    return f"""(() => {{ const e = document.querySelector({json.dumps(selector)});
  if (!e) return null; const s = getComputedStyle(e);
  return {{background: s.backgroundColor, border: s.borderLeftColor, text: e.textContent}}; }})()"""


def strategy_markers(selector: str) -> str:
    """A probe of the boxes of a matplotlib chart's scatter points (the strategies), legend's left out."""
    return f"""(() => {{ {_BOX}
  const svg = document.querySelector({json.dumps(selector)});
  return [...svg.querySelectorAll('g[id^="PathCollection"] use')]
    .filter(u => !u.closest('g[id^="legend"]')).map(box); }})()"""


def clipped_tables(seen: dict[str, Any]) -> list[str]:
    """Tables wider than their scrolling box: a column a reader must scroll sideways to see."""
    return [
        f"{t['id']} ({t['box'][2] - t['box'][0]:.0f} px in {t['scroller'][2] - t['scroller'][0]:.0f})"
        for t in seen["tables"]
        if t["scroller"] is not None and t["box"][2] > t["scroller"][2] + 0.5
    ]


def unfilled_figures(figures: list[dict[str, Any]], share: float = 0.95) -> list[str]:
    """Figures whose chart takes less than `share` of the figure's width."""
    return [
        f"{f['id'] or 'a figure'}: chart {f['svg']:.0f} px of {f['inner']:.0f}"
        for f in figures
        if f["svg"] < share * f["inner"]
    ]


def labels_on_markers(chart_seen: dict[str, Any], markers: list[list[float]]) -> list[str]:
    """Labels on the plot (dial settings, N=...) whose text touches a strategy's point."""
    return [
        t["text"]
        for t in chart_seen["texts"]
        if t["kind"] == "label" and any(overlap(t["box"], m, slack=-1.0) for m in markers)
    ]


def undefined_headers(headers: list[list[str]], terms: list[str], term_of: Any) -> list[str]:
    """Column headers and card titles without a hover definition, or whose word the page's
    glossary does not list."""
    return [text for text, title in headers if text and (not title or term_of(text) not in terms)]
