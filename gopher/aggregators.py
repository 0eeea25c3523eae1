"""Global aggregators: partial values per task, reduced on the driver, visible next superstep."""
from __future__ import annotations

import numpy as np

from gofs.errors import InputError


class Aggregator:
    """An associative reduction with an identity; subclass or build from a function. ``pack``
    (optional) rewrites a task's combined partial before it travels to the driver (say, many
    small arrays into a few large ones); ``combine`` must accept packed values too."""

    def __init__(self, combine, zero=None, pack=None):
        self.combine = combine
        self.zero = zero
        self.pack = pack

    def reduce(self, values):
        out = self.zero
        for v in values:
            out = v if out is None else self.combine(out, v)
        return out


BUILTIN = {
    "sum": Aggregator(lambda a, b: a + b, 0),
    "min": Aggregator(lambda a, b: np.minimum(a, b)),
    "max": Aggregator(lambda a, b: np.maximum(a, b)),
}


def resolve(spec) -> Aggregator:
    if isinstance(spec, Aggregator):
        return spec
    if callable(spec):
        return Aggregator(spec)
    try:
        return BUILTIN[spec]
    except KeyError:
        raise InputError(f"unknown aggregator {spec!r}: use 'sum', 'min', 'max' or an Aggregator") from None
