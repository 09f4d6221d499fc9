"""Reading plain-text edge lists (CSV, TSV, whitespace; gzip or zstd compressed or not) with bulk
numpy parsing (writing them: ``text_writer``)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TextIO

import numpy as np

from ..errors import PartitionInputError, PartitionOptionError
from ..graph import Graph
from ..inputs import id_space_too_sparse, load_node_data, resolve_num_nodes, sparse_ids_error
from ..spill import Column, SpillFolder, discarded_on_error
from .compressed import open_text

# Error messages quote the offending line up to this many characters.
_QUOTE_LIMIT = 120
_ENCODING = "utf-8-sig"

DELIMITER_NAMES = {",": "comma", "\t": "tab", None: "whitespace"}
# Lines parsed at a time: 16 MiB of int64 ids per chunk.
CHUNK_ROWS = 1 << 20


@dataclass(frozen=True)
class TextLayout:
    """What a text edge file looks like, found from its first data line.

    ``delimiter`` is ``None`` for runs of whitespace. ``skip_lines`` is the number of leading
    lines (comments and header) to skip so parsing starts after the header. ``has_weight`` is
    true when a third column holds numbers. ``num_fields`` is the number of columns of the
    first data line, ``first_line`` its 1-based number: every data line must have as many.
    """

    delimiter: str | None
    skip_lines: int
    has_weight: bool
    header: tuple[str, ...] | None
    num_fields: int = 2
    first_line: int = 0


def _quote(text: str) -> str:
    """Show a line in an error message, shortened if long."""
    text = text.rstrip("\r\n")
    if len(text) > _QUOTE_LIMIT:
        text = text[:_QUOTE_LIMIT] + "..."
    return repr(text)


def _strip_comment(line: str, comment: str | None) -> str:
    if comment:
        line = line.split(comment, 1)[0]
    return line.strip()


def _split(line: str, delimiter: str | None) -> list[str]:
    if delimiter is None:
        return line.split()
    return [field.strip() for field in line.split(delimiter)]


def _is_int(field: str) -> bool:
    try:
        value = int(field)
    except ValueError:
        return False
    # "1_000" is a Python int but not something numpy's parser accepts.
    return "_" not in field and -(2**63) <= value < 2**63


def _is_float(field: str) -> bool:
    try:
        float(field)
    except ValueError:
        return False
    return "_" not in field


def _normalise_delimiter(delimiter: str | None, path: str) -> str | None:
    """Map user spellings to loadtxt's: a single space means any run of whitespace."""
    if delimiter is None:
        return None
    aliases = {" ": None, "space": None, "whitespace": None, "tab": "\t", "\\t": "\t", "comma": ","}
    if delimiter in aliases:
        return aliases[delimiter]
    if len(delimiter) != 1 or delimiter.isalnum() or delimiter in "-+.":
        raise PartitionInputError(
            f"delimiter {delimiter!r} cannot separate node ids",
            path=path,
            hint="use ',', '\\t', ' ' (any whitespace) or leave it out to auto-detect",
        )
    return delimiter


def detect_layout(
    path: str,
    *,
    delimiter: str | None = None,
    comment: str | None = "#",
    allow_header: bool = True,
) -> TextLayout:
    """Find the delimiter, header line and weight column from the first data line of ``path``.

    ``delimiter=None`` auto-detects: tab if the line has one, else comma if it has one, else
    whitespace. A first data line whose first two fields are not integers is a header when
    ``allow_header``; otherwise it is reported as a bad line.
    """
    delim = _normalise_delimiter(delimiter, path)
    try:
        with open_text(path, errors="replace") as fh:
            # Only leading comment and blank lines are walked here, never the edges.
            for lineno, raw in enumerate(fh, start=1):
                line = _strip_comment(raw, comment)
                if not line:
                    continue
                if delimiter is None:
                    delim = _guess_delimiter(line)
                fields = _split(line, delim)
                if len(fields) >= 2 and _is_int(fields[0]) and _is_int(fields[1]):
                    has_weight = len(fields) >= 3 and _is_float(fields[2])
                    return TextLayout(delim, lineno - 1, has_weight, None, len(fields), lineno)
                if not allow_header:
                    raise _bad_line(path, lineno, raw, fields, delim)
                auto = delimiter is None
                return _layout_after_header(fh, lineno, tuple(fields), delim, auto, comment, path)
    except OSError as exc:
        raise PartitionInputError(
            f"cannot read edge list: {exc.strerror or exc}", path=path
        ) from exc
    return TextLayout(delim, 0, False, None)


