"""Task-side half of the engine: one Spark task's GoFS partitions, every lane of a run.

A *lane* is one BSP computation over one instance at a time: a single run is
one lane with no instance; independent time-series runs have a lane per
instance, advancing in the same supersteps; a sequential run is one lane that
moves from instance to instance. For each partition it serves, a
:class:`TaskWorker` keeps every lane's sub-graph states (live Python objects,
never pickled between supersteps), the messages waiting for the next superstep
and the forward messages waiting for the lane's next instance.

The worker knows nothing about how bytes move: :meth:`TaskWorker.step` runs the
planned lanes and returns what leaves for other partitions, and
:meth:`TaskWorker.deliver` takes in what arrived. Both transports (the
resident barrier stage and the job-per-superstep fallback) drive this class.
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from gofs import files
from gofs.bundle import instance_bundle, load_instance_attributes, load_partition
from gofs.errors import EngineError, InputError
from gopher import aggregators as agg
from gopher import codec
from gopher.cache import DiskCache, WorkingSpace, freeze, nbytes, process_cache
from gopher.context import ComputeContext
from gopher.messages import Arrivals, Inbox, Mailboxes, Outbox, combiner_ufunc
from gopher.subgraph import Subgraph, check_direction

MERGED = -1            # the lane that holds the Merge step's results


class GopherProgramError(EngineError, RuntimeError):
    """A sub-graph program raised: names the program, sub-graph, partition and superstep."""


@dataclass(frozen=True)
class LaneStep:
    """What one lane does in a superstep (sent by the driver)."""

    instance: dict | None
    index: int              # the instance's position in the run's selection
    count: int              # instances in the selection
    superstep: int          # superstep within the instance; 0 starts it
    aggregated: dict
    globals: dict
    sequential: bool


@dataclass(frozen=True)
class RunSpec:
    """Everything a task needs to serve a run (shipped once, in the task's closure)."""

    store: object
    program: object
    tasks: int
    vertex_offsets: np.ndarray
    subgraph_offsets: np.ndarray
    cache_bytes: int
    disk_cache: DiskCache | None = None    # partition bundles kept on the executor's disk across processes
    owners: tuple = ()                     # the task of each partition (default: :func:`balance_partitions`)

    def __post_init__(self):
        if not self.owners:
            object.__setattr__(self, "owners", balance_partitions(np.diff(self.vertex_offsets),
                                                                  np.diff(self.subgraph_offsets), self.tasks))

    def partitions_of(self, task: int) -> list[int]:
        return [p for p, owner in enumerate(self.owners) if owner == task]

    def task_of(self, partition: int) -> int:
        return self.owners[partition]


#: a sub-graph's ``compute`` call costs about as much as this many vertices of vectorised work
SUBGRAPH_COST_IN_VERTICES = 100


def balance_partitions(vertices, subgraphs, tasks: int) -> tuple:
    """The task of each partition, so that tasks finish a superstep together: a superstep lasts
    as long as its slowest task. Largest estimated cost first (vertices, plus a Python call per
    sub-graph), each to the task with the least so far (ties: fewer partitions, lower
    number), so every task gets a partition while there are enough."""
    costs = np.asarray(vertices, np.int64) + SUBGRAPH_COST_IN_VERTICES * np.asarray(subgraphs, np.int64)
    load = [(0, 0, task) for task in range(tasks)]
    owners = [0] * len(costs)
    for p in np.argsort(-costs, kind="stable").tolist():
        cost, count, task = min(load)
        owners[p] = task
        load[task] = (cost + int(costs[p]), count + 1, task)
    return tuple(owners)


class TimeSeriesContext(ComputeContext):
    """The compute context of a run over instances.

    Besides :class:`gopher.context.ComputeContext`: ``instance`` (the manifest
    entry: ``id``, ``start``, ``end``, ...), ``instance_index`` and
    ``num_instances`` (position in, and size of, the selection), and in the
    sequential pattern the ``send_forward_*`` methods, whose messages arrive in
    superstep 0 of the next instance (combined with the program's combiner).
    ``superstep`` counts supersteps within the current instance.
    """

    def __init__(self, step: LaneStep, outbox: Outbox, forward: Outbox, message_dtype, aggregators):
        super().__init__(step.superstep, outbox, step.aggregated, step.globals, message_dtype, step.instance)
        self.instance_index = step.index
        self.num_instances = step.count
        self._aggregators = aggregators
        self._forward = ComputeContext(step.superstep, forward, {}, {}, message_dtype) if step.sequential else None
        self._before: LaneState | None = None       # the previous instance's lane here (lanes side by side)

    def _forwarding(self) -> ComputeContext:
        """The forward messages' context, from the sub-graph now computing (set here, not by the
        engine's loop for every sub-graph: few send forward)."""
        if self._forward is None:
            raise RuntimeError("send_forward_* is for sequentially dependent runs (run_sequential)")
        self._forward._subgraph = self._subgraph
        return self._forward

    def state_before(self, subgraph) -> dict | None:
        """``subgraph``'s state in the lane of the previous instance of the selection, where
        instances run side by side as lanes (the independent patterns); None for the first
        instance, in a sequential run, or before that lane ran here. Read it, never write it.

        This is how a sequentially dependent analysis runs its independent part in shared
        supersteps: each lane works out its instance on its own, then reads its predecessor's
        settled state; the program's ``master`` decides when that state is settled."""
        if self._before is None:
            return None
        k = subgraph._k
        return self._before.states[k] if k < len(self._before.states) else None

    def send_forward_to_vertex(self, vertex_id: int, value) -> None:
        self._forwarding().send_to_vertex(vertex_id, value)

    def send_forward_to_vertices(self, vertex_ids, values) -> None:
        """Batched, like ``send_to_vertices``, delivered in the next instance."""
        self._forwarding().send_to_vertices(vertex_ids, values)

    def send_forward_to_subgraph(self, subgraph_id: int, payload) -> None:
        self._forwarding().send_to_subgraph(subgraph_id, payload)

    def send_forward_to_subgraphs(self, subgraph_ids, payloads) -> None:
        self._forwarding().send_to_subgraphs(subgraph_ids, payloads)


class InstanceView:
    """One partition's sub-graphs as one program sees them through one instance's attributes.

    Views are cached per program class, so ``Subgraph.derived`` data built by one
    program is never seen by another. ``cache`` is the task cache as the run now computing
    on the view sees it (:func:`partition_view` hands each run its own); ``key`` is the
    view's entry in it.
    """

    def __init__(self, bundle, vertex: dict, edge: dict, cache, key, process_key: tuple = (), kept=None):
        self.bundle, self.vertex, self.edge = bundle, vertex, edge
        self.cache, self.key, self.process_key = cache, key, process_key
        self.kept = kept                         # Subgraph's kept: the topology's place on disk, if any
        self.entries: tuple = (key,)           # its cache entries: bundles and itself, as partition_view uses them
        self._subgraphs: dict[int, Subgraph] = {}
        self._every: list | None = None          # every_subgraph()
        self.shared: dict = {}                   # Subgraph.partition_pass results

    def _account(self, size: int) -> None:
        self.cache.grow(self.key, size)

    def process_pass(self, key, build):
        """:meth:`gopher.subgraph.Subgraph.process_pass`: one process-cache entry under
        ``process_key`` (graph version, instance, program class), shared by every partition's view."""
        return self.cache.get((*self.process_key, key), build)

    def neighbor_pairs(self, direction: str) -> "NeighborPairs":
        """Every sub-graph's ``neighbors(direction)``, sub-graph after sub-graph, worked out once
        for the partition (:class:`NeighborPairs` with ``position`` the local sub-graph number)."""
        key = ("neighbor pairs", direction)
        pairs = self.shared.get(key)
        if pairs is None:
            pairs = self.shared[key] = NeighborPairs.of(self.bundle, direction)
            self._account(nbytes(pairs))
        return pairs

    def every_subgraph(self) -> list:
        """All of the partition's sub-graphs in order, built once: what a superstep in which all are
        active walks (without a look-up per sub-graph)."""
        if self._every is None:
            self._every = [self.subgraph(k) for k in range(self.bundle.num_subgraphs)]
        return self._every

    def subgraph(self, k: int) -> Subgraph:
        k = int(k)
        sg = self._subgraphs.get(k)
        if sg is None:
            working = WorkingSpace(lambda: self.cache, (*self.key, "working", k))
            sg = self._subgraphs[k] = Subgraph(self.bundle, k, self.vertex, self.edge, self._account, working,
                                               self.shared, self.process_pass, self.kept)
        return sg


@dataclass(frozen=True)
class NeighborPairs:
    """(sender, adjacent sub-graph) pairs of some of a partition's sub-graphs, sender after sender
    and each sender's targets ascending, as ``Subgraph.neighbors`` lists them: ``position`` is
    the sender's place among the sub-graphs asked about, ``senders`` and ``targets`` global ids."""

    position: np.ndarray
    senders: np.ndarray
    targets: np.ndarray

    @classmethod
    def of(cls, bundle, direction: str) -> "NeighborPairs":
        """Every sub-graph of ``bundle``'s partition (``position``: the local sub-graph number)."""
        check_direction(direction)
        n = bundle.num_subgraphs
        local = np.repeat(np.arange(n, dtype=np.int64), np.diff(bundle.remote_bounds))
        targets = np.asarray(bundle.remote_dst_sg, np.int64)
        if bundle.directed and direction != "both":
            keep = bundle.remote_incoming if direction == "in" else ~bundle.remote_incoming
            local, targets = local[keep], targets[keep]
        order = np.lexsort((targets, local))
        local, targets = local[order], targets[order]
        first = np.ones(len(local), dtype=bool)            # each pair once, as np.unique per sub-graph
        first[1:] = (local[1:] != local[:-1]) | (targets[1:] != targets[:-1])
        local, targets = local[first], targets[first]
        senders = bundle.sg_offset + local
        if bundle.added_vids is not None:
            senders[local == n - 1] = bundle.added_subgraph
        for array in (local, senders, targets):
            array.flags.writeable = False
        return cls(local, senders, targets)

    def of_some(self, ks: np.ndarray, n: int) -> "NeighborPairs":
        """The pairs of local sub-graphs ``ks`` (ascending) of the ``n`` these pairs cover."""
        place = np.full(n, -1, np.int64)
        place[ks] = np.arange(len(ks))
        position = place[self.position]
        keep = position >= 0
        return NeighborPairs(position[keep], self.senders[keep], self.targets[keep])


class ActiveSubgraphs(Sequence):
    """A lane's active sub-graphs in one partition (sub-graph numbers ``ks``), each with its
    ``state``, built when first read: a program that works over the whole partition
    (``compute_partition``, ``output_partition``) pays only for those it reads, not for
    thousands of small objects. Their ids, numbers, first vertices and sizes are arrays, and
    ``partition_state`` is the lane's dict for the whole partition: a program that keeps one
    array for the partition's sub-graphs keeps it there, not split into their states."""

    def __init__(self, view: InstanceView, ks: list, states: list, partition_state: dict | None = None):
        self._view, self._ks, self._states = view, ks, states
        self._built: list = [None] * len(ks)
        self.partition_state = {} if partition_state is None else partition_state

    def __len__(self) -> int:
        return len(self._ks)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._at(j) for j in range(*i.indices(len(self)))]
        return self._at(range(len(self._ks))[i])

    def __iter__(self):
        return iter(self.built())

    def built(self, states: bool = True) -> list:
        """All of them, built, each with its ``state``, in order: what a superstep's per-sub-graph
        loop walks (a list, without the index checks of ``__getitem__`` nor a call per item).
        ``states=False``: where all are active, their states are left for the caller to set (the
        loop that computes them sets each one's as it goes: one pass over them, not two)."""
        if len(self._ks) == self._view.bundle.num_subgraphs:      # all of them: the view keeps their list
            self._built = built = self._view.every_subgraph()
            if states:
                for sg, state in zip(built, self._states):
                    sg.state = state
            return built
        built, states, subgraph, made = self._built, self._states, self._view.subgraph, self._view._subgraphs
        for i, k in enumerate(self._ks):
            if built[i] is None:
                sg = built[i] = made.get(k) or subgraph(k)
                sg.state = states[k]
        return built

    @property
    def ids(self) -> np.ndarray:
        """The global id of each of these sub-graphs (int64), without building them."""
        bundle = self._view.bundle
        ids = bundle.sg_offset + np.asarray(self._ks, np.int64)
        if bundle.added_vids is not None and self._ks and self._ks[-1] == bundle.num_subgraphs - 1:
            ids[-1] = bundle.added_subgraph
        return ids

    @property
    def local(self) -> np.ndarray:
        """Each one's number among the partition's sub-graphs, 0 to ``total`` - 1 (int64): where
        an array over the partition's sub-graphs (in ``partition_state``) holds it."""
        return np.asarray(self._ks, np.int64)

    @property
    def states(self) -> list:
        """Each one's ``state`` dict, in order, without building the sub-graphs."""
        return [self._states[k] for k in self._ks]

    @property
    def total(self) -> int:
        """How many sub-graphs the partition has, active or not."""
        return self._view.bundle.num_subgraphs

    @property
    def connected(self) -> bool:
        """Whether each of the partition's sub-graphs is one piece of its local edges (always on
        the template; an instance that removes edges may split some: :meth:`Subgraph.pieces`)."""
        bundle = self._view.bundle
        return bundle.piece is None or bool((bundle.piece_counts == 1).all())

    @property
    def first_vertex_ids(self) -> np.ndarray:
        """The smallest vid of each (int64; as :attr:`Subgraph.first_vertex_id`)."""
        bundle, local = self._view.bundle, self.local
        ids = bundle.sg_starts[local] + bundle.vid_offset
        if bundle.added_vids is not None and len(bundle.added_vids):     # the last: the vertices added, in vid order
            ids[local == bundle.num_subgraphs - 1] = bundle.added_vids[0]
        return ids

    @property
    def vertex_counts(self) -> np.ndarray:
        """Each one's number of vertices: with all of the partition's sub-graphs, in order, what an
        ``output_partition`` column repeats a per-sub-graph value by."""
        return np.diff(self._view.bundle.sg_starts)[self._ks]

    def local_of(self, subgraph_ids) -> np.ndarray:
        """The number among the partition's sub-graphs of each global sub-graph id (a message's
        target), -1 for one that is not in this partition in this instance."""
        bundle = self._view.bundle
        local = bundle.local_subgraph(subgraph_ids)
        return np.where((local >= 0) & (local < bundle.num_subgraphs), local, -1)

    def local_of_vertices(self, positions) -> np.ndarray:
        """The number of the sub-graph holding each vertex position of the partition (what
        ``ctx.partition_messages().vertices`` holds)."""
        return np.searchsorted(self._view.bundle.sg_starts, np.asarray(positions, np.int64), side="right") - 1

    def subset(self, mask) -> "ActiveSubgraphs":
        """Those of these sub-graphs where ``mask`` (a boolean per sub-graph) is True: what
        ``ctx.send_to_neighbors_of`` sends from when only some of them send."""
        ks = np.asarray(self._ks, np.int64)[np.asarray(mask, bool)].tolist()
        return ActiveSubgraphs(self._view, ks, self._states, self.partition_state)

    def neighbor_pairs(self, direction: str = "both") -> NeighborPairs:
        """Each of these sub-graphs' ``neighbors(direction)``, in order, without building them
        (``position``: the sub-graph's place here); what ``ComputeContext.send_to_neighbors_of`` sends."""
        pairs = self._view.neighbor_pairs(direction)
        n = self._view.bundle.num_subgraphs
        if len(self._ks) == n:                 # all of the partition's: positions are local numbers
            return pairs
        return pairs.of_some(np.asarray(self._ks, np.int64), n)

    def _at(self, i: int) -> Subgraph:
        sg = self._built[i]
        if sg is None:
            k = self._ks[i]
            sg = self._built[i] = self._view.subgraph(k)
            sg.state = self._states[k]
        return sg


