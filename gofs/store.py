"""A handle on a stored GoFS graph: metadata, pruned reads, Spark DataFrames.

Reads go partition by partition through pyarrow (:mod:`gofs.files`), opening
only the template and instance files of the selected partitions and instances,
and only the requested columns. Spark DataFrames are built with ``mapInArrow``
over one task per partition, so the same pruning holds on a cluster.
"""
from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa          # pyarrow.compute (~60 ms) is imported where used: a fresh Python worker imports this module

from gofs import files, layout, manifest as manifest_io, vids as vid_space
from gofs.errors import InputError, ManifestError

_EDGE_KEYS = ("eid", "src", "dst", "remote", "mirror", "dst_part", "dst_sg")


def as_store(graph) -> "GraphStore":
    """The :class:`GraphStore` behind ``graph``: a store itself, or the one a handle has
    (``goffish.Graph.store``). What Spark tasks get is always the store, never the handle."""
    store = getattr(graph, "store", graph)
    if not isinstance(store, GraphStore):
        raise InputError(f"expected a GoFS graph (goffish.open(path)), got a {type(graph).__name__}")
    return store


class GraphStore:
    """Read access to the GoFS graph at ``path``."""

    def __init__(self, path: str, spark=None):
        self.path = path
        self.fs, self.graph_root = layout.filesystem(path)
        self._load(manifest_io.read(self.fs, self.graph_root))
        self._spark = spark

    def _load(self, snapshot: manifest_io.Snapshot) -> None:
        self.manifest = snapshot.manifest
        self.version = snapshot.version
        self.head = snapshot.head
        self.root = layout.version_root(self.graph_root, snapshot.version)   # where the files of this version are
        self._instance_types = _instance_types(self.path, self.manifest)
        self._static_types = _static_types(self.path, self.manifest)

    def __getstate__(self):
        """What a Spark task gets: the graph metadata and how many instances it had, not the
        instance list (a task that asks for ``instances`` reads the log and keeps that many:
        instances are only ever appended, so they are the same ones)."""
        return {"path": self.path, "version": self.version, "head": self.head,
                "num_instances": len(self.manifest["instances"]),
                "manifest": {k: v for k, v in self.manifest.items() if k != "instances"}}

    def __setstate__(self, state):
        self.path = state["path"]
        self.fs, self.graph_root = layout.filesystem(self.path)
        self.version, self.head = state["version"], state["head"]
        self.root = layout.version_root(self.graph_root, self.version)
        self.manifest = _LazyInstances(state["manifest"], self, state["num_instances"])
        self._instance_types = _instance_types(self.path, self.manifest)
        self._static_types = _static_types(self.path, self.manifest)
        self._spark = None

    def refresh(self) -> "GraphStore":
        """Re-read the committed state (after instances were appended)."""
        version = self.version
        self._load(manifest_io.read(self.fs, self.graph_root))
        if self.version != version:
            for name in ("vertex_ids", "_id_index"):
                self.__dict__.pop(name, None)
        return self

    @property
    def spark(self):
        if self._spark is None:
            from pyspark.sql import SparkSession

            self._spark = SparkSession.getActiveSession()
            if self._spark is None:
                raise RuntimeError("no active SparkSession: call goffish.session() first")
        return self._spark

    # metadata -----------------------------------------------------------------
    name = property(lambda self: self.manifest["name"])
    directed = property(lambda self: self.manifest["directed"])
    num_vertices = property(lambda self: self.manifest["num_vertices"])
    num_edges = property(lambda self: self.manifest["num_edges"])
    num_partitions = property(lambda self: self.manifest["num_partitions"])
    partitions = property(lambda self: self.manifest["partitions"])
    instances = property(lambda self: self.manifest["instances"])
    num_subgraphs = property(lambda self: self.manifest["subgraphs"]["count"])
    #: how the original vertex ids are stored: "int64" or "string" (:attr:`id_type` is the Arrow type)
    id_kind = property(lambda self: self.manifest["id_type"])
    #: what identifies this graph's data across processes (cache keys): its uuid, else its version directory
    identity = property(lambda self: self.manifest.get("uuid", self.root))

    def attribute_types(self, kind: str, instance: bool = False) -> dict[str, str]:
        """{name: stored type name} of the static ``kind`` ("vertex" or "edge") attributes, or with
        ``instance`` of the per-instance ones."""
        if kind not in ("vertex", "edge"):
            raise InputError(f"attribute kind must be 'vertex' or 'edge', got {kind!r}")
        fields = self.manifest["instance_schema"][kind] if instance else self.manifest[f"{kind}_schema"]
        return {f["name"]: f["type"] for f in fields}

    @property
    def vertex_attributes(self) -> list[str]:
        return [f["name"] for f in self.manifest["vertex_schema"]]

    @property
    def edge_attributes(self) -> list[str]:
        return [f["name"] for f in self.manifest["edge_schema"]]

    @property
    def instance_vertex_attributes(self) -> list[str]:
        return [f["name"] for f in self.manifest["instance_schema"]["vertex"]]

    @property
    def instance_edge_attributes(self) -> list[str]:
        return [f["name"] for f in self.manifest["instance_schema"]["edge"]]

    def select_instances(self, instance=None, time=None) -> list[dict]:
        """Instances by id (int or list) or by time: a number (the instances covering it)
        or a (start, end) range: every instance whose [start, end) overlaps it (an
        instant instance, start == end, when start lies in the range)."""
        known = self.instances
        if instance is not None and time is not None:
            raise InputError("give either instance or time, not both")
        if instance is not None:
            wanted = [instance] if np.isscalar(instance) else list(instance)
            by_id = {i["id"]: i for i in known}
            missing = [i for i in wanted if i not in by_id]
            if missing:
                raise InputError(f"{self.path}: no instance {missing[0]} (instances: {sorted(by_id)[:10]}...)")
            return [by_id[i] for i in wanted]
        if time is None:
            return []
        if np.isscalar(time):
            found = [i for i in known if i["start"] <= time <= i["end"]]
        else:
            lo, hi = time
            found = [i for i in known if i["start"] < hi and (i["end"] > lo or i["start"] >= lo)]
        if not found:
            raise InputError(f"{self.path}: no instance in time {time}")
        return found

    def _split_attributes(self, attributes, static: list[str], dynamic: list[str], kind: str):
        if attributes is None:
            return list(static), list(dynamic)
        attributes = [attributes] if isinstance(attributes, str) else list(attributes)
        unknown = [a for a in attributes if a not in static and a not in dynamic]
        if unknown:
            raise InputError(f"{self.path}: unknown {kind} attribute '{unknown[0]}' "
                             f"(static: {static}, per instance: {dynamic})")
        return [a for a in attributes if a in static], [a for a in attributes if a in dynamic]

    # partition reads (pyarrow) -------------------------------------------------
    @property
    def id_type(self) -> pa.DataType:
        """Arrow type of the original vertex ids (int64 or string)."""
        return pa.int64() if self.manifest["id_type"] == "int64" else pa.string()

    @functools.cached_property
    def vertex_ids(self) -> pa.Array:
        """Original id of every dense vid (partitions hold contiguous vid ranges).

        O(V) on the caller: for explicit use on graphs that fit; run paths use
        :meth:`vids_of`, :meth:`vertex_id_frame` and per-partition reads instead."""
        chunks = [files.read_columns(self.fs, layout.template_vertices(self.root, p), ["id"]).column("id")
                  for p in range(self.num_partitions)]
        return pa.chunked_array([c for ch in chunks for c in ch.chunks], type=self.id_type).combine_chunks()

    @functools.cached_property
    def _id_index(self):
        import pandas as pd

        return pd.Index(self.vertex_ids.to_numpy(zero_copy_only=False))

    def _vertex_offsets(self) -> np.ndarray:
        """First vid of every partition, then the vertex count."""
        return np.array([q["vertex_offset"] for q in self.partitions] + [self.num_vertices], dtype=np.int64)

    def instance_entry(self, instance) -> dict | None:
        """The manifest entry of instance id ``instance`` (None for None: the template)."""
        return None if instance is None else self.select_instances(instance=instance)[0]

    def vertex_count(self, instance=None) -> int:
        """Vertices of the template, or of instance id ``instance``: the template's and the ones it adds."""
        entry = self.instance_entry(instance)
        return self.num_vertices + (0 if entry is None else (entry.get("topology") or {}).get("added_vertices", 0))

    def added_vertices(self, instance: dict) -> pa.Table | None:
        """(``vid``, ``id``) of the vertices ``instance`` has beyond the template, in vid order
        (None if it adds none; see :mod:`gofs.vids`)."""
        if not (instance.get("topology") or {}).get("added_vertices"):
            return None
        table = files.read_columns(self.fs, layout.instance_added_vertices(self.root, instance["id"]), ["vid", "id"])
        return table.set_column(1, "id", table.column("id").cast(self.id_type))

    def _added_in_partition(self, instance: dict, p: int) -> pa.Table | None:
        added = self.added_vertices(instance)
        if added is None:
            return None
        part = vid_space.partition_of_vids(self._vertex_offsets(), added.column("vid").to_numpy())
        return added.filter(pa.array(part == p))

    def _original_ids(self, vids, added: pa.Table | None = None) -> pa.Array:
        """Original ids of dense ``vids``: of each partition they lie in, only the rows holding
        them are read (streamed, see :func:`gofs.files.read_rows`), so the memory used grows with
        ``len(vids)``, never with the graph. Vids beyond the template are looked up in ``added``
        (an instance's :meth:`added_vertices`)."""
        vids = np.asarray(vids.to_numpy() if hasattr(vids, "to_numpy") else vids, dtype=np.int64)
        if not len(vids):
            return pa.array([], self.id_type)
        if (vids >= self.num_vertices).any():
            beyond = vids >= self.num_vertices
            out = np.empty(len(vids), object)
            out[~beyond] = self._original_ids(vids[~beyond]).to_numpy(zero_copy_only=False)
            known = added.column("vid").to_numpy()
            out[beyond] = added.column("id").to_numpy(zero_copy_only=False)[np.searchsorted(known, vids[beyond])]
            return pa.array(out, self.id_type)
        unique, inverse = np.unique(vids, return_inverse=True)
        offsets = self._vertex_offsets()
        part = np.searchsorted(offsets, unique, side="right") - 1
        bounds = np.flatnonzero(np.r_[True, part[1:] != part[:-1], True])
        pieces = [files.read_rows(self.fs, layout.template_vertices(self.root, int(part[a])), "id",
                                  unique[a:b] - offsets[part[a]]).cast(self.id_type)
                  for a, b in zip(bounds[:-1], bounds[1:])]
        return pa.concat_arrays(pieces).take(pa.array(inverse.ravel()))

    def vids_of(self, vertex_ids, instance: dict | None = None) -> np.ndarray:
        """Dense internal ids of original ``vertex_ids`` (a list or array), in that order.

        The id columns are streamed partition by partition until every id is found, so
        the memory used is that of the answer, never of the id column (no index of all
        ids is built); ids not in the template are looked up among the vertices ``instance``
        adds. Raises InputError naming the first id the graph (or instance) does not have.
        For very many ids, join with :meth:`vertex_id_frame` on Spark instead.
        """
        import pyarrow.compute as pc

        values = list(vertex_ids) if not isinstance(vertex_ids, (np.ndarray, pa.Array)) else vertex_ids
        try:
            keys = pa.array(values, type=self.id_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError, ValueError):
            raise InputError(f"{self.path}: unknown vertex {_first_foreign(values, self.id_type)!r}") from None
        if not len(keys):
            return np.empty(0, np.int64)
        unique = pc.unique(keys)
        found = np.full(len(unique), -1, np.int64)
        for p in range(self.num_partitions):
            left = np.flatnonzero(found < 0)
            if not len(left):
                break
            rows, which = files.find_rows(self.fs, layout.template_vertices(self.root, p), "id",
                                          unique.take(pa.array(left)))
            found[left[which]] = self.partitions[p]["vertex_offset"] + rows
        added = None if instance is None else self.added_vertices(instance)
        if added is not None and (found < 0).any():
            left = np.flatnonzero(found < 0)
            at = pc.index_in(unique.take(pa.array(left)), value_set=added.column("id")).to_numpy(zero_copy_only=False)
            hit = ~np.isnan(at.astype(float))
            found[left[hit]] = added.column("vid").to_numpy()[at[hit].astype(np.int64)]
        missing = np.flatnonzero(found < 0)
        if len(missing):
            raise InputError(f"{self.path}: unknown vertex {unique[int(missing[0])].as_py()!r}")
        return found[pc.index_in(keys, value_set=unique).to_numpy(zero_copy_only=False).astype(np.int64)]

    def vid_of(self, vertex_id, instance: dict | None = None) -> int:
        """The dense internal id of an original vertex id (see :meth:`vids_of`)."""
        return int(self.vids_of([vertex_id], instance)[0])

    def _instance_columns(self, kind: str, inst: dict, p: int, static: list[str], dynamic: list[str],
                          rows: int) -> dict:
        """Instance ``inst``'s columns of partition ``p``: each of ``dynamic`` (null where the
        instance has none) and those of ``static`` it overrides (:func:`gofs.manifest.overridden`),
        which replace the template's."""
        stored = manifest_io.stored_columns(inst, kind)
        shadowed = [a for a in static if a in stored]
        have = [a for a in dynamic if a in stored] + shadowed
        table = None
        if have:
            path = (layout.instance_vertices if kind == "vertex" else layout.instance_edges)(self.root, inst["id"], p)
            table = files.read_columns(self.fs, path, have)
        types = {**self._instance_types[kind], **{a: self._static_types[kind][a] for a in shadowed}}
        out = {}
        for a in [*dynamic, *shadowed]:
            # the schema is the truth: Parquet stores some types in a wider form (date64 as date32)
            out[a] = table.column(a).cast(types[a]) if table is not None and a in have else pa.nulls(rows, type=types[a])
        return out


    def read_vertex_partition(self, p: int, attributes=None, instance=None, time=None,
                              internal: bool = False) -> pa.Table:
        """Vertices of partition ``p``: ``id``, requested static attributes and, per selected
        instance, ``instance``/``start``/``end`` and the instance attributes."""
        static, dynamic = self._split_attributes(attributes, self.vertex_attributes,
                                                 self.instance_vertex_attributes, "vertex")
        selected = self.select_instances(instance, time)
        keys = ["vid", "id", "sg"] if internal else ["id"]
        base = _typed(files.read_columns(self.fs, layout.template_vertices(self.root, p), keys + static),
                      self._static_types["vertex"])
        if not selected:
            return base
        tables = []
        for inst in selected:
            rows = self._with_added_vertices(base, inst, p)
            tables.append(_with_instance(rows, inst, self._instance_columns("vertex", inst, p, static, dynamic,
                                                                            rows.num_rows)))
        return pa.concat_tables(tables)

    def _with_added_vertices(self, base: pa.Table, inst: dict, p: int) -> pa.Table:
        """``base`` (template vertex rows of ``p``) and the rows of the vertices ``inst`` adds in
        ``p``, in the order of the instance's value files; static attributes are null for them."""
        added = self._added_in_partition(inst, p)
        if added is None or not added.num_rows:
            return base
        extra = {"vid": added.column("vid"), "id": added.column("id"),
                 "sg": pa.array(np.full(added.num_rows, self.manifest["subgraphs"]["count"] + p, np.int64))}
        return pa.concat_tables([base, pa.table({f.name: extra[f.name].cast(f.type) if f.name in extra
                                                 else pa.nulls(added.num_rows, f.type) for f in base.schema})])

    def read_edge_partition(self, p: int, attributes=None, instance=None, time=None,
                            internal: bool = False) -> pa.Table:
        """Edges stored with partition ``p`` (each input edge once, in its source's partition):
        ``src``/``dst`` original ids, requested attributes, per selected instance as for vertices.
        ``internal=True`` keeps dense ids and the mirror rows of remote edges instead.

        Original ids come from this partition's id column and, for remote ends, from only
        the rows of the other partitions' id columns that hold them: memory stays
        O(this partition), whatever the graph's size."""
        import pyarrow.compute as pc

        static, dynamic = self._split_attributes(attributes, self.edge_attributes,
                                                 self.instance_edge_attributes, "edge")
        selected = self.select_instances(instance, time)
        keys = list(_EDGE_KEYS) if internal else ["eid", "src", "dst", "mirror"]
        base = _typed(files.read_columns(self.fs, layout.template_edges(self.root, p), keys + static),
                      self._static_types["edge"])
        if internal:
            if not selected:
                return base
            return pa.concat_tables([_with_instance(base, inst, self._instance_columns("edge", inst, p, static, dynamic,
                                                                                          base.num_rows))
                                     for inst in selected])
        keep = pc.invert(base.column("mirror").combine_chunks())
        kept = base.filter(keep)
        external = pa.table({**_original_pair(self, kept.column("src"), kept.column("dst")),
                             **{c: kept.column(c) for c in static}})
        if not selected:
            return external
        tables = []
        for inst in selected:
            columns = self._instance_columns("edge", inst, p, static, dynamic, base.num_rows)
            table = _with_instance(external, inst, {c: v.filter(keep) for c, v in columns.items()})
            if inst.get("topology"):
                table = self._apply_topology(table, inst, p, kept.column("eid"))
            tables.append(table)
        return pa.concat_tables(tables)

    def _apply_topology(self, table, inst, p, eids):
        """Drop the instance's removed edges (``eids``: the eid of each row of ``table``); add its
        added edges (those whose source is in ``p``)."""
        import pyarrow.compute as pc

        removed, mine = self._topology_changes(inst, p)
        if len(removed):
            table = table.filter(pc.invert(pc.is_in(eids, value_set=removed)))
        if mine is not None:
            cols = _original_pair(self, mine.column("add_src"), mine.column("add_dst"), self.added_vertices(inst))
            for c in table.column_names[2:]:
                if c in mine.column_names:
                    cols[c] = mine.column(c).cast(table.schema.field(c).type)
                elif c in ("instance", "start", "end"):
                    cols[c] = pa.array([inst["id" if c == "instance" else c]] * mine.num_rows, table.schema.field(c).type)
                else:
                    cols[c] = pa.nulls(mine.num_rows, table.schema.field(c).type)
            table = pa.concat_tables([table, pa.table(cols)])
        return table

    def _topology_changes(self, inst: dict, p: int):
        """(eids of the edges instance ``inst`` removes, the edges it adds whose source is in
        partition ``p`` or None if it adds none)."""
        import pyarrow.compute as pc

        changes = files.read_columns(self.fs, layout.instance_topology(self.root, inst["id"]), None)
        removed = changes.filter(pc.equal(changes.column("op"), "remove")).column("eid").combine_chunks()
        added = changes.filter(pc.equal(changes.column("op"), "add"))
        if not added.num_rows:
            return removed, None
        source_part = vid_space.partition_of_vids(self._vertex_offsets(), added.column("add_src").to_numpy())
        return removed, added.filter(pa.array(source_part == p))

    # Spark DataFrames -------------------------------------------------------------
    def _dataframe(self, method: str, partitions, **kw):
        parts = list(range(self.num_partitions)) if partitions is None else list(partitions)
        store = GraphStore.__new__(GraphStore)
        store.__setstate__(self.__getstate__())
        sample = getattr(self, method)(_smallest(self, parts), **kw).schema
        from sparkshim.compat import forgets_zip_importers, spark_schema

        @forgets_zip_importers
        def read(batches):
            for batch in batches:
                for p in batch.column(0).to_pylist():
                    table = getattr(store, method)(p, **kw).cast(sample)
                    yield from table.to_batches()

        seeds = self.spark.createDataFrame([(p,) for p in parts], "p int").repartition(max(len(parts), 1))
        return seeds.mapInArrow(read, spark_schema(sample))

    def vertices(self, attributes=None, instance=None, time=None, partitions=None):
        """Vertices as a Spark DataFrame (``id`` first), optionally with instance values."""
        return self._dataframe("read_vertex_partition", partitions, attributes=attributes,
                               instance=instance, time=time)

    def edges(self, attributes=None, instance=None, time=None, partitions=None):
        """Edges as a Spark DataFrame (``src``, ``dst`` first), optionally with instance values."""
        return self._dataframe("read_edge_partition", partitions, attributes=attributes,
                               instance=instance, time=time)

    def vertex_id_frame(self, partitions=None):
        """(``vid``, ``id``) of every vertex as a Spark DataFrame, one task per partition: join
        with it to turn dense ids into original ones (or back) without the driver holding them."""
        return self._dataframe("read_vertex_partition", partitions, attributes=[], internal=True).select("vid", "id")

    def edge_attribute_profile(self, attribute: str, partitions=None, instance=None) -> list[dict]:
        """Per partition, computed on Spark (one task each, a plain RDD job; the driver gets one small row per
        partition): how many values of the numeric static edge ``attribute`` are null, NaN,
        negative, zero, infinite or not whole numbers, their min and max (as text), and for each of those
        problems the first edge that has it (``"src -> dst"``, original ids). With ``instance`` (an
        id), the edges of that instance: the template's it keeps and the ones it adds.

        Algorithms validate weights with it before a run without reading a column on the driver.
        A versioned graph never changes, so its profiles are kept in this process: only the first
        run with a weight pays the Spark job.
        """
        if attribute not in self.edge_attributes:
            raise InputError(f"{self.path}: no edge attribute '{attribute}' (edge attributes: {self.edge_attributes})")
        kind = self._static_types["edge"][attribute]
        if not (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
            raise InputError(f"{self.path}: edge attribute '{attribute}' is {kind}, not a number")
        parts = list(range(self.num_partitions)) if partitions is None else list(partitions)
        key = (self.manifest["uuid"], self.root, attribute, instance, tuple(parts)) if "uuid" in self.manifest else None
        if key in _PROFILES:
            return [dict(row) for row in _PROFILES[key]]
        entry = self.instance_entry(instance)
        store = GraphStore.__new__(GraphStore)
        store.__setstate__(self.__getstate__())

        # a plain RDD job, one task per partition: a query would build the session's SQL state and
        # plan (seconds in a fresh JVM, before the run it guards), and would start Python workers
        # of its own where the run's barrier stage reuses these
        found = self.spark.sparkContext.parallelize(parts, max(len(parts), 1)).map(
            lambda p: _profile_partition(store, p, attribute, entry)).collect()
        rows = sorted(pa.RecordBatch.from_pylist(found, schema=_PROFILE).to_pylist(), key=lambda r: r["partition"])
        if key is not None:
            while len(_PROFILES) >= _PROFILES_KEPT:
                del _PROFILES[next(iter(_PROFILES))]
            _PROFILES[key] = [dict(row) for row in rows]
        return rows

    def to_graphframe(self, vertex_attributes=None, edge_attributes=None, instance=None, time=None):
        """A GraphFrame of the template (or of one instance); needs the GraphFrames jar."""
        from sparkshim.graphframes import require_graphframes

        return require_graphframes()(self.vertices(vertex_attributes, instance, time),
                          self.edges(edge_attributes, instance, time))

    # tables about sub-graphs -----------------------------------------------------
    def subgraph_table(self) -> pa.Table:
        return files.read_columns(self.fs, layout.join(self.root, "template", "subgraphs.parquet"), None)

    def metagraph_table(self) -> pa.Table:
        return files.read_columns(self.fs, layout.join(self.root, "template", "metagraph.parquet"), None)


def _original_pair(store: GraphStore, src, dst, added: pa.Table | None = None) -> dict:
    """{"src", "dst"}: original ids of two dense id columns, read with one pass over each id file."""
    ends = store._original_ids(np.concatenate([np.asarray(src, np.int64), np.asarray(dst, np.int64)]), added)
    return {"src": ends.slice(0, len(src)), "dst": ends.slice(len(src))}


def _first_foreign(values, id_type: pa.DataType):
    """The first of ``values`` that is not an id of ``id_type`` (for the error message)."""
    for value in values:
        try:
            pa.array([value], type=id_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError, ValueError):
            return value
    return values[0] if len(values) else None


_PROBLEMS = ("null", "nan", "negative", "zero", "infinite", "fractional")
_PROFILES: dict = {}            # (uuid, version root, attribute, instance, partitions) -> profile rows
_PROFILES_KEPT = 256
_PROFILE = pa.schema([("partition", pa.int32()), ("rows", pa.int64()), ("min", pa.string()), ("max", pa.string())]
                     + [(f"{k}s", pa.int64()) for k in _PROBLEMS] + [(f"{k}_example", pa.string()) for k in _PROBLEMS])


def _profile_partition(store: GraphStore, p: int, attribute: str, inst: dict | None = None) -> dict:
    """One row of :meth:`GraphStore.edge_attribute_profile` (each input edge once: no mirror rows)."""
    import pyarrow.compute as pc

    table = files.read_columns(store.fs, layout.template_edges(store.root, p), ["eid", "src", "dst", "mirror", attribute])
    if inst is not None and attribute in manifest_io.overridden(inst, "edge"):
        shadow = store._instance_columns("edge", inst, p, [attribute], [], table.num_rows)[attribute]
        table = table.set_column(table.column_names.index(attribute), attribute, shadow)
    table = table.filter(pc.invert(table.column("mirror")))
    added_vertices = None
    if inst is not None and inst.get("topology"):
        table, added_vertices = _instance_edges_of(store, inst, p, table, attribute)
    column = table.column(attribute).combine_chunks()
    numbers = pc.cast(column, pa.float64())
    masks = {"null": pc.is_null(column), "nan": pc.is_nan(numbers), "negative": pc.less(numbers, 0),
             "zero": pc.equal(numbers, 0), "infinite": pc.is_inf(numbers),
             "fractional": pc.and_(pc.not_equal(numbers, pc.floor(numbers)), pc.invert(pc.is_nan(numbers)))}
    row = {"partition": p, "rows": table.num_rows}
    bounds = pc.min_max(column)
    row["min"], row["max"] = (None if bounds[k].as_py() is None else str(bounds[k].as_py()) for k in ("min", "max"))
    for kind, mask in masks.items():
        hits = np.flatnonzero(pc.fill_null(mask, False).to_numpy(zero_copy_only=False))
        row[f"{kind}s"] = len(hits)
        row[f"{kind}_example"] = None
        if len(hits):
            at = int(hits[0])
            ends = _original_pair(store, table.column("src").slice(at, 1), table.column("dst").slice(at, 1),
                                  added_vertices)
            row[f"{kind}_example"] = f"{ends['src'][0].as_py()!r} -> {ends['dst'][0].as_py()!r}"
    return row


def _instance_edges_of(store: GraphStore, inst: dict, p: int, template: pa.Table, attribute: str):
    """(src, dst, ``attribute``) of partition ``p``'s edges in instance ``inst``: the template's
    it keeps and those it adds from ``p`` (an added edge without the attribute has it null),
    and the instance's added vertices (for original ids)."""
    import pyarrow.compute as pc

    removed, mine = store._topology_changes(inst, p)
    kept = template.filter(pc.invert(pc.is_in(template.column("eid"), value_set=removed)))
    if mine is None:
        return kept.select(["src", "dst", attribute]), None
    kind = template.schema.field(attribute).type
    values = (mine.column(attribute).combine_chunks().cast(kind) if attribute in mine.column_names
              else pa.nulls(mine.num_rows, kind))
    columns = {"src": pa.concat_arrays([kept.column("src").combine_chunks(),
                                        mine.column("add_src").combine_chunks().cast(pa.int64())]),
               "dst": pa.concat_arrays([kept.column("dst").combine_chunks(),
                                        mine.column("add_dst").combine_chunks().cast(pa.int64())]),
               attribute: pa.concat_arrays([kept.column(attribute).combine_chunks(), values])}
    return pa.table(columns), store.added_vertices(inst)


def _smallest(store: GraphStore, parts: list[int]) -> int:
    return min(parts, key=lambda p: store.partitions[p]["num_vertices"]) if parts else 0


def _with_instance(base: pa.Table, inst: dict, columns: dict) -> pa.Table:
    """``base`` with ``inst``'s id and time range and its ``columns``: per-instance attributes
    after them, and the static ones it overrides in place of the template's."""
    rows = base.num_rows
    out = {c: base.column(c) for c in base.column_names}
    out["instance"] = pa.array(np.full(rows, inst["id"], np.int64))
    out["start"] = pa.array(np.full(rows, inst["start"], np.float64))
    out["end"] = pa.array(np.full(rows, inst["end"], np.float64))
    out.update(columns)
    return pa.table(out)


def _instance_types(path: str, manifest: dict) -> dict:
    """{"vertex"|"edge": {name: Arrow type}} of the instance attributes (checked when a graph is opened)."""
    schema = manifest["instance_schema"]
    return {kind: manifest_io.field_types(schema[kind], f"{path}: instance schema") for kind in ("vertex", "edge")}


def _static_types(path: str, manifest: dict) -> dict:
    return {kind: manifest_io.field_types(manifest[f"{kind}_schema"], f"{path}: {kind} schema")
            for kind in ("vertex", "edge")}


def _typed(table: pa.Table, types: dict) -> pa.Table:
    """Cast columns to their declared types (Parquet widens a few: date64 -> date32, time32[s] -> [ms])."""
    for i, name in enumerate(table.column_names):
        if name in types and not table.schema.field(i).type.equals(types[name]):
            table = table.set_column(i, name, table.column(i).cast(types[name]))
    return table


class _LazyInstances(dict):
    """A shipped manifest: reads ``instances`` from the log (up to the shipped position) on first use."""

    def __init__(self, manifest: dict, store: GraphStore, count: int):
        super().__init__(manifest)
        self._store, self._count = store, count

    def __missing__(self, key):
        if key != "instances":
            raise KeyError(key)
        store = self._store
        snapshot = manifest_io.read(store.fs, store.graph_root)
        if snapshot.version != store.version or snapshot.manifest.get("uuid") != self.get("uuid"):
            raise ManifestError(f"{store.path}: the graph was replaced while this job ran; open it again")
        self["instances"] = snapshot.manifest["instances"][:self._count]
        return self["instances"]