def _guess_delimiter(line: str) -> str | None:
    return "\t" if "\t" in line else "," if "," in line else None


def _layout_after_header(
    fh: TextIO,
    header_line: int,
    header: tuple[str, ...],
    delim: str | None,
    auto: bool,
    comment: str | None,
    path: str,
) -> TextLayout:
    """Look past a header at the next data line to learn whether a weight column exists.

    With ``auto`` the delimiter is guessed again from that data line, since a header such as
    ``src dst`` says nothing about how the numbers below it are separated.
    """
    for lineno, raw in enumerate(fh, start=header_line + 1):
        line = _strip_comment(raw, comment)
        if not line:
            continue
        if auto:
            delim = _guess_delimiter(line)
        fields = _split(line, delim)
        if len(fields) < 2 or not (_is_int(fields[0]) and _is_int(fields[1])):
            raise _bad_line(path, lineno, raw, fields, delim, after_header=header_line)
        has_weight = len(fields) >= 3 and _is_float(fields[2])
        return TextLayout(delim, header_line, has_weight, header, len(fields), lineno)
    return TextLayout(delim, header_line, False, header)


def _bad_line(
    path: str,
    lineno: int,
    raw: str,
    fields: list[str],
    delim: str | None,
    *,
    after_header: int | None = None,
    want_weight: bool = False,
    layout: TextLayout | None = None,
) -> PartitionInputError:
    """Build the error for one unparsable line, saying which field is wrong and why.

    With ``layout``, a line whose fields are fine but whose column count differs from the
    first data line's is reported as such, quoting the extra columns.
    """
    name = DELIMITER_NAMES.get(delim, repr(delim))
    hint = None
    bad = next((i for i in (0, 1) if i < len(fields) and not _is_int(fields[i])), None)
    if len(fields) < (3 if want_weight else 2):
        what = (
            f"expected 'src dst{' weight' if want_weight else ''}' separated by {name}, "
            f"found {len(fields)} field{'s' if len(fields) != 1 else ''}"
        )
    elif bad is not None:
        what = f"{'source' if bad == 0 else 'destination'} id {fields[bad]!r} is not an integer"
    elif want_weight and not _is_float(fields[2]):
        what = f"weight {fields[2]!r} is not a number"
    else:
        expected = layout.num_fields if layout is not None else len(fields)
        what = (
            f"found {len(fields)} fields separated by {name} where the first data line "
            f"(line {layout.first_line if layout else '?'}) has {expected}"
        )
        if len(fields) > expected:
            what += f"; extra: {(delim or ' ').join(fields[expected:])!r}"
        hint = (
            "every data line needs the columns of the first one (src dst, then an optional "
            "weight and other columns): remove the extra columns or fix the line"
        )
    if after_header is not None:
        hint = f"line {after_header} was taken as a header; only one header line is allowed"
    return PartitionInputError(
        f"cannot parse edge line {_quote(raw)}: {what}", path=path, line=lineno, hint=hint
    )


def _find_bad_line(
    path: str, layout: TextLayout, comment: str | None, want_weight: bool
) -> PartitionInputError | None:
    """Walk the file to the first line bulk parsing rejected (error path only)."""
    with open_text(path, errors="replace") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if lineno <= layout.skip_lines:
                continue
            line = _strip_comment(raw, comment)
            if not line:
                continue
            fields = _split(line, layout.delimiter)
            ok = (
                len(fields) == layout.num_fields
                and _is_int(fields[0])
                and _is_int(fields[1])
                and (not want_weight or _is_float(fields[2]))
            )
            if not ok:
                return _bad_line(
                    path, lineno, raw, fields, layout.delimiter, want_weight=want_weight,
                    layout=layout,
                )
    return None


def line_of_row(path: str, layout: TextLayout, comment: str | None, row: int) -> tuple[int, str]:
    """1-based line number and text of the ``row``-th data line (0-based); error path only."""
    seen = -1
    with open_text(path, errors="replace") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if lineno <= layout.skip_lines or not _strip_comment(raw, comment):
                continue
            seen += 1
            if seen == row:
                return lineno, raw
    return 0, ""


