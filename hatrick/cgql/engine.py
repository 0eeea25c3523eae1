"""Registered queries: feed snapshots (stored instances, then live views) through the patterns.

:func:`query` parses and plans a query text, creates its topics, evaluates
the past part of its frame over stored snapshots, and subscribes the live part
to a stream. Sources:

- a GoFS graph (``gofs.store.GraphStore``, a ``goffish`` graph handle or its
  path): the stored instances whose start lies in the past part of the frame
  are its past, run as Gopher programs with the instances as lanes of shared
  supersteps (:mod:`hatrick.cgql.programs`; the sub-queries an ``alias.*``
  wildcard ties together as the stages of one run), on the session given, else
  the active one: only summaries, pairs, diameters and events' members reach
  the driver, never an instance's vertices or edges.
- a stream: anything with ``on_batch(callback)`` and ``remove_callback(callback)``
  that calls ``callback(view)`` after every applied batch (Hatrick's
  ``Stream``); its ``store``/``graph`` attribute, if any, serves the past part.
  A stream whose workers evaluate live patterns (Hatrick's) also has
  ``forget_patterns(keys)``: a cancelled query frees what they keep for it.
- an iterable of GraphViews: a recorded history the caller holds in this
  process, evaluated view by view as live views are (``Query.past_engine`` is
  "driver" there, "gopher" for a stored graph).

The seam: the live callback is registered before the past part is evaluated;
views arriving meanwhile are buffered and replayed after it. A view is
evaluated only if its time lies in the frame and at or after ``now`` (the
past part took the instances before ``now``), its ``seq`` is larger than the
last live one, and its time is not earlier than the last snapshot evaluated:
no gap, no duplicate.

Every event carries ``time`` (the snapshot's time: when its condition was
seen to hold), ``detected`` (wall clock when it was published), ``pattern``,
``status``, ``subquery`` (its alias, or ``Pattern#i``), ``topic`` and ``seq``.
A query whose evaluation fails (say an attribute the live graph lacks) stops,
records the error as ``query.error`` / ``topic.error`` and closes its topics.

Running queries are registered by topic name per Spark application (:func:`registry`):
``CANCEL name`` and :func:`active_queries` see the queries of the application active in
the calling thread, never another application's.
"""
from __future__ import annotations

import itertools
import math
import threading
import time as clock

from hatrick.cgql import nodes as n
from hatrick.cgql.errors import CGQLError, located
from hatrick.cgql.onworkers import WorkerSnapshot, evaluate, memory_keys, on_workers
from hatrick.cgql.parser import parse
from hatrick.cgql.planner import Plan, plan
from hatrick.cgql.programs import run_past
from hatrick.cgql.topics import Topic
from hatrick.cgql.views import Snapshot

__all__ = ["query", "Query", "active_queries"]

_numbers = itertools.count(1)


class QueryRegistry:
    """The running queries of one Spark application by topic name: where ``CANCEL name`` finds
    them, and what keeps two running queries off one topic name."""

    def __init__(self):
        self._queries: dict = {}
        self._lock = threading.Lock()

    def register(self, topics: dict, make) -> "Query":
        """``make()``, the query publishing to ``topics``, registered under their names."""
        with self._lock:
            taken = [name for name in topics if name in self._queries]
            if taken:
                raise CGQLError(f"topic {taken[0]!r} is already used by a running query (CANCEL {taken[0]} first)")
            registered = make()
            registered.registry = self
            self._queries.update(dict.fromkeys(topics, registered))
        return registered

    def find(self, name: str) -> "Query | None":
        with self._lock:
            return self._queries.get(name)

    def release(self, query: "Query") -> None:
        with self._lock:
            for name in [k for k, q in self._queries.items() if q is query]:
                del self._queries[name]

    def active(self) -> dict:
        with self._lock:
            return dict(self._queries)


_registries: dict = {}          # Spark application id (None: no Spark) -> its QueryRegistry
_registries_lock = threading.Lock()


