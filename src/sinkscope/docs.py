"""The generated parts of the repository's documents, each from the one source of its facts: the
README's exhibit table from the exhibit registry, and the table of every threshold in
docs/exhibit-reference.md from the claim catalogue.

    python -m sinkscope.docs          # rewrite the stale tables of the checkout in place
    python -m sinkscope.docs --check  # name the stale ones, exit 1 (what the tests run)

A generated table starts at its header line and ends at the first line that is not a table row.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from .catalogue import THRESHOLD_HEADER, load_claims, threshold_table
from .exhibits import PAPERS
from .exhibits.registry import EXHIBITS

EXHIBIT_HEADER = "| ID | exhibit | module | rules | outputs |"


def exhibit_table() -> str:
    """The README's table of exhibits, by paper and number: per exhibit its title, module,
    tables rule and outputs."""
    papers = list(PAPERS)
    ordered = sorted(EXHIBITS.values(), key=lambda e: (papers.index(e.id[0]), int(e.id[1:])))
    lines = [EXHIBIT_HEADER, "|---|---|---|---|---|"]
    for exhibit in ordered:
        name = exhibit.id.lower()
        module = f"[`exhibits/{name}.py`](src/sinkscope/exhibits/{name}.py)"
        outputs = f"`results/{exhibit.id}/`: {', '.join(exhibit.tables)}"
        outputs += f"; `figures/{exhibit.id}.png`"
        row = [exhibit.id, exhibit.title, module, f"`tables_{exhibit.id}`", outputs]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


# file (relative to the checkout) -> [(the header line of a generated table, its generator)]
GENERATED: dict[str, list[tuple[str, Callable[[], str]]]] = {
    "README.md": [(EXHIBIT_HEADER, exhibit_table)],
    "docs/exhibit-reference.md": [(THRESHOLD_HEADER, lambda: threshold_table(load_claims()))],
}


def regenerated(text: str, header: str, table: str) -> str:
    """`text` with the table that starts at `header` replaced by `table`."""
    start = text.index(header)
    end = start
    for line in text[start:].splitlines(keepends=True):
        if not line.startswith("|"):
            break
        end += len(line)
    return text[:start] + table + text[end:]


def stale(root: Path, write: bool = False) -> list[str]:
    """The files of the checkout at `root` whose generated tables differ from what their
    sources give now; with `write`, rewritten in place."""
    found = []
    for name, tables in GENERATED.items():
        path = root / name
        text = new = path.read_text()
        for header, generate in tables:
            if header not in new:
                raise ValueError(f"{name}: no table starting with {header!r} to regenerate")
            new = regenerated(new, header, generate())
        if new != text:
            found.append(name)
            if write:
                path.write_text(new)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sinkscope.docs", description=__doc__)
    parser.add_argument("root", nargs="?", default=".", help="the checkout (default: here)")
    parser.add_argument("--check", action="store_true", help="only name the stale files")
    args = parser.parse_args(argv)
    found = stale(Path(args.root), write=not args.check)
    for name in found:
        print(f"{name}: {'stale' if args.check else 'regenerated'}")
    return 1 if found and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
