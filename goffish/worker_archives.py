"""Bytecode in PySpark's worker archives: ``python -m goffish.worker_archives`` (``./run.sh`` runs it
once at set-up).

Spark starts its Python workers with ``$SPARK_HOME/python/lib/pyspark.zip`` and py4j's zip first on
their path, and PySpark ships both with sources only: zipimport never caches bytecode, so every
worker daemon compiles the ~100 modules it imports on start (~0.7 CPU-s here, against ~0.05 s to
load them compiled), on the critical path of a process's first Python job. This adds the compiled
modules (unchecked hash-based ``.pyc``, as the interpreter writes them) beside their sources in each
archive, for the modules a worker imports before its first task only: every cached zip importer
re-reads its archive's directory before each task (PySpark's ``importlib.invalidate_caches``), so
the archives stay close to their size. An interpreter of another version finds the wrong magic
number and compiles the source as before. The archive is rewritten atomically, once.
"""
from __future__ import annotations

import importlib.util
import json
import marshal
import os
import subprocess
import sys
import zipfile
from pathlib import Path

from gofs.files import write_atomic

#: what a Python worker imports before its first task: ``python -m pyspark.daemon`` forks workers
#: that run ``pyspark.worker``
WORKER_START = ("pyspark.daemon", "pyspark.worker")


def archives() -> list[Path]:
    """PySpark's worker archives, where Spark's JVM puts them on its workers' path, when they belong to
    the PySpark installed in this environment: a Spark installation elsewhere (``SPARK_HOME``) is not
    ours to rewrite, nor is a PySpark outside this virtual environment."""
    import pyspark

    package = Path(pyspark.__file__).resolve().parent
    if sys.prefix == sys.base_prefix or not package.is_relative_to(Path(sys.prefix).resolve()):
        return []
    home = os.environ.get("SPARK_HOME")
    if home and Path(home).resolve() != package:
        return []
    lib = package / "python" / "lib"
    return sorted(p for p in [lib / "pyspark.zip", *lib.glob("py4j-*-src.zip")] if p.is_file())


def worker_modules(paths: list[Path]) -> dict[str, set[str]]:
    """{archive: names of its entries (``pyspark/worker.py``) that a worker imports on start}, found
    by importing :data:`WORKER_START` from the archives in an interpreter of this Python."""
    code = ("import importlib, json, sys\n"
            f"for name in {list(WORKER_START)!r}: importlib.import_module(name)\n"
            "print(json.dumps([m.__spec__.origin for m in list(sys.modules.values())"
            " if getattr(m, '__spec__', None) and m.__spec__.origin]))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, paths))}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                          cwd=paths[0].parent)
    origins = json.loads(done.stdout.splitlines()[-1])
    found: dict[str, set[str]] = {str(p): set() for p in paths}
    for origin in origins:
        for archive in found:
            if origin.startswith(archive + os.sep) and origin.endswith(".py"):
                found[archive].add(origin[len(archive) + 1:].replace(os.sep, "/"))
    return found


def has_bytecode(path: Path) -> bool:
    with zipfile.ZipFile(path) as archive:
        return any(name.endswith(".pyc") for name in archive.namelist())


def add_bytecode(path: Path, modules: set[str]) -> int:
    """Rewrite the archive at ``path`` with ``modules`` (entry names of sources) compiled beside
    their sources; every other entry is copied as it is. Returns how many were compiled."""
    with zipfile.ZipFile(path) as source:
        entries = [(info, source.read(info)) for info in source.infolist()]
    compiled = []
    for info, data in entries:
        if info.filename in modules:
            # the name zipimport gives a module compiled from the archive's source: tracebacks read the same
            code = compile(data, os.path.join(str(path), info.filename), "exec", dont_inherit=True)
            header = importlib.util.MAGIC_NUMBER + (1).to_bytes(4, "little") + importlib.util.source_hash(data)
            pyc = zipfile.ZipInfo(info.filename + "c", date_time=info.date_time)
            pyc.compress_type, pyc.external_attr = zipfile.ZIP_DEFLATED, info.external_attr
            compiled.append((pyc, header + marshal.dumps(code)))

    def write(out) -> None:
        with zipfile.ZipFile(out, "w") as target:
            for info, data in entries + compiled:
                target.writestr(info, data)

    write_atomic(path, write=write)
    return len(compiled)


def main() -> int:
    paths = [p for p in archives() if not has_bytecode(p)]
    if not paths:
        return 0
    for archive, modules in worker_modules(paths).items():
        count = add_bytecode(Path(archive), modules)
        print(f"goffish: {count} modules compiled into {archive}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
