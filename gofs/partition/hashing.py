"""Hash partitioning, the baseline every cut is judged by: the numpy and the Spark form side by side.

Both compute Spark's ``xxhash64(seed, vid) mod k``, so the local engine, the Spark
engine and label propagation's starting point give every vertex the same label
(``tests/test_partitioners.py`` checks the two forms agree).
"""
from __future__ import annotations

import numpy as np

from gofs.partition.arrays import checked

# Spark's xxhash64 constants: hash_partition must equal its Spark twin bit for bit.
_P1 = np.uint64(0x9E3779B185EBCA87)
_P2 = np.uint64(0xC2B2AE3D27D4EB4F)
_P3 = np.uint64(0x165667B19E3779F9)
_P4 = np.uint64(0x85EBCA77C2B2AE63)
_P5 = np.uint64(0x27D4EB2F165667C5)
_SPARK_HASH_SEED = 42


def hash_partition(num_vertices: int, src, dst, num_partitions: int, seed: int = 0) -> np.ndarray:
    """Spread vertices uniformly with no regard to edges: the baseline every cut is judged by.

    The hash is Spark's ``xxhash64(seed, vid)``, so ``spark-lp`` starts from the
    very same assignment; ``src`` and ``dst`` are only validated.
    """
    checked(num_vertices, src, dst, num_partitions)
    seed_hash = _xxhash64(np.array([seed]), np.array([_SPARK_HASH_SEED]))
    hashed = _xxhash64(np.arange(num_vertices, dtype=np.int64), seed_hash)
    return np.mod(hashed, num_partitions).astype(np.int32)


def hash_labels(vertices, num_partitions: int, seed: int = 0):
    """The Spark form of :func:`hash_partition`: ``(vid, part)`` for a DataFrame with a ``vid`` column."""
    from pyspark.sql import functions as F

    hashed = F.xxhash64(F.lit(seed).cast("long"), F.col("vid"))
    return vertices.select("vid", F.pmod(hashed, F.lit(num_partitions)).cast("int").alias("part"))


def _xxhash64(values: np.ndarray, seed: np.ndarray) -> np.ndarray:
    """Spark's ``XxHash64.hashLong`` over int64 arrays, with wrap-around uint64 arithmetic."""
    def rotl(x, r):
        return (x << np.uint64(r)) | (x >> np.uint64(64 - r))

    with np.errstate(over="ignore"):
        v = np.asarray(values, dtype=np.int64).view(np.uint64)
        h = np.asarray(seed, dtype=np.int64).view(np.uint64) + _P5 + np.uint64(8)
        h = h ^ (rotl(v * _P2, 31) * _P1)
        h = rotl(h, 27) * _P1 + _P4
        h = (h ^ (h >> np.uint64(33))) * _P2
        h = (h ^ (h >> np.uint64(29))) * _P3
        h = h ^ (h >> np.uint64(32))
    return h.view(np.int64)
