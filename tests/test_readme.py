"""Every ```bash and ```python block of README.md and docs/GUIDE.md, run as a user would run it.

Blocks run top to bottom from the repository root, README.md first. A document's
Python blocks share one namespace (a later block uses what an earlier one defined,
as in a user's session) and run in-process, where ``goffish.session()`` returns the test
session; shell blocks run with ``bash -e -o pipefail`` against the installed
environment (``./run.sh`` and ``.venv``), with this checkout first on
PYTHONPATH; they start Spark in subprocesses, so they are marked ``slow``.
Every ``/tmp/`` path points into one fresh temporary directory.

An HTML comment on the line right before a fence changes how it runs:
``<!-- readme-test: skip (why) -->`` (a reason is required), or
``<!-- readme-test: replace "OLD" "NEW" -->`` (OLD must occur in the block).
Blocks in other languages, or without one, are not run. A failing block is
reported with its README line; Python tracebacks point at README lines.
"""
from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pictures import assert_picture

ROOT = Path(__file__).resolve().parents[1]
#: the documents whose examples run, in order (each with its own Python namespace)
DOCUMENTS = ("README.md", "docs/GUIDE.md")
LANGUAGES = {"bash": "bash", "sh": "bash", "shell": "bash", "python": "python"}
_DIRECTIVE = re.compile(r"^<!--\s*readme-test:\s*(.*?)\s*-->\s*$")
_SKIP = re.compile(r"^skip\s*\((.+)\)$")
_REPLACE = re.compile(r'^replace\s+"((?:[^"\\]|\\.)*)"\s+"((?:[^"\\]|\\.)*)"$')
_TMP = re.compile(r"(?<![\w./-])/tmp/")
BASH_TIMEOUT = 420


@dataclass
class Block:
    """One fenced code block: its language, its document and first code line, code and directives."""

    language: str
    line: int
    code: str
    skip: str | None = None
    replacements: list[tuple[str, str]] = field(default_factory=list)
    document: str = "README.md"

    @property
    def id(self) -> str:
        return f"{self.document}:{self.line}-{self.language}"

    def runnable(self, tmp: Path) -> str:
        """The code as it runs: replacements made, /tmp/ paths moved into ``tmp``."""
        code = self.code
        for old, new in self.replacements:
            if old not in code:
                raise ValueError(f"{self.document} line {self.line}: replace directive: {old!r} is not in the block")
            code = code.replace(old, new)
        return _TMP.sub(f"{tmp}/", code)


def _directive(text: str, number: int, block_directives: dict, document: str = "README.md") -> None:
    skip, replace = _SKIP.match(text), _REPLACE.match(text)
    if skip:
        block_directives["skip"] = skip.group(1).strip()
    elif replace:
        unescape = lambda s: s.replace('\\"', '"').replace("\\\\", "\\")  # noqa: E731
        block_directives.setdefault("replacements", []).append((unescape(replace.group(1)),
                                                                unescape(replace.group(2))))
    else:
        raise ValueError(f"{document} line {number}: unknown readme-test directive {text!r} "
                         "(expected: skip (reason) | replace \"OLD\" \"NEW\")")


def readme_blocks(text: str, document: str = "README.md") -> list[Block]:
    """The runnable blocks of a document, in order, with the directives right above them."""
    lines = text.splitlines()
    blocks, pending, i = [], {}, 0
    while i < len(lines):
        line = lines[i]
        directive = _DIRECTIVE.match(line)
        if directive:
            _directive(directive.group(1), i + 1, pending, document)
            i += 1
            continue
        fence = re.match(r"^(\s*)(```+)\s*([\w+-]*)", line)
        if fence:
            indent, ticks, language = fence.groups()
            end = i + 1
            while end < len(lines) and not lines[end].strip().startswith(ticks):
                end += 1
            if end == len(lines):
                raise ValueError(f"{document} line {i + 1}: code block never closed")
            body = [ln[len(indent):] if ln.startswith(indent) else ln for ln in lines[i + 1:end]]
            if language.lower() in LANGUAGES:
                blocks.append(Block(LANGUAGES[language.lower()], i + 2, "\n".join(body) + "\n", **pending,
                                    document=document))
            elif pending:
                raise ValueError(f"{document} line {i + 1}: readme-test directive above a block that is not run")
            pending, i = {}, end + 1
            continue
        if pending:
            raise ValueError(f"{document} line {i + 1}: a readme-test directive must be right before a code fence")
        i += 1
    return blocks


