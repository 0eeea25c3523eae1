"""The manifest: a versioned JSON document, the single commit point of a graph."""
from __future__ import annotations

import json
import uuid

import pyarrow as pa

from gofs import layout
from gofs.errors import ManifestError

FORMAT = "gofs"
VERSION = 1
_REQUIRED = ("name", "directed", "id_type", "num_vertices", "num_edges", "partitioner",
             "num_partitions", "partitions", "instances", "vertex_schema", "edge_schema")


def schema_fields(schema: pa.Schema, skip=()) -> list[dict]:
    """Attribute schema as JSON: [{"name", "type"}], types as Arrow spells them."""
    return [{"name": f.name, "type": str(f.type)} for f in schema if f.name not in skip]


def read(fs, root: str) -> dict:
    path = layout.join(root, layout.MANIFEST)
    if not layout.exists(fs, root):
        raise ManifestError(f"{root}: no such GoFS graph")
    if not layout.exists(fs, path):
        raise ManifestError(f"{root}: not a GoFS graph (no {layout.MANIFEST})")
    with fs.open_input_stream(path) as stream:
        raw = stream.read()
    try:
        manifest = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ManifestError(f"{path}: corrupt manifest ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ManifestError(f"{path}: not a GoFS manifest (missing \"format\": \"{FORMAT}\")")
    if manifest.get("version") != VERSION:
        raise ManifestError(f"{path}: manifest version {manifest.get('version')!r} is not supported "
                            f"(this GoFS reads version {VERSION})")
    missing = [k for k in _REQUIRED if k not in manifest]
    if missing:
        raise ManifestError(f"{path}: corrupt manifest, missing field(s) {', '.join(missing)}")
    return manifest


def write(fs, root: str, manifest: dict) -> None:
    """Replace the manifest atomically: write a temporary file, then rename over."""
    manifest = {"format": FORMAT, "version": VERSION, **manifest}
    path = layout.join(root, layout.MANIFEST)
    staging = layout.join(root, f".{layout.MANIFEST}.tmp-{uuid.uuid4().hex[:12]}")
    with fs.open_output_stream(staging) as stream:
        stream.write(json.dumps(manifest, indent=1, sort_keys=False).encode())
    fs.move(staging, path)
