"""From parsed statements to an executable plan: parameters, aliases, time frames, columns.

Decisions:

- Parameters: every ``$name`` and every bare word in an aggregate condition
  (``sum(node.usage) < C``, ``C'``) must be bound by ``params`` at
  registration; an unbound one is a :class:`CGQLError` naming it and its
  place. Bare words in vertex/edge conditions are string literals.
- Aliases: ``AS name`` names a sub-query and its topic, across all statements
  of one registration. ``X.*`` wildcards and ``Evolved(X)`` must name a
  ``Cluster`` sub-query; references may point forward (the smart-grid query
  uses C1 before ``AS C1``); sub-queries are evaluated in dependency order and
  a cycle is an error. Un-aliased sub-queries publish to the query's default
  topic.
- Time (all in graph time; ``time_unit`` seconds per graph time unit, 1 by
  default, so durations, ISO dates and cron times are divided by it):
  no frame = the whole timeline (every stored instance, then live updates);
  ``FOR d`` = [now, now + d); ``SINCE d`` = [now - d, +inf);
  ``FROM a TO b`` = [a, b) with numbers, ``now``, ISO dates, or cron
  expressions (5 fields, UTC, minute resolution): the window that is open at
  ``now`` (from the last FROM match, when no TO match followed it) or else
  the next one, up to the first TO match after its start.
- Plan: the query's frame is the union of its sub-queries' frames. The part
  before ``now`` is a *past* evaluation over stored instances (time = the
  instance start); the part from ``now`` on is *live*; a frame across ``now``
  is both, split at ``now`` exactly (instances with start < now, live views
  with time >= now), so there is no gap and no duplicate at the seam.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone

import numpy as np

from hatrick.cgql import nodes as n
from hatrick.cgql.errors import CGQLError, located
from hatrick.cgql.patterns import PATTERNS, Cluster, Pattern

__all__ = ["SubQuery", "Plan", "plan", "cron_previous", "cron_next"]


@dataclass
class SubQuery:
    """One clause ready to run: its pattern object, topic and frame [start, end)."""
    clause: n.Clause
    pattern: Pattern
    topic: str
    start: float
    end: float
    name: str
    depends: tuple = ()

    def in_frame(self, t: float) -> bool:
        return self.start <= t < self.end


@dataclass
class Plan:
    subqueries: list            # in evaluation (dependency) order
    start: float
    end: float
    now: float
    default_topic: str
    vertex_attributes: set = field(default_factory=set)
    edge_attributes: set = field(default_factory=set)
    cancels: list = field(default_factory=list)

    @property
    def topics(self) -> list:
        seen = []
        for sq in self.subqueries:
            if sq.topic not in seen:
                seen.append(sq.topic)
        return seen

    @property
    def has_past(self) -> bool:
        return self.start < self.now

    @property
    def has_live(self) -> bool:
        return self.end > self.now

    @property
    def kind(self) -> str:
        """"past", "live" or "straddle"."""
        if self.has_past and self.has_live:
            return "straddle"
        return "past" if self.has_past else "live"


def plan(statements, params: dict | None = None, now: float | None = None, time_unit: float = 1.0,
         default_topic: str = "query", options: dict | None = None) -> Plan:
    """Bind ``params``, resolve aliases and time frames of parsed ``statements``.

    ``now`` is the current graph time (None: no live part; frames that need
    ``now`` then raise). ``options`` go to every pattern (``directed``,
    ``grow_factor``, ``min_size``).
    """
    params = dict(params or {})
    options = dict(options or {})
    clauses = [c for s in statements if isinstance(s, n.Detect) for c in s.clauses]
    cancels = [s for s in statements if isinstance(s, n.Cancel)]
    aliases: dict = {}
    for c in clauses:
        if c.alias is not None:
            if c.alias in aliases:
                raise located(c, f"alias {c.alias!r} is defined twice (AS {c.alias})")
            aliases[c.alias] = c
    subqueries = []
    for i, c in enumerate(clauses):
        c = _bind_aggregate_words(c)
        _check_params(c, params)
        pattern_options = dict(options)
        pattern_options["_next_cluster_id"] = [0]
        pattern = PATTERNS[c.pattern.name.lower()](c, params, pattern_options)
        for alias in pattern.aliases() | {t.alias for t in c.temporal}:
            target = aliases.get(alias)
            if target is None:
                raise located(c.pattern, f"alias {alias!r} is not defined; add AS {alias} to a Cluster sub-query")
            if PATTERNS[target.pattern.name.lower()] is not Cluster:
                raise located(c.pattern, f"alias {alias!r} names a {target.pattern.name} sub-query; "
                                         "wildcards and Evolved need a Cluster")
        start, end = frame_bounds(c.frame, now, time_unit)
        name = c.alias or f"{c.pattern.name}#{i}"
        subqueries.append(SubQuery(c, pattern, c.alias or default_topic, start, end, name,
                                   tuple(sorted(pattern.aliases()))))
    ordered = _dependency_order(subqueries)
    vertex_attributes, edge_attributes = set(), set()
    for sq in ordered:
        vertex_attributes |= sq.pattern.vertex_attributes()
        edge_attributes |= sq.pattern.edge_attributes()
    start = min((sq.start for sq in ordered), default=math.inf)
    end = max((sq.end for sq in ordered), default=-math.inf)
    return Plan(ordered, start, end, math.inf if now is None else now, default_topic, vertex_attributes,
                edge_attributes, cancels)


def _bind_aggregate_words(c: n.Clause) -> n.Clause:
    """Bare words compared with aggregates are parameters."""
    def fix(conditions):
        return tuple(dataclasses.replace(a, value=n.Param(a.value.value, line=a.value.line, column=a.value.column))
                     if isinstance(a.value, n.Word) else a for a in conditions)

    call = dataclasses.replace(c.pattern, aggregates=fix(c.pattern.aggregates))
    return dataclasses.replace(c, pattern=call, aggregates=fix(c.aggregates))


def _check_params(c: n.Clause, params: dict) -> None:
    for value in _values(c):
        if isinstance(value, n.Param) and value.name not in params:
            raise located(value, f"parameter {value.name!r} is not bound; pass params={{{value.name!r}: ...}}")


def _values(c: n.Clause):
    groups = [c.pattern.conditions, c.pattern.aggregates, c.aggregates]
    groups += [s.conditions for _, s in c.pattern.named] + [s.conditions for s in c.pattern.sets]
    if c.node:
        groups.append(c.node.conditions)
    if c.edge:
        groups.append(c.edge.conditions)
    for group in groups:
        for cond in group:
            yield from (cond.value if isinstance(cond.value, tuple) else (cond.value,))


def _dependency_order(subqueries: list) -> list:
    by_alias = {sq.clause.alias: sq for sq in subqueries if sq.clause.alias}
    ordered, state = [], {}

    def visit(sq, path):
        mark = state.get(id(sq))
        if mark == "done":
            return
        if mark == "active":
            raise located(sq.clause, "aliases depend on each other in a cycle: " + " -> ".join(path + [sq.name]))
        state[id(sq)] = "active"
        for alias in sq.depends:
            visit(by_alias[alias], path + [sq.name])
        state[id(sq)] = "done"
        ordered.append(sq)

    for sq in subqueries:
        visit(sq, [])
    return ordered


# time frames ------------------------------------------------------------------------------
def frame_bounds(frame: n.TimeFrame | None, now: float | None, time_unit: float = 1.0):
    """[start, end) in graph time of a clause's frame."""
    if frame is None:
        return -math.inf, math.inf

    def need_now(node):
        if now is None:
            raise located(node, f"{frame.kind.upper().replace('_', '/')} is relative to now: pass now=... "
                                "(graph time) or query a live stream")
        return now

    if frame.kind == "for":
        t = need_now(frame)
        return t, t + frame.duration.seconds / time_unit
    if frame.kind == "since":
        return need_now(frame) - frame.duration.seconds / time_unit, math.inf
    if all(p.kind == "string" and _is_cron(p.value) for p in (frame.start, frame.end)):
        t = need_now(frame) * time_unit
        if not _CRON_SPAN[0] <= t <= _CRON_SPAN[1]:
            raise located(frame, f"now={now!r} (x time unit {time_unit!r}) is not an epoch time in the years "
                                 "1-9999, where a cron frame can be placed")
        opened = cron_previous(frame.start.value, t, frame.start)
        closed = cron_previous(frame.end.value, t, frame.end)
        start = opened if opened is not None and (closed is None or closed < opened) else \
            cron_next(frame.start.value, t, frame.start)
        end = cron_next(frame.end.value, start, frame.end)
        return start / time_unit, end / time_unit
    start = _point(frame.start, now, time_unit, need_now)
    end = _point(frame.end, now, time_unit, need_now)
    if end < start:
        raise located(frame.end, f"time frame ends ({end}) before it starts ({start})")
    return start, end