BLOCKS = [b for name in DOCUMENTS for b in readme_blocks((ROOT / name).read_text(), name)]


def test_readme_has_examples_of_both_kinds():
    assert {b.language for b in BLOCKS if b.document == "README.md"} == {"bash", "python"}
    skipped = [b for b in BLOCKS if b.skip]
    assert len(skipped) <= 2, f"skips must stay rare: {[b.id for b in skipped]}"


def test_directives_are_parsed_and_checked():
    text = ('<!-- readme-test: skip (needs a cluster) -->\n```bash\nrun --big\n```\n'
            '```text\nnot run\n```\n'
            '<!-- readme-test: replace "--size 100" "--size 3" -->\n```python\nf(\'--size 100\', "/tmp/x")\n```\n')
    first, second = readme_blocks(text)
    assert (first.language, first.line, first.skip, first.code) == ("bash", 3, "needs a cluster", "run --big\n")
    assert second.replacements == [("--size 100", "--size 3")]
    assert second.runnable(Path("/scratch")) == "f('--size 3', \"/scratch/x\")\n"
    with pytest.raises(ValueError, match="line 1: unknown readme-test directive"):
        readme_blocks("<!-- readme-test: sometimes -->\n```bash\nx\n```\n")
    with pytest.raises(ValueError, match="line 2: a readme-test directive must be right before"):
        readme_blocks("<!-- readme-test: skip (x) -->\nprose\n```bash\nx\n```\n")
    with pytest.raises(ValueError, match="'--size 9' is not in the block"):
        readme_blocks('<!-- readme-test: replace "--size 9" "1" -->\n```bash\nx\n```\n')[0].runnable(Path("/t"))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """The temporary directory /tmp/ paths point to, and the namespace each document's Python blocks share."""
    return tmp_path_factory.mktemp("readme"), {name: {"__name__": "__readme__"} for name in DOCUMENTS}


def _run_python(block: Block, code: str, namespace: dict) -> None:
    # blank lines in front, so line numbers in a traceback are the document's
    exec(compile("\n" * (block.line - 1) + code, str(ROOT / block.document), "exec"), namespace)  # noqa: S102


def _run_bash(block: Block, code: str) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    for key in ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET"):
        env.pop(key, None)
    try:
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", code], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=BASH_TIMEOUT)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{block.id}: still running after {BASH_TIMEOUT}s:\n{code}\nstderr tail:\n"
                    f"{(exc.stderr or b'')[-3000:]!r}")
    assert done.returncode == 0, (f"{block.id} failed ({done.returncode}):\n{code}\n"
                                  f"stdout tail:\n{done.stdout[-3000:]}\nstderr tail:\n{done.stderr[-5000:]}")


def _outputs(block: Block) -> list[str]:
    """The files and directories a block says it writes under /tmp/ (PNG pictures, Parquet, GoFS graphs)."""
    return sorted(set(re.findall(r"(?<![\w./-])/tmp/([\w.-]+\.(?:png|parquet|gofs|json))", block.code)))


@pytest.mark.parametrize("block", [pytest.param(b, id=b.id, marks=[pytest.mark.slow] if b.language == "bash" else [])
                                   for b in BLOCKS])
def test_readme_block(block, workspace, spark, monkeypatch):
    if block.skip:
        pytest.skip(block.skip)
    tmp, namespace = workspace
    code = block.runnable(tmp)
    monkeypatch.chdir(ROOT)
    if block.language == "python":
        _run_python(block, code, namespace[block.document])
    else:
        _run_bash(block, code)
    for name in _outputs(block):
        assert (tmp / name).exists(), f"{block.id} names /tmp/{name} but did not write it"
        if name.endswith(".png"):
            assert_picture(tmp / name)