def parse_edge_columns(
    path: str,
    *,
    delimiter: str | None = None,
    comment: str | None = "#",
    allow_header: bool = True,
    read_weight: bool = True,
    spill: SpillFolder | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, TextLayout]:
    """Parse the ``src dst [weight]`` columns of a text edge file, :data:`CHUNK_ROWS` lines
    at a time with numpy.

    Returns int64 ``src``, ``dst``, float64 ``weight`` (``None`` without a weight column or when
    ``read_weight`` is false) and the detected layout. With ``spill``, columns that grow large
    go to memory-mapped files there as they are parsed (:class:`partitioner.spill.Column`), so
    the parse holds one chunk, not the file. Columns past the third are ignored, but every data
    line must have the first data line's number of columns. Raises PartitionInputError naming
    the file and the 1-based line of the first bad line.
    """
    layout = detect_layout(path, delimiter=delimiter, comment=comment, allow_header=allow_header)
    weighted = layout.has_weight and read_weight
    columns = [Column(np.int64, folder=spill), Column(np.int64, folder=spill)]
    if weighted:
        columns.append(Column(np.float64, folder=spill))
    with discarded_on_error(columns):
        for chunk in edge_chunks(path, layout, comment, weighted):
            for column, values in zip(columns, chunk, strict=False):
                column.append(values)
        arrays = [column.finish() for column in columns]
    return arrays[0], arrays[1], arrays[2] if weighted else None, layout


def edge_chunks(
    path: str, layout: TextLayout, comment: str | None, read_weight: bool,
    rows: int | None = None,
) -> Iterator[tuple[np.ndarray, ...]]:
    """``(src, dst)`` or, with ``read_weight``, ``(src, dst, weight)`` for each ``rows`` data
    lines of ``path`` in order (default :data:`CHUNK_ROWS`), contiguous arrays."""
    rows = rows or CHUNK_ROWS
    dtype = _row_dtype(layout)
    try:
        with open_text(path) as fh:  # gzip / zstd decompressed on the fly
            skip = layout.skip_lines
            while True:
                # Around the call only, not across the yield (the filter is process-wide): an
                # edge file with no edges is legal (a type or chunk may be empty), the last
                # chunk of a file with a multiple of `rows` lines is empty, and blank lines
                # are not rows; numpy warns of each.
                with warnings.catch_warnings():
                    warnings.filterwarnings("ignore", message=".*contained no data.*")
                    table = np.loadtxt(
                        fh,
                        dtype=dtype,
                        delimiter=layout.delimiter,
                        comments=comment or None,
                        skiprows=skip,
                        max_rows=rows,
                        ndmin=1 if dtype.names else 2,
                        encoding=_ENCODING,
                    )
                skip = 0
                if dtype.names:
                    columns = [table["src"], table["dst"]]
                    if read_weight and layout.has_weight:
                        columns.append(table["c2"])
                else:
                    columns = [table[:, 0], table[:, 1]] if table.size else \
                        [np.zeros(0, np.int64)] * 2
                yield tuple(np.ascontiguousarray(c) for c in columns)
                if len(table) < rows:
                    return
    except (ValueError, UnicodeDecodeError) as exc:
        located = _find_bad_line(path, layout, comment, layout.has_weight)
        if located is not None:
            raise located from exc
        raise PartitionInputError(f"cannot parse edge list: {exc}", path=path) from exc
    except OSError as exc:
        raise PartitionInputError(
            f"cannot read edge list: {exc.strerror or exc}", path=path
        ) from exc


def _row_dtype(layout: TextLayout) -> np.dtype:
    """The dtype ``loadtxt`` parses one line into: every column of the layout, never a
    ``usecols`` subset, so that loadtxt itself rejects a line with more or fewer columns
    (in bulk, with no Python loop). Ignored columns become zero-width strings."""
    if layout.num_fields <= 2:
        return np.dtype(np.int64)
    third = np.float64 if layout.has_weight else "S0"
    rest = [(f"c{i}", "S0") for i in range(3, layout.num_fields)]
    return np.dtype([("src", np.int64), ("dst", np.int64), ("c2", third), *rest])


