"""Adaptive sampling of source-target pairs for betweenness with a guarantee.

KADABRA (Borassi & Natale, "KADABRA is an ADaptive Algorithm for Betweenness via
Random Approximation", 2016) samples shortest paths between uniformly random pairs
``(s, t)`` and stops as soon as per-vertex confidence intervals are tight enough.
Here a sample scores every vertex ``v`` with its pair dependency
``X_v = sigma_sv * sigma_vt / sigma_st`` (the share of ``s``-``t`` shortest paths
through ``v``, in [0, 1]) rather than 0/1 for one sampled path: the same mean,
``E[X_v] = sum over ordered pairs s != t of delta_st(v) / (n (n - 1))``, with
less variance, computed by the Brandes sweeps with the target as the only sink.

At checkpoints spaced geometrically in the number of samples (each 15% past the
last, and ``max_samples``) each vertex's interval is its mean plus or minus the
empirical Bernstein radius (Maurer & Pontil 2009, two-sided), with ``delta`` split
over the vertices and the checkpoints, so all intervals of all checks hold together
with probability at least ``1 - delta``. The split is even, or (:meth:`PairSampling.log_terms`,
top-k on the gathered topology) KADABRA's unequal one: a pilot whose samples are then
set aside picks the candidates, which share 90% of ``delta``; checks start where they could stop. The gathered run stops
when :func:`top_k_guarantee` reaches ``epsilon`` (the reported top-k are each at least
the true k-th minus it); the run across cuts when the top-``k`` are separated from the
rest (:func:`stop_reason`). Either stops when every interval is narrower than ``epsilon``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PairSampling:
    """The sampler's parameters for a graph of ``n`` vertices, ``batch`` samples per batch."""

    n: int
    batch: int
    epsilon: float
    delta: float
    max_samples: int
    seed: int
    #: batches of the pilot (their samples only choose the candidates; not in any interval)
    pilot: int = 0
    #: how many candidates the pilot picks (0: ``delta`` split evenly, no pilot needed)
    candidates: int = 0

    @classmethod
    def default_max_samples(cls, n: int, batch: int, epsilon: float, delta: float) -> int:
        """The number of samples at which Hoeffding's radius (with this sampler's split of
        ``delta``) is ``epsilon / 2`` for every vertex: the cap, where the rule stops for sure."""
        cap = 1
        for _ in range(4):                  # the split depends on the checkpoints, which depend on the cap
            log = math.log(4 * max(n, 1) * cls(n, batch, epsilon, delta, cap, 0).checks / delta)
            cap = max(1, math.ceil(log / (2 * (epsilon / 2) ** 2)))
        return cap

    #: samples at the first checkpoint, and the growth from one checkpoint to the next
    FIRST_CHECK = 256
    GROWTH = 1.15
    #: the candidates' share of ``delta`` in the unequal split
    CANDIDATE_SHARE = 0.9

    @property
    def checks(self) -> int:
        """How many checkpoints a run can pass (the last at ``max_samples``)."""
        return sum(1 for _ in self._checkpoints(self.first_check))

    @property
    def first_check(self) -> int:
        """Samples at the first checkpoint. With candidates, none before the empirical Bernstein
        radius's range term ``7 L / (3 m)`` alone is below ``epsilon / 2`` at the candidates'
        log term (taken with the checks counted from :attr:`FIRST_CHECK`, which only makes it
        larger): earlier checks could not stop, and each one costs every interval a share of
        ``delta``."""
        if not 0 < self.candidates < self.n:
            return self.FIRST_CHECK
        checks = sum(1 for _ in self._checkpoints(self.FIRST_CHECK))
        log = math.log(4 * checks * self.candidates / (self.CANDIDATE_SHARE * self.delta)) + math.log(2)
        return max(self.FIRST_CHECK, math.ceil(14 * log / (3 * self.epsilon)))

    def _checkpoints(self, first: int | None = None):
        point = float(self.first_check if first is None else first)
        while point < self.max_samples:
            yield math.ceil(point)
            point *= self.GROWTH
        yield self.max_samples

    def is_check(self, batch: int) -> bool:
        """Whether the batch ends at or past a checkpoint it is the first to reach (counted in
        the samples after the pilot)."""
        before, after = self.measured(batch - 1), self.measured(batch)
        return batch >= self.pilot and any(before < point <= after for point in self._checkpoints())

    def measured(self, batch: int) -> int:
        """Samples after the pilot, once ``batch`` is done."""
        return max(0, self.samples_after(batch) - self.pilot * self.batch) if batch >= 0 else 0

    def log_terms(self, candidates: np.ndarray | None) -> np.ndarray | float:
        """Per vertex ``ln(4 R / delta_v)``: each vertex's share ``delta_v`` of ``delta`` (two bounds,
        two sides, ``R`` checks). Without candidates ``delta / n`` each (:attr:`log_term`); with
        them (KADABRA's unequal split) :attr:`CANDIDATE_SHARE` of ``delta`` goes to the
        :attr:`candidates` the pilot ranked highest, whose intervals decide the top-k, the rest
        to all the others, whose small values keep their intervals narrow even with a tiny
        share."""
        if candidates is None or not 0 < self.candidates < self.n:
            return self.log_term
        base = 4 * self.checks / self.delta
        log = np.full(self.n, math.log(base * (self.n - self.candidates) / (1 - self.CANDIDATE_SHARE)))
        log[candidates[:self.candidates]] = math.log(base * self.candidates / self.CANDIDATE_SHARE)
        return log

    @property
    def log_term(self) -> float:
        """``ln(4 n R / delta)``: each vertex's interval at each of the ``R`` checks fails with
        probability at most ``delta / (n R)``, half of it for each of the two bounds whose
        smaller radius is taken (two-sided: ``delta / (4 n R)`` per side of each)."""
        return math.log(4 * max(self.n, 1) * self.checks / self.delta)

    def samples_after(self, batch: int) -> int:
        return min((batch + 1) * self.batch, self.max_samples)

    def pairs(self, batch: int) -> tuple[np.ndarray, np.ndarray]:
        """The batch's (source numbers, target numbers), ``s != t``, the same in every task."""
        size = self.samples_after(batch) - batch * self.batch
        rng = np.random.default_rng([self.seed, batch])
        s = rng.integers(0, self.n, size)
        t = rng.integers(0, max(self.n - 1, 1), size)
        return s, t + (t >= s)

    def radius(self, total: np.ndarray, squares: np.ndarray, m: int, log=None) -> np.ndarray:
        """Per vertex, the half-width of its interval after ``m`` samples whose scores (in
        [0, 1]) sum to ``total`` and whose squares sum to ``squares``: the smaller of the
        empirical Bernstein and the Hoeffding radius (``log``: :meth:`log_terms`, default
        the equal split)."""
        if m < 2:
            return np.full(len(total), np.inf)
        variance = np.maximum(squares - total * total / m, 0.0) / (m - 1)
        log = self.log_term if log is None else log
        bernstein = np.sqrt(2 * variance * (log + math.log(2)) / m) + 7 * (log + math.log(2)) / (3 * (m - 1))
        return np.minimum(bernstein, np.sqrt(log / (2 * m)))


