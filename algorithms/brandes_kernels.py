"""Compiled per-sub-graph Brandes passes for betweenness (numba).

Brandes' algorithm makes one pass per source over the arcs for distances, one for
path counts and one for dependencies; no numpy, scipy or igraph call does a
seeded pass of that kind, so these are numba kernels (``cache=True``: compiled
once, the machine code kept beside this module and loaded by every Spark Python
worker; ``nogil``: tasks of one worker process do not serialise on the GIL).

The program's phase kernels (a phase ends where its messages stop crossing cuts, so
the passes stay apart) work on ``n x B`` arrays in Fortran order, one column per
source of a batch, so a column's entries are contiguous. Columns are independent: a kernel
loops over them and, within one, over the CSR arcs ``(indptr, indices, weights)``.
A shortest-path DAG arc ``u -> v`` of column ``c`` is a local arc with
``dist[u, c] + w == dist[v, c]`` (exact float equality, NetworkX's test); it is
never stored, only tested while sweeping the vertices in distance order.
:func:`brandes_sources` is the whole-graph case with nothing to wait for: distances,
path counts and the stack in one forward pass per source, as igraph's C Brandes does.

Compilation takes ~4.5 s per process with a cold cache, loading the cache ~0.5 s
(``benchmarks.bench_betweenness`` reports it); the cache is written to
``algorithms/__pycache__`` of the installed tree, which every Spark Python worker
imports, so workers load it rather than compile.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from gofs.numba_cache import serialise_compilation

serialise_compilation()  # one compilation at a time on this machine: numba's kernel cache stays whole


@njit(cache=True, nogil=True)
def _heap_push(keys, vals, size, key, val):
    i = size
    keys[i], vals[i] = key, val
    while i > 0:
        parent = (i - 1) >> 1
        if keys[parent] <= keys[i]:
            break
        keys[parent], keys[i] = keys[i], keys[parent]
        vals[parent], vals[i] = vals[i], vals[parent]
        i = parent
    return size + 1


@njit(cache=True, nogil=True)
def _heap_pop(keys, vals, size):
    key, val = keys[0], vals[0]
    size -= 1
    if size > 0:
        keys[0], vals[0] = keys[size], vals[size]
        i = 0
        while True:
            left = 2 * i + 1
            if left >= size:
                break
            child = left
            if left + 1 < size and keys[left + 1] < keys[left]:
                child = left + 1
            if keys[i] <= keys[child]:
                break
            keys[child], keys[i] = keys[i], keys[child]
            vals[child], vals[i] = vals[i], vals[child]
            i = child
    return key, val, size


@njit(cache=True, nogil=True)
def lower_distances(indptr, indices, weights, unit, dist, seed_v, seed_col, seed_d, changed):
    """Lower ``dist`` in place to the distances from the seeds (vertex, column, distance;
    sorted by column, then distance) and everything already in ``dist``, exploring only
    where a distance drops; marks those entries in ``changed``.

    ``unit``: every arc has length 1 and seeds whole distances: a breadth-first search
    whose queue is merged with the seeds in distance order. Otherwise Dijkstra with a
    binary heap. Both skip stale entries, so a column that paths re-enter is lowered
    only in the region where it improves."""
    n = dist.shape[0]
    total = len(seed_v)
    capacity = len(indices) + total + n + 1
    queue_v = np.empty(capacity, np.int64)
    queue_d = np.empty(capacity, np.float64)
    i = 0
    while i < total:
        c = seed_col[i]
        j = i
        while j < total and seed_col[j] == c:
            j += 1
        if unit:                        # the queue holds vertices; a vertex's distance is read when it leaves
            head, tail, k = 0, 0, i
            while True:
                if k < j and (head == tail or seed_d[k] <= dist[queue_v[head], c]):
                    v, d = seed_v[k], seed_d[k]
                    k += 1
                    if d >= dist[v, c]:
                        continue
                    dist[v, c] = d
                    changed[v, c] = True
                elif head < tail:
                    v = queue_v[head]
                    d = dist[v, c]
                    head += 1
                else:
                    break
                step = d + 1.0
                for e in range(indptr[v], indptr[v + 1]):
                    u = indices[e]
                    if step < dist[u, c]:
                        dist[u, c] = step
                        changed[u, c] = True
                        if tail >= capacity:
                            raise RuntimeError("lower_distances: queue overflow")
                        queue_v[tail] = u
                        tail += 1
        else:
            size = 0
            for k in range(i, j):
                v, d = seed_v[k], seed_d[k]
                if d < dist[v, c]:
                    dist[v, c] = d
                    changed[v, c] = True
                    size = _heap_push(queue_d, queue_v, size, d, v)
            while size > 0:
                d, v, size = _heap_pop(queue_d, queue_v, size)
                if d > dist[v, c]:
                    continue
                for e in range(indptr[v], indptr[v + 1]):
                    u = indices[e]
                    step = d + weights[e]
                    if step < dist[u, c]:
                        dist[u, c] = step
                        changed[u, c] = True
                        if size >= capacity:
                            raise RuntimeError("lower_distances: heap overflow")
                        size = _heap_push(queue_d, queue_v, size, step, u)
        i = j


@njit(cache=True, nogil=True)
def distance_order(dist, integral, order, count):
    """Per column, the reached vertices sorted by distance into ``order[:count[c], c]``:
    a counting sort when distances are whole numbers over a short range, else a merge
    sort. Equal distances are never joined by a DAG arc (lengths are positive), so
    their relative order does not matter."""
    n, batch = dist.shape
    keys = np.empty(n, np.float64)
    found = np.empty(n, np.int64)
    for c in range(batch):
        m = 0
        low, high = np.inf, -np.inf
        for v in range(n):
            d = dist[v, c]
            if d < np.inf:
                found[m], keys[m] = v, d
                m += 1
                low = min(low, d)
                high = max(high, d)
        count[c] = m
        if m == 0:
            continue
        if integral and high - low <= 4 * m + 64:
            span = int(high - low) + 1
            starts = np.zeros(span + 1, np.int64)
            for t in range(m):
                starts[int(keys[t] - low) + 1] += 1
            for s in range(span):
                starts[s + 1] += starts[s]
            for t in range(m):
                level = int(keys[t] - low)
                order[starts[level], c] = found[t]
                starts[level] += 1
        else:
            perm = np.argsort(keys[:m], kind="mergesort")
            for t in range(m):
                order[t, c] = found[perm[t]]


@njit(cache=True, nogil=True)
def _first_at_least(dist, order, c, m, bound):
    """First position in column ``c``'s distance order whose distance is >= ``bound``."""
    lo, hi = 0, m
    while lo < hi:
        mid = (lo + hi) >> 1
        if dist[order[mid, c], c] < bound:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True)
