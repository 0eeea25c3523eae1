"""Driver-side half of the engine: the one superstep loop behind every run.

A run is a set of *lanes* (see :mod:`gopher.worker`): a single run is one lane;
time-series patterns are planners that hand this loop their lanes. Each
superstep the driver sends the tasks a plan (which lanes run, at which
superstep of which instance, with which aggregates and globals), gathers one
summary per task, reduces the aggregators, runs ``program.master`` and decides
what comes next (:mod:`gopher.lanes`). Where the program has no ``master``, the
resident transport's tasks apply that rule themselves and the driver follows
their summaries. How the plan and the messages travel is the transport's
business:

``resident`` (the default)
    the whole run is one gang-scheduled Spark barrier stage; its tasks load
    their topology once, exchange messages peer to peer over authenticated
    sockets and talk to the driver over the same kind of socket
    (:mod:`gopher.resident`). A superstep costs milliseconds.
``jobs`` (the fallback)
    one Spark job per superstep, state and messages carried as records
    (:mod:`gopher.jobs`); used where a barrier stage cannot run (dynamic
    allocation, fewer slots than tasks) or when asked for.

Both drive the same :class:`gopher.worker.TaskWorker` with the same codec, so
their results are identical. Settings come from the Spark conf:
``spark.goffish.transport`` (``auto``, ``resident``, ``jobs``),
``spark.goffish.tasks``, ``spark.goffish.checkpointInterval`` (supersteps),
``spark.goffish.checkpointSeconds``, ``spark.goffish.maxAttempts``,
``spark.goffish.rendezvousTimeout``, ``spark.goffish.maxFrameBytes``,
``spark.goffish.taskCacheBytes``, ``spark.goffish.bundleCacheDir`` (partition
bundles on each executor's local disk, kept across processes; ``off`` to
disable; default a private directory in the temporary directory),
``spark.goffish.bundleCacheBytes``, ``spark.goffish.runDir`` (also where
resident runs write their result rows).
"""
from __future__ import annotations

import copy
import dataclasses
import logging
import os
import re
import sys
import threading
import time
import weakref
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs

from gofs.errors import InputError
from gofs.store import as_store
from gopher import aggregators as agg
from gopher import lanes as schedule
from gopher.cache import DEFAULT_BUDGET, DEFAULT_DISK_BUDGET, DiskCache
from gopher.lanes import Lane
from gopher.messages import combiner_ufunc
from gopher.metrics import RunMetrics, SuperstepMetrics
from gopher.program import SubgraphProgram
from gopher.resident import LazyFrame, ResultFiles, prepare_result_reads
from gopher.worker import MERGED, GopherProgramError, RunSpec
from sparkshim.compat import settings_before_sql_state

log = logging.getLogger("gopher")

__all__ = ["RunResult", "EngineOptions", "run_program", "Lane", "execute", "GopherProgramError", "MERGED"]


@dataclass(frozen=True)
class EngineOptions:
    """How a run executes, not what it computes: one typed object that every algorithm passes
    through to :func:`run_program` (see its parameters). ``instance`` is for single runs;
    time-series runs select ``instances=``/``time=`` themselves."""

    spark: object = None
    transport: str | None = None
    checkpoint_interval: int | None = None
    checkpoint_seconds: float | None = None
    progress: object = None
    tasks: int | None = None
    instance: int | None = None

    @classmethod
    def merged(cls, options: "EngineOptions | None", loose: dict, where: str) -> "EngineOptions":
        """``options`` with loose keyword options on top; an unknown keyword is named in the error."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(loose) - names)
        if unknown:
            raise TypeError(f"{where}() got an unexpected keyword argument {unknown[0]!r} "
                            f"(engine options: {', '.join(sorted(names))})")
        return dataclasses.replace(options or cls(), **loose)

    def as_kwargs(self) -> dict:
        """The options that are set, as keyword arguments."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}


class _Frame:
    """``RunResult.dataframe``: a DataFrame, or a run's :class:`gopher.resident.LazyFrame`,
    made into its DataFrame when first read (a required dataclass field all the same)."""

    def __get__(self, result, owner=None):
        if result is None:
            raise AttributeError("dataframe")          # no class-level default
        frame = result.__dict__["_dataframe"]
        return frame.get() if isinstance(frame, LazyFrame) else frame

    def __set__(self, result, frame) -> None:
        result.__dict__["_dataframe"] = frame


