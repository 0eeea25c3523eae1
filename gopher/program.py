"""The sub-graph program contract (GoFFish's Gopher, GraphX/Giraph style).

Subclass :class:`SubgraphProgram` and implement ``compute``; the engine calls
it once per active sub-graph per superstep. Everything else is optional.
"""
from __future__ import annotations


class SubgraphProgram:
    #: merge vertex messages to the same vertex before the shuffle: "min", "max", "sum" or a ufunc
    combiner = None
    #: dtype of vertex message values
    message_dtype = "float64"
    #: global aggregators: {name: "sum" | "min" | "max" | gopher.aggregators.Aggregator}
    aggregators: dict = {}
    #: static attributes to load with the topology
    vertex_attributes: tuple = ()
    edge_attributes: tuple = ()
    #: per-instance attributes to load (time-series runs)
    instance_vertex_attributes: tuple = ()
    instance_edge_attributes: tuple = ()
    #: text instance edge attributes as ``pandas.Categorical`` (the stored codes over the distinct
    #: values) instead of object arrays: for programs that test values, once per distinct value
    text_as_categorical: bool = False
    #: :meth:`compute_partition` runs for a partition that received messages too, reading them all
    #: at once with ``ctx.partition_messages()``: a program whose every superstep is vectorised
    #: over the partition
    partition_messages: bool = False
    #: output columns of :meth:`output` besides ``id``: {name: pyarrow type}
    output_schema: dict = {}

    def compute(self, subgraph, messages, ctx) -> None:
        """Run one superstep for one sub-graph: read ``messages``, update ``subgraph.state``,
        send with ``ctx.send_*``, and ``ctx.vote_to_halt()`` when done."""
        raise NotImplementedError

    def compute_partition(self, subgraphs: list, ctx) -> bool:
        """Optional: run this superstep once for all of a partition's active sub-graphs (in
        sub-graph order, each with its ``state``; :class:`gopher.worker.ActiveSubgraphs`, whose
        ``partition_state`` survives supersteps as theirs do), vectorised over the partition,
        instead of ``compute`` per sub-graph. Called when the partition received no messages in this
        superstep, or always where :attr:`partition_messages` is set. Return False to run
        ``compute`` per sub-graph instead, True when done (none halts), or the sub-graphs' halt
        votes (a boolean per sub-graph of ``subgraphs``): a halted sub-graph is left out of later
        supersteps until a message arrives for it."""
        return False

    def output_partition(self, subgraphs) -> dict | None:
        """Optional: the per-vertex results of all of a partition's sub-graphs at once (``subgraphs``
        as :meth:`compute_partition` gets them, every one of the partition's, in order): {column:
        array over the partition's vertices, sub-graph after sub-graph} for the columns in
        ``output_schema``; None calls :meth:`output` per sub-graph instead."""
        return None

    def master(self, ctx) -> None:
        """Runs on the driver after every superstep; may read aggregates, set globals, halt."""

    def output(self, subgraph) -> dict:
        """Per-vertex results of one sub-graph, aligned with its local vertices:
        {column: numpy array} for the columns in ``output_schema``."""
        return {}
