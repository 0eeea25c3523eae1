"""Which updates of a batch are new: per-producer high-water marks and the seqs skipped below them.

Producers number their updates in the order they send them, so an update at or
below its producer's mark was applied before (a replay, dropped quietly), unless
its seq is one the producer skipped: then it arrived out of order, and is refused
and listed rather than taken for a replay. Within one batch, a repeated
(producer, seq) with the same content is a replay; with different content the
later rows are refused and listed (one seq names one update). Up to
``MAX_GAPS`` skipped ranges are remembered per producer (the newest).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from numba import njit

from gofs.numba_cache import serialise_compilation
from hatrick.updates import UpdateBatch, empty_rejected

serialise_compilation()  # one compilation at a time on this machine: numba's kernel cache stays whole

MAX_GAPS = 4096


def _same(x: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Whether x[i] equals x[j] elementwise (two nulls are equal)."""
    xi, xj = x[i], x[j]
    equal = np.asarray(xi == xj, dtype=bool) if len(i) else np.zeros(0, bool)
    if x.dtype == object or x.dtype.kind == "f":
        equal |= pd.isna(xi) & pd.isna(xj)
    return equal


class ProducerMarks:
    """Per producer, the largest seq applied (``hwm``) and the ranges [lo, hi] below it that were
    never seen (``gaps``, an (k, 2) int64 array each). Immutable: :meth:`advanced` returns new marks."""

    def __init__(self, hwm: dict | None = None, gaps: dict | None = None):
        self.hwm = {str(p): int(s) for p, s in (hwm or {}).items()}
        self.gaps = {str(p): np.asarray(g, np.int64).reshape(-1, 2) for p, g in (gaps or {}).items() if len(g)}

    def admit(self, batch: UpdateBatch) -> tuple[UpdateBatch, pd.DataFrame, "ProducerMarks"]:
        """(the new updates, the refused ones as a rejection table, the marks once the new ones are
        applied); the rest are replays. One factorize of the producers and one grouping of the rows
        by (producer, seq) serve both the split and the new marks. A batch whose producers' seqs
        all rise above their marks in row order (what producers send) is all new: one pass
        (:func:`_rising`) finds that and the new marks, with no sort."""
        n = len(batch)
        if not n:
            return batch, empty_rejected(), self
        codes, producers = batch.producer_codes or pd.factorize(batch.producer)
        old = np.array([self.hwm.get(p, -1) for p in producers], dtype=np.int64)
        rising, prev, top = _rising(codes, batch.seq, old)
        if rising:
            present = np.flatnonzero(top != old)
            return batch, empty_rejected(), self._advanced(producers, codes, batch.seq, prev, present, top[present])
        below = batch.seq <= old[codes]
        refused, reasons = np.zeros(n, bool), None     # reasons: made where a row may be refused
        if below.any() and self.gaps:
            reasons = np.full(n, None, dtype=object)
            rows = np.flatnonzero(below)
            rows = rows[np.argsort(codes[rows], kind="stable")]
            cuts = np.flatnonzero(np.diff(codes[rows])) + 1
            for group in np.split(rows, cuts):
                producer = producers[codes[group[0]]]
                gaps = self.gaps.get(producer)
                if gaps is None:
                    continue
                seq = batch.seq[group]
                at = np.searchsorted(gaps[:, 0], seq, "right") - 1
                late = group[(at >= 0) & (seq <= gaps[np.maximum(at, 0), 1])]
                refused[late] = True
                reasons[late] = [f"out of order: producer {producer!r} already sent seq "
                                 f"{self.hwm[producer]}, and seq {s} was never applied; refused"
                                 for s in batch.seq[late]]
        order = _by_producer_and_seq(codes, batch.seq, len(producers))
        c, s = codes[order], batch.seq[order]
        repeat = np.r_[False, (c[1:] == c[:-1]) & (s[1:] == s[:-1])]
        keep = ~below
        if repeat.any():
            run_start = np.maximum.accumulate(np.where(~repeat, np.arange(n), 0))
            later, first = order[repeat], order[run_start[repeat]]
            same = np.ones(len(later), bool)
            for name in ("op", "a", "b", "attribute", "value", "time"):
                same &= _same(getattr(batch, name), later, first)
            keep[later] = False
            clash = later[~same]
            if reasons is None:
                reasons = np.full(n, None, dtype=object)
            refused[clash] = True
            reasons[clash] = [f"seq {s} of producer {p!r} names two different updates in this batch; "
                              f"the first is kept" for s, p in zip(batch.seq[clash], batch.producer[clash])]
        keep &= ~refused
        fresh = batch if keep.all() else batch.take(np.flatnonzero(keep))
        rows = np.flatnonzero(refused)
        rejected = batch.rejected(rows, reasons[rows]) if len(rows) else empty_rejected()
        c, s = codes[order[keep[order]]], s[keep[order]]            # by (code, seq), no repeats
        if not len(c):
            return fresh, rejected, self._advanced(producers, c, s, s, c, s)
        first = np.r_[True, c[1:] != c[:-1]]
        last = np.r_[np.flatnonzero(first)[1:], len(s)] - 1
        prev = np.where(first, old[c], np.r_[0, s[:-1]])
        return fresh, rejected, self._advanced(producers, c, s, prev, c[last], s[last])

    def _advanced(self, producers, c: np.ndarray, s: np.ndarray, prev: np.ndarray, top_codes: np.ndarray,
                  top: np.ndarray) -> "ProducerMarks":
        """The marks once the new updates with producer codes ``c`` and seqs ``s`` (each producer's
        rising; ``prev``: the seq before each one of its producer, or the mark before) are applied:
        each producer's mark rises to its largest seq (``top`` of producer ``top_codes``), and the
        seqs it skipped on the way are remembered."""
        out = ProducerMarks.__new__(ProducerMarks)
        out.hwm, out.gaps = dict(self.hwm), dict(self.gaps)
        out.hwm.update({producers[k]: int(v) for k, v in zip(top_codes, top)})
        skipped = np.flatnonzero(s - prev > 1)
        if len(skipped):
            for k in np.unique(c[skipped]):
                mine = skipped[c[skipped] == k]
                new = np.stack([prev[mine] + 1, s[mine] - 1], axis=1)
                name = producers[k]
                held = self.gaps.get(name)
                out.gaps[name] = (new if held is None else np.concatenate([held, new]))[-MAX_GAPS:]
        return out


@njit(cache=True, nogil=True)
def _rising(codes, seq, old):
    """Whether every row's seq is above its producer's mark ``old[code]`` and its producer's
    seqs rise in row order; then also each row's previous seq of its producer (or the mark) and
    each producer's largest seq (``old`` where it has none)."""
    top = old.copy()
    prev = np.empty(len(seq), np.int64)
    for i in range(len(seq)):
        k = codes[i]
        if seq[i] <= top[k]:
            return False, prev, top
        prev[i] = top[k]
        top[k] = seq[i]
    return True, prev, top


def _by_producer_and_seq(codes: np.ndarray, seq: np.ndarray, producers: int) -> np.ndarray:
    """Rows in (producer code, seq, row) order. Producers usually number a batch's rows in the
    order they come, so a stable sort by code alone is tried first (numpy's stable sort of int16
    is a radix sort); the sort by seq is done only if some producer's seqs do not rise."""
    order = np.argsort(codes.astype(np.int16) if producers < 1 << 15 else codes, kind="stable")
    c, s = codes[order], seq[order]
    if ((c[1:] == c[:-1]) & (s[1:] <= s[:-1])).any():
        order = np.lexsort((seq, codes))                    # stable: equal seqs stay in row order
    return order