def _first_above(dist, order, c, m, bound):
    """First position in column ``c``'s distance order whose distance is > ``bound``."""
    lo, hi = 0, m
    while lo < hi:
        mid = (lo + hi) >> 1
        if dist[order[mid, c], c] <= bound:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True)
def sweep(indptr, indices, weights, dist, order, count, cols, x, bound, upward):
    """One sweep of ``x`` along the DAG, in place, pushed from each vertex holding a non-zero
    value, so an increment costs the vertices it reaches, not the column. ``upward`` (path
    counts): in increasing distance, ``x(v) += x(u)`` over each DAG arc ``u -> v``, the arcs
    ``(indptr, indices, weights)`` forwards, from distance ``bound[j]`` up (``-inf``: all).
    Else (dependencies): in decreasing distance, ``x(u) += x(v)`` over each DAG arc ``u -> v``,
    the arcs given *reversed* (the transposed CSR), from distance ``bound[j]`` down (``inf``:
    all). ``x``'s column ``j`` belongs to the batch's column ``cols[j]``; beyond where an
    increment enters nothing changes."""
    for j in range(len(cols)):
        c = cols[j]
        m = count[c]
        if upward:
            first, stop, step = _first_at_least(dist, order, c, m, bound[j]), m, 1
        else:
            first, stop, step = _first_above(dist, order, c, m, bound[j]) - 1, -1, -1
        for p in range(first, stop, step):
            u = order[p, c]
            xu = x[u, j]
            if xu == 0.0:
                continue
            du = dist[u, c]
            for e in range(indptr[u], indptr[u + 1]):
                v = indices[e]
                if (du + weights[e] == dist[v, c]) if upward else (dist[v, c] + weights[e] == du):
                    x[v, j] += xu