@dataclass
class RunResult:
    """Per-vertex results (a DataFrame keyed by original ``id``), metrics, final aggregates."""

    dataframe: object = _Frame()   # a descriptor, not a default: the field is required
    metrics: RunMetrics
    aggregated: dict
    _cached = None              # what holds the rows behind ``dataframe`` (set by the engine, not a field)
    _direct = None              # (what ``dataframe`` was set to, a reader of its rows from the run's result
                                # files, their Arrow schema), set by the engine

    def unpersist(self) -> None:
        """Free the result rows (the DataFrame cannot be read afterwards)."""
        if self._cached is not None:
            self._cached.unpersist()

    def write_parquet(self, path: str, overwrite: bool = False) -> None:
        """Write the result rows to ``path`` as ``dataframe.write.parquet`` would (mode overwrite,
        else errorifexists). A single run's rows are already Parquet files in their final shape:
        they are copied and committed by one rename (:meth:`gopher.resident.ResultFiles.copy_to`),
        with no Spark job (in a fresh process that job, the session's SQL state and Spark's Parquet
        source cost ~1 s quiet: the CLI's ``goffish run --out``), where ``path`` is on a file system
        that renames a directory in one step (a local disk, HDFS); other rows, and other file
        systems (an object store), go through the writer."""
        from gofs.layout import filesystem

        renames = isinstance(filesystem(path)[0], (pafs.LocalFileSystem, pafs.HadoopFileSystem))
        if renames and self._direct is not None and self._direct[0] is self.__dict__["_dataframe"]:
            self._cached.copy_to(path, overwrite)
        else:
            self.dataframe.write.mode("overwrite" if overwrite else "errorifexists").parquet(path)

    def to_arrow(self, columns: list[str] | None = None) -> pa.Table:
        """The result rows in this process as an Arrow table: ``columns`` of ``dataframe`` (default
        all), with its types.

        A caller that wants the rows here anyway (NetworkX's dicts and sets, a plot) gets the
        run's result files read straight by pyarrow, one scan and no Spark job (nor the
        DataFrame, if not made yet); a result whose rows are elsewhere (a cached frame, a frame
        made from the result) is collected.
        """
        from sparkshim.compat import collect_arrow

        if self._direct is not None and self._direct[0] is self.__dict__["_dataframe"]:
            _, read, schema = self._direct
            names = list(columns or schema.names)
            if set(names) <= set(schema.names):
                return read(names).cast(pa.schema([schema.field(name) for name in names]))
        frame = self.dataframe.select(*columns) if columns else self.dataframe
        return collect_arrow(frame)


@dataclass
class Table:
    """One per-vertex result table: which program method makes it, its columns, and which
    lanes it covers ({lane key: instance}; None: every lane, at the instance it ended on)."""

    method: str                  # "output" or "merge_output"
    columns: dict                # {name: pyarrow type}
    per_instance: bool
    lanes: dict | None = None


#: the Spark settings a run reads besides its own ``spark.goffish.*`` ones
SPARK_KEYS = ("spark.master", "spark.task.cpus", "spark.executor.instances", "spark.executor.cores",
              "spark.dynamicAllocation.enabled", "spark.authenticate",
              "spark.network.crypto.enabled", "spark.driver.host", "spark.driver.bindAddress")
GOFFISH_KEYS = ("tasks", "checkpointInterval", "checkpointSeconds", "transport", "maxAttempts", "rendezvousTimeout",
                "maxFrameBytes", "taskCacheBytes", "bundleCacheDir", "bundleCacheBytes", "runDir")


_FIXED_SETTINGS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # SparkContext -> its SPARK_KEYS