def _graph_key(store) -> tuple:
    """The graph version: its manifest uuid and the version directory its files live in."""
    return (store.identity, store.root)


def _template_bundle(spec: RunSpec, p: int) -> tuple:
    """(key, bundle): partition ``p``'s template topology with the program's static attributes,
    from the process cache."""
    store, program = spec.store, spec.program
    key = (*_graph_key(store), "bundle", p, tuple(program.vertex_attributes), tuple(program.edge_attributes))

    def load():
        return load_partition(store, p, program.vertex_attributes, program.edge_attributes)

    disk = _disk_cache(spec)
    bundle = process_cache(spec.cache_bytes).get(key, lambda: freeze(
        load() if disk is None else disk.get((*key, _code_digest("gofs.bundle")), load)))
    return key, bundle


def _disk_cache(spec: RunSpec) -> DiskCache | None:
    """Where a run keeps a graph's topology across processes: only a versioned graph's."""
    return spec.disk_cache if "uuid" in spec.store.manifest else None


def _template_keeper(spec: RunSpec, p: int):
    """The ``kept`` of partition ``p``'s template sub-graphs (:class:`gopher.subgraph.Subgraph`):
    arrays derived from its topology, kept on the executor's disk beside its bundle and keyed by
    the graph version and the code that builds the bundle and them; None without a disk cache."""
    disk = _disk_cache(spec)
    if disk is None:
        return None
    graph = (*_graph_key(spec.store), "topology", p, _code_digest("gofs.bundle"), _code_digest("gopher.subgraph"))
    return lambda key, build: disk.get((*graph, key), build)


