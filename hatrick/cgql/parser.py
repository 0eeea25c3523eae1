"""CGQL text -> statements (:mod:`hatrick.cgql.nodes`), with errors that say where and what.

The grammar is ``grammar.lark`` beside this file, parsed by lark's LALR(1)
parser with the contextual lexer: a query is data and is never evaluated as
Python (``__import__('os')`` in a value is a syntax error, ``"__import__"``
a string). Decisions the grammar encodes:

- Keywords (DETECT, FOR, WHERE, AND, AS, ...) are case-insensitive. ``AND
  DETECT`` starts a new sub-query; any other ``AND`` joins WHERE conditions.
- Unquoted words are string literals in vertex and edge conditions (``{name =
  Bob}``), and parameters in aggregate conditions (``sum(node.usage) < C``,
  ``C'`` included); ``$name`` is a parameter anywhere. Parameters are bound at
  registration (:mod:`hatrick.cgql.planner`), so an unbound one is an error
  there, not here. Numbers are numbers; ``20h``, ``30m``, ``2d``, ``1w``,
  ``10s``, ``5ms`` are durations (seconds).
- ``{attr = ALIAS.*}`` matches vertices whose ``attr`` equals that of a member
  of a cluster currently reported under ALIAS (``id`` is the vertex id).
- ``edge: {message}``: a bare label matches edges whose ``type`` attribute
  (else ``label``) equals it; several labels match any of them; ``key op
  value`` terms must all hold.
- ``FROM a TO b`` takes numbers (graph time), ``now``, or quoted strings: an
  ISO date (``"2024-05-01T09:00"``) or a 5-field cron expression
  (``"0 9 * * *"``, UTC); ``FOR (24h)`` may be parenthesised.
- Comments run from ``--`` or ``#`` to the end of the line.

Every clause is checked against its pattern (:mod:`hatrick.cgql.patterns`):
an unknown pattern or a wrong argument is a :class:`CGQLSyntaxError` at the
argument's position.
"""
from __future__ import annotations

import functools
from pathlib import Path

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from hatrick.cgql import nodes as n
from hatrick.cgql.errors import CGQLError, CGQLSyntaxError

__all__ = ["parse", "CGQLSyntaxError"]

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_READABLE = {"$END": "end of input", "AND_DETECT": "AND DETECT", "OP": "a comparison (= != < <= > >=)",
             "NUMBER": "a number", "DURATION": "a duration (e.g. 20h)", "STRING": "a quoted string",
             "NAME": "a name", "PARAM": "a $parameter", "WILDCARD": "ALIAS.*",
             "AGGREGATE_FN": "an aggregate (sum, count, min, max, avg)",
             "CLUSTER_MEASURE": "diameter or size", "STAR": "'*'", "NODE": "node", "EDGE": "edge:"}


@functools.lru_cache(maxsize=1)
def _lark() -> Lark:
    return Lark.open(str(Path(__file__).with_name("grammar.lark")), parser="lalr", lexer="contextual",
                     propagate_positions=True, maybe_placeholders=False)


@functools.lru_cache(maxsize=1)
def _terminal_names() -> dict:
    """Terminal name -> how an error message spells it."""
    names = {}
    for t in _lark().terminals:
        if t.name in _READABLE:
            names[t.name] = _READABLE[t.name]
        elif t.pattern.type == "str":
            names[t.name] = repr(t.pattern.value)
        else:
            names[t.name] = t.name.replace("_", " ")
    return names


def _spell(terminals) -> list[str]:
    names = _terminal_names()
    return sorted({names.get(t, _READABLE.get(t, t)) for t in terminals})


def _context(text: str, line: int, column: int) -> str:
    lines = text.splitlines() or [""]
    if not 1 <= line <= len(lines):
        return ""
    return f"  {lines[line - 1]}\n  {' ' * (column - 1)}^"


def _syntax_error(text: str, exc: UnexpectedInput) -> CGQLSyntaxError:
    if isinstance(exc, UnexpectedToken) and exc.token.type == "$END" or isinstance(exc, UnexpectedEOF):
        lines = text.splitlines() or [""]
        line, column, token = len(lines), len(lines[-1]) + 1, "end of input"
        expected = getattr(exc, "accepts", None) or exc.expected
    elif isinstance(exc, UnexpectedToken):
        line, column, token = exc.line, exc.column, str(exc.token)
        expected = getattr(exc, "accepts", None) or exc.expected
    elif isinstance(exc, UnexpectedCharacters):
        line, column, token = exc.line, exc.column, exc.char
        expected = exc.allowed or ()
    else:  # pragma: no cover - lark's other UnexpectedInput kinds
        line, column, token, expected = getattr(exc, "line", 0), getattr(exc, "column", 0), "?", ()
    spelled = _spell(expected)
    message = (f"unexpected {token if token == 'end of input' else repr(token)}; expected "
               + (spelled[0] if len(spelled) == 1 else "one of: " + ", ".join(spelled)))
    return CGQLSyntaxError(message, line, column, token, spelled, _context(text, line, column))


