"""Edge lists read by byte range in Spark tasks, with the local engine's parser.

Spark's text source gives a file one task per split, and parsing each line in
Spark SQL (a regex split, a cast and a check per field, a UTF-8 round trip)
made the read the Spark engine's slowest stage per byte. Here the driver cuts
each file into byte ranges (a ``.gz`` file is one range); each task reads its
range, extended to whole lines as Hadoop's line reader does (a range owns the
lines that start in it), parses it with
:func:`gofs.ingest.read_local.parse_edge_list` (pandas' C tokenizer and Arrow
casts, exactly as the local engine reads the whole file) and hands the columns
to the caller's ``consume`` in the same task (the ingest's first step of dense
ids: no file of parsed rows is written and read back). That is one Spark job;
the driver gets each range's row count, and edge ids (line order) follow from
them without another pass.

A range that does not parse (a malformed line, bytes that are not UTF-8, a
corrupt gzip), a compression this reader does not know, a filesystem pyarrow
cannot reach, or ranges whose ids are integers in some and text in others
(``"auto"`` ids must be typed over the whole input) make :func:`read_ranges`
return None: the caller then reads with Spark's own text source, whose checks
name the file and line of the first problem (and ignores what ``consume`` left).
"""
from __future__ import annotations

import gzip
import zlib

import numpy as np
import pyarrow as pa

from gofs import layout
from sparkshim.compat import forgets_zip_importers
from gofs.errors import InputError
import gofs.ingest.formats as formats
from gofs.ingest.read_local import parse_edge_list

RANGE_BYTES = 64 << 20
"""At most this many bytes per range (a task holds its range, parsed, in memory)."""
_MIN_RANGE_BYTES = 1 << 20
_SCAN_BYTES = 1 << 16
_OTHER_CODECS = (".bz2", ".deflate", ".lz4", ".snappy", ".zst", ".xz")
_INT_IDS, _TEXT_IDS, _UNREADABLE = 0, 1, 2
_STATUS = "range long, rows long, status int"


class RangeRead:
    """The result of :func:`read_ranges`: ``rows`` per range (ranges without rows included),
    ``count`` edges and ``text_ids``."""

    def __init__(self, rows: np.ndarray, text_ids: bool):
        self.rows, self.count, self.text_ids = rows, int(rows.sum()), text_ids


def read_ranges(spark, uris: list[str], names: list[str], types: dict[str, str], consume,
                range_bytes: int | None = None):
    """Read the edge-list files ``uris`` (in this order) in byte ranges, one task each, calling
    ``consume(r, table)`` in the task with range r's rows (a table of ``src``, ``dst`` as int64 or,
    text ids, string, and the attribute columns, by ``names``), where it has rows; None when
    Spark's own reader must do it (see the module's docstring). ``names`` and ``types`` as for
    :func:`parse_edge_list`; ``range_bytes`` (default: the input cut in two ranges per core,
    within 1-64 MiB)."""
    ranges = _ranges(spark, uris, range_bytes)
    if ranges is None:
        return None
    found = spark.range(0, len(ranges), 1, len(ranges)) \
        .mapInArrow(_range_reader(ranges, names, types, consume), _STATUS).collect()
    rows = np.zeros(len(ranges), np.int64)
    status = set()
    for row in found:
        rows[row["range"]] = row["rows"]
        if row["rows"] or row["status"] == _UNREADABLE:
            status.add(row["status"])
    if _UNREADABLE in status or len(status) != 1:     # a problem, mixed id kinds, or no rows at all
        return None
    return RangeRead(rows, status == {_TEXT_IDS})


def _ranges(spark, uris: list[str], step: int | None):
    """``(uri, start, end, gzip)`` per range, or None when a file is out of this reader's reach."""
    sizes = []
    for uri in uris:
        if uri.lower().endswith(_OTHER_CODECS):
            return None
        try:
            fs, path = layout.filesystem(uri)
            sizes.append(fs.get_file_info(path).size)
        except (OSError, pa.ArrowException):
            return None
    if any(size is None for size in sizes):
        return None
    if step is None:
        wanted = 2 * spark.sparkContext.defaultParallelism
        step = int(min(RANGE_BYTES, max(_MIN_RANGE_BYTES, -(-sum(sizes) // wanted))))
    ranges = []
    for uri, size in zip(uris, sizes):
        if uri.lower().endswith(".gz"):
            ranges.append((uri, 0, size, True))
        else:
            ranges += [(uri, start, min(start + step, size), False) for start in range(0, max(size, 1), step)]
    return ranges


def _range_reader(ranges: list, names: list[str], types: dict[str, str], consume):
    """Task: parse each range it is given (by index) and hand its rows to ``consume``."""
    @forgets_zip_importers
    def read(batches):
        for batch in batches:
            for r in batch.column(0).to_pylist():
                rows, status = _read_one(ranges[r], r, names, types, consume)
                yield pa.RecordBatch.from_pydict({"range": [r], "rows": [rows], "status": [status]},
                                                 schema=pa.schema([("range", pa.int64()), ("rows", pa.int64()),
                                                                   ("status", pa.int32())]))
    return read


def _read_one(spec, r: int, names, types, consume) -> tuple[int, int]:
    uri, start, end, compressed = spec
    fs, path = layout.filesystem(uri)
    with fs.open_input_file(path) as f:
        data = f.read_at(end, 0) if compressed else _whole_lines(f, start, end, f.size())
    try:
        if compressed:
            if not data.startswith(formats.GZIP_MAGIC):
                return 0, _UNREADABLE
            data = gzip.decompress(data)
        table = parse_edge_list(data, names, types, uri)
    except (InputError, OSError, EOFError, zlib.error):
        return 0, _UNREADABLE
    ids = (table.column("src"), table.column("dst"))
    text = not all(pa.types.is_integer(column.type) for column in ids)
    if table.num_rows:
        ids_type = pa.string() if text else pa.int64()
        consume(r, table.set_column(0, "src", ids[0].cast(ids_type)).set_column(1, "dst", ids[1].cast(ids_type)))
    return table.num_rows, _TEXT_IDS if text else _INT_IDS


def _whole_lines(f, start: int, end: int, size: int) -> bytes:
    """The bytes of the lines that start in ``[start, end)``, each up to its end of line."""
    first = _line_start_after(f, start - 1, size) if start > 0 else 0
    if first >= end:
        return b""
    last = _line_start_after(f, end - 1, size)
    return f.read_at(last - first, first)


def _line_start_after(f, position: int, size: int) -> int:
    """Where the line after the end of line at or after ``position`` starts (``size`` if none)."""
    while position < size:
        block = f.read_at(min(_SCAN_BYTES, size - position), position)
        found = block.find(b"\n")
        if found >= 0:
            return position + found + 1
        position += len(block)
    return size
