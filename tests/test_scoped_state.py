"""State that one run, one session or one query keeps is scoped to it: no process-wide
setting or registry that the latest caller overwrites for everybody (issue 27, item 5)."""
import numpy as np

from gopher import cache


def _array(nbytes: int):
    return lambda: np.zeros(nbytes // 8)


def test_each_run_keeps_its_task_cache_budget(monkeypatch):
    monkeypatch.setattr(cache, "_PROCESS_CACHE", cache.TaskCache())
    roomy = cache.process_cache(10**6)
    roomy.get("topology", _array(800))
    tight = cache.process_cache(1000)          # a later run with a small budget ...
    tight.get("a", _array(800))
    assert "topology" in roomy                 # ... does not shrink what the roomy run keeps
    cache.process_cache(10**6)                 # and a later roomy run does not lift the tight one's
    tight.get("b", _array(800))
    assert "a" not in tight and "b" in tight and "topology" in roomy
    assert cache._PROCESS_CACHE.used == 1600


def test_one_budget_is_plain_lru():
    shared = cache.TaskCache(budget=2000)
    for key in "abc":
        shared.get(key, _array(800))
    assert [k for k in "abc" if k in shared] == ["b", "c"]
    shared.get("b", _array(800))               # b is now the most recent: c goes before it
    shared.get("d", _array(800))
    assert [k for k in "abcd" if k in shared] == ["b", "d"] and shared.used == 1600
