"""Bytecode added to a worker archive (goffish.worker_archives): modules load compiled, tracebacks
name and show the archive's source as before, every entry is kept, a bad .pyc falls back to the source."""
import os
import subprocess
import sys
import zipfile

from goffish import worker_archives

SOURCES = {
    "pkg/__init__.py": b"from pkg.mod import fail\n",
    "pkg/mod.py": b"def fail():\n    raise ValueError('from the archive')\n",
    "pkg/other.py": b"X = 1\n",
    "pkg/data.txt": b"not a module\n",
}


def _archive(tmp_path):
    path = tmp_path / "lib.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("pkg/", b"")
        for name, data in SOURCES.items():
            archive.writestr(name, data)
    return path


def _import(path, code):
    env = {**os.environ, "PYTHONPATH": str(path)}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=path.parent)


PROBE = ("import traceback, pkg, pkg.mod\n"
         "print(pkg.mod.__file__)\n"
         "try:\n    pkg.fail()\nexcept ValueError:\n    print(traceback.format_exc())\n")


def test_worker_modules_are_what_importing_them_loads_from_the_archive(tmp_path, monkeypatch):
    path = _archive(tmp_path)
    monkeypatch.setattr(worker_archives, "WORKER_START", ("pkg",))
    assert worker_archives.worker_modules([path]) == {str(path): {"pkg/__init__.py", "pkg/mod.py"}}


def test_compiled_modules_load_from_bytecode_with_the_same_tracebacks(tmp_path):
    path = _archive(tmp_path)
    assert not worker_archives.has_bytecode(path)
    assert worker_archives.add_bytecode(path, {"pkg/__init__.py", "pkg/mod.py"}) == 2
    assert worker_archives.has_bytecode(path)
    with zipfile.ZipFile(path) as archive:
        assert sorted(archive.namelist()) == sorted(["pkg/", *SOURCES, "pkg/__init__.pyc", "pkg/mod.pyc"])
        assert all(archive.read(name) == data for name, data in SOURCES.items())
    done = _import(path, PROBE)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == os.path.join(str(path), "pkg", "mod.pyc")
    assert f'File "{os.path.join(str(path), "pkg", "mod.py")}", line 2, in fail' in done.stdout
    assert "raise ValueError('from the archive')" in done.stdout


def test_bytecode_of_another_interpreter_falls_back_to_the_source(tmp_path):
    path = _archive(tmp_path)
    worker_archives.add_bytecode(path, {"pkg/__init__.py", "pkg/mod.py"})
    with zipfile.ZipFile(path) as archive:
        entries = [(info, archive.read(info)) for info in archive.infolist()]
    with zipfile.ZipFile(path, "w") as archive:
        for info, data in entries:
            archive.writestr(info, b"\0\0\0\0" + data[4:] if info.filename.endswith(".pyc") else data)
    done = _import(path, PROBE)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == os.path.join(str(path), "pkg", "mod.py")
    assert "raise ValueError('from the archive')" in done.stdout
