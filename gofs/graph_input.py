"""The in-memory form every input source is normalised to before ingest."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa

from gofs.errors import InputError


@dataclass
class GraphInput:
    """A graph as Arrow tables, ids as given by the user.

    ``edges`` has columns ``src`` and ``dst`` (both int64 or both string) plus
    edge attributes; ``vertices`` (optional) has an ``id`` column of the same
    type plus vertex attributes. Vertices that appear only in ``edges`` are
    added with null attributes. ``source`` names where the data came from, for
    error messages; ``vertex_where(i)`` names the id of row i of ``vertices`` as
    the user knows it (file and line, or row, and column) for errors about it.
    """

    edges: pa.Table
    vertices: pa.Table | None = None
    directed: bool = False
    source: str = "<memory>"
    name: str | None = None
    extra: dict = field(default_factory=dict)
    vertex_where: Callable[[int], str] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        for column in ("src", "dst"):
            if column not in self.edges.column_names:
                raise InputError(f"{self.source}: edge table has no '{column}' column "
                                 f"(columns: {self.edges.column_names})")
        id_type = self.edges.schema.field("src").type
        if self.edges.schema.field("dst").type != id_type:
            raise InputError(f"{self.source}: 'src' is {id_type} but 'dst' is {self.edges.schema.field('dst').type}")
        if not (pa.types.is_integer(id_type) or pa.types.is_string(id_type) or pa.types.is_large_string(id_type)):
            raise InputError(f"{self.source}: vertex ids must be integers or strings, got {id_type}")
        if self.vertices is not None:
            if "id" not in self.vertices.column_names:
                raise InputError(f"{self.source}: vertex table has no 'id' column (columns: {self.vertices.column_names})")
            vtype = self.vertices.schema.field("id").type
            if (pa.types.is_integer(vtype) != pa.types.is_integer(id_type)):
                raise InputError(f"{self.source}: vertex 'id' is {vtype} but edge endpoints are {id_type}")

    def vertex_place(self, row: int) -> str:
        """Where the id of vertex-table row ``row`` is, for an error about it."""
        if self.vertex_where is not None:
            return self.vertex_where(row)
        return f"{self.source}: vertex row {row}, column 'id'"

    @property
    def edge_attribute_names(self) -> list[str]:
        return [c for c in self.edges.column_names if c not in ("src", "dst")]

    @property
    def vertex_attribute_names(self) -> list[str]:
        return [] if self.vertices is None else [c for c in self.vertices.column_names if c != "id"]