def registry() -> QueryRegistry:
    """The query registry of the Spark application active in this thread (one more for
    queries run without Spark): sessions of other applications never see its topics."""
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    application = None if session is None else session.sparkContext.applicationId
    with _registries_lock:
        return _registries.setdefault(application, QueryRegistry())


def active_queries() -> dict:
    """{topic name: Query} of the registered queries still running in this Spark application."""
    return registry().active()


class Query:
    """A registered query: its plan, topics, pattern states and sources."""

    def __init__(self, text: str, plan_: Plan, topics: dict, directed: bool | None):
        self.text, self.plan, self.topics, self.directed = text, plan_, topics, directed
        self.states: dict = {}
        self.in_frame: dict = {}
        self.error: Exception | None = None
        self.cancelled = False
        self.snapshots = 0
        self.past_engine = None         # "gopher" or "driver": where the past part ran
        self.past_metrics: dict = {}    # {sub-query name: gopher.metrics.RunMetrics} of a Gopher past part
        self._stream = None
        self._lock = threading.RLock()
        self._buffer: list | None = None
        self._last_seq = -math.inf
        self._last_time = -math.inf
        self.registry: QueryRegistry | None = None      # set when registered
        self.settings: dict | None = None               # how it was planned (what a restart plans it again with)
        for topic in topics.values():
            topic.query = self

    @property
    def topic(self) -> Topic:
        return self.topics[self.plan.default_topic] if self.plan.default_topic in self.topics else \
            next(iter(self.topics.values()))

    # evaluation ---------------------------------------------------------------------
    def feed(self, view) -> int:
        """Evaluate every sub-query on one snapshot and publish its events; returns how many."""
        snap = on_workers(view, self.directed, self.plan) or Snapshot.of(view, self.directed)
        if not self.plan.start <= snap.time < self.plan.end:
            return 0
        aliases, published = {}, 0
        for sq in self.plan.subqueries:
            previous = self.states.get(sq.name)
            depends = {a: aliases[a] for a in sq.depends}
            state = evaluate(sq.pattern, snap, previous, depends) if isinstance(snap, WorkerSnapshot) else \
                sq.pattern.evaluate(snap, previous, depends)
            if sq.clause.alias:
                aliases[sq.clause.alias] = state
            inside = sq.in_frame(snap.time)
            if inside:
                events = sq.pattern.diff(previous if self.in_frame.get(sq.name) else None, state)
                published += self._publish(sq, snap.time, snap.seq, events)
            self.states[sq.name], self.in_frame[sq.name] = state, inside
        self.snapshots += 1
        self._last_time = max(self._last_time, snap.time)
        return published

    def _publish(self, sq, time: float, seq: int, events: list) -> int:
        if not events:
            return 0
        head = {"time": time, "pattern": sq.clause.pattern.name}
        tail = {"subquery": sq.name, "snapshot": seq, "detected": clock.time()}
        return len(self.topics[sq.topic].publish([{**head, **e, **tail} for e in events]))

    def run_past_on_gopher(self, store, spark) -> None:
        """The past part as Gopher programs (:mod:`hatrick.cgql.programs`): one run per Reach or
        Cluster sub-query (an Evolved follows its alias's) over the stored instances, then the
        events published instance by instance."""
        self.past_engine = "gopher"
        chosen = _past_instances(store, self.plan)
        if not chosen:
            return
        runs, self.past_metrics = run_past(store, self.plan.subqueries, chosen, self.plan.has_live,
                                           sorted(self.plan.vertex_attributes), spark=spark)
        for i, instance in enumerate(chosen):
            for sq in self.plan.subqueries:
                _, state, inside, events = runs[sq.name][i]
                self._publish(sq, float(instance["start"]), int(instance["id"]), events)
                self.states[sq.name], self.in_frame[sq.name] = state, inside
            self.snapshots += 1
            self._last_time = max(self._last_time, float(instance["start"]))

    def replay(self, views) -> None:
        """Evaluate the recorded views (time order) that fall in the past part of the frame, as
        live views are evaluated."""
        self.past_engine = "driver"
        for view in views:
            if self.cancelled:
                return
            if float(view.time) < self.plan.now:
                self._guarded(view, reraise=True)

    # live ---------------------------------------------------------------------------
    def attach(self, stream) -> None:
        """Subscribe to ``stream``; views are buffered until :meth:`release` (after the past part)."""
        self._stream = stream
        self._buffer = []
        stream.on_batch(self._on_batch)

    def release(self) -> None:
        with self._lock:
            pending, self._buffer = self._buffer or [], None
            for view in pending:
                self._live(view)

    def _on_batch(self, view) -> None:
        with self._lock:
            if self.cancelled:
                return
            if self._buffer is not None:
                self._buffer.append(view)
                return
            self._live(view)

    def _live(self, view) -> None:
        t, seq = float(view.time), int(view.seq)
        if t < self.plan.now or seq <= self._last_seq or t < self._last_time:
            return
        self._last_seq = seq
        if t >= self.plan.end:
            self.cancel()
            return
        self._guarded(view, reraise=False)

    def _guarded(self, view, reraise: bool) -> None:
        """Feed ``view``; a query error stops the query (and is raised to a past run's caller, not
        into the stream's thread)."""
        try:
            self.feed(view)
        except (CGQLError, ValueError) as exc:
            self.error = exc
            for topic in self.topics.values():
                topic.error = exc
            self.cancel()
            if reraise:
                raise

    # restart ----------------------------------------------------------------------
    def checkpoint_record(self) -> dict | None:
        """What a stream's checkpoint keeps of this live query (taken before a batch is evaluated):
        how to plan it again, each topic's next seq, the pattern states that decide what the next
        batch emits. None while it cannot be restored: its past part is still running, it is not
        live, or a sub-query's pattern keeps no state across a restart (Reach does; Cluster and
        Evolved do not yet)."""
        with self._lock:
            if self.cancelled or self._buffer is not None or self.settings is None:
                return None
            if not all(sq.pattern.keeps_state for sq in self.plan.subqueries):
                return None
            states = {sq.name: sq.pattern.state_to_tree(self.states[sq.name])
                      for sq in self.plan.subqueries if sq.name in self.states}
            return {"text": self.text, "settings": dict(self.settings),
                    "topics": {name: t.next_seq for name, t in self.topics.items()}, "states": states,
                    "in_frame": {k: bool(v) for k, v in self.in_frame.items()},
                    "last_seq": float(self._last_seq), "last_time": float(self._last_time),
                    "snapshots": self.snapshots, "past_engine": self.past_engine}

    def cancel(self) -> None:
        """Stop: close every topic, unsubscribe from the stream and free what its workers keep for
        this query, leave the registry. The stream is called outside this query's lock (its batch
        thread holds the stream's lock while it takes this one in :meth:`_on_batch`); no view is
        evaluated once ``cancelled`` is set."""
        with self._lock:
            if self.cancelled:
                return
            self.cancelled = True
            for topic in self.topics.values():
                topic.close()
        if self._stream is not None:
            self._stream.remove_callback(self._on_batch)
            keys = memory_keys(self.plan)
            if keys and hasattr(self._stream, "forget_patterns"):
                self._stream.forget_patterns(keys)
        if self.registry is not None:
            self.registry.release(self)

    def __repr__(self) -> str:
        return (f"Query({self.plan.kind}, topics={list(self.topics)}, snapshots={self.snapshots}, "
                f"cancelled={self.cancelled})")


