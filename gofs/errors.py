"""Every error the project raises on purpose, under one root: :class:`GoffishError`.

The root lives in the lowest layer (GoFS) so that every layer can import it; the CLI
catches it and prints one line. Each error names where the problem is (file, line,
field, sub-graph, superstep). An error keeps the builtin base it always had (an
``InputError`` is a ``ValueError``), so ``except ValueError`` still catches it::

    GoffishError
    ├── InputError (ValueError)          a bad argument or input; UpdateError, CGQLError
    ├── GoFSError                        storage: GraphExistsError, ManifestError, DataError, CommitConflict
    ├── EngineError                      Gopher: GopherProgramError, GopherTaskError, RendezvousTimeout, ...
    ├── StreamError                      Hatrick: DataFileError
    └── SetupError (RuntimeError)        the environment: no Java, no GraphFrames jar

The floor below GoFS (``sparkshim``) imports nothing of ours: its one error, a GraphFrames
package that cannot be imported, is an ``ImportError`` (``GraphFramesUnavailable``) that the
CLI catches beside the root.
"""


class GoffishError(Exception):
    """Root of every error GoFFish raises on purpose."""


class InputError(GoffishError, ValueError):
    """A bad argument or malformed input: the message names the file, line and/or field."""


class GoFSError(GoffishError):
    """Base class for storage errors."""


class GraphExistsError(GoFSError, FileExistsError):
    """The target path already holds something and overwrite was not asked for."""


class ManifestError(GoFSError):
    """A manifest is missing, corrupt, or of an unsupported version."""


class DataError(GoFSError):
    """A data file of a graph is missing or unreadable (truncated, not Parquet)."""


class EngineError(GoffishError):
    """Base class for errors of a Gopher run (a program, a task, the transport)."""


class StreamError(GoffishError):
    """Base class for errors of a Hatrick stream's own state (checkpoints, data files)."""


class SetupError(GoffishError, RuntimeError):
    """The environment cannot run Spark or GraphFrames (no Java, no jar)."""
