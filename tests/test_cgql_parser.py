"""CGQL parsing: every example of the issue parses; errors say line, column, token and what was
expected; a query is data, never evaluated as Python; parameters are bound at registration."""
import pytest

from hatrick.cgql import CGQLError, CGQLSyntaxError, PandasView, parse, query
from hatrick.cgql import nodes as n

SMART_GRID = ("DETECT Reach(source: {name=C1.*}, sink: {name=C2.*}) FOR 24h WHERE edge:{message} "
              "AND DETECT Cluster(sum(node.usage) < C, diameter < d) FOR (24h) WHERE edge:{type = power} AS C1 "
              "AND DETECT Cluster(sum(node.usage) > C', diameter < d) FOR (24h) WHERE edge:{type = power} AS C2; "
              "DETECT Evolved(C2) WHERE sum(node.usage) < C AND SUCCEEDS C2;")

EXAMPLES = [
    "DETECT Reach(source:{name = Bob, age = 33}, sink:{age < 30, lives_in = London}) FOR 20h "
    "WHERE edge: {type = follow}",
    SMART_GRID,
    "DETECT Reach(source: {interests = foo}, sink: {age >= 18}) SINCE 2h WHERE edge: {message}",
    "DETECT Cluster(age < 30, lives_in = London, count(*) > 3) FROM 0 TO 100 WHERE edge: {type = follow} AS young",
    "DETECT Cluster({city IN (London, Paris, \"New York\")}, avg(node.age) <= 40.5, size >= 2)",
    'DETECT Cluster(sum(node.usage) < $cap) FROM "0 9 * * *" TO "0 17 * * *" WHERE edge: {power} AS day',
    'DETECT Reach(source: {name != Alice}, sink: {}) FROM "2024-05-01T09:00" TO now',
    "DETECT Evolved(H) WHERE max(node.usage) > 9 AND PREDATES H AND DETECT Cluster(usage > 1) AS H",
    "CANCEL young",
    "detect reach(source: {name = Bob}, sink: {name = Ann}) for 30m where edge: {type = follow, weight > 2};",
]


@pytest.mark.parametrize("text", EXAMPLES)
def test_examples_parse(text):
    statements = parse(text)
    assert statements and all(isinstance(s, (n.Detect, n.Cancel)) for s in statements)


def test_headline_example_structure():
    (q,) = parse(EXAMPLES[0])
    (c,) = q.clauses
    source = c.pattern.argument("source").conditions
    assert [(x.attribute, x.op, x.value) for x in source] == [("name", "=", n.Word("Bob")), ("age", "=", n.Number(33))]
    sink = c.pattern.argument("sink").conditions
    assert [(x.attribute, x.op, x.value) for x in sink] == [("age", "<", n.Number(30)),
                                                             ("lives_in", "=", n.Word("London"))]
    assert c.frame.kind == "for" and c.frame.duration.seconds == 20 * 3600
    assert c.edge.conditions[0].attribute == "type" and c.edge.conditions[0].value == n.Word("follow")


def test_smart_grid_structure():
    first, second = parse(SMART_GRID)
    reach, c1, c2 = first.clauses
    assert reach.pattern.name == "Reach" and reach.alias is None and reach.edge.labels == ("message",)
    assert reach.pattern.argument("source").conditions[0].value == n.Wildcard("C1")
    assert (c1.alias, c2.alias) == ("C1", "C2")
    assert [str(a.aggregate) for a in c1.pattern.aggregates] == ["sum(node.usage)", "diameter"]
    assert c2.pattern.aggregates[0].value == n.Word("C'") and c2.pattern.aggregates[0].op == ">"
    assert c1.frame.duration.seconds == 86400
    (evolved,) = second.clauses
    assert evolved.pattern.aliases == ("C2",)
    assert evolved.aggregates[0].op == "<" and evolved.temporal == (n.Temporal("succeeds", "C2"),)


def test_durations_and_values():
    (q,) = parse("DETECT Cluster(a = 2.5, b = -3, c = 1e3, d = 'it\\'s', e = $p) SINCE 2d")
    values = [c.value for c in q.clauses[0].pattern.conditions]
    assert values[:3] == [n.Number(2.5), n.Number(-3), n.Number(1000.0)]
    assert values[3] == n.String("it's") and values[4] == n.Param("p")
    assert q.clauses[0].frame.duration.seconds == 2 * 86400
    for text, seconds in [("30m", 1800), ("10s", 10), ("1w", 604800), ("250ms", 0.25)]:
        (q,) = parse(f"DETECT Cluster(a = 1) FOR {text}")
        assert q.clauses[0].frame.duration.seconds == seconds