def query(source, text: str, params: dict | None = None, time_ordered: bool = False, *, stream=None,
          now: float | None = None, time_unit: float = 1.0, directed: bool | None = None,
          grow_factor: float = 1.5, min_size: int = 2, spark=None) -> Topic:
    """Register the CGQL query ``text`` over ``source`` and return the topic its events go to.

    Parameters
    ----------
    source : GoFS graph (handle or path), stream, iterable of GraphViews, or None
        What the query reads: stored instances for the past, a stream (``on_batch`` /
        ``remove_callback``) for live updates. None only for ``CANCEL`` statements.
    text : str
        CGQL statements (see :func:`hatrick.cgql.parse`).
    params : dict
        Values of the symbolic constants (``C``, ``C'``, ``d``, ``$x``).
    time_ordered : bool
        Sort each publication's events by time and key (see :mod:`hatrick.cgql.topics`).
    stream : optional
        A live stream when ``source`` is a stored graph (straddling frames).
    now : float
        The current graph time; default the stream's ``now()``/``clock()`` or the wall clock
        when there is a stream, else None (all stored instances are past; FOR/SINCE then
        need ``now``).
    time_unit : float
        Seconds per graph time unit (durations like ``20h`` are divided by it).
    directed : bool
        Override the graph's directedness for Reach (default: the source's ``directed``).
    grow_factor, min_size : Cluster's ``grew`` threshold and smallest reported group.
    spark : SparkSession
        Runs the past part over a stored graph as Gopher programs (default: the active session;
        without one, ``goffish.session()`` makes one).

    Returns
    -------
    Topic
        The topic of the un-aliased sub-queries (else of the first one); ``topic.query.topics``
        holds every topic of the query, ``topic.cancel()`` stops it.

    Example
    -------
    >>> topic = query(graph, "DETECT Cluster(sum(node.usage) > C) WHERE edge: {type = power}",
    ...               params={"C": 100})                                  # doctest: +SKIP
    >>> [e["status"] for e in topic]                                      # doctest: +SKIP
    """
    statements = parse(text)
    cancelled = _run_cancels(statements)
    if not any(isinstance(s, n.Detect) for s in statements):
        if cancelled:
            return cancelled[-1]
        raise CGQLError("nothing to register: the query has no DETECT statement")
    store, live, history = _sources(source, stream)
    if now is None and live is not None:
        now = _stream_now(live)
    default = f"query_{next(_numbers)}"
    the_plan = plan(statements, params, now, time_unit, default,
                    {"directed": directed, "grow_factor": grow_factor, "min_size": min_size})
    if live is None and not the_plan.has_past:
        raise CGQLError(f"the query's time frame starts at or after now ({the_plan.now}): it needs a live "
                        "stream (pass stream=... or query the stream)")
    if store is not None:
        _check_store_attributes(store, the_plan)
    topics = {name: Topic(name, time_ordered) for name in the_plan.topics}
    registered = registry().register(topics, lambda: Query(
        text, the_plan, topics, directed if directed is not None else _directed(store, live)))
    registered.settings = {"params": dict(params or {}), "now": the_plan.now, "time_unit": time_unit,
                           "default": default, "directed": registered.directed, "grow_factor": grow_factor,
                           "min_size": min_size, "time_ordered": time_ordered}
    if live is not None and the_plan.has_live:
        registered.attach(live)
    try:
        if the_plan.has_past and history is not None:
            registered.replay(history)
        elif the_plan.has_past and store is not None:
            registered.run_past_on_gopher(store, spark or store.spark)
    except BaseException:
        registered.cancel()
        raise
    if live is not None and the_plan.has_live:
        registered.release()
    else:
        registered.cancel()          # past only: every event is published; topics close
    return registered.topic