@njit(cache=True, nogil=True)
def sweep_pull(indptr, indices, weights, dist, order, count, sigma, reach, target_row, y):
    """Dependencies of every column in one downward sweep: ``y(u) += sum over u's DAG heads v of
    share(v) + y(v)``, in place, with each head's share computed where it is read rather than
    stored: ``reach(v) / sigma(v)`` (every vertex a target, exact runs), or where
    ``target_row[c] >= 0`` (a sampled pair's column) ``1 / sigma(t)`` at that target only and
    nothing elsewhere. ``y`` enters holding what was injected (zeros, or increments received)."""
    pairs = len(target_row) > 0
    for c in range(dist.shape[1]):
        target = target_row[c] if pairs else -1
        for p in range(count[c] - 1, -1, -1):
            u = order[p, c]
            du = dist[u, c]
            total = y[u, c]
            for e in range(indptr[u], indptr[u + 1]):
                v = indices[e]
                if du + weights[e] == dist[v, c]:
                    share = 0.0
                    if sigma[v, c] > 0.0 and (not pairs or v == target):
                        share = (1.0 if pairs else reach[v]) / sigma[v, c]
                    total += share + y[v, c]
            y[u, c] = total


@njit(cache=True, nogil=True)
def credit(y, increment, cols, add, sigma, col_reach, source_row, sampled):
    """Credit a dependency increment (``increment``'s column ``j`` belongs to the batch's column
    ``cols[j]``): ``sampled(u) += reach(s) * sigma(u) * increment(u)``, skipping each column's
    source row. ``add``: also add the increment into ``y`` (else ``y`` already holds it, as
    after a whole first sweep)."""
    for j in range(len(cols)):
        c = cols[j]
        weight = col_reach[c]
        skip = source_row[c]
        for u in range(y.shape[0]):
            step = increment[u, j]
            if step == 0.0:
                continue
            if add:
                y[u, c] += step
            if u == skip:
                continue
            sampled[u] += weight * sigma[u, c] * step


@njit(cache=True, nogil=True)
def inject(v, j, values, entry, x, bound, lowest):
    """``x[v[i], j[i]] += values[i]`` and, per column ``j``, the lowest (``lowest``) or highest
    ``entry`` distance into ``bound``: where an increment's sweep starts."""
    for i in range(len(v)):
        x[v[i], j[i]] += values[i]
        if lowest:
            bound[j[i]] = min(bound[j[i]], entry[i])
        else:
            bound[j[i]] = max(bound[j[i]], entry[i])


@njit(cache=True, nogil=True)
def add_columns(x, increment, cols):
    """``x[:, cols[j]] += increment[:, j]`` in place, without numpy's fancy-index copies."""
    for j in range(len(cols)):
        c = cols[j]
        for u in range(x.shape[0]):
            x[u, c] += increment[u, j]


@njit(cache=True, nogil=True)
def _breadth_first(indptr, indices, s, dist, sigma, stack, starts):
    """Hop distances and path counts from ``s``, layer by layer: layer ``d`` is
    ``stack[starts[d]:starts[d + 1]]``; returns (layers, vertices reached). The arc loop has no
    data-dependent branch (every head is written to the stack's next slot and kept only if new;
    ``min`` and a select update the rest), so ``stack`` needs one slot more than the vertices:
    the test-and-push branches cost the whole pass ~15-20% more CPU at 20k."""
    dist[s], sigma[s] = 0.0, 1.0
    stack[0], starts[0], starts[1] = s, 0, 1
    lo, hi, layers = 0, 1, 0
    while lo < hi:
        tail = hi
        step = layers + 1.0
        for i in range(lo, hi):
            v = stack[i]
            count = sigma[v]
            for e in range(indptr[v], indptr[v + 1]):
                u = indices[e]
                du = dist[u]
                stack[tail] = u
                tail += du == np.inf
                dist[u] = min(du, step)
                sigma[u] += count if du >= step else 0.0
        layers += 1
        starts[layers + 1] = tail
        lo, hi = hi, tail
    return layers, hi