def read_settings(spark) -> tuple[dict, bool]:
    """The settings a run reads, one key at a time from the session's runtime conf: a
    ``SparkContext.getConf()`` copies the whole conf over Py4J (hundreds of round trips), five
    of which once cost a warm run more than its superstep. :data:`SPARK_KEYS` are Spark's own,
    fixed once its context starts (``spark.conf.set`` refuses them), so they are read once per
    SparkContext; the ``spark.goffish.*`` ones may change between runs and are read each run.
    Where the session has not built its SQL state yet (a fresh process's first run), they are
    read without it: a run does not wait for it (~0.5 s). Returns (settings, whether that state
    is still to be built)."""
    fixed = _FIXED_SETTINGS.get(spark.sparkContext)
    keys = (SPARK_KEYS if fixed is None else ()) + tuple(f"spark.goffish.{key}" for key in GOFFISH_KEYS)
    values = settings_before_sql_state(spark, keys)
    pending = values is not None
    if not pending:
        conf = spark.conf
        values = {key: conf.get(key, None) for key in keys}
    if fixed is None:
        fixed = _FIXED_SETTINGS[spark.sparkContext] = {key: values[key] for key in SPARK_KEYS}
    values.update(fixed)
    return {key: value for key, value in values.items() if value not in (None, "")}, pending


def _prepare_reads_meanwhile(spark, options: "Options") -> None:
    """Where the session's SQL state is still to be built and the driver has a core the run's
    tasks leave free (a cluster's tasks run elsewhere; a local master may use fewer cores than
    the machine has), build it and Spark's Parquet source on a thread while the stage starts
    (:func:`gopher.resident.prepare_result_reads`): the caller's first read of the results finds
    them ready. Where the tasks fill every core it would only compete with them: measured so (1M road
    CC on local[2] and 2 cores, 10 fresh processes each, alternated, load 6-20), it takes the
    caller's first job 0.4 driver-JVM CPU-s less but costs the run's start ~1.0, and the first run's
    median went from 9.2 to 11.1 s. Preparing more (planning and compiling a count and sum over a
    scan, 3 processes) saved the first job 0.8 CPU-s for 1.7 more before it: the caller's own query
    still runs cold paths, so warming the JVM ahead pays only on an idle core."""
    local_cores = os.cpu_count() or 1
    if options.sql_state_pending and (not options.local or options.tasks < local_cores):
        threading.Thread(target=prepare_result_reads, args=(spark,), daemon=True, name="goffish-prepare-reads").start()


@dataclass
class Options:
    """How a run executes (from arguments, else the Spark conf); ``spark`` holds the Spark
    settings it was resolved from (:func:`read_settings`), for the transports."""

    transport: str
    tasks: int
    checkpoint_interval: int | None
    checkpoint_seconds: float | None
    max_attempts: int
    rendezvous_timeout: float
    max_frame_bytes: int
    cache_bytes: int
    disk_cache: DiskCache | None
    run_dir: str | None
    progress: object            # bool, or a callable given each superstep's progress line
    spark: dict = dataclasses.field(default_factory=dict)
    sql_state_pending: bool = False   # the session has not built its SQL state (read_settings)

    @property
    def local(self) -> bool:
        """Whether the master is local: every task runs on this machine."""
        return self.spark.get("spark.master", "").startswith("local")

    @classmethod
    def resolve(cls, spark, store, transport=None, checkpoint_interval=None, checkpoint_seconds=None,
                progress=None, tasks=None) -> "Options":
        conf, pending = read_settings(spark)

        def setting(key, default, kind=str):
            value = conf.get(f"spark.goffish.{key}")
            return default if value is None else kind(value)

        sc = spark.sparkContext
        if not tasks:
            tasks = setting("tasks", None, int)
            tasks = task_slots(conf, sc) if tasks is None else tasks
        tasks = min(store.num_partitions, tasks)
        interval = checkpoint_interval if checkpoint_interval is not None else setting("checkpointInterval", None, int)
        seconds = checkpoint_seconds if checkpoint_seconds is not None else setting("checkpointSeconds", 30.0, float)
        transport = transport or setting("transport", "auto")
        if transport not in ("auto", "resident", "jobs"):
            raise InputError(f"unknown Gopher transport {transport!r}: use 'auto', 'resident' or 'jobs'")
        bundles = setting("bundleCacheDir", None)
        return cls(transport, max(1, tasks), interval, seconds, setting("maxAttempts", 3, int),
                   setting("rendezvousTimeout", 120.0, float), setting("maxFrameBytes", 1 << 31, int),
                   setting("taskCacheBytes", DEFAULT_BUDGET, int),
                   None if bundles == "off" else DiskCache(bundles, setting("bundleCacheBytes", DEFAULT_DISK_BUDGET, int)),
                   setting("runDir", None) or sc.getCheckpointDir(),
                   sys.stderr.isatty() if progress is None else progress, conf, pending)


