"""Checkpoint files as data, never code: a JSON header followed by raw numeric buffers.

Loading a checkpoint must not run anything the file says (unpickling does), so a
file holds only JSON values (str, int, float incl. NaN/inf, bool, None, lists,
str-keyed maps) and numpy arrays: numeric and bool arrays as raw little-endian
bytes; object arrays (ids, attribute values, producers) of text or nulls as codes
plus the distinct strings, of floats or nulls as a float buffer, others as JSON
lists of their scalars. Every node is tagged, so no user
string (an attribute name, a producer) can be mistaken for structure.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd

from gofs.errors import StreamError

MAGIC = b"HATRICK-DATA-1\n"
_NUMERIC_KINDS = "biuf"


class DataFileError(StreamError, ValueError):
    """The bytes are not a well-formed hatrick data file."""


def dumps(tree) -> bytes:
    """``tree`` (dicts with str keys, lists, JSON scalars, numpy arrays) as bytes."""
    buffers: list[bytes] = []

    def enc(node):
        if isinstance(node, np.ndarray):
            if node.dtype.kind in _NUMERIC_KINDS:
                data = np.ascontiguousarray(node, dtype=node.dtype.newbyteorder("<"))
                buffers.append(data.tobytes())
                return {"$a": [len(buffers) - 1, data.dtype.str, list(node.shape)]}
            if node.dtype == object and node.ndim == 1:
                inferred = pd.api.types.infer_dtype(node, skipna=True) if len(node) else "empty"
                if inferred == "floating":
                    floats = pd.to_numeric(pd.Series(node, dtype=object)).to_numpy(np.float64)
                    buffers.append(floats.astype("<f8").tobytes())
                    return {"$f": len(buffers) - 1}
                if inferred in ("string", "empty"):
                    codes, uniques = pd.factorize(node, use_na_sentinel=True)
                    buffers.append(codes.astype("<i8").tobytes())
                    return {"$c": [len(buffers) - 1, list(uniques)]}
                return {"$o": node.tolist()}
            raise TypeError(f"cannot store an array of dtype {node.dtype} (shape {node.shape})")
        if isinstance(node, dict):
            if not all(isinstance(k, str) for k in node):
                raise TypeError("map keys must be strings")
            return {"$m": {k: enc(v) for k, v in node.items()}}
        if isinstance(node, (list, tuple)):
            return [enc(v) for v in node]
        if isinstance(node, np.generic):
            return node.item()
        return node

    def scalar(value):
        if isinstance(value, np.generic):
            return value.item()
        raise TypeError(f"cannot store a value of type {type(value).__name__}")

    header = json.dumps({"tree": enc(tree), "sizes": [len(b) for b in buffers]},
                        default=scalar, separators=(",", ":")).encode()
    return b"".join([MAGIC, len(header).to_bytes(8, "little"), header, *buffers])


def loads(data: bytes):
    """The tree stored by :func:`dumps`; raises DataFileError on anything else."""
    view = memoryview(data)
    if bytes(view[:len(MAGIC)]) != MAGIC:
        raise DataFileError("not a hatrick data file (bad magic; older checkpoints were pickles, "
                            "which are never loaded)")
    at = len(MAGIC)
    size = int.from_bytes(view[at:at + 8], "little")
    at += 8
    try:
        header = json.loads(bytes(view[at:at + size]))
        sizes = [int(s) for s in header["sizes"]]
    except (ValueError, KeyError, TypeError) as error:
        raise DataFileError(f"unreadable header: {error}") from None
    at += size
    offsets = np.r_[0, np.cumsum(sizes)] + at
    if len(offsets) and offsets[-1] != len(view):
        raise DataFileError(f"truncated or padded: {len(view)} bytes, the header describes {int(offsets[-1])}")

    def buffer(index) -> memoryview:
        if not isinstance(index, int) or not 0 <= index < len(sizes):
            raise DataFileError(f"no buffer {index!r}")
        return view[offsets[index]:offsets[index + 1]]

    def dec(node):
        if isinstance(node, list):
            return [dec(v) for v in node]
        if not isinstance(node, dict):
            return node
        if len(node) != 1:
            raise DataFileError(f"untagged map with keys {sorted(node)[:3]}")
        (tag, body), = node.items()
        if tag == "$m":
            return {k: dec(v) for k, v in body.items()}
        if tag == "$o":
            return np.array(body + [None], dtype=object)[:-1]      # 1-D even when items are lists
        if tag == "$c":
            index, uniques = body
            if not all(isinstance(u, str) for u in uniques):
                raise DataFileError("a coded text array holds non-text values")
            codes = np.frombuffer(buffer(index), "<i8")
            if len(codes) and (codes.min() < -1 or codes.max() >= len(uniques)):
                raise DataFileError("a coded text array's codes are out of range")
            return np.array(uniques + [None], dtype=object)[codes]
        if tag == "$f":
            return np.frombuffer(buffer(body), "<f8").astype(object)
        if tag == "$a":
            index, dtype, shape = body
            dtype = np.dtype(dtype)
            if dtype.kind not in _NUMERIC_KINDS:
                raise DataFileError(f"array dtype {dtype} is not numeric")
            return np.frombuffer(buffer(index), dtype).reshape(shape).astype(dtype.newbyteorder("="))
        raise DataFileError(f"unknown tag {tag!r}")

    try:
        return dec(header["tree"])
    except (ValueError, TypeError, AttributeError) as error:
        raise DataFileError(f"malformed content: {error}") from None