@pytest.mark.parametrize("text, line, column, token, expected", [
    ("DETECT Reach(source:{name = Bob}, sink:{age < 30}) FRO 20h", 1, 52, "FRO", {"FOR", "WHERE", "AS"}),
    ("DETECT Reach(source:{name = Bob},\n  sink:{age < 30}", 2, 18, "end of input", {"')'", "','"}),
    ("DETECT Cluster(a = 1)\n  WHERE edge: {type = @}", 2, 23, "@", {"a name", "a number"}),
    ("DETECT Reach(source:{}, sink:{}) FOR 20", 1, 38, "20", {"a duration (e.g. 20h)"}),
    ("DETECT Cluster(sum() < 3)", 1, 20, ")", {"node", "'*'"}),
    ("DETECT Reach(source:{}, sink:{}) WHERE", 1, 39, "end of input", {"edge:", "node"}),
    ("DETECT Teleport(source:{})", 1, 8, "Teleport", {"Reach", "Cluster", "Evolved"}),
])
def test_errors_locate_token_and_expected(text, line, column, token, expected):
    with pytest.raises(CGQLSyntaxError) as info:
        parse(text)
    e = info.value
    assert (e.line, e.column, e.token) == (line, column, token)
    assert expected <= set(e.expected), e.expected
    assert f"line {line}, column {column}" in str(e) and token in str(e)


def test_pattern_argument_errors():
    with pytest.raises(CGQLSyntaxError, match="missing argument sink") as info:
        parse("DETECT Reach(source: {a = 1})")
    assert (info.value.line, info.value.column) == (1, 8)
    with pytest.raises(CGQLSyntaxError, match="unknown argument 'target'"):
        parse("DETECT Reach(source: {a = 1}, target: {b = 2})")
    with pytest.raises(CGQLSyntaxError, match="SUCCEEDS applies to Evolved"):
        parse("DETECT Cluster(a = 1) WHERE SUCCEEDS X")
    with pytest.raises(CGQLSyntaxError, match="must name the evolved alias"):
        parse("DETECT Evolved(X) WHERE SUCCEEDS Y")


def test_query_is_never_python():
    # a call is not a value: syntax error at the parenthesis
    with pytest.raises(CGQLSyntaxError) as info:
        parse("DETECT Reach(source: {name = __import__('os').system('true')}, sink: {})")
    assert info.value.token == "("
    # a bare word or a quoted string stays a string literal
    (q,) = parse("DETECT Reach(source: {name = __import__}, sink: {name = \"__import__('os')\"})")
    assert q.clauses[0].pattern.argument("source").conditions[0].value == n.Word("__import__")
    assert q.clauses[0].pattern.argument("sink").conditions[0].value == n.String("__import__('os')")
    import pandas as pd

    view = PandasView(0.0, 0, pd.DataFrame({"id": [1, 2], "name": ["__import__('os')", "x"]}),
                      pd.DataFrame({"src": [2], "dst": [1]}))
    topic = query([view], "DETECT Reach(source: {name = x}, sink: {name = \"__import__('os')\"})")
    assert [(e["source"], e["sink"]) for e in topic] == [(2, 1)]


def test_parameters_bound_at_registration_not_parse():
    import pandas as pd

    statements = parse("DETECT Cluster(sum(node.usage) > C') WHERE edge: {type = power}")   # parses
    assert statements[0].clauses[0].pattern.aggregates[0].value == n.Word("C'")
    view = PandasView(0.0, 0, pd.DataFrame({"id": [1, 2], "usage": [5, 6]}),
                      pd.DataFrame({"src": [1], "dst": [2], "type": ["power"]}))
    with pytest.raises(CGQLError, match="parameter \"C'\" is not bound") as info:
        query([view], "DETECT Cluster(sum(node.usage) > C') WHERE edge: {type = power}")
    assert (info.value.line, info.value.column) == (1, 34)
    topic = query([view], "DETECT Cluster(sum(node.usage) > C') WHERE edge: {type = power}", params={"C'": 10})
    assert [(e["status"], e["members"], e["sum_usage"]) for e in topic] == [("created", [1, 2], 11.0)]


def test_registration_errors_name_the_place():
    import pandas as pd

    view = PandasView(0.0, 0, pd.DataFrame({"id": [1, 2], "usage": [5, 6]}), pd.DataFrame({"src": [1], "dst": [2]}))
    with pytest.raises(CGQLError, match="alias 'C9' is not defined"):
        query([view], "DETECT Reach(source: {id = C9.*}, sink: {})")
    with pytest.raises(CGQLError, match="vertex attribute 'age' is not in the graph") as info:
        query([view], "DETECT Reach(source: {age < 3}, sink: {})")
    assert (info.value.line, info.value.column) == (1, 23)
    with pytest.raises(CGQLError, match="cycle"):
        query([view], "DETECT Cluster(id = B.*) AS A AND DETECT Cluster(id = A.*) AS B")
    with pytest.raises(CGQLError, match="FOR is relative to now"):
        query([view], "DETECT Cluster(usage > 1) FOR 2h")
