"""The shape of the tree: what is installed, and what the library may import.

Benchmarks live in ``benchmarks/`` at the top of the checkout: they import the
library, never the other way round, and ``pip install .`` installs none of them.
"""
import ast
import pathlib
import tomllib

from setuptools import find_namespace_packages, find_packages

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _packaged() -> list[str]:
    """The packages ``pip install .`` installs, from pyproject's own package selection."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    find = find_namespace_packages if config.get("namespaces", True) else find_packages
    return find(str(ROOT), include=config.get("include", ["*"]), exclude=config.get("exclude", []))


def _library_modules():
    for package in _packaged():
        for path in (ROOT / package.replace(".", "/")).glob("*.py"):
            yield f"{package}.{path.stem}", path


def test_no_benchmark_is_installed():
    packages = _packaged()
    assert "goffish" in packages and "gofs.ingest" in packages      # the selection is the real one
    assert not [p for p in packages if p.split(".")[0] in ("benchmarks", "tests")]
    assert not [name for name, _ in _library_modules() if name.rsplit(".", 1)[1].startswith("bench")]


def test_the_library_never_imports_a_benchmark():
    offenders = []
    for name, path in _library_modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = ([a.name for a in node.names] if isinstance(node, ast.Import)
                       else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            offenders += [f"{name} imports {t}" for t in targets if t.split(".")[0] == "benchmarks"]
    assert offenders == []


#: the floors, lowest first: a module imports only from its own floor or below
LAYERS = {"sparkshim": -1, "gofs": 0, "gopher": 1, "algorithms": 2, "hatrick": 2, "goffish": 3}


def _imports(name: str, path: pathlib.Path, modules: set) -> set:
    """Every library module ``name`` imports, at module level or inside a function."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
            found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names}
    return {m for m in found if m in modules and m != name}


def _import_graph() -> dict:
    paths = {}
    for name, path in _library_modules():
        paths[name[:-len(".__init__")] if name.endswith(".__init__") else name] = path
    return {name: _imports(name, path, set(paths)) for name, path in paths.items()}


def test_no_import_circle_even_through_function_level_imports():
    graph = _import_graph()
    assert len(graph) > 90 and "gofs.partition.multilevel" in graph["gofs.partition"]
    state, cycles = {}, []

    def visit(module, trail):
        state[module] = "open"
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                cycles.append(trail[trail.index(target):] + [target])
            elif target not in state:
                visit(target, trail + [target])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert cycles == []


def test_no_floor_imports_a_higher_one():
    graph = _import_graph()
    upward = [f"{a} -> {b}" for a, targets in graph.items() for b in targets
              if LAYERS[b.split(".")[0]] > LAYERS[a.split(".")[0]]]
    assert upward == []


def test_the_handle_has_a_store_and_only_the_store_is_shipped(tmp_path):
    import pickle

    import networkx as nx

    import goffish
    from gofs.ingest import ingest
    from gofs.store import GraphStore, as_store

    ingest(nx.path_graph(6), str(tmp_path / "p.gofs"), num_partitions=2, engine="local")
    g = goffish.open(str(tmp_path / "p.gofs"))
    assert not isinstance(g, GraphStore) and type(as_store(g)) is GraphStore and as_store(g) is g.store
    assert (g.num_vertices, g.num_subgraphs, g.id_kind, g.directed) == (6, 2, "int64", False)
    shipped = pickle.dumps(as_store(g))
    assert b"goffish" not in shipped and pickle.loads(shipped).num_edges == 5