def _check_program(program) -> None:
    if not isinstance(program, SubgraphProgram):
        raise TypeError(f"program must be a gopher.program.SubgraphProgram, got {type(program).__name__}")


def _check_engine_arguments(tasks, checkpoint_interval, checkpoint_seconds) -> None:
    """Engine options given as arguments: None (the Spark conf's setting) or a sensible value."""
    def integer(x):
        return isinstance(x, (int, np.integer)) and not isinstance(x, bool)

    if tasks is not None and not (integer(tasks) and tasks >= 1):
        raise InputError(f"tasks must be an integer >= 1, got {tasks!r}")
    if checkpoint_interval is not None and not (integer(checkpoint_interval) and checkpoint_interval >= 0):
        raise InputError(f"checkpoint_interval must be an integer >= 0 (0: never), got {checkpoint_interval!r}")
    if checkpoint_seconds is not None and not (isinstance(checkpoint_seconds, (int, float)) and
                                               not isinstance(checkpoint_seconds, bool) and
                                               0 <= checkpoint_seconds < float("inf")):
        raise InputError(f"checkpoint_seconds must be a finite number >= 0 (0: never), got {checkpoint_seconds!r}")


def task_slots(conf: dict, sc=None) -> int:
    """How many tasks the cluster runs at once: what a barrier stage may ask for.

    ``conf``: Spark settings (:func:`read_settings`). From the master URL for local and
    local-cluster masters; on a cluster from ``spark.executor.instances`` x
    ``spark.executor.cores`` where both are set, else the default parallelism (``sc``'s).
    """
    per_task = int(conf.get("spark.task.cpus", "1"))
    master = conf.get("spark.master", "")
    local = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?", master)
    if local:
        cores = 1 if local.group(1) is None else (os.cpu_count() or 1) if local.group(1) == "*" else int(local.group(1))
        return max(1, cores // per_task)
    cluster = re.fullmatch(r"local-cluster\[\s*(\d+)\s*,\s*(\d+)\s*,\s*\d+\s*\]", master)
    if cluster:
        return max(1, int(cluster.group(1)) * (int(cluster.group(2)) // per_task))
    instances, cores = conf.get("spark.executor.instances"), conf.get("spark.executor.cores")
    if instances and cores:
        return max(1, int(instances) * (int(cores) // per_task))
    return sc.defaultParallelism


def _choose_transport(spark, options: Options) -> str:
    """The resident barrier stage where it can run; otherwise the job-per-superstep fallback, saying why."""
    if options.transport != "auto":
        return options.transport
    if options.spark.get("spark.dynamicAllocation.enabled", "false").lower() == "true":
        log.warning("gopher: dynamic allocation is on, so a run cannot be one barrier stage; "
                    "running one Spark job per superstep instead")
        return "jobs"
    slots = task_slots(options.spark, spark.sparkContext)
    if options.tasks > slots:
        log.warning("gopher: %d tasks need more slots than the %d the cluster has; running one Spark job per "
                    "superstep instead", options.tasks, slots)
        return "jobs"
    return "resident"


def _open_transport(kind: str, spark, spec: RunSpec, options: Options, schema: pa.Schema):
    if kind == "resident":
        from gopher.resident import ResidentTransport

        return ResidentTransport(spark, spec, options, schema)
    from gopher.jobs import JobTransport

    return JobTransport(spark, spec, options, schema)


class _Driver:
    """The superstep loop over lanes: plans, summaries, master, checkpoints, restarts."""

    def __init__(self, program, lanes: list[Lane], window: int, max_supersteps: int, metrics: RunMetrics,
                 options: Options):
        self.program, self.lanes, self.window = program, lanes, max(1, window)
        self.max_supersteps, self.metrics, self.options = max_supersteps, metrics, options
        self.specs = {name: agg.resolve(spec) for name, spec in program.aggregators.items()}
        self.superstep = 0
        self.files: set = set()
        self.checkpoints: dict = {}          # superstep -> driver state, once every task has confirmed it
        self._pending: dict = {}             # superstep -> driver state, asked for but not yet confirmed
        self._last_checkpoint = time.perf_counter()

    def plan(self) -> dict:
        return schedule.plan(self.lanes, self.window)

    def _checkpoint_at(self) -> int | None:
        """The superstep about to start, if it starts by saving the run's state (recorded as pending)."""
        o, now = self.options, time.perf_counter()
        if not schedule.checkpoint_due(self.superstep, o.checkpoint_interval, o.checkpoint_seconds,
                                       now - self._last_checkpoint):
            return None
        self._pending[self.superstep] = self._state()
        self._last_checkpoint = now
        return self.superstep

    def run(self, transport) -> None:
        """The supersteps. Where the transport's tasks can go on by themselves and the program has
        no ``master``, the driver starts them once (and again after a restart) and then only
        follows their summaries: the tasks apply :mod:`gopher.lanes`'s rule to the reports they
        exchange with their messages, so a superstep costs no round trip through the driver."""
        ahead = getattr(transport, "runs_ahead", False) and schedule.runs_ahead(self.program)
        going = False                        # the tasks are going on by themselves
        while True:
            plan = self.plan()
            if not plan:
                return
            checkpoint = None if going else self._checkpoint_at()
            clock = time.perf_counter()
            if ahead:
                going = going or transport.go_ahead(self.superstep, self.lanes, self.window, self.max_supersteps,
                                                    checkpoint)
                summaries = transport.summaries() if going else None
            else:
                summaries = transport.superstep(self.superstep, plan, checkpoint)
            if summaries is None:            # tasks were lost: resume from the last confirmed checkpoint
                going = False
                self._restart(transport)
                continue
            if going:                        # the tasks timed the superstep and chose its checkpoints
                if summaries[0]["checkpointed"] == self.superstep:
                    self._pending[self.superstep] = self._state()
                self._finish(plan, summaries, max(s["seconds"] for s in summaries))
                if any(s["going"] != bool(self.plan()) for s in summaries):
                    raise RuntimeError(f"gopher: the run's tasks and its driver disagree on whether superstep "
                                       f"{self.superstep} runs (a non-deterministic aggregator?)")
            else:
                self._finish(plan, summaries, time.perf_counter() - clock)

    def _finish(self, plan: dict, summaries: list, seconds: float) -> None:
        for s in summaries:
            self.files.update(s.get("files", ()))
        confirmed = {s.get("checkpointed") for s in summaries}
        if len(confirmed) == 1 and (step := confirmed.pop()) in self._pending:
            self.checkpoints = {step: self._pending.pop(step)}
        reports = schedule.finish(self.lanes, plan, [s["lanes"] for s in summaries], self.specs, self.program,
                                  self.metrics, self.max_supersteps)
        all_reports = [r for rs in reports.values() for r in rs]
        instance = None
        if len(plan) == 1:
            step = next(iter(plan.values()))
            instance = None if step.instance is None else step.instance["id"]
        metrics = SuperstepMetrics(self.superstep, seconds, sum(r["active"] for r in all_reports),
                                   sum(r["sent"] + r["forward"] for r in all_reports),
                                   sum(s["bytes"] for s in summaries),
                                   max((s["compute_seconds"] for s in summaries), default=0.0),
                                   max((s.get("exchange_seconds", 0.0) for s in summaries), default=0.0), instance)
        self.metrics.supersteps.append(metrics)
        if self.options.progress:
            lanes = f"{len(plan)} lanes, " if len(plan) > 1 else ""
            line = (f"[gopher] {self.metrics.program} superstep {self.superstep}: {lanes}"
                    f"{metrics.active_subgraphs} active sub-graphs, {metrics.messages} messages, "
                    f"{metrics.seconds * 1e3:.1f} ms")
            if callable(self.options.progress):
                self.options.progress(line)
            else:
                print(line, file=sys.stderr)
        self.superstep += 1

    def _state(self) -> dict:
        return {"lanes": copy.deepcopy(self.lanes), "superstep": self.superstep,
                "recorded": len(self.metrics.supersteps)}

    def _restart(self, transport) -> None:
        self.metrics.attempts += 1
        if self.metrics.attempts > self.options.max_attempts:
            raise RuntimeError(f"gopher: the run's tasks were lost {self.metrics.attempts - 1} times; giving up "
                               f"(spark.goffish.maxAttempts = {self.options.max_attempts})")
        self._pending.clear()
        if self.checkpoints:
            step, state = next(iter(self.checkpoints.items()))
            self.lanes[:] = copy.deepcopy(state["lanes"])
            self.superstep = state["superstep"]
            del self.metrics.supersteps[state["recorded"]:]
            log.warning("gopher: tasks lost; resuming from the checkpoint of superstep %d", step)
        else:
            step = None
            for lane in self.lanes:
                lane.__init__(lane.key, lane.instances, lane.index, lane.count, lane.sequential, lane.globals0)
            self.superstep = 0
            self.metrics.supersteps.clear()
            log.warning("gopher: tasks lost before any checkpoint; starting the run again")
        self.metrics.resumed_from.append(step)
        transport.restart(step)


def _in_final_shape(tables: list[Table]) -> bool:
    """Whether the result files hold the tables' rows in their final shape (see :func:`_output_schema`)."""
    return len(tables) == 1 and not {"table", "instance", "id"} & set(tables[0].columns)


def _output_schema(store, tables: list[Table]) -> tuple[pa.Schema, list]:
    """One Arrow schema for every table's rows, and each table's (name, physical column) pairs.

    Several tables share the rows: ``table``, ``instance``, ``id``, then each table's columns
    as ``t<number>_<name>``; the engine splits them with a filter. One table (a single run)
    has its final shape already (``instance`` only if per instance, ``id``, its columns by
    name), so its DataFrame is the plain scan of the files: nothing for Spark to plan or
    generate code for before the caller's first job."""
    keys = [pa.field("instance", pa.int64()), pa.field("id", store.id_type)]
    if _in_final_shape(tables):
        table = tables[0]
        fields = keys[0 if table.per_instance else 1:]
        return pa.schema(fields + [pa.field(name, kind) for name, kind in table.columns.items()]), \
            [[(name, name) for name in table.columns]]
    fields = [pa.field("table", pa.int8()), *keys]
    columns = []
    for number, table in enumerate(tables):
        pairs = [(name, f"t{number}_{name}") for name in table.columns]
        fields += [pa.field(physical, table.columns[name]) for name, physical in pairs]
        columns.append(pairs)
    return pa.schema(fields), columns


def _record_phases(metrics: RunMetrics, at_start: dict, phases: dict) -> None:
    """The phases the transport timed (``at_start``: those of its set-up; ``phases``: all of
    them, restarts included); ``submit`` and ``handoff`` are the rest of the set-up and of the
    output, so the phases add up to ``setup_seconds`` and ``output_seconds``."""
    metrics.add_phase("submit", metrics.setup_seconds - sum(at_start.values()))
    for name, seconds in phases.items():
        metrics.add_phase(name, seconds)
    metrics.add_phase("handoff", metrics.output_seconds - metrics.phases.get("merge", 0.0)
                      - metrics.phases.get("rows", 0.0))


def execute(store, program, lanes: list[Lane], tables: list[Table], *, window: int | None = None,
            max_supersteps: int = 1000, merge: bool = False, spark=None, transport: str | None = None,
            checkpoint_interval: int | None = None, checkpoint_seconds: float | None = None,
            progress: bool | None = None, tasks: int | None = None, lazy: bool = False):
    """Run ``lanes`` of ``program`` to the end, then the Merge step if asked, then the result tables.

    At most ``window`` lanes run in the same superstep (default: all). Returns
    ([DataFrame per table, None for a table without columns], metrics, merged
    aggregates, what holds the result rows (its ``unpersist()`` frees them), files read).
    ``lazy``: a table whose rows are the result files as written may come back as the
    :class:`gopher.resident.LazyFrame` that makes its DataFrame.
    """
    _check_program(program)
    if isinstance(max_supersteps, bool) or not isinstance(max_supersteps, (int, np.integer)) or max_supersteps < 1:
        raise InputError(f"max_supersteps must be an integer >= 1, got {max_supersteps!r}")
    _check_engine_arguments(tasks, checkpoint_interval, checkpoint_seconds)
    combiner_ufunc(program.combiner)              # bad settings fail here, before any work
    store = as_store(store)                       # what tasks get: the store, never a user's handle
    spark = spark or store.spark
    options = Options.resolve(spark, store, transport, checkpoint_interval, checkpoint_seconds, progress, tasks)
    _prepare_reads_meanwhile(spark, options)
    metrics = RunMetrics(type(program).__name__)
    clock = time.perf_counter()
    spec = RunSpec(store, program, options.tasks,
                   np.array([p["vertex_offset"] for p in store.partitions] + [store.num_vertices]),
                   np.array([p["subgraph_offset"] for p in store.partitions] + [store.num_subgraphs]),
                   options.cache_bytes, options.disk_cache)
    metrics.transport = _choose_transport(spark, options)
    wanted = [t for t in tables if t.columns]
    schema, columns = _output_schema(store, wanted)
    driver = _Driver(program, lanes, window or len(lanes), max_supersteps, metrics, options)
    merged_aggregated: dict = {}
    with _open_transport(metrics.transport, spark, spec, options, schema) as session:
        metrics.setup_seconds = time.perf_counter() - clock
        at_start = dict(getattr(session, "phases", {}))
        driver.run(session)
        clock = time.perf_counter()
        if merge:
            partials = session.merge({lane.key: lane.instance for lane in lanes})
            merged_aggregated = {name: driver.specs[name].reduce([p[name] for p in partials if name in p])
                                 for name in driver.specs}
            metrics.add_phase("merge", time.perf_counter() - clock)
        layouts = [(number, {lane.key: lane.instance for lane in lanes} if table.lanes is None else table.lanes,
                    table.method, pairs, table.per_instance)
                   for number, (table, pairs) in enumerate(zip(wanted, columns))]
        cached = session.output(layouts, schema) if wanted else None
        release = getattr(session, "results", None) if wanted else None   # what frees the result rows
        metrics.output_seconds = time.perf_counter() - clock
    _record_phases(metrics, at_start, getattr(session, "phases", {}))
    frames, number = [], 0
    for table in tables:
        if not table.columns:
            frames.append(None)
            continue
        if isinstance(cached, LazyFrame) and not (lazy and "table" not in schema.names):
            cached = cached.get()
        if "table" not in schema.names:         # the one table: the rows as they are
            frames.append(cached)
            continue
        keys = (["instance"] if table.per_instance else []) + ["id"]
        frames.append(cached.filter(cached["table"] == number).select(
            *keys, *[cached[physical].alias(name) for name, physical in columns[number]]))
        number += 1
    return frames, metrics, merged_aggregated, release or cached, sorted(driver.files)


def run_program(store, program, max_supersteps: int = 1000, spark=None, transport: str | None = None,
                checkpoint_interval: int | None = None, checkpoint_seconds: float | None = None,
                progress=None, tasks: int | None = None, instance: int | None = None) -> RunResult:
    """Run a sub-graph program on a stored graph and return per-vertex results and metrics.

    ``instance``: run on that instance (its id) instead of the template: the program
    sees the instance's topology (edges added and removed) and its attribute values.

    ``transport``: "resident" (one barrier stage), "jobs" (a Spark job per
    superstep) or None (``spark.goffish.transport``, default: resident where
    it can run). ``checkpoint_interval`` / ``checkpoint_seconds``: how often the
    resident run saves its state so lost tasks resume instead of starting over. ``progress``:
    print a line per superstep to stderr (True; default: when stderr is a terminal), or hand
    each line to a callable (the CLI's status line). ``tasks``:
    how many Spark tasks (cores) serve the run (default ``spark.goffish.tasks``, else one
    per slot, at most one per partition).
    """
    _check_program(program)
    if instance is not None and not isinstance(instance, (int, np.integer)):
        raise InputError(f"instance must be one instance id (an int), got {instance!r}")
    selected = None if instance is None else store.select_instances(instance=instance)[0]
    lane = Lane(0, [selected], 0, 1, False, {})
    table = Table("output", dict(program.output_schema), False)
    frames, metrics, _, cached, _ = execute(
        store, program, [lane], [table],
        max_supersteps=max_supersteps, spark=spark, transport=transport, checkpoint_interval=checkpoint_interval,
        checkpoint_seconds=checkpoint_seconds, progress=progress, tasks=tasks, lazy=True)
    result = RunResult(frames[0], metrics, lane.final.get(None, lane.aggregated))
    result._cached = cached
    if isinstance(cached, ResultFiles) and _in_final_shape([table]):
        from sparkshim.compat import arrow_schema, spark_schema

        result._direct = (frames[0], cached.read, arrow_schema(spark_schema(cached.schema)))
    return result