@njit(cache=True, nogil=True)
def _dijkstra(indptr, indices, weights, s, dist, sigma, stack, touched, heap_d, heap_v):
    """Distances and path counts from ``s`` with a binary heap, ``stack`` the vertices in the order
    they became final; returns (vertices on the stack, vertices touched), ``touched`` listing
    every entry to reset."""
    dist[s], sigma[s] = 0.0, 1.0
    touched[0] = s
    seen, done = 1, 0
    size = _heap_push(heap_d, heap_v, 0, 0.0, s)
    while size > 0:
        d, v, size = _heap_pop(heap_d, heap_v, size)
        if d > dist[v]:
            continue
        stack[done] = v
        done += 1
        count = sigma[v]
        for e in range(indptr[v], indptr[v + 1]):
            u = indices[e]
            step = d + weights[e]
            if step < dist[u]:
                if dist[u] == np.inf:
                    touched[seen] = u
                    seen += 1
                dist[u], sigma[u] = step, count
                size = _heap_push(heap_d, heap_v, size, step, u)
            elif step == dist[u]:
                sigma[u] += count
    return done, seen


@njit(cache=True, nogil=True)
def brandes_sources(indptr, indices, weights, unit, sources, reach, raw, squares):
    """Whole-graph Brandes from each of ``sources`` in one compiled pass per source, adding
    ``reach(s) * sigma(v) * y(v)`` (``y`` as in :mod:`algorithms.betweenness`) to ``raw`` and,
    unless ``squares`` is None (numba then compiles it out), its square to ``squares``: the
    sampler's variance-aware bound needs each sampled source's dependencies squared one by one.

    The forward pass sets distances and path counts together and stacks the vertices in the
    order they became final; the backward pass settles ``z = (reach + dependency) / sigma``
    over that stack in reverse, from the sum of ``z`` over each vertex's successors. With
    lengths it settles one vertex at a time and finds successors by ``dist[v] + w == dist[u]``.
    On hop counts it settles a whole layer at a time and sums ``z`` over *every* neighbour: one
    in a nearer layer is not settled yet and one in the same layer only after the layer's sums,
    so both still hold zero and only the next layer counts (the same sums in the same order,
    without the test's unpredictable branch; with :func:`_breadth_first`'s, 0.68x the CPU of
    the branching pass at 20k). The settling is written here, not called: a call per vertex
    pays numba's reference counting on each array (~50% more CPU). The work arrays are
    allocated once per call and only the entries a source touched are reset, so a source
    costs what its traversal costs."""
    n = len(reach)
    dist, sigma, z, partial = np.full(n, np.inf), np.zeros(n), np.zeros(n), np.empty(n)
    stack, starts = np.empty(n + 1, np.int64), np.empty(n + 2, np.int64)
    touched = stack if unit else np.empty(n, np.int64)
    arcs = 0 if unit else len(indices) + 1
    heap_d, heap_v = np.empty(arcs, np.float64), np.empty(arcs, np.int64)
    for s in sources:
        if unit:
            layer, seen = _breadth_first(indptr, indices, s, dist, sigma, stack, starts)
            hi = seen
        else:
            hi, seen = _dijkstra(indptr, indices, weights, s, dist, sigma, stack, touched, heap_d, heap_v)
        weight = reach[s]
        while hi > 0:                                   # settle stack[lo:hi]
            if unit:
                layer -= 1
                lo = starts[layer]
                for p in range(lo, hi):
                    v = stack[p]
                    total = 0.0
                    for e in range(indptr[v], indptr[v + 1]):
                        total += z[indices[e]]
                    partial[p] = total
            else:
                lo = hi - 1
                v = stack[lo]
                dv = dist[v]
                total = 0.0
                for e in range(indptr[v], indptr[v + 1]):
                    u = indices[e]
                    if dv + weights[e] == dist[u]:
                        total += z[u]
                partial[lo] = total
            for p in range(lo, hi):
                v = stack[p]
                if v != s:
                    dependency = weight * sigma[v] * partial[p]
                    raw[v] += dependency
                    if squares is not None:
                        squares[v] += dependency * dependency
                z[v] = partial[p] + reach[v] / sigma[v]
            hi = lo
        for p in range(seen):
            v = touched[p]
            dist[v], sigma[v], z[v] = np.inf, 0.0, 0.0
