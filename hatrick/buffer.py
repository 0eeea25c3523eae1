"""The elastic buffer: updates since the last snapshot, by bucket, and when to snapshot.

The live graph already holds every buffered update (live results never wait
for a snapshot); the buffer keeps them per bucket so a snapshot, a migration
or a report can say what changed where, and decides when the next snapshot is
due. The threshold is elastic: L = clip(rate * interval, min_volume,
max_volume) updates, so a burst is snapshotted in larger, fewer instances
(amortising the write) and a trickle still gets one every ``max_age`` seconds.
``capacity`` bounds the buffer: a batch that would overflow it first forces a
snapshot, holding the producer back instead of dropping anything.
"""
from __future__ import annotations

import time as _time
from dataclasses import dataclass

import numpy as np

from hatrick.updates import UpdateBatch


@dataclass
class SnapshotPolicy:
    """L = clip(rate * interval, min_volume, max_volume); also due after ``max_age`` seconds."""

    interval: float = 5.0
    min_volume: int = 10_000
    max_volume: int = 2_000_000
    max_age: float = 30.0
    capacity: int = 5_000_000

    def threshold(self, rate: float) -> int:
        return int(min(max(rate * self.interval, self.min_volume), self.max_volume))

    def due(self, volume: int, rate: float, age: float) -> bool:
        return volume > 0 and (volume >= self.threshold(rate) or age >= self.max_age)


class ElasticBuffer:
    """Applied updates since the last snapshot, grouped by bucket, with an arrival-rate estimate."""

    def __init__(self, num_buckets: int, policy: SnapshotPolicy | None = None, half_life: float = 2.0):
        self.num_buckets = num_buckets
        self.policy = policy or SnapshotPolicy()
        self.half_life = half_life
        self.per_bucket = np.zeros(num_buckets, np.int64)
        self.load = np.zeros(num_buckets)          # decayed updates per bucket, for the planner
        self.volume = 0
        self._min_time: float | None = None
        self.rate = 0.0
        self.since = None
        self._last = None

    def count(self, buckets: np.ndarray) -> np.ndarray:
        """Updates per bucket of a batch whose rows are in ``buckets``: what :meth:`summary_after`
        and :meth:`add` take (a batch is counted once)."""
        return np.bincount(buckets, minlength=self.num_buckets)

    def add(self, counts: np.ndarray, batch: UpdateBatch, now: float | None = None) -> None:
        """Hold ``batch``, ``counts`` its updates per bucket (:meth:`count`)."""
        now = _time.monotonic() if now is None else now
        if self._last is not None:
            dt = max(now - self._last, 1e-6)
            decay = 0.5 ** (dt / self.half_life)
            self.rate = decay * self.rate + (1 - decay) * len(batch) / dt
            self.load *= decay
        self._last = now
        if self.since is None:
            self.since = now
        self.per_bucket += counts
        self.load += counts
        self.volume += len(batch)
        if len(batch):
            low = float(batch.time.min())
            self._min_time = low if self._min_time is None else min(self._min_time, low)

    def summary_after(self, counts: np.ndarray, batch: UpdateBatch) -> dict:
        """What the buffer will hold once ``batch`` (``counts`` per bucket) is added: the part a
        checkpoint records, so a restart still snapshots updates no instance holds yet."""
        low = float(batch.time.min()) if len(batch) else None
        if self._min_time is not None:
            low = self._min_time if low is None else min(low, self._min_time)
        return {"volume": self.volume + len(batch), "min_time": low,
                "per_bucket": self.per_bucket + counts}

    def restore(self, summary: dict) -> None:
        """Hold what a checkpoint recorded (its age starts now; per-bucket counts only if the
        bucket count is unchanged)."""
        self.volume = int(summary["volume"])
        self._min_time = None if summary["min_time"] is None else float(summary["min_time"])
        per_bucket = np.asarray(summary["per_bucket"], np.int64)
        if len(per_bucket) == self.num_buckets:
            self.per_bucket = per_bucket.copy()
        self.since = _time.monotonic() if self.volume else None

    def age(self, now: float | None = None) -> float:
        return 0.0 if self.since is None else (_time.monotonic() if now is None else now) - self.since

    def due(self, now: float | None = None) -> bool:
        return self.policy.due(self.volume, self.rate, self.age(now))

    def would_overflow(self, incoming: int) -> bool:
        return self.volume > 0 and self.volume + incoming > self.policy.capacity

    def min_time(self) -> float | None:
        return self._min_time

    def drain(self) -> dict:
        """Empty the buffer; returns what it held (volume, age, updates per bucket)."""
        held = {"volume": self.volume, "age": self.age(), "per_bucket": self.per_bucket.copy()}
        self.per_bucket[:] = 0
        self.volume = 0
        self._min_time = None
        self.since = None
        return held
