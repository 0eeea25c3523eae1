"""``python -m benchmarks [NAME] ARGS...``: run benchmark NAME (default ``gopher``) with ARGS."""
import importlib
import sys

#: name on the command line -> module under benchmarks/ (each has ``main(argv)``)
BENCHMARKS = {name: f"benchmarks.bench_{name}" for name in
              ("gopher", "betweenness", "cgql", "cgql_past", "cgql_rules", "driver_memory", "hatrick", "ingest", "instances", "louvain", "nx")}


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-l", "--list"):
        print("\n".join(BENCHMARKS))
        return 0
    name = argv.pop(0) if argv and argv[0] in BENCHMARKS else "gopher"
    result = importlib.import_module(BENCHMARKS[name]).main(argv)
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
