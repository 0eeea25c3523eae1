#!/usr/bin/env bash
# One-command set-up and entry points. On a fresh machine (Python 3.9+ and Java 17):
#   ./run.sh demo     the main job on the embedded default (local Spark, sample road graph)
#   ./run.sh test     the test suite
#   ./run.sh bench [NAME] ARGS...   benchmark NAME from benchmarks/ (default gopher: Gopher vs GraphFrames vs
#                     igraph; ./run.sh bench --list names them), ./run.sh goffish ... any CLI command
#   ./run.sh submit [spark-submit options] COMMAND ...   a goffish COMMAND through spark-submit, with absolute
#                     interpreter paths (executors start elsewhere) and, unless --verbose, errors-only logging
# Each creates .venv, installs the project and fetches the GraphFrames jar the first time.
set -euo pipefail
cd "$(dirname "$0")"
VENV="${GOFFISH_VENV:-.venv}"
export GOFFISH_CACHE="${GOFFISH_CACHE:-$PWD/.cache}"

ensure_env() {
  if ! command -v java >/dev/null 2>&1 && [ -z "${JAVA_HOME:-}" ]; then
    echo "run.sh: Spark needs Java 17 (e.g. apt-get install openjdk-17-jre-headless), or set JAVA_HOME" >&2
    exit 1
  fi
  if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
  fi
  local stamp="$VENV/.installed-$(cat pyproject.toml | sha1sum | cut -c1-12)"
  if [ ! -f "$stamp" ]; then
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    "$VENV/bin/python" -m pip install --quiet -e ".[test]"
    "$VENV/bin/python" -c "from goffish.jars import resolve_graphframes_jar as r; import sys; j = r(); print('GraphFrames jar:', j or 'not available (GraphFrames baselines will be skipped)', file=sys.stderr)"
    rm -f "$VENV/.worker-archives"            # a reinstalled PySpark brings its archives without bytecode
    touch "$stamp"
  fi
  if [ ! -f "$VENV/.worker-archives" ]; then
    # once: bytecode for the modules Spark's Python workers import on start (goffish/worker_archives.py)
    "$VENV/bin/python" -m goffish.worker_archives || echo "run.sh: PySpark's worker archives keep sources only (Python workers start slower)" >&2
    touch "$VENV/.worker-archives"
  fi
  # every time (only what changed is rewritten): this checkout's bytecode. An editable install has none, and
  # where PYTHONDONTWRITEBYTECODE is set (containers, CI) no process writes it, so every fresh Spark Python
  # worker compiled the goffish modules a run's task imports on its first task (~65 CPU-ms a worker)
  "$VENV/bin/python" -m compileall -q goffish gofs gopher algorithms hatrick sparkshim benchmarks 1>&2 \
    || echo "run.sh: some of this checkout's modules did not compile (python -m compileall)" >&2
  if [ ! -f "$VENV/.class-archive" ]; then
    # once: the Spark driver JVM's class-data archive, mapped by every later session (goffish/class_archive.py)
    "$VENV/bin/python" -m goffish.record_class_archive || echo "run.sh: no JVM class-data archive (first runs start slower)" >&2
    touch "$VENV/.class-archive"
  fi
  # absolute: executors start their Python workers in another working directory
  PYSPARK_PYTHON="$(cd "$VENV/bin" && pwd)/python"
  export PYSPARK_PYTHON PYSPARK_DRIVER_PYTHON="$PYSPARK_PYTHON"
}

GOFFISH_COMMANDS=" ingest info generate run demo "

submit() {
  # spark-submit's options come first, the goffish command and its arguments after the first command word
  local spark=() app=() verbose=""
  while [ $# -gt 0 ] && [[ "$GOFFISH_COMMANDS" != *" $1 "* ]]; do spark+=("$1"); shift; done
  if [ $# -eq 0 ]; then
    echo "usage: ./run.sh submit [spark-submit options] ingest|info|generate|run|demo ARGS..." >&2
    exit 2
  fi
  app=("$@")
  for arg in "${app[@]}"; do [ "$arg" = "--verbose" ] && verbose=1; done
  local java="" driver=()
  if [ -z "$verbose" ]; then
    SUBMIT_LOGS="$(mktemp -d)"
    trap 'rm -rf "$SUBMIT_LOGS"' EXIT
    java="-Dlog4j2.configurationFile=file:$("$VENV/bin/python" -m goffish.cli_logging "$SUBMIT_LOGS")"
  fi
  # the driver JVM maps the class-data archive too (goffish/class_archive.py), unless its options are the user's
  if [[ " ${spark[*]} " != *"--driver-java-options"* && " ${spark[*]} " != *"spark.driver.extraJavaOptions"* ]]; then
    java="$java $("$VENV/bin/python" -m goffish.class_archive)"
  fi
  [ -n "${java// /}" ] && driver=(--driver-java-options "$java")
  "$VENV/bin/spark-submit" "${driver[@]}" "${spark[@]}" "$PWD/goffish/submit.py" "${app[@]}"
}

command="${1:-demo}"
shift || true
case "$command" in
  demo) ensure_env; exec "$VENV/bin/goffish" demo --master "${GOFFISH_MASTER:-local[2]}" "$@" ;;
  test) ensure_env; exec "$VENV/bin/python" -m pytest "$@" ;;
  # benchmarks are not installed: they run from this checkout (its root on the path, for Spark's workers too)
  bench) ensure_env; export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"; exec "$VENV/bin/python" -m benchmarks "$@" ;;
  goffish) ensure_env; exec "$VENV/bin/goffish" "$@" ;;
  submit) ensure_env; submit "$@" ;;
  *) echo "usage: ./run.sh demo|test|bench|goffish|submit [args...]" >&2; exit 2 ;;
esac
