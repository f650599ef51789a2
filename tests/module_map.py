"""The module map of `docs/development.md`, generated from each module's docstring so it cannot drift.

    python tests/module_map.py           print the map
    python tests/module_map.py --write   rewrite the map between its markers in docs/development.md

`tests/test_module_map.py` fails when the map in the doc is not what this prints, or when a module
has no docstring; the fix is `make module-map` (this script with `--write`).
"""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "predictive_headroom"
DOC = REPO / "docs" / "development.md"
BEGIN = (
    "<!-- module map: generated from the docstrings by `make module-map`; edit those, not this -->"
)
END = "<!-- end of the module map -->"

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(])")


def first_sentence(docstring: str) -> str:
    """The docstring's first sentence on one line (its first paragraph when no sentence ends)."""
    paragraph = " ".join(docstring.strip().split("\n\n")[0].split())
    return _SENTENCE_END.split(paragraph, maxsplit=1)[0]


def docstring_of(path: Path) -> str | None:
    """The module docstring of a source file, or None when it has none."""
    return ast.get_docstring(ast.parse(path.read_text(), filename=str(path)))


def modules() -> list[Path]:
    """Every module of the package that a reader of the map should meet (not `__main__`)."""
    return sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__main__.py")


def missing_docstrings() -> list[str]:
    """The modules (paths relative to the package) that have no docstring."""
    return [str(p.relative_to(PACKAGE)) for p in modules() if not docstring_of(p)]


def module_map() -> str:
    """The map as Markdown: one heading line per subpackage from its `__init__`, a bullet per module."""
    lines: list[str] = []
    lines.append(
        f"**`{PACKAGE.name}/`** {first_sentence(docstring_of(PACKAGE / '__init__.py') or '')}"
    )
    lines.append("")
    lines.extend(
        f"- {_entry(p)}" for p in modules() if p.parent == PACKAGE and p.name != "__init__.py"
    )
    for package in sorted(p for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()):
        lines.append("")
        lines.append(
            f"**`{package.name}/`** {first_sentence(docstring_of(package / '__init__.py') or '')}"
        )
        lines.append("")
        for path in sorted(package.glob("*.py")):
            if path.name != "__init__.py":
                lines.append(f"- {_entry(path)}")
    return "\n".join(lines)


def _entry(path: Path) -> str:
    return f"`{path.name}`: {first_sentence(docstring_of(path) or '(no docstring)')}"


def rewrite(doc: str, generated: str) -> str:
    """`doc` with the text between the map's markers replaced by `generated`."""
    head, sep, rest = doc.partition(BEGIN)
    _, sep2, tail = rest.partition(END)
    if not sep or not sep2:
        raise SystemExit(f"{DOC}: the markers {BEGIN!r} and {END!r} are missing")
    return f"{head}{BEGIN}\n\n{generated}\n\n{END}{tail}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite the map in {DOC.name}")
    args = parser.parse_args()
    if args.write:
        DOC.write_text(rewrite(DOC.read_text(), module_map()))
        print(f"wrote the module map into {DOC.relative_to(REPO)}")
    else:
        print(module_map())


if __name__ == "__main__":
    main()