def restore_query(record: dict, stream, view) -> Query:
    """A live query as a stream's checkpoint kept it (:meth:`Query.checkpoint_record`), registered
    again and subscribed to ``stream``: its topics number on from where they stopped and its
    patterns start from the states the record holds. ``view`` (the stream's graph at the batch the
    record was taken before, whose events a crash may have kept from being published) is
    evaluated first, so a subscriber resuming from its last seq gets every event once."""
    settings = record["settings"]
    the_plan = plan(parse(record["text"]), settings["params"], settings["now"], settings["time_unit"],
                    settings["default"], {"directed": settings["directed"], "grow_factor": settings["grow_factor"],
                                          "min_size": settings["min_size"]})
    topics = {name: Topic(name, bool(settings["time_ordered"]), int(record["topics"][name]))
              for name in the_plan.topics}
    restored = registry().register(topics, lambda: Query(record["text"], the_plan, topics, settings["directed"]))
    restored.settings = dict(settings)
    by_name = {sq.name: sq for sq in the_plan.subqueries}
    restored.states = {name: by_name[name].pattern.state_from_tree(tree) for name, tree in record["states"].items()}
    restored.in_frame = dict(record["in_frame"])
    restored._last_seq, restored._last_time = record["last_seq"], record["last_time"]
    restored.snapshots, restored.past_engine = int(record["snapshots"]), record["past_engine"]
    restored.attach(stream)
    restored._buffer = None
    restored._on_batch(view)
    return restored


