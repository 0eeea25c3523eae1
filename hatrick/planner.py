"""State-aware migration planning for rescaling, and a policy that does not flap.

Consistent hashing moves about 1/(n+1) of the buckets on scale-out whatever
they hold. The planner instead chooses which buckets move so that the moved
state is small while every worker ends under the load bound
``max_i W_i <= (1 + tau) * W / n`` (the problem of elastic stream operators,
e.g. Gedik et al., "Elastic scaling for data stream processing", TPDS 2014).

It is greedy and exact on the cases that matter: buckets of a removed worker
are placed heaviest first on the least loaded worker; then, while a worker is
over the bound, it sheds the bucket that covers its excess with the least
state (or, if none covers it alone, the one with the most load per unit of
state) to the least loaded worker that stays under the bound. With
``state_tau`` the state each worker holds is a second bounded quantity, handled
the same way (loads and states as shares of their totals). With ``group`` (buckets aligned with
the graph's partitions, :mod:`hatrick.buckets`) a bucket goes, where the bound allows, to a
worker that already holds buckets of its group: a partition's buckets move together, so its
vertices stay on one worker and the boundary between workers stays the partitions' cut.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from gofs.errors import InputError


@dataclass
class Plan:
    """A migration: the new owner of each bucket and what moving costs."""

    owner: np.ndarray
    moved: np.ndarray                 # bucket ids that change owner
    moved_state: float
    total_state: float
    loads: dict                        # worker -> load after the plan
    bound: float
    feasible: bool

    @property
    def moved_fraction(self) -> float:
        return self.moved_state / self.total_state if self.total_state else 0.0

    @property
    def max_load(self) -> float:
        return max(self.loads.values()) if self.loads else 0.0


def _plan(owner_before, owner, load, state, workers, tau, state_tau=None) -> Plan:
    moved = np.flatnonzero(owner != owner_before)
    per = {w: float(load[owner == w].sum()) for w in workers}
    bound = (1.0 + tau) * float(load.sum()) / len(workers)
    feasible = max(per.values()) <= bound + 1e-9
    if state_tau is not None:
        held = max(float(state[owner == w].sum()) for w in workers)
        feasible = feasible and held <= (1.0 + state_tau) * float(state.sum()) / len(workers) + 1e-9
    return Plan(owner, moved, float(state[moved].sum()), float(state.sum()), per, bound, feasible)


def _shares(values: np.ndarray) -> np.ndarray:
    total = float(values.sum())
    return values / total if total > 0 else np.zeros_like(values)


def plan_migration(load, state, owner, workers, tau: float = 0.1, state_tau: float | None = None,
                   group=None) -> Plan:
    """Choose which buckets move when the worker set becomes ``workers``.

    Parameters
    ----------
    load : array of float, one per bucket (e.g. updates/s routed to it)
    state : array of float, one per bucket (e.g. bytes or edges it holds); what moving costs
    owner : array of int, the current worker of each bucket
    workers : the worker ids after rescaling (added ones start empty, missing ones are drained)
    tau : allowed imbalance, the bound is ``(1 + tau) * total_load / len(workers)``
    state_tau : if set, the state each worker holds is bounded too, by ``(1 + state_tau)`` times
        its mean (a stream's buckets can differ in state and in load, e.g. a skewed degree
        distribution or a rule that puts edges in one endpoint's bucket, so balancing one alone
        can leave the other uneven)
    group : array of int, one per bucket, or None: buckets of one group are kept on one worker
        where the bounds allow (a bucket moves preferably to a worker holding its group)

    Returns
    -------
    Plan with the new owner array, the moved buckets and state, and whether the bound holds.

    Example
    -------
    >>> load = np.array([1.0] * 10 + [2.0] * 2)
    >>> owner = np.array([0] * 5 + [1] * 5 + [0, 1])
    >>> plan_migration(load, np.ones(12), owner, [0, 1, 2]).moved
    array([10, 11])
    """
    load = np.asarray(load, dtype=np.float64)
    state = np.asarray(state, dtype=np.float64)
    before = np.asarray(owner, dtype=np.int64)
    workers = sorted(int(w) for w in workers)
    if not workers:
        raise InputError("plan_migration needs at least one worker")
    if not (len(load) == len(state) == len(before)):
        raise InputError(f"load, state and owner differ in length ({len(load)}, {len(state)}, {len(before)})")
    owner = before.copy()
    # each balanced quantity as shares of its total, bounded by (1 + its tau) / n
    weight = np.column_stack([_shares(load)] + ([_shares(state)] if state_tau is not None else []))
    limit = (1.0 + np.array([tau] + ([state_tau] if state_tau is not None else []))) / len(workers)
    index = {w: i for i, w in enumerate(workers)}
    use = np.zeros((len(workers), weight.shape[1]))
    kept = np.isin(owner, workers)
    np.add.at(use, np.array([index[w] for w in owner[kept]], dtype=np.int64), weight[kept])
    grouped = group is not None
    group = np.asarray(group, np.int64) if grouped else np.zeros(len(owner), np.int64)
    drained = np.flatnonzero(~kept)
    for b in drained[np.lexsort((-weight[drained].max(axis=1), group[drained]))]:
        after = ((use + weight[b]) / limit).max(axis=1)
        near = np.isin(workers, owner[(group == group[b]) & np.isin(owner, workers)]) & (after <= 1.0 + 1e-9)
        target = int(np.argmin(np.where(near, after, np.inf))) if grouped and near.any() else int(np.argmin(after))
        owner[b] = workers[target]
        use[target] += weight[b]
    for _ in range(len(owner)):
        over = use / limit
        source, d = np.unravel_index(int(np.argmax(over)), over.shape)
        excess = use[source, d] - limit[d]
        if excess <= 1e-9:
            break
        mine = np.flatnonzero(owner == workers[source])
        mine = mine[weight[mine, d] > 0]
        fits = mine[:0]
        for target in np.argsort(over.max(axis=1), kind="stable"):       # least used first
            if target != source:
                fits = mine[((use[target] + weight[mine]) <= limit + 1e-9).all(axis=1)]
                near = fits[np.isin(group[fits], group[owner == workers[target]])]
                fits = near if grouped and len(near) else fits
                if len(fits):
                    break
        if not len(fits):
            break
        covers = fits[weight[fits, d] >= excess - 1e-9]
        if len(covers):
            pick = covers[np.lexsort((weight[covers, d], state[covers]))[0]]
        else:
            ratio = weight[fits, d] / np.maximum(state[fits], 1e-12)
            pick = fits[np.lexsort((-weight[fits, d], -ratio))[0]]
        owner[pick] = workers[target]
        use[source] -= weight[pick]
        use[target] += weight[pick]
    return _plan(before, owner, load, state, workers, tau, state_tau)


def ring_plan(load, state, owner_after, owner_before, workers, tau: float = 0.1) -> Plan:
    """Describe the consistent-hash ring's own reassignment as a Plan, to compare with the planner."""
    return _plan(np.asarray(owner_before), np.asarray(owner_after), np.asarray(load, np.float64),
                 np.asarray(state, np.float64), sorted(workers), tau)


