"""The parsed form of a CGQL query: frozen dataclasses, nothing executable.

A query text is a tuple of statements (:class:`Detect` or :class:`Cancel`).
A :class:`Detect` groups sub-queries (:class:`Clause`) joined by ``AND DETECT``;
every clause names a pattern call, an optional time frame, its WHERE
conditions split by kind, and an optional ``AS`` alias (which is also the
name of the topic its events go to). Every node keeps the ``line`` and
``column`` where it starts, so later stages (planner, evaluation) can name the
place in the query when something is wrong; positions do not take part in
equality.

Values stay symbolic: a bare word is a :class:`Word` (a string literal in a
vertex or edge condition, a parameter name in an aggregate condition), ``$x``
is a :class:`Param`, ``C1.*`` a :class:`Wildcard`. The planner binds them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union


def _pos():
    return field(default=0, compare=False, repr=False)


@dataclass(frozen=True)
class Number:
    value: float
    line: int = _pos()
    column: int = _pos()


@dataclass(frozen=True)
class String:
    """A quoted string literal."""
    value: str
    line: int = _pos()
    column: int = _pos()


@dataclass(frozen=True)
class Word:
    """A bare word: a string literal in vertex/edge conditions, a parameter in aggregate conditions."""
    value: str
    line: int = _pos()
    column: int = _pos()


@dataclass(frozen=True)
class Param:
    """``$name``: a parameter bound at registration."""
    name: str
    line: int = _pos()
    column: int = _pos()


@dataclass(frozen=True)
class Wildcard:
    """``ALIAS.*``: the members of the clusters currently reported under ``alias``."""
    alias: str
    line: int = _pos()
    column: int = _pos()


@dataclass(frozen=True)
class Duration:
    """A duration literal (``20h``) in seconds."""
    seconds: float
    text: str = ""
    line: int = _pos()
    column: int = _pos()


Value = Union[Number, String, Word, Param, Wildcard, Duration]


@dataclass(frozen=True)
class VertexCondition:
    """``attribute op value`` (op one of = != < <= > >=) or ``attribute IN (v, ...)`` (op "in", value a tuple)."""
    attribute: str
    op: str
    value: Union[Value, tuple]
    line: int = _pos()
    column: int = _pos()


@dataclass(frozen=True)
class VertexSet:
    """``{c1, c2, ...}``: vertices satisfying every condition (an empty set matches every vertex)."""
    conditions: tuple = ()
    line: int = _pos()
    column: int = _pos()


@dataclass(frozen=True)
class EdgeCondition:
    """``edge: {type = follow, weight > 2}`` or ``edge: {message}``: every condition holds, and
    when labels are given the edge's label (its ``type`` column, else ``label``) is one of them."""
    conditions: tuple = ()
    labels: tuple = ()
    line: int = _pos()
    column: int = _pos()


@dataclass(frozen=True)
class Aggregate:
    """An aggregate over a cluster's members: ``sum/min/max/avg(node.attr)``, ``count(...)``,
    ``diameter`` or ``size``."""
    function: str
    attribute: Optional[str] = None
    line: int = _pos()
    column: int = _pos()

    def __str__(self) -> str:
        if self.function in ("diameter", "size"):
            return self.function
        return f"{self.function}({'node.' + self.attribute if self.attribute else 'node'})"

    @property
    def column_name(self) -> str:
        """The field name an event carries the value under: ``sum_usage``, ``count``, ``diameter``."""
        return self.function if self.attribute is None else f"{self.function}_{self.attribute}"


@dataclass(frozen=True)
class AggregateCondition:
    aggregate: Aggregate
    op: str
    value: Value
    line: int = _pos()
    column: int = _pos()


@dataclass(frozen=True)
class Temporal:
    """``SUCCEEDS alias`` / ``PREDATES alias``."""
    relation: str
    alias: str
    line: int = _pos()
    column: int = _pos()


@dataclass(frozen=True)
class TimePoint:
    """A FROM/TO bound: a number (graph time), a quoted ISO date or cron expression, or ``now``."""
    kind: str          # "number" | "string" | "now"
    value: object = None
    line: int = _pos()
    column: int = _pos()


@dataclass(frozen=True)
class TimeFrame:
    """``FROM a TO b`` (kind "from_to"), ``FOR d`` ("for") or ``SINCE d`` ("since")."""
    kind: str
    start: Optional[TimePoint] = None
    end: Optional[TimePoint] = None
    duration: Optional[Duration] = None
    line: int = _pos()
    column: int = _pos()


@dataclass(frozen=True)
class PatternCall:
    """``Name(args)``: ``named`` holds ``key: {...}`` arguments, ``sets`` bare ``{...}`` ones,
    ``conditions`` bare vertex conditions, ``aggregates`` aggregate conditions, ``aliases``
    bare names."""
    name: str
    named: tuple = ()
    sets: tuple = ()
    conditions: tuple = ()
    aggregates: tuple = ()
    aliases: tuple = ()
    line: int = _pos()
    column: int = _pos()

    def argument(self, key: str) -> Optional[VertexSet]:
        for name, value in self.named:
            if name == key:
                return value
        return None


@dataclass(frozen=True)
class Clause:
    """One sub-query: ``DETECT pattern(...) [frame] [WHERE ...] [AS alias]``."""
    pattern: PatternCall
    frame: Optional[TimeFrame] = None
    edge: Optional[EdgeCondition] = None
    node: Optional[VertexSet] = None
    aggregates: tuple = ()
    temporal: tuple = ()
    alias: Optional[str] = None
    line: int = _pos()
    column: int = _pos()


@dataclass(frozen=True)
class Detect:
    """``DETECT clause (AND DETECT clause)*``: sub-queries registered and evaluated together."""
    clauses: tuple
    line: int = _pos()
    column: int = _pos()


@dataclass(frozen=True)
class Cancel:
    """``CANCEL topic``: stop the registered query that delivers to ``topic``."""
    topic: str
    line: int = _pos()
    column: int = _pos()
