"""The Jinja2 environment of the pages: templates shipped in the package, autoescaped, with the unit filters.

A page template lives next to its builder (`report/templates/report.html`); it extends
`base.html` and imports `macros.html` from `pages/templates`, which also holds the shared `page.css`.
"""

from __future__ import annotations

import functools
from typing import Any

from jinja2 import (
    ChoiceLoader,
    Environment,
    PackageLoader,
    StrictUndefined,
    select_autoescape,
)

from predictive_headroom.pages.burst import burst_view
from predictive_headroom.pages.format import FILTERS
from predictive_headroom.pages.glossary import glossary, term_title


@functools.cache
def environment(package: str) -> Environment:
    """The environment for pages of `package` (e.g. 'predictive_headroom.report'): its templates first, then the shared ones."""
    env = Environment(
        loader=ChoiceLoader(
            [
                PackageLoader(package, "templates"),
                PackageLoader("predictive_headroom.pages", "templates"),
            ]
        ),
        autoescape=select_autoescape(["html"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(FILTERS)
    env.globals["burst_view"] = burst_view
    env.globals["term_title"] = term_title
    env.globals["glossary"] = glossary
    return env


def render(package: str, template: str, **context: Any) -> str:
    """Render `template` of `package` with `context` into one HTML document."""
    return environment(package).get_template(template).render(**context)
