"""One declaration per algorithm, read by every interface.

An algorithm module ends with ``register(Algorithm(...))``: its function (whose
signature is the one source of parameter names, defaults and types), how its
parameters appear on ``goffish run``, what it returns, and its NetworkX and
GraphFrames counterparts. ``goffish.graph.Graph`` methods, the ``goffish run``
sub-commands and ``--help``, the NetworkX backend's dispatch table
(:mod:`goffish.nx_backend`) and the GraphFrames-compatible methods
(:mod:`goffish.graphframes`) are all built from :func:`algorithms`. Adding an
algorithm touches its own module and nothing else.
"""
from __future__ import annotations

import importlib
import inspect
import pkgutil
from dataclasses import dataclass, field
from typing import Any, Callable

_REGISTRY: dict[str, "Algorithm"] = {}


@dataclass(frozen=True)
class Flag:
    """How one parameter appears on ``goffish run``.

    ``kind``: ``"value"`` (typed from the signature), ``"vertex"`` (a vertex id, read as the
    graph's id type), ``"switch"`` (a flag that sets True), ``"negate"`` (a flag that sets
    False), ``"instances"`` (comma-separated ids), ``"time"`` (TIME or START,END).
    """

    help: str
    flag: str | None = None
    kind: str = "value"


@dataclass(frozen=True)
class NetworkX:
    """A NetworkX function this algorithm answers, and how its answer is shaped.

    ``function``: its path under ``networkx`` (``"pagerank"``, ``"community.louvain_communities"``).
    ``result``: the NetworkX shape built from the result column (see
    :data:`goffish.nx_backend.SHAPES`). ``params``: NetworkX parameter -> ours. ``requires``:
    NetworkX parameters that must keep these values for us to run (else ``can_run`` says why).
    ``graphs``: ``"undirected"``/``"directed"`` where NetworkX refuses the other kind, else ``"any"``;
    ``directed``: False where NetworkX takes directed graphs with semantics we do not implement
    (``can_run`` declines them). ``weight``: the NetworkX parameter naming the edge weight, if any.
    ``sample``: our parameter that receives NetworkX's ``k=`` sample of nodes, drawn as NetworkX
    draws it (``seed.sample(list(G), k)``; ``k = n`` is no sample), so a seed picks the same sources.
    """

    function: str
    result: str
    params: dict = field(default_factory=dict)
    requires: dict = field(default_factory=dict)
    graphs: str = "any"
    directed: bool = True
    weight: str | None = None
    sample: str | None = None

    @property
    def name(self) -> str:
        return self.function.rsplit(".", 1)[-1]


@dataclass(frozen=True)
class GraphFramesMethod:
    """A GraphFrames-style method: its name, its parameters (-> ours), and the column it adds
    to the vertices (``column``, renamed from our result column ``ours``). ``ignored``:
    GraphFrames' tuning knobs of its own implementation, accepted so its callers run unchanged."""

    name: str
    column: str
    ours: str
    params: dict = field(default_factory=dict)
    ignored: tuple = ()


@dataclass(frozen=True)
class Algorithm:
    """One algorithm as every interface sees it.

    ``function(store, ...)`` runs it; ``returns`` names the result's per-vertex columns;
    ``cli`` is the ``goffish run`` sub-command (None: not on the CLI) and ``flags`` the
    parameters it exposes there; ``frames(result)`` gives what the CLI writes, DataFrames or the
    run's result itself (``{"": result}`` writes OUT itself, ``{"tree": df}`` writes OUT/tree) and
    ``report(result)`` the run summary it prints. Single runs take the engine option
    ``instance=``; ``timeseries`` ones select ``instances=``/``time=`` themselves. Whether it
    takes ``weight=`` (and every other parameter) is its function's signature.
    """

    name: str
    function: Callable
    summary: str
    returns: tuple
    cli: str | None = None
    flags: dict = field(default_factory=dict)
    timeseries: bool = False
    networkx: tuple = ()
    graphframes: tuple = ()
    frames: Callable = lambda result: {"": result}
    metrics: Callable = lambda result: result.metrics
    report: Callable = lambda result: {}

    @property
    def parameters(self) -> list[inspect.Parameter]:
        """The function's own parameters after the graph (engine options excluded)."""
        params = list(inspect.signature(self.function).parameters.values())[1:]
        return [p for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]

    def default(self, name: str) -> Any:
        return inspect.signature(self.function).parameters[name].default


def register(algorithm: Algorithm) -> Algorithm:
    """Declare an algorithm (called once, at the end of its module)."""
    if algorithm.name in _REGISTRY and _REGISTRY[algorithm.name].function is not algorithm.function:
        raise ValueError(f"algorithm {algorithm.name!r} is registered twice")
    _REGISTRY[algorithm.name] = algorithm
    return algorithm


def algorithms() -> dict[str, Algorithm]:
    """Every registered algorithm, by name (imports each module of the package once)."""
    import algorithms as package

    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"algorithms.{module.name}")
    return dict(_REGISTRY)


def by_cli_name() -> dict[str, Algorithm]:
    return {a.cli: a for a in algorithms().values() if a.cli}
