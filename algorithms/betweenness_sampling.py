"""Adaptive sampling for betweenness with a guarantee: sampled sources or sampled pairs.

KADABRA (Borassi & Natale, "KADABRA is an ADaptive Algorithm for Betweenness via
Random Approximation", 2016) samples shortest paths between uniformly random pairs
``(s, t)`` and stops as soon as per-vertex confidence intervals are tight enough. A sample
here scores every vertex ``v`` with a value ``X_v`` in [0, 1] whose mean is the same for both
units, ``E[X_v] = sum over ordered pairs s != t of delta_st(v) / (n (n - 1))``:

- a **source** (``unit="sources"``, where the whole graph is in one task): one whole Brandes
  pass from a uniformly random ``s`` scores ``X_v = delta_s.(v) / (n - 1)``, ``v``'s mean
  dependency over every target. For the top vertices of a 100k road graph its variance is
  ~6% of a pair's, so the same noise costs a few thousand sources instead of ~100k pairs;
  the guarantee then needs an interval that sees the variance: the empirical Bernstein bound
  of Maurer & Pontil ("Empirical Bernstein Bounds and Sample Variance Penalization", 2009,
  Theorem 4), from the sums of the scores and of their squares.
- a **pair** (``unit="pairs"``, where paths are followed across cuts and a source's
  dependencies arrive in pieces over supersteps, so their squares are never formed):
  ``X_v = sigma_sv * sigma_vt / sigma_st``, nearly 0/1, whose variance is bounded by its
  mean (``X^2 <= X``); Bernstein's inequality with that bound, inverted for the true mean
  (KADABRA's ``f`` and ``g``), needs no squares.

At checks (in the number of samples, fixed before the samples they judge) each vertex's
interval comes from :meth:`Sampling.bounds` (two-sided), with ``delta`` split over the
vertices and the checks, so all intervals of all checks hold together with probability at
least ``1 - delta``. The even plan spaces the checks geometrically (each 15% past the last, up
to ``max_samples``) and splits ``delta`` evenly. In top-k on the gathered topology a pilot,
whose samples are then set aside, fixes two uneven splits: KADABRA's over the vertices (the
candidates it ranks highest share 90% of ``delta``) and one over the checks
(:meth:`Sampling.planned`: most of ``delta`` on a few checks around the stop the pilot's
means and variances predict). The gathered run stops when :func:`top_k_guarantee` reaches
``epsilon`` (the reported top-k are each at least the true k-th minus it); the run across
cuts when the top-``k`` are separated from the rest (:func:`stop_reason`). Either stops when
every interval is narrower than ``epsilon``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class CheckPlan:
    """Where the checks fall (in samples counted after the pilot, the last at the cap) and each
    check's share of ``delta`` (the shares sum to 1), fixed before any measured sample."""

    points: tuple
    shares: tuple

    def share_at(self, before: int, after: int) -> float | None:
        """The share of the check that samples ``before`` to ``after`` pass first, or None."""
        passed = [share for point, share in zip(self.points, self.shares) if before < point <= after]
        return passed[0] if passed else None


