"""A DGL script with only its imports changed: the dglctl copy of a script written for DGL.

The script marks its import block with ``# imports: begin`` / ``# imports: end``; inside it,
each line of :data:`IMPORTS` is replaced by its runtime counterpart (the table of
docs/migrating-from-dgl.md). Nothing else changes, and :func:`changed_lines` lets a test prove it.
"""

from __future__ import annotations

from pathlib import Path

BEGIN, END = "# imports: begin", "# imports: end"
IMPORTS = {
    "import dgl": "import runtime as dgl",
    "import dgl.nn.pytorch as dglnn": "import runtime.nn as dglnn",
}


def runtime_variant(text: str) -> str:
    """``text`` with the DGL import lines between the markers replaced; a ValueError when the
    markers are missing or a line between them is not in :data:`IMPORTS`."""
    lines = text.splitlines(keepends=True)
    stripped = [ln.strip() for ln in lines]
    try:
        begin, end = stripped.index(BEGIN), stripped.index(END)
    except ValueError:
        raise ValueError(f"the script has no '{BEGIN}' ... '{END}' block") from None
    for i in range(begin + 1, end):
        if stripped[i] not in IMPORTS:
            raise ValueError(f"line {i + 1}: {stripped[i]!r} has no runtime counterpart "
                             f"(known: {sorted(IMPORTS)})")
        lines[i] = IMPORTS[stripped[i]] + "\n"
    return "".join(lines)


def write_runtime_variant(script: Path, out: Path) -> Path:
    """Write ``script``'s runtime variant to ``out`` (same file name is fine) and return it."""
    out.write_text(runtime_variant(script.read_text()))
    return out


def changed_lines(original: str, variant: str) -> list[tuple[str, str]]:
    """The ``(original, variant)`` line pairs that differ (both texts have as many lines)."""
    a, b = original.splitlines(), variant.splitlines()
    if len(a) != len(b):
        raise ValueError(f"{len(a)} lines became {len(b)}")
    return [(x, y) for x, y in zip(a, b, strict=True) if x != y]