def _point(p: n.TimePoint, now, time_unit, need_now) -> float:
    if p.kind == "now":
        return need_now(p)
    if p.kind == "number":
        return float(p.value)
    if _is_cron(p.value):
        raise located(p, "a cron time needs a cron time at the other end (FROM \"cron\" TO \"cron\")")
    try:
        moment = datetime.fromisoformat(p.value)
    except ValueError:
        raise located(p, f"{p.value!r} is neither an ISO date (2024-05-01T09:00) nor a cron expression "
                         "(5 fields: minute hour day month weekday)") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp() / time_unit


def _is_cron(text: str) -> bool:
    return len(text.split()) == 5


_CRON_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6))
_CRON_SPAN = (-62135596800.0 + 400 * 86400, 253402300799.0 - 400 * 86400)   # years 1-9999, less a search


def _cron_fields(expr: str, node) -> list:
    """Allowed values per field (minute, hour, day of month, month, weekday 0=Sunday)."""
    fields = []
    for text, (lo, hi) in zip(expr.split(), _CRON_RANGES):
        allowed = np.zeros(hi + 2, dtype=bool)
        for part in text.split(","):
            body, _, step = part.partition("/")
            try:
                step_n = int(step) if step else 1
                if body == "*":
                    a, b = lo, hi
                elif "-" in body:
                    a, b = (int(x) for x in body.split("-"))
                else:
                    a = b = int(body)
            except ValueError:
                raise located(node, f"cron expression {expr!r}: bad field {text!r}") from None
            if not (lo <= a <= b <= hi + (1 if hi == 6 else 0)) or step_n < 1:
                raise located(node, f"cron expression {expr!r}: field {text!r} is outside {lo}-{hi}")
            allowed[a:b + 1:step_n] = True
        if hi == 6:
            allowed[0] |= allowed[7]
        fields.append(allowed)
    return fields