def parse(text: str) -> tuple:
    """Parse CGQL ``text`` into a tuple of statements.

    Parameters
    ----------
    text : str
        One or more statements separated by ``;``: ``DETECT pattern(args) [FROM a TO b |
        FOR d | SINCE d] [WHERE conditions] [AS topic] (AND DETECT ...)*`` or ``CANCEL topic``.

    Returns
    -------
    tuple of :class:`hatrick.cgql.nodes.Detect` / :class:`hatrick.cgql.nodes.Cancel`

    Raises
    ------
    CGQLSyntaxError
        With ``.line``, ``.column``, ``.token`` (the offending text) and ``.expected``.

    Example
    -------
    >>> from hatrick.cgql import parse
    >>> (q,) = parse("DETECT Reach(source: {name = Bob}, sink: {age < 30}) FOR 20h WHERE edge: {type = follow}")
    >>> q.clauses[0].frame.duration.seconds, q.clauses[0].edge.conditions[0].value.value
    (72000.0, 'follow')
    """
    if not isinstance(text, str):
        raise TypeError(f"a CGQL query is a string, not {type(text).__name__}")
    if not text.strip():
        raise CGQLSyntaxError("empty query; expected DETECT or CANCEL", 1, 1, "end of input", ["DETECT", "CANCEL"])
    try:
        tree = _lark().parse(text)
    except UnexpectedInput as exc:
        raise _syntax_error(text, exc) from None
    try:
        statements = _ToNodes().transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, CGQLError):
            raise exc.orig_exc from None
        raise
    from hatrick.cgql.patterns import check_clause

    for statement in statements:
        for clause in getattr(statement, "clauses", ()):
            check_clause(clause, text)
    return statements


def _at(meta_or_token):
    return {"line": getattr(meta_or_token, "line", 0) or 0, "column": getattr(meta_or_token, "column", 0) or 0}


def _name(token: Token) -> str:
    return str(token)