def top_k_guarantee(mean: np.ndarray, radius: np.ndarray, k: int) -> tuple[float, bool]:
    """(epsilon reached, separated) for reporting the ``k`` highest means, every interval holding.

    The true ``k``-th value is at most the ``k``-th highest upper bound (the true top ``k`` all
    have upper bounds above it), and each reported vertex's true value is at least its lower
    bound, so each is at least the true ``k``-th minus ``max(0, k-th upper - lowest reported
    lower)``. Separated: that lowest lower bound is at least every upper bound outside."""
    k = min(k, len(mean))
    reported = np.argpartition(-mean, k - 1)[:k]
    lowest = float((mean[reported] - radius[reported]).min())
    upper = mean + radius
    kth_upper = float(np.partition(-upper, k - 1)[k - 1]) * -1
    outside = np.ones(len(mean), bool)
    outside[reported] = False
    return max(0.0, kth_upper - lowest), not outside.any() or lowest >= float(upper[outside].max())


def stop_reason(top: tuple, by_upper: tuple, widest: float, k: int | None, epsilon: float) -> str | None:
    """Why sampling may stop now, or None.

    ``top``: (vertex ids, means, radii) of the ``k`` highest means; ``by_upper``: (vertex ids,
    upper bounds) of the ``k + 1`` highest upper bounds (the first of them outside ``top`` has
    the largest upper bound of all vertices outside it); ``widest``: the largest radius."""
    if 2 * widest <= epsilon:
        return "epsilon"
    if k:
        vids, means, radii = top
        chosen = set(np.asarray(vids).tolist())
        outside = [u for v, u in zip(*by_upper) if int(v) not in chosen]
        if len(vids) == k and outside and float(np.min(means - radii)) >= outside[0]:
            return "separated"
    return None