@functools.lru_cache(maxsize=None)
def _code_digest(module: str) -> str:
    """A digest of a module's source: files that another release's code wrote are not read."""
    return hashlib.sha256(Path(importlib.import_module(module).__file__).read_bytes()).hexdigest()[:16]


def partition_view(spec: RunSpec, p: int, instance: dict | None) -> InstanceView:
    """Partition ``p`` through ``instance``: topology and attributes from the process cache."""
    store, program = spec.store, spec.program
    cache = process_cache(spec.cache_bytes)
    bundle_key, bundle = _template_bundle(spec, p)
    used = [bundle_key]
    kept = _template_keeper(spec, p)
    if instance is not None and instance.get("topology"):
        kept = None                          # the instance's own topology: kept in this process only
        template = bundle
        bundle_key = (*bundle_key, "topology", instance["id"])
        bundle = cache.get(bundle_key, lambda: freeze(instance_bundle(store, template, instance)))
        used.append(bundle_key)
    # static attributes too: an instance that overrides one holds it (gofs.bundle.load_instance_attributes)
    vattrs = (*program.instance_vertex_attributes, *program.vertex_attributes)
    eattrs = (*program.instance_edge_attributes, *program.edge_attributes)
    categorical = bool(program.text_as_categorical)
    program_class = (type(program).__module__, type(program).__qualname__)
    process_key = (*_graph_key(store), "process pass", None if instance is None else instance["id"], program_class)
    view_key = (*bundle_key, "view", None if instance is None else instance["id"], vattrs, eattrs, categorical,
                program_class)

    def build():
        if instance is None or not (vattrs or eattrs):
            vertex, edge = {}, {}
        else:
            vertex, edge = freeze(load_instance_attributes(store, bundle, instance, vattrs, eattrs, categorical))
        return InstanceView(bundle, vertex, edge, cache, view_key, process_key, kept)

    view = cache.get(view_key, build)
    if view.bundle is not bundle:            # the bundle was evicted and reloaded: rebuild the view
        cache.grow(view_key, 0)
        view = InstanceView(bundle, view.vertex, view.edge, cache, view_key, process_key, kept)
    view.cache = cache
    view.entries = (*used, view_key)
    return view