@dataclass
class RescalePolicy:
    """Decides when to add or remove a worker, without flapping.

    A worker is added only after ``patience`` consecutive observations in which
    the busiest worker is above ``capacity`` (updates/s one worker sustains) and
    the move would lower the peak load by at least ``min_gain`` (a fraction);
    one is removed only after ``patience`` observations in which the load would
    fit on one worker fewer at ``scale_in_below`` of capacity. After a rescale,
    nothing happens for ``cooldown`` observations.
    """

    capacity: float
    patience: int = 3
    cooldown: int = 5
    min_gain: float = 0.1
    scale_in_below: float = 0.6
    min_workers: int = 1
    max_workers: int = 64
    _over: int = field(default=0, repr=False)
    _under: int = field(default=0, repr=False)
    _quiet: int = field(default=0, repr=False)

    def observe(self, worker_loads) -> int:
        """Feed the load of each worker now; returns +1 (add one), -1 (remove one) or 0."""
        loads = np.asarray(list(worker_loads), dtype=np.float64)
        n = len(loads)
        if self._quiet > 0:
            self._quiet -= 1
            return 0
        total, peak = float(loads.sum()), float(loads.max()) if n else 0.0
        gain = (peak - total / (n + 1)) / peak if peak > 0 else 0.0
        self._over = self._over + 1 if peak > self.capacity and gain >= self.min_gain and n < self.max_workers else 0
        fits_fewer = n > self.min_workers and total / (n - 1 if n > 1 else 1) <= self.scale_in_below * self.capacity
        self._under = self._under + 1 if fits_fewer else 0
        if self._over >= self.patience:
            self._over, self._under, self._quiet = 0, 0, self.cooldown
            return 1
        if self._under >= self.patience:
            self._over, self._under, self._quiet = 0, 0, self.cooldown
            return -1
        return 0
