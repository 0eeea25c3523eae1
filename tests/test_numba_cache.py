"""numba compilations queue on one machine-wide lock (gofs.numba_cache), so concurrent workers cannot
corrupt the kernel cache: a process that compiles waits while another holds the lock."""
import fcntl
import os
import subprocess
import sys
import textwrap
import time

import pytest

from gofs.numba_cache import lock_path, serialise_compilation

KERNEL = textwrap.dedent("""
    print("started", flush=True)
    from gofs.numba_cache import serialise_compilation
    serialise_compilation()
    from numba import njit

    @njit(cache=True)
    def twice_plus_one(x):
        return x * 2 + 1

    print(twice_plus_one(20), flush=True)
""")


def test_a_compilation_waits_for_the_lock_and_finishes_after(tmp_path):
    module = tmp_path / "kernel_under_lock.py"
    module.write_text(KERNEL)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    fd = os.open(lock_path(), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        child = subprocess.Popen([sys.executable, str(module)], stdout=subprocess.PIPE, text=True,
                                 env={**os.environ, "PYTHONPATH": root})
        assert child.stdout.readline().strip() == "started"
        time.sleep(3.0)
        assert child.poll() is None, "the kernel compiled while another process held the lock"
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
    out, _ = child.communicate(timeout=120)
    assert child.returncode == 0
    assert out.strip() == "41"
    assert any(name.endswith(".nbi") for name in os.listdir(tmp_path / "__pycache__"))


def test_registering_twice_keeps_one_listener():
    from numba.core import event
    serialise_compilation()
    serialise_compilation()
    ours = [listener for listener in event._registered["numba:compiler_lock"]
            if type(listener).__module__ == "gofs.numba_cache"]
    assert len(ours) == 1


def test_partitioner_tasks_name_their_kernels_instead_of_shipping_them():
    """A numba kernel pickled into a Spark task is rebuilt in the worker without its disk cache
    and compiled again by every task; the partitioner's task functions must reach their
    kernels through module-level functions that cloudpickle ships by reference."""
    import functools

    import numpy as np
    from numba.core.registry import CPUDispatcher
    from pyspark import cloudpickle

    from gofs.partition import boundary, multilevel, propagation

    per_range = functools.partial(multilevel._range_rows, clusters_of=multilevel._range_clusters, cluster_weight=3.0,
                                  seed=0, directory="/tmp/x", labelled=True, ranges={}, summary=(0, {}))
    tasks = {"refine": functools.partial(boundary._refine_task, [], np.array([5, 5]), 6, 1, 3, 1, 0, "/tmp/x"),
             "ranges": functools.partial(multilevel._clustered_ranges, per_range),
             "exchanged ranges": functools.partial(multilevel._exchanged_ranges, {}, {}, per_range),
             "label propagation": functools.partial(propagation._move_vertices, {}, "/tmp/x", 0, 5, 1)}
    shipped = cloudpickle.dumps(boundary.refine_rounds)
    assert b"numba" in shipped, "the check below would not see a kernel shipped by value"
    assert isinstance(boundary.refine_rounds, CPUDispatcher)
    for name, task in tasks.items():
        assert b"numba" not in cloudpickle.dumps(task), f"the {name} task carries a numba kernel by value"