class _ToNodes(Transformer):
    """Parse tree -> frozen dataclasses (``nodes``)."""

    def start(self, items):
        return tuple(items)

    @v_args(meta=True)
    def detect(self, meta, items):
        return n.Detect(tuple(i for i in items if isinstance(i, n.Clause)), **_at(meta))

    @v_args(meta=True)
    def cancel(self, meta, items):
        return n.Cancel(_name(items[1]), **_at(meta))

    @v_args(meta=True)
    def clause(self, meta, items):
        call, frame, alias = items[0], None, None
        where: list = []
        for item in items[1:]:
            if isinstance(item, n.TimeFrame):
                frame = item
            elif isinstance(item, tuple) and item and item[0] == "where":
                where = item[1]
            elif isinstance(item, tuple) and item and item[0] == "alias":
                alias = item[1]
        edges = [c for c in where if isinstance(c, n.EdgeCondition)]
        node_sets = [c for c in where if isinstance(c, n.VertexSet)]
        for kind, extra in (("edge", edges[1:]), ("node", node_sets[1:])):
            if extra:
                raise CGQLSyntaxError(f"a sub-query takes one {kind}: condition; join the terms inside one "
                                      "{...}", extra[0].line, extra[0].column, kind, [])
        return n.Clause(call, frame, edges[0] if edges else None, node_sets[0] if node_sets else None,
                        tuple(c for c in where if isinstance(c, n.AggregateCondition)),
                        tuple(c for c in where if isinstance(c, n.Temporal)), alias, **_at(meta))

    @v_args(meta=True)
    def pattern(self, meta, items):
        name, args = items[0], items[1:]
        named, sets, conditions, aggregates, aliases = [], [], [], [], []
        for a in args:
            if isinstance(a, tuple) and a[0] == "named":
                named.append((a[1], a[2]))
            elif isinstance(a, n.VertexSet):
                sets.append(a)
            elif isinstance(a, n.VertexCondition):
                conditions.append(a)
            elif isinstance(a, n.AggregateCondition):
                aggregates.append(a)
            elif isinstance(a, tuple) and a[0] == "alias_ref":
                aliases.append(a[1])
        return n.PatternCall(str(name), tuple(named), tuple(sets), tuple(conditions), tuple(aggregates),
                             tuple(aliases), line=name.line, column=name.column)

    def named_set(self, items):
        return ("named", str(items[0]), items[1])

    def alias_ref(self, items):
        return ("alias_ref", str(items[0]))

    @v_args(meta=True)
    def vertex_set(self, meta, items):
        return n.VertexSet(tuple(items), **_at(meta))

    @v_args(meta=True)
    def vertex_condition(self, meta, items):
        attribute, op, value = items
        op = "in" if op.type == "IN" else str(op)
        return n.VertexCondition(str(attribute), op, value, line=attribute.line, column=attribute.column)

    @v_args(meta=True)
    def value_list(self, meta, items):
        return tuple(items)

    # time frames
    @v_args(meta=True)
    def from_to(self, meta, items):
        return n.TimeFrame("from_to", start=items[1], end=items[3], **_at(meta))

    @v_args(meta=True)
    def for_(self, meta, items):
        return n.TimeFrame("for", duration=self._duration(items[1]), **_at(meta))

    @v_args(meta=True)
    def since(self, meta, items):
        return n.TimeFrame("since", duration=self._duration(items[1]), **_at(meta))

    def _duration(self, item):
        return item if isinstance(item, n.Duration) else self.duration([item])

    def time_point(self, items):
        (token,) = items
        if token.type == "NOW":
            return n.TimePoint("now", None, line=token.line, column=token.column)
        if token.type == "NUMBER":
            return n.TimePoint("number", float(token), line=token.line, column=token.column)
        return n.TimePoint("string", _unquote(token), line=token.line, column=token.column)

    # WHERE
    def where(self, items):
        return ("where", [i for i in items if not isinstance(i, Token)])

    def alias(self, items):
        return ("alias", str(items[1]))

    @v_args(meta=True)
    def edge_condition(self, meta, items):
        terms = items[1:]
        return n.EdgeCondition(tuple(t for t in terms if isinstance(t, n.VertexCondition)),
                               tuple(t for t in terms if isinstance(t, str)), **_at(meta))

    def label(self, items):
        (token,) = items
        return _unquote(token) if token.type == "STRING" else str(token)

    def node_condition(self, items):
        return items[1]

    def temporal_condition(self, items):
        relation, alias = items
        return n.Temporal(str(relation).lower(), str(alias), line=relation.line, column=relation.column)

    @v_args(meta=True)
    def aggregate_condition(self, meta, items):
        aggregate, op, value = items
        return n.AggregateCondition(aggregate, str(op), value, line=aggregate.line, column=aggregate.column)

    def aggregate(self, items):
        head = items[0]
        function = str(head).lower()
        if head.type == "CLUSTER_MEASURE":
            return n.Aggregate(function, None, line=head.line, column=head.column)
        function = {"mean": "avg"}.get(function, function)
        target = items[1]
        if target is None and function != "count":
            raise CGQLSyntaxError(f"{function}() needs a vertex attribute: {function}(node.ATTRIBUTE)",
                                  head.line, head.column, str(head), ["node.ATTRIBUTE"])
        return n.Aggregate(function, target, line=head.line, column=head.column)

    def aggregate_target(self, items):
        return str(items[1]) if len(items) == 2 else None

    # values
    def number(self, items):
        (t,) = items
        text = str(t)
        value = int(text) if text.lstrip("+-").isdigit() else float(text)
        return n.Number(value, line=t.line, column=t.column)

    def duration(self, items):
        (t,) = items
        text = str(t)
        unit = "ms" if text.endswith("ms") else text[-1]
        return n.Duration(float(text[:-len(unit)]) * _UNITS[unit], text, line=t.line, column=t.column)

    def string(self, items):
        (t,) = items
        return n.String(_unquote(t), line=t.line, column=t.column)

    def word(self, items):
        (t,) = items
        return n.Word(str(t), line=t.line, column=t.column)

    def param(self, items):
        (t,) = items
        return n.Param(str(t)[1:], line=t.line, column=t.column)

    def wildcard(self, items):
        (t,) = items
        return n.Wildcard(str(t)[:-2], line=t.line, column=t.column)


def _unquote(token) -> str:
    """A quoted STRING's text: quotes removed, backslash escapes of the quote and backslash resolved."""
    body = str(token)[1:-1]
    out, i = [], 0
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            out.append(body[i + 1])
            i += 2
        else:
            out.append(body[i])
            i += 1
    return "".join(out)
