"""CGQL: continuous graph queries over stored GoFS instances and Hatrick's live graph.

    from hatrick.cgql import parse, query
    statements = parse("DETECT Reach(source: {name = Bob}, sink: {age < 30}) FOR 20h WHERE edge: {type = follow}")
    topic = query(stream, "DETECT Cluster(sum(node.usage) > C) WHERE edge: {type = power} AS hot", params={"C": 100})
    for event in topic: ...

Modules: ``grammar.lark`` and :mod:`.parser` (text -> :mod:`.nodes`),
:mod:`.planner` (parameters, aliases, time frames -> past/live plan),
:mod:`.patterns` (Reach, Cluster, Evolved; pluggable), :mod:`.views`
(graph snapshots), :mod:`.engine` (registered queries) and :mod:`.topics`.
"""
from hatrick.cgql.engine import Query, active_queries, query
from hatrick.cgql.errors import CGQLError, CGQLSyntaxError
from hatrick.cgql.parser import parse
from hatrick.cgql.patterns import Pattern, register_pattern
from hatrick.cgql.topics import Topic
from hatrick.cgql.views import GraphView, PandasView

__all__ = ["parse", "query", "Query", "Topic", "CGQLError", "CGQLSyntaxError", "Pattern", "register_pattern",
           "GraphView", "PandasView", "active_queries"]
