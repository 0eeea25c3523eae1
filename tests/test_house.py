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