def check_id_range(
    path: str,
    layout: TextLayout,
    comment: str | None,
    src: np.ndarray,
    dst: np.ndarray,
    limits: tuple[int | None, int | None],
    node_types: tuple[str, str] | None = None,
    first_row: int = 0,
) -> None:
    """Raise for the first negative id, or id at or above ``limits``, naming its line.

    ``node_types`` (source type, destination type) only words the message for typed edges;
    ``first_row`` is the data row of ``src[0]`` in the file (for a chunk past the first).
    """
    for ids, end, limit, kind in (
        (src, "source", limits[0], f"{node_types[0]} " if node_types else ""),
        (dst, "destination", limits[1], f"{node_types[1]} " if node_types else ""),
    ):
        if ids.size == 0:
            continue
        bad_mask = ids < 0
        if limit is not None:
            bad_mask |= ids >= limit
        if not bad_mask.any():
            continue
        row = int(np.flatnonzero(bad_mask)[0])
        lineno, raw = line_of_row(path, layout, comment, first_row + row)
        value = int(ids[row])
        if value < 0:
            why = f"{end} id {value} is negative"
        else:
            assert limit is not None  # a non-negative id is flagged only by `ids >= limit`
            why = (
                f"{end} id {value} is out of range: there are {limit} {kind}nodes "
                f"(ids 0..{limit - 1})"
            )
        raise PartitionInputError(
            f"{why} in edge line {_quote(raw)}", path=path, line=lineno or None
        )


def _check_compact_ids(
    path: str, layout: TextLayout, comment: str | None, src: np.ndarray, dst: np.ndarray, n: int
) -> None:
    """Refuse a node count taken as largest id + 1 that the edges cannot need (the rule of
    :func:`partitioner.inputs.id_space_too_sparse`), naming the line of the largest id."""
    ends = [ids for ids in (src, dst) if ids.size and int(ids.max()) + 1 == n]
    if not ends or not id_space_too_sparse(n, len(src)):
        return
    lineno, raw = line_of_row(path, layout, comment, int(np.argmax(ends[0])))
    raise sparse_ids_error(n - 1, len(src), path=path, line=lineno or None,
                           where=f" in edge line {_quote(raw)}")


def read_edge_list(
    path: str | os.PathLike,
    *,
    delimiter: str | None = None,
    comment: str | None = "#",
    num_nodes: int | None = None,
    node_data: dict[str, str] | None = None,
    spill: SpillFolder | None = None,
) -> Graph:
    """Read a homogeneous graph from a text edge list, one ``src dst [weight]`` per line.

    Blank lines and ``comment`` lines (and trailing comments) are skipped; a first line whose
    first two fields are not integers is a header. ``delimiter=None`` auto-detects comma, tab
    or whitespace. A numeric third column becomes edge data ``weight``; further columns are
    ignored, but every data line must have as many columns as the first. gzip and zstd files
    are decompressed on the fly; a binary file is refused by name (``compressed.open_text``).
    ``node_data`` maps feature names to ``.npy`` files with one row per node.
    ``num_nodes`` defaults to max id + 1 (or the feature row count, when larger); a max id far
    beyond what the edges can use is refused unless ``num_nodes`` says so
    (:func:`partitioner.inputs.id_space_too_sparse`).
    With ``spill``, the parsed columns go to memory-mapped files there once they grow large
    (see :func:`parse_edge_columns`).
    Raises PartitionInputError naming the file and, for a bad line, its 1-based number.
    """
    path = os.fspath(path)
    if num_nodes is not None and int(num_nodes) < 0:
        raise PartitionOptionError(f"num_nodes must be >= 0 (got {num_nodes})")
    if not os.path.isfile(path):
        raise PartitionInputError(
            "no such file" if not os.path.exists(path) else "not a regular file", path=path
        )
    src, dst, weight, layout = parse_edge_columns(path, delimiter=delimiter, comment=comment,
                                                  spill=spill)
    features = load_node_data(node_data)
    limit = None if num_nodes is None else int(num_nodes)
    check_id_range(path, layout, comment, src, dst, (limit, limit))
    n = resolve_num_nodes(num_nodes, src, dst, features, node_data, path)
    if num_nodes is None:
        _check_compact_ids(path, layout, comment, src, dst, n)
    edata = {"weight": weight} if weight is not None else {}
    graph = Graph.homogeneous(src, dst, n, ndata=features, edata=edata)
    graph.validate(path)
    return graph