@dataclass(frozen=True)
class Sampling:
    """The sampler's parameters for a graph of ``n`` vertices, ``batch`` samples per batch, each
    sample a uniformly random source (``unit="sources"``) or source-target pair (``"pairs"``)."""

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
    #: "sources" or "pairs"
    unit: str = "pairs"

    @property
    def by_source(self) -> bool:
        return self.unit == "sources"

    @classmethod
    def default_max_samples(cls, n: int, batch: int, epsilon: float, delta: float, unit: str = "pairs") -> int:
        """The number of samples at which each side of every vertex's interval (:meth:`bounds`,
        this sampler's even split of ``delta``) is at most ``epsilon / 2`` whatever the scores
        (variance at most its mean, at most 1 for pairs; at most 1/4 for sources): the cap,
        where the rule stops for sure."""
        cap, half = 2, epsilon / 2
        for _ in range(4):                  # the split depends on the checkpoints, which depend on the cap
            log = cls(n, batch, epsilon, delta, cap, 0, unit=unit).log_term
            if unit == "sources":           # sqrt(2 (1/4) L' / m) + 7 L' / (3 (m - 1)) <= half, L' = L + ln 2
                wide = log + math.log(2)
                cap = max(2, math.ceil((math.sqrt(wide / 2) / half) ** 2))
                while math.sqrt(wide / (2 * cap)) + 7 * wide / (3 * (cap - 1)) > half:
                    cap = math.ceil(cap * 1.01) + 1
            else:                           # m half^2 = 2 L (1 + 4 half / 3)
                cap = max(2, math.ceil(2 * log * (1 + 4 * half / 3) / half ** 2))
        return cap

    #: samples at the first checkpoint, and the growth from one checkpoint to the next
    FIRST_CHECK = 256
    GROWTH = 1.15
    #: the candidates' share of ``delta`` in the unequal split
    CANDIDATE_SHARE = 0.9
    #: a plan from the pilot: checks from this share of the predicted stop, ``WINDOW`` of them
    #: ``WINDOW_GROWTH`` apart sharing ``WINDOW_SHARE`` of ``delta``, then :attr:`GROWTH` apart
    PLAN_START = 0.85
    WINDOW = 8
    WINDOW_GROWTH = 1.05
    WINDOW_SHARE = 0.9

    @property
    def checks(self) -> int:
        """How many checkpoints the even plan has (the last at :attr:`last_check`)."""
        return sum(1 for _ in self._checkpoints(self.first_check, self.GROWTH))

    @property
    def first_check(self) -> int:
        """Samples at the first checkpoint. With candidates, none before the interval of a mean
        of 0 (:meth:`bounds`: ``8 L / (3 m)`` wide for pairs, ``7 (L + ln 2) / (3 (m - 1))`` for
        sources, which is no wider where ``L >= 5``) is narrower than ``epsilon`` at the
        candidates' log term with all of their ``delta`` on one check: earlier checks could not
        stop, and each one costs every interval a share of ``delta``."""
        if not 0 < self.candidates < self.n:
            return self.FIRST_CHECK
        log = math.log(2 * self.candidates / (self.CANDIDATE_SHARE * self.delta))
        return max(self.FIRST_CHECK, math.ceil(8 * log / (3 * self.epsilon)))

    def _checkpoints(self, first: float, growth: float, count: int | None = None):
        """Checkpoints (measured samples) from ``first``, ``growth`` apart: ``count`` of them, or
        all before the cap and the cap."""
        point, made = float(first), 0
        while point < self.last_check and made != count:
            yield math.ceil(point)
            point, made = point * growth, made + 1
        if count is None:
            yield self.last_check

    @property
    def last_check(self) -> int:
        """The measured samples at ``max_samples`` (the pilot's are not measured): the last check."""
        return self.measured(-(-self.max_samples // self.batch) - 1)

    def even_plan(self) -> CheckPlan:
        """Checks :attr:`GROWTH` apart from :attr:`first_check`, sharing ``delta`` evenly."""
        points = tuple(self._checkpoints(self.first_check, self.GROWTH))
        return CheckPlan(points, (1 / len(points),) * len(points))

    def planned(self, stop: float) -> CheckPlan:
        """Checks around ``stop``, the measured samples at which the pilot predicts the rule to
        stop: :attr:`WINDOW` checks from :attr:`PLAN_START` of it share :attr:`WINDOW_SHARE` of
        ``delta`` (where a stop is likely, each check's interval gets a large share), and the
        checks after them up to the cap share the rest evenly. Fixed from the pilot alone, so
        the measured samples do not choose their own split."""
        first = max(float(self.first_check), self.PLAN_START * stop)
        window = tuple(self._checkpoints(first, self.WINDOW_GROWTH, self.WINDOW))
        if not window:
            return CheckPlan((self.last_check,), (1.0,))
        tail = tuple(self._checkpoints(window[-1] * self.GROWTH, self.GROWTH))
        inside, after = self.WINDOW_SHARE / len(window), (1 - self.WINDOW_SHARE) / len(tail)
        return CheckPlan(window + tail, (inside,) * len(window) + (after,) * len(tail))

    def check_share(self, batch: int, plan: CheckPlan | None = None) -> float | None:
        """The share of ``delta`` of the check that ``batch`` ends at (the first batch to reach
        its point, in the samples after the pilot), or None when the batch ends at none."""
        if batch < self.pilot:
            return None
        return (plan or self.even_plan()).share_at(self.measured(batch - 1), self.measured(batch))

    def is_check(self, batch: int) -> bool:
        """Whether the batch ends at a check of the even plan."""
        return self.check_share(batch) is not None

    def measured(self, batch: int) -> int:
        """Samples after the pilot, once ``batch`` is done."""
        return max(0, self.samples_after(batch) - self.pilot * self.batch) if batch >= 0 else 0

    def log_terms(self, candidates: np.ndarray | None, share: float | None = None) -> np.ndarray | float:
        """Per vertex ``ln(2 / delta_v)``, ``delta_v`` its interval's failure probability at one
        check (``share`` of ``delta``, default the even plan's), half on each side. Without
        candidates ``delta / n`` each (:attr:`log_term`); with them (KADABRA's unequal split)
        :attr:`CANDIDATE_SHARE` goes to the :attr:`candidates` the pilot ranked highest, whose
        intervals decide the top-k, the rest to all the others, whose small values keep their
        intervals narrow even with a tiny share."""
        share = 1 / self.checks if share is None else share
        if candidates is None or not 0 < self.candidates < self.n:
            return math.log(2 * max(self.n, 1) / (share * self.delta))
        base = 2 / (share * self.delta)
        log = np.full(self.n, math.log(base * (self.n - self.candidates) / (1 - self.CANDIDATE_SHARE)))
        log[candidates[:self.candidates]] = math.log(base * self.candidates / self.CANDIDATE_SHARE)
        return log

    @property
    def log_term(self) -> float:
        """``ln(2 n R / delta)``: each vertex's interval at each of the even plan's ``R`` checks
        fails with probability at most ``delta / (n R)``, half of it on each side."""
        return self.log_terms(None)

    def samples_after(self, batch: int) -> int:
        return min((batch + 1) * self.batch, self.max_samples)

    def _batch_rng(self, batch: int) -> tuple[np.random.Generator, int]:
        return np.random.default_rng([self.seed, batch]), self.samples_after(batch) - batch * self.batch

    def pairs(self, batch: int) -> tuple[np.ndarray, np.ndarray]:
        """The batch's (source numbers, target numbers), ``s != t``, the same in every task."""
        rng, size = self._batch_rng(batch)
        s = rng.integers(0, self.n, size)
        t = rng.integers(0, max(self.n - 1, 1), size)
        return s, t + (t >= s)

    def sources(self, batch: int) -> np.ndarray:
        """The batch's source numbers, drawn independently (with replacement: the samples of the
        bound are independent), the same in every task."""
        rng, size = self._batch_rng(batch)
        return rng.integers(0, self.n, size)

    @property
    def score_scale(self) -> float:
        """What turns the kernels' sums into sums of scores in [0, 1]: a source's dependencies
        are divided by the ``n - 1`` targets (a pair's are scores already)."""
        return 1 / max(self.n - 1, 1) if self.by_source else 1.0

    def bounds(self, total: np.ndarray, m: int, log=None, squares: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """Per vertex (below, above): how far under and over its mean after ``m`` samples whose
        scores (in [0, 1]) sum to ``total`` (and, sampling sources, whose squares sum to
        ``squares``) its true mean may lie, each side failing with probability ``exp(-log)``
        (``log``: :meth:`log_terms`, default the even split).

        Sources: Maurer & Pontil's empirical Bernstein bound, each side
        ``sqrt(2 V L' / m) + 7 L' / (3 (m - 1))`` with ``V`` the unbiased sample variance and
        ``L' = log + ln 2`` (the bound holds with ``2 exp(-L')``: it covers the variance's
        estimate too), needing ``m >= 2``. Pairs: Bernstein's inequality with the variance
        bounded by the true mean ``b`` itself (a score in [0, 1] has ``X^2 <= X``),
        ``P(|mean - b| >= t) <= exp(-m t^2 / (2 b + 2 t / 3))`` per side, inverted for ``b``
        (KADABRA's ``f`` and ``g``): ``b`` is at most ``mean + u`` with ``m u^2 = 2 L (mean + 4 u
        / 3)`` and at least ``mean - l`` with ``m l^2 = 2 L (mean - 2 l / 3)``. On pair
        dependencies, nearly 0/1, this is narrower than the empirical bound, which pays for
        estimating the variance in ``delta`` and in its range term."""
        total = np.asarray(total, np.float64)
        log = self.log_term if log is None else log
        if m < (2 if self.by_source else 1):
            return np.full(len(total), np.inf), np.full(len(total), np.inf)
        mean = total / m
        if self.by_source:
            wide = log + math.log(2)
            variance = np.maximum(np.asarray(squares, np.float64) - total * mean, 0.0) / (m - 1)
            radius = np.sqrt(2 * variance * wide / m) + 7 * wide / (3 * (m - 1))
            return np.minimum(radius, mean), radius
        root = 8 * m * log * mean
        above = (8 * log / 3 + np.sqrt(64 * log * log / 9 + root)) / (2 * m)
        below = (-4 * log / 3 + np.sqrt(16 * log * log / 9 + root)) / (2 * m)
        return np.clip(below, 0.0, mean), above          # >= 0: at mean 0 the root cancels to -2e-17

    def predicted_stop(self, total: np.ndarray, m: int, candidates: np.ndarray, k: int,
                       squares: np.ndarray | None = None) -> float:
        """The measured samples at which :func:`top_k_guarantee` would reach ``epsilon`` if the
        means (and, for sources, the sample variances) stayed those of the pilot (``m`` samples
        summing to ``total``, their squares to ``squares``), with the window's share of
        ``delta`` per check: where :meth:`planned` puts its checks."""
        mean = total / m
        variance = np.maximum(squares - total * mean, 0.0) / max(m - 1, 1) if self.by_source else None
        log = self.log_terms(candidates, self.WINDOW_SHARE / self.WINDOW)
        points = list(self._checkpoints(self.first_check, 1.01))
        low, high = 0, len(points) - 1             # the bounds shrink with the samples: bisect
        while low < high:
            middle = (low + high) // 2
            p = points[middle]
            same = variance * (p - 1) + mean * mean * p if self.by_source else None
            below, above = self.bounds(mean * p, p, log, same)
            if top_k_guarantee(mean, below, above, k)[0] <= self.epsilon:
                high = middle
            else:
                low = middle + 1
        return float(points[low])


def top_k_guarantee(mean: np.ndarray, below: np.ndarray, above: np.ndarray, k: int) -> tuple[float, bool]:
    """(epsilon reached, separated) for reporting the ``k`` highest means, every interval
    (``mean - below`` to ``mean + above``) holding.

    The true ``k``-th value is at most the ``k``-th highest upper bound (the true top ``k`` all
    have upper bounds above it), and each reported vertex's true value is at least its lower
    bound, so each is at least the true ``k``-th minus ``max(0, k-th upper - lowest reported
    lower)``. Separated: that lowest lower bound is at least every upper bound outside; then the
    reported vertices are the true top ``k`` and the epsilon reached is 0."""
    k = min(k, len(mean))
    reported = np.argpartition(-mean, k - 1)[:k]
    lowest = float((mean[reported] - below[reported]).min())
    upper = mean + above
    kth_upper = float(np.partition(-upper, k - 1)[k - 1]) * -1
    outside = np.ones(len(mean), bool)
    outside[reported] = False
    if not outside.any() or lowest >= float(upper[outside].max()):
        return 0.0, True
    return max(0.0, kth_upper - lowest), False


def stop_reason(top: tuple, by_upper: tuple, widest: float, k: int | None, epsilon: float) -> str | None:
    """Why sampling may stop now, or None.

    ``top``: (vertex ids, means, how far below them the lower bounds are) of the ``k`` highest
    means; ``by_upper``: (vertex ids, upper bounds) of the ``k + 1`` highest upper bounds (the
    first of them outside ``top`` has the largest upper bound of all vertices outside it);
    ``widest``: the largest half-width of an interval."""
    if 2 * widest <= epsilon:
        return "epsilon"
    if k:
        vids, means, radii = top
        chosen = set(np.asarray(vids).tolist())
        outside = [u for v, u in zip(*by_upper) if int(v) not in chosen]
        if len(vids) == k and outside and float(np.min(means - radii)) >= outside[0]:
            return "separated"
    return None
