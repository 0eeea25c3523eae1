"""The edge-key index (hatrick.keyindex) against a dict, under churn that keeps its probe runs
long (dense keys, deletions in the middle of runs, regrowth)."""
import numpy as np

from hatrick.keyindex import build


def test_lookups_match_a_dict_through_deletions_insertions_and_growth():
    rng = np.random.default_rng(5)
    keys = np.unique(rng.integers(0, 1 << 40, 300))
    index = build(keys, np.arange(len(keys)))
    want = dict(zip(keys.tolist(), range(len(keys))))
    slot = len(keys)
    sizes = {len(index.table)}
    for _ in range(200):
        present = np.array(list(want), np.int64)
        removed = rng.choice(present, min(len(present), int(rng.integers(0, 300))), replace=False)
        for key in removed.tolist():
            del want[key]
        added = np.setdiff1d(np.unique(rng.integers(0, 1 << 12, int(rng.integers(0, 500)))),
                             np.array(list(want), np.int64))
        slots = np.arange(slot, slot + len(added))
        slot += len(added)
        want.update(zip(added.tolist(), slots.tolist()))
        index.update(removed, added, slots)
        sizes.add(len(index.table))
        probes = np.concatenate([np.array(list(want), np.int64), rng.integers(0, 1 << 12, 300), [1 << 45]])
        assert index.lookup(probes).tolist() == [want.get(k, -1) for k in probes.tolist()]
        assert len(index) == len(want) and len(index) <= 0.7 * len(index.table)
        held, where = index.items()
        assert dict(zip(held.tolist(), where.tolist())) == want
    assert len(sizes) > 1                                   # it grew, and kept every key through it