def _run_cancels(statements) -> list:
    closed = []
    for s in statements:
        if isinstance(s, n.Cancel):
            target = registry().find(s.topic)
            if target is None:
                raise located(s, f"CANCEL {s.topic}: no running query publishes to topic {s.topic!r}")
            target.cancel()
            closed.append(target.topics[s.topic])
    return closed


def _sources(source, stream):
    """(store, live stream, recorded views) from what the caller passed."""
    from gofs.store import GraphStore, as_store

    store = history = None
    live = stream
    if isinstance(source, str):
        store = GraphStore(source)
    elif isinstance(source, GraphStore) or isinstance(getattr(source, "store", None), GraphStore):
        store = as_store(source)
    elif hasattr(source, "on_batch") and hasattr(source, "remove_callback"):
        live = source
        backing = getattr(source, "store", None) or getattr(source, "graph", None)
        store = backing if isinstance(backing, GraphStore) else None
    elif source is not None:
        try:
            history = sorted(source, key=lambda v: (float(v.time), int(v.seq)))
        except (TypeError, AttributeError):
            raise CGQLError(f"cannot query a {type(source).__name__}: pass a GoFS graph, a stream with "
                            "on_batch/remove_callback, or GraphViews") from None
    if live is not None and not (hasattr(live, "on_batch") and hasattr(live, "remove_callback")):
        raise CGQLError(f"stream {type(live).__name__} has no on_batch/remove_callback")
    return store, live, history


def _stream_now(stream) -> float:
    for name in ("now", "clock"):
        fn = getattr(stream, name, None)
        if callable(fn):
            return float(fn())
    return clock.time()


def _directed(store, live):
    if store is not None:
        return bool(store.directed)
    if live is not None and hasattr(live, "directed"):
        return bool(live.directed)
    return None


def _past_instances(store, the_plan: Plan) -> list:
    """The stored instances whose start lies in the past part of the frame, in time order."""
    hi = min(the_plan.end, the_plan.now)
    return sorted((i for i in store.instances if the_plan.start <= i["start"] < hi),
                  key=lambda i: (i["start"], i["id"]))


def _check_store_attributes(store, the_plan: Plan) -> None:
    """Name a missing attribute and its place in the query at registration, not mid-run."""
    vertex_known = set(store.vertex_attributes) | set(store.instance_vertex_attributes) | {"id"}
    edge_known = set(store.edge_attributes) | set(store.instance_edge_attributes)
    for sq in the_plan.subqueries:
        clause = sq.clause
        groups = sq.pattern._vertex_condition_groups()
        for cond in (c for g in groups for c in g):
            if cond.attribute not in vertex_known:
                raise located(cond, f"vertex attribute {cond.attribute!r} is not in graph {store.path} "
                                    f"(vertex attributes: {', '.join(sorted(vertex_known))})")
        for agg in sq.pattern.aggregate_conditions():
            if agg.aggregate.attribute and agg.aggregate.attribute not in vertex_known:
                raise located(agg, f"vertex attribute {agg.aggregate.attribute!r} is not in graph {store.path}")
        if clause.edge is not None:
            for cond in clause.edge.conditions:
                if cond.attribute not in edge_known:
                    raise located(cond, f"edge attribute {cond.attribute!r} is not in graph {store.path} "
                                        f"(edge attributes: {', '.join(sorted(edge_known)) or 'none'})")
            if clause.edge.labels and not ({"type", "label"} & edge_known):
                raise located(clause.edge, f"edge label {clause.edge.labels[0]!r} needs a 'type' or 'label' "
                                           f"edge attribute in graph {store.path}")