def _cron_matches(expr: str, minutes: np.ndarray, node) -> np.ndarray:
    minute_f, hour_f, dom_f, month_f, dow_f = _cron_fields(expr, node)
    stamps = minutes.astype("datetime64[m]")
    days = stamps.astype("datetime64[D]")
    months = stamps.astype("datetime64[M]")
    minute = (stamps - days.astype("datetime64[m]")).astype(np.int64)
    dom = (days - months.astype("datetime64[D]")).astype(np.int64) + 1
    month = months.astype(np.int64) % 12 + 1
    dow = (days.astype(np.int64) + 4) % 7          # 1970-01-01 was a Thursday
    day_fields = expr.split()[2:5:2]
    if "*" not in day_fields:                       # both day fields restricted: either may match (cron)
        day = dom_f[dom] | dow_f[dow]
    else:
        day = dom_f[dom] & dow_f[dow]
    return minute_f[minute % 60] & hour_f[minute // 60] & day & month_f[month]


def _cron_search(expr: str, t: float, node, forward: bool):
    base = math.floor(t / 60.0) if not forward else math.floor(t / 60.0) + 1
    chunk = 7 * 24 * 60
    for k in range(60):                               # about 400 days, a week at a time
        offsets = np.arange(chunk) + k * chunk
        minutes = base + offsets if forward else base - offsets
        hits = np.flatnonzero(_cron_matches(expr, minutes, node))
        if len(hits):
            return float(minutes[hits[0]] * 60)
    return None


def cron_previous(expr: str, t: float, node=None):
    """The latest time (epoch seconds) <= t matching the cron expression, or None within ~400 days."""
    return _cron_search(expr, t, node, forward=False)


def cron_next(expr: str, t: float, node=None) -> float:
    """The first time (epoch seconds) > t matching the cron expression."""
    found = _cron_search(expr, t, node, forward=True)
    if found is None:
        raise located(node, f"cron expression {expr!r} matches no time within a year") if node else \
            CGQLError(f"cron expression {expr!r} matches no time within a year")
    return found
