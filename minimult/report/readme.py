"""Generated tables inside a Markdown file (README.md, docs/results.md): the text between two marker lines is
replaced, the rest kept.

    <!-- BEGIN quick-table1 -->
    | ID | setting | n | µ | ...
    No row: ...
    <!-- END quick-table1 -->

`minimult report RUNS --out DIR --readme FILE` puts the report's first table there (markers
`<preset>-<grid>`, e.g. `quick-table1`: a report of tiny runs cannot overwrite the quick table, nor a
report of another grid's sweep the Table 1 one);
`experiments/bench_table.py` does the same for the Speed table (`bench-train`). The file is only
rewritten when the text changes, and atomically.
"""

from __future__ import annotations

from pathlib import Path

from minimult.data.cache import atomic_write_text
from minimult.errors import MinimultError


def markers(marker: str) -> tuple[str, str]:
    return f"<!-- BEGIN {marker} -->", f"<!-- END {marker} -->"


def update_readme(path, markdown_table: str, marker: str, write: bool = True, optional: bool = False) -> bool | None:
    """Replace the lines between `<!-- BEGIN marker -->` and `<!-- END marker -->` (each alone on its
    line, once, BEGIN first) with `markdown_table`; True when the text changed (`write=False`: would
    change; nothing is written). `optional`: a file without the BEGIN line is left alone (None), for a
    block written only where a README asks for it."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise MinimultError(f"cannot read {path}: {e}") from None
    begin, end = markers(marker)
    lines = text.splitlines(keepends=True)
    b = [i for i, line in enumerate(lines) if line.strip() == begin]
    e = [i for i, line in enumerate(lines) if line.strip() == end]
    if optional and not b:
        return None
    if len(b) != 1 or len(e) != 1 or e[0] < b[0]:
        raise MinimultError(f"{path} needs the line {begin} and, below it, the line {end} around the table to "
                            f"replace (found {len(b)} and {len(e)})")
    body = markdown_table.strip("\n")
    new = "".join(lines[: b[0] + 1]) + (body + "\n" if body else "") + "".join(lines[e[0]:])
    if write and new != text:
        atomic_write_text(path, new)
    return new != text


def table_marker(section: dict) -> str:
    """The markers' name for an aggregated section's table: `<preset>-<grid>`, the grid being the sweep's
    (`quick-table1` for experiments/table1.toml at the quick preset, `paper-fidelity` for fidelity.toml at
    the paper's); `table1` for runs that no sweep claims, and the grid's name alone without a preset."""
    grid = section.get("grid") or "table1"
    return f"{section['preset']}-{grid}" if section.get("preset") else grid
