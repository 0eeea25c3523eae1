"""Edge weights checked before a run, from the per-partition profile computed on Spark
(:meth:`gofs.store.GraphStore.edge_attribute_profile`): each algorithm names the problems it
rejects, in order, with its own message; nothing is read on the driver."""
from __future__ import annotations

from gofs.errors import InputError


def reject_bad_weights(store, weight: str, problems, instance=None) -> list[dict]:
    """Raise InputError for the first partition row with one of ``problems`` ((kind, message)
    pairs, kind as in the profile: "null", "nan", "negative", "zero", "infinite"); returns the
    rows. A message is formatted with ``path``, ``weight``, ``low`` (the smallest value as text;
    ``low_value`` as a float), ``partition`` and ``example`` (an edge with the problem, original ids).
    ``instance``: check that instance's edges (the template's it keeps and the ones it adds)."""
    rows = store.edge_attribute_profile(weight, instance=instance)
    for row in rows:
        for kind, message in problems:
            if row[f"{kind}s"]:
                low = row["min"]
                raise InputError(message.format(path=store.path, weight=weight, low=low,
                                                low_value=None if low is None else float(low),
                                                partition=row["partition"], example=row[f"{kind}_example"]))
    return rows
