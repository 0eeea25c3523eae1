"""Errors raised by GoFS; each names where the problem is (file, line, field)."""


class GoFSError(Exception):
    """Base class for GoFS errors."""


class InputError(GoFSError, ValueError):
    """Input data is malformed: the message names the file, line and/or field."""


class GraphExistsError(GoFSError, FileExistsError):
    """The target path already holds something and overwrite was not asked for."""


class ManifestError(GoFSError):
    """A manifest is missing, corrupt, or of an unsupported version."""


class DataError(GoFSError):
    """A data file of a graph is missing or unreadable (truncated, not Parquet)."""
