"""One bad-input corpus, both ingest engines: the same error, naming file, line and field,
and nothing left behind at the target.

Every case runs through the one front door (:func:`gofs.ingest.ingest`) with
``engine="local"`` and ``engine="spark"``; the two messages must be equal, so
the engines cannot drift apart again (issue 27 item 1, issue 24 item 7).
"""
from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from gofs.errors import InputError
from gofs.ingest import ingest

GOOD_GZIP = gzip.compress(b"0 1\n1 2\n" * 50)
CORRUPT_GZIP = GOOD_GZIP[:10] + bytes(b ^ 0x5A for b in GOOD_GZIP[10:30]) + GOOD_GZIP[30:]

# name: (files {name: bytes}, the input file, read options, InputError text after "<dir>/")
CASES = {
    "edge list line with one field": (
        {"e.txt": b"0 1\n2\n"}, "e.txt", {}, "e.txt line 2: expected 2 fields (src dst), found 1"),
    "edge list line with a field too many": (
        {"e.txt": b"# comment\n0 1\n1 2 3\n"}, "e.txt", {},
        "e.txt line 3: expected 2 fields (src dst), found 3; name the extra columns with weight= or attribute_names="),
    "edge list not UTF-8": (
        {"e.txt": b"0 1\n1 \xff\xfe\n"}, "e.txt", {}, "e.txt line 2: not valid UTF-8 text"),
    "edge list weight not a number": (
        {"e.txt": b"0 1 2.5\n1 2 heavy\n"}, "e.txt", {"weight": "w"}, "e.txt line 2, column 'w': 'heavy' is not a number"),
    "edge list id not an integer": (
        {"e.txt": b"0 1\nx 2\n"}, "e.txt", {"id_type": "int"}, "e.txt line 2, column 'src': 'x' is not an integer"),
    "edge list corrupt gzip": (
        {"e.txt.gz": CORRUPT_GZIP}, "e.txt.gz", {}, "e.txt.gz: not a readable gzip file (corrupt or truncated)"),
    "CSV short row": (
        {"e.csv": b"src,dst,w\n0,1,2.0\n1,2\n"}, "e.csv", {}, "e.csv line 3: expected 3 fields (src, dst, w), found 2"),
    "CSV long row": (
        {"e.csv": b"src,dst\n0,1\n1,2,3\n"}, "e.csv", {}, "e.csv line 3: expected 2 fields (src, dst), found 3"),
    "CSV not UTF-8": (
        {"e.csv": b"src,dst\n0,1\n1,\xff\xfe\n"}, "e.csv", {}, "e.csv line 3: not valid UTF-8 text"),
    "CSV missing id": (
        {"e.csv": b"src,dst\n0,1\n\n1,\n"}, "e.csv", {}, "e.csv line 4, column 'dst': missing vertex id"),
    "CSV value against the schema": (
        {"e.csv": b"src,dst,w\n0,1,2\n1,2,x\n"}, "e.csv", {"schema": {"w": "int"}},
        "e.csv line 3, column 'w': 'x' is not an integer"),
    "CSV without the id column": (
        {"e.csv": b"a,b\n0,1\n"}, "e.csv", {}, "e.csv: no column 'src' (columns: a, b)"),
    "CSV corrupt gzip": (
        {"e.csv.gz": CORRUPT_GZIP}, "e.csv.gz", {}, "e.csv.gz: not a readable gzip file (corrupt or truncated)"),
    "vertex file repeats an id": (
        {"e.csv": b"src,dst\n0,1\n1,2\n", "v.csv": b"id,name\n0,a\n1,b\n0,c\n"}, "e.csv",
        {"vertices_path": "v.csv"}, "v.csv line 4, column 'id': duplicate vertex id 0"),
    "vertex file misses an id": (
        {"e.csv": b"src,dst\n0,1\n", "v.csv": b"id,name\n0,a\n,b\n"}, "e.csv",
        {"vertices_path": "v.csv"}, "v.csv line 3, column 'id': missing vertex id"),
    "unknown suffix": (
        {"e.xyz": b"0 1\n"}, "e.xyz", {},
        "e.xyz: cannot tell the format from the suffix '.xyz'; pass format='edgelist', 'csv' or 'parquet'"),
    "file without a suffix": (
        {"edges": b"0 1\n"}, "edges", {},
        "edges: cannot tell the format from the suffix ''; pass format='edgelist', 'csv' or 'parquet'"),
    "Parquet file that is not Parquet": (
        {"e.parquet": b"hello"}, "e.parquet", {},
        "e.parquet: not a readable Parquet file (corrupt, truncated, or another format)"),
    "missing input": (
        {}, "nope.txt", {}, "nope.txt: no such file or directory"),
}


def _write(directory: Path, files: dict) -> None:
    for name, data in files.items():
        (directory / name).write_bytes(data)


@pytest.mark.parametrize("case", CASES)
def test_both_engines_give_the_same_error_and_write_nothing(spark, tmp_path, case):
    files, source, options, message = CASES[case]
    _write(tmp_path, files)
    options = {k: str(tmp_path / v) if k == "vertices_path" else v for k, v in options.items()}
    errors = {}
    for engine in ("local", "spark"):
        target = tmp_path / f"{engine}.gofs"
        with pytest.raises(InputError) as caught:
            ingest(str(tmp_path / source), str(target), num_partitions=2, partitioner="hash", engine=engine,
                   spark=spark, **options)
        errors[engine] = str(caught.value)
        assert not target.exists(), f"{engine} engine left {target}"
    assert errors["local"] == errors["spark"]
    assert errors["local"] == f"{tmp_path}/{message}"