@dataclass
class LaneState:
    """One lane's sub-graphs in one partition: halt votes and ``state`` dicts."""

    halted: np.ndarray
    states: list
    partition: dict = field(default_factory=dict)      # ActiveSubgraphs.partition_state


@dataclass
class PartitionRun:
    """A partition's part of a run: lane states, next superstep's messages, forward messages."""

    lanes: dict = field(default_factory=dict)        # lane -> LaneState
    inbox: dict = field(default_factory=dict)        # lane -> [message batch]
    ahead: dict = field(default_factory=dict)        # lane -> [forward message batch]
    views: dict = field(default_factory=dict)        # lane -> (instance id, its InstanceView), see TaskWorker._view


class TaskWorker:
    """The partitions one Spark task serves, for the whole run (or one superstep of it)."""

    def __init__(self, spec: RunSpec, partitions: list[int]):
        self.spec = spec
        self.partitions = {p: PartitionRun() for p in partitions}
        self.ufunc = combiner_ufunc(spec.program.combiner)
        first = {}
        for p, task in enumerate(spec.owners):
            first.setdefault(task, p)
        #: each task's mailbox is its first partition, whose inbox takes in every message to the
        #: task (:meth:`step` sends one batch per task, not one per partition)
        self.mailboxes = Mailboxes(spec.vertex_offsets, spec.subgraph_offsets,
                                   np.array([first[task] for task in spec.owners], np.int64))
        self.specs = {name: agg.resolve(s) for name, s in spec.program.aggregators.items()}

    def load_topology(self) -> None:
        """Load every partition's template topology now (a run's set-up), not in its first superstep."""
        for p in self.partitions:
            _template_bundle(self.spec, p)

    # messages ------------------------------------------------------------------
    def deliver_own(self, outgoing: dict) -> int:
        """Deliver what this task's partitions sent each other ({partition: payload} of
        :meth:`step`) as a peer would get it, without encoding it all: the program's objects
        (sub-graph messages, broadcasts, object-typed message values) are copied, pickled at
        once, so no receiver shares an object its sender still holds; the arrays of numbers
        :meth:`gopher.messages.Outbox.route` made are the engine's own and are handed over as
        they are (pickling each cost more than the superstep's messages). Returns the bytes
        handed over."""
        held = [batch for payload in outgoing.values() for lanes in payload.values()
                for batches in lanes.values() for batch in batches]
        objects = [(batch["subgraph"][2] if "subgraph" in batch else None, batch.get("broadcast"),
                    batch["vertex"][1] if "vertex" in batch and batch["vertex"][1].dtype.hasobject else None)
                   for batch in held]
        blob = codec.dumps(objects)
        for batch, (payloads, broadcasts, values) in zip(held, codec.loads(blob)):
            if payloads is not None:
                batch["subgraph"] = (*batch["subgraph"][:2], payloads)
            if broadcasts is not None:
                batch["broadcast"] = broadcasts
            if values is not None:
                batch["vertex"] = (batch["vertex"][0], values)
        for p, payload in outgoing.items():
            self.deliver(p, payload)
        return len(blob) + sum(array.nbytes for batch in held for key in ("vertex", "subgraph")
                               if key in batch for array in batch[key][:2])

    def deliver(self, p: int, payload: dict) -> None:
        """Take in what other partitions sent to the task of ``p`` (its mailbox, :attr:`mailboxes`),
        {"messages" | "forward": {lane: [batch]}}: kept with ``p`` until the lane's next superstep
        sorts them to the task's partitions (and a checkpoint of ``p`` saves them)."""
        run = self.partitions[p]
        for lane, batches in payload.get("messages", {}).items():
            run.inbox.setdefault(lane, []).extend(batches)
        for lane, batches in payload.get("forward", {}).items():
            run.ahead.setdefault(lane, []).extend(batches)

    # one superstep ----------------------------------------------------------------
    def step(self, plan: dict) -> tuple[dict, dict]:
        """Run one superstep of the lanes in ``plan`` ({lane: LaneStep}) on every partition.

        Returns (outgoing, summary): outgoing is {destination task's mailbox (a partition): payload
        for :meth:`deliver`}; the summary carries per-lane counts, halt votes and
        aggregator partials, the compute time and the files read.
        """
        clock = time.perf_counter()
        outgoing: dict = {}
        lanes: dict = {}
        boxes = {lane: (Outbox(), Outbox()) for lane in plan}     # a lane's sends from all of its partitions
        program = self.spec.program
        contexts = {lane: TimeSeriesContext(step, *boxes[lane], program.message_dtype, self.specs)
                    for lane, step in plan.items()}                # one per lane, for each of its partitions
        arrivals = {lane: self._arrivals(lane, step) for lane, step in plan.items()}
        with files.traced() as reads:
            for p, run in self.partitions.items():
                for lane, step in plan.items():
                    report = self._step_lane(p, run, lane, step, contexts[lane], arrivals[lane], *boxes[lane])
                    total = lanes.setdefault(lane, {"active": 0, "halted": 0, "subgraphs": 0, "sent": 0,
                                                    "forward": 0, "received": 0, "partials": {}})
                    for name in ("active", "halted", "subgraphs", "sent", "forward", "received"):
                        total[name] += report[name]
                    for name, value in report["partials"].items():
                        total["partials"][name] = value if name not in total["partials"] else \
                            self.specs[name].combine(total["partials"][name], value)
        for lane, pair in boxes.items():         # routed once per lane: one batch per destination task
            for kind, box in zip(("messages", "forward"), pair):
                for dst, batch in box.route(self.mailboxes, self.ufunc).items():
                    outgoing.setdefault(dst, {}).setdefault(kind, {})[lane] = [batch]
        for total in lanes.values():
            for name, value in total["partials"].items():
                if self.specs[name].pack is not None:
                    total["partials"][name] = self.specs[name].pack(value)
        return outgoing, {"lanes": lanes, "compute_seconds": time.perf_counter() - clock,
                          "files": sorted(set(reads))}

    def _arrivals(self, lane, step: LaneStep) -> Arrivals:
        """Every message the task's partitions take in for ``lane`` in this superstep, sorted once
        for them all: forward messages first where the lane starts an instance."""
        runs = self.partitions.values()
        batches = [b for run in runs for b in run.ahead.pop(lane, ())] if step.superstep == 0 else []
        for run in runs:
            batches += run.inbox.pop(lane, ())
        return Arrivals(batches, self.spec.vertex_offsets, self.ufunc)

    def _step_lane(self, p: int, run: PartitionRun, lane, step: LaneStep, ctx: TimeSeriesContext,
                   arrivals: Arrivals, out: Outbox, ahead: Outbox) -> dict:
        """Partition ``p``'s part of ``lane`` in this superstep, with its slice of the task's
        ``arrivals``; its sends go into ``out`` and ``ahead`` (forward), shared by the task's
        partitions and routed once after them all, through ``ctx``, the lane's context in this
        superstep (its partials and inbox are the partition's)."""
        program = self.spec.program
        view = self._view(run, p, lane, step.instance)
        n = view.bundle.num_subgraphs
        fresh = lane not in run.lanes
        if fresh:
            run.lanes[lane] = LaneState(np.zeros(n, dtype=bool), [{} for _ in range(n)])
        state = run.lanes[lane]
        if len(state.states) < n:          # this instance adds vertices here: one more sub-graph
            state.halted = np.r_[state.halted, np.zeros(n - len(state.states), dtype=bool)]
            state.states.extend({} for _ in range(n - len(state.states)))
        start = step.superstep == 0
        inbox = arrivals.inbox(view.bundle)
        wake = start and (fresh or getattr(program, "wake_at_instance_start", True))
        everyone = wake or not state.halted[:n].any()          # then who received messages does not matter
        active = slice(0, n) if everyone else np.flatnonzero(~state.halted[:n] | inbox.receiving())
        sent, forward = out.count(), ahead.count()
        ctx.partials, ctx._subgraph = {}, None
        ctx._before = run.lanes.get(lane - 1) if not step.sequential and isinstance(lane, int) and lane > 0 else None
        ks = list(range(n)) if everyone else active.tolist()     # Python ints: list indexing is faster with them
        subgraphs = ActiveSubgraphs(view, ks, state.states, state.partition)
        ctx._inbox = inbox
        try:
            done = (not inbox.count or program.partition_messages) and program.compute_partition(subgraphs, ctx)
        except Exception as exc:
            raise GopherProgramError(
                f"{type(program).__name__}.compute_partition failed on partition {p} in "
                f"{_where(step)}superstep {step.superstep}: {exc!r}\n{traceback.format_exc()}") from exc
        votes = isinstance(done, (list, tuple, np.ndarray))       # the sub-graphs' halt votes
        halts = np.asarray(done, dtype=bool) if votes else False if done else \
            self._compute_each(p, step, ctx, ks, subgraphs, inbox, state.states)
        state.halted[active] = halts
        if everyone:                       # halts covers them all: count it, not the array
            halted = int(np.count_nonzero(halts)) if votes else halts.count(True) if halts else 0
        else:
            halted = int(np.count_nonzero(state.halted[:n]))
        return {"active": len(ks), "halted": halted, "subgraphs": n,
                "sent": out.count() - sent, "forward": ahead.count() - forward, "received": inbox.count,
                "partials": ctx.partials}

    def _compute_each(self, p: int, step: LaneStep, ctx: TimeSeriesContext, ks: list, subgraphs: ActiveSubgraphs,
                      inbox: Inbox, states: list) -> list | bool:
        """``compute`` once per active sub-graph; returns their halt votes (False: none voted).
        This loop's body is the engine's cost per sub-graph and superstep: the sub-graphs and
        their messages are made in one pass (:meth:`Inbox.for_subgraphs`), each one's ``state``
        and ``ctx``'s sub-graph are set inline, each ``state`` (which ``compute`` may replace) is
        kept as soon as it returns, and a vote to halt is the voter put on a list (a
        superstep in which none votes pays nothing per sub-graph for the votes)."""
        program = self.spec.program
        compute, voters = program.compute, ctx._voters
        built, received = subgraphs.built(states=False), inbox.for_subgraphs(ks)
        voters.clear()
        try:
            for k, sg, messages in zip(ks, built, received):
                sg.state = states[k]
                ctx._subgraph = sg
                compute(sg, messages, ctx)
                states[k] = sg.state
        except Exception as exc:
            raise GopherProgramError(
                f"{type(program).__name__}.compute failed on sub-graph {ctx._subgraph.id} (partition {p}) in "
                f"{_where(step)}superstep {step.superstep}: {exc!r}\n{traceback.format_exc()}") from exc
        if not voters:
            return False
        voted = set(map(id, voters))
        voters.clear()
        return [id(sg) in voted for sg in built]

    def _view(self, run: PartitionRun, p: int, lane, instance: dict | None) -> InstanceView:
        """:func:`partition_view` of ``p`` for ``lane``, kept from one superstep to the next while
        the lane stays on its instance and the view's cache entries stay (then only marked used):
        building its keys and looking it up cost as much as a small partition's superstep."""
        iid = None if instance is None else instance["id"]
        held = run.views.get(lane)
        if held is not None and held[0] == iid and held[1].cache.touch(held[1].entries):
            return held[1]
        view = partition_view(self.spec, p, instance)
        run.views[lane] = (iid, view)
        return view

    # after the supersteps ---------------------------------------------------------
    def merge(self, lanes: dict) -> dict:
        """The Merge step: ``program.merge`` once per sub-graph over its final state in every
        lane ({lane: instance}, in selection order); the merged states become lane
        :data:`MERGED`. Returns the merge's aggregator partials."""
        program, partials = self.spec.program, {}
        for p, run in self.partitions.items():
            view = partition_view(self.spec, p, None)
            n = view.bundle.num_subgraphs
            ctx = ComputeContext(0, Outbox(), {}, {}, program.message_dtype)
            ctx._aggregators = self.specs
            merged = []
            for k in range(n):
                sg = view.subgraph(k)
                sg.state = {}
                ctx._begin(sg)
                try:
                    program.merge(sg, {instance["id"]: run.lanes[lane].states[k] for lane, instance in lanes.items()},
                                  ctx)
                except Exception as exc:
                    raise GopherProgramError(
                        f"{type(program).__name__}.merge failed on sub-graph {sg.id} (partition {p}): "
                        f"{exc!r}\n{traceback.format_exc()}") from exc
                merged.append(sg.state)
            run.lanes[MERGED] = LaneState(np.ones(n, dtype=bool), merged)
            for name, value in ctx.partials.items():
                partials[name] = value if name not in partials else self.specs[name].combine(partials[name], value)
        return partials

    def output(self, tables: list, schema: pa.Schema):
        """Per-vertex result rows as Arrow batches of ``schema``.

        ``tables`` lists (table number, {lane: instance or None}, method name,
        [(column, physical column)], per_instance); every table's rows go into
        the one ``schema`` (``table``, ``instance``, ``id`` and the physical
        columns of every table, null where another table's). A partition's columns come from
        ``program.output_partition`` at once where it gives them, else from ``output`` (or the
        table's method) per sub-graph.
        """
        for p, run in self.partitions.items():
            for number, lanes, method, columns, per_instance in tables:
                for lane, instance in lanes.items():
                    view = partition_view(self.spec, p, instance)
                    state = run.lanes[lane]
                    rows = view.bundle.num_vertices
                    pieces = self._partition_columns(p, view, state, columns) if method == "output" else None
                    if pieces is None:
                        pieces = self._subgraph_columns(p, view, state, method, columns)
                    arrays = {"table": files.arrow_array(np.full(rows, number, np.int8)),
                              "instance": files.arrow_array(np.full(rows, instance["id"], np.int64)) if per_instance
                              else pa.nulls(rows, pa.int64()),
                              "id": files.arrow_array(view.bundle.ids, schema.field("id").type)}
                    for name, physical in columns:
                        arrays[physical] = _concat(pieces[name], schema.field(physical).type)
                    yield pa.RecordBatch.from_arrays(
                        [arrays.get(f.name, pa.nulls(rows, f.type)) for f in schema], schema=schema)

    def _partition_columns(self, p: int, view: InstanceView, state: LaneState, columns) -> dict | None:
        """{column: [one array over the partition's vertices]} from ``program.output_partition``,
        or None where it leaves the partition to ``output`` per sub-graph."""
        program = self.spec.program
        subgraphs = ActiveSubgraphs(view, list(range(view.bundle.num_subgraphs)), state.states, state.partition)
        try:
            values = program.output_partition(subgraphs)
            if values is None:
                return None
            _check_lengths(values, [name for name, _ in columns], view.bundle.num_vertices)
        except Exception as exc:
            raise GopherProgramError(f"{type(program).__name__}.output_partition failed on partition {p}: "
                                     f"{exc!r}\n{traceback.format_exc()}") from exc
        return {name: [values[name]] for name, _ in columns}

    def _subgraph_columns(self, p: int, view: InstanceView, state: LaneState, method: str, columns) -> dict:
        """{column: [one array per sub-graph]} from ``program.output`` (or ``merge_output``) per sub-graph."""
        program = self.spec.program
        pieces = {name: [] for name, _ in columns}
        for k in range(view.bundle.num_subgraphs):
            sg = view.subgraph(k)
            sg.state = state.states[k]
            try:
                values = getattr(program, method)(sg)
                _check_lengths(values, pieces, sg.num_vertices)
            except Exception as exc:
                raise GopherProgramError(
                    f"{type(program).__name__}.{method} failed on sub-graph {sg.id} (partition {p}): "
                    f"{exc!r}\n{traceback.format_exc()}") from exc
            for name in pieces:
                pieces[name].append(values[name])
        return pieces

    # checkpoints and records ------------------------------------------------------
    def export_partition(self, p: int) -> bytes:
        """Partition ``p``'s lane states and pending messages as one blob."""
        run = self.partitions[p]
        return codec.dumps((run.lanes, run.inbox, run.ahead))

    def import_partition(self, p: int, blob: bytes) -> None:
        run = self.partitions[p]
        run.lanes, run.inbox, run.ahead = codec.loads(blob)


def _check_lengths(values: dict, names, count: int) -> None:
    for name in names:
        if len(values[name]) != count:
            raise InputError(f"column {name!r} has {len(values[name])} values, expected {count}: one value per vertex")


def _where(step: LaneStep) -> str:
    """Where a program failed, for its error message: the instance, if any."""
    return "" if step.instance is None else f"instance {step.instance['id']}, "


def _concat(pieces: list, type_: pa.DataType) -> pa.Array:
    """One column from per-sub-graph pieces: numpy arrays, or pyarrow arrays (list columns, nulls)."""
    if not pieces:
        return pa.array([], type=type_)
    if isinstance(pieces[0], (pa.Array, pa.ChunkedArray)):
        return pa.concat_arrays([p.combine_chunks() if isinstance(p, pa.ChunkedArray) else p
                                 for p in pieces]).cast(type_)
    return files.arrow_array(np.concatenate([np.asarray(p) for p in pieces]), type_)
