"""Errors of CGQL: each names the place in the query text (line, column) it is about."""
from __future__ import annotations

from gofs.errors import InputError


class CGQLError(InputError):
    """A query cannot be registered or evaluated; ``line``/``column`` locate it in the text (0 when unknown)."""

    def __init__(self, message: str, line: int = 0, column: int = 0):
        self.line, self.column = line, column
        self.reason = message
        super().__init__(f"line {line}, column {column}: {message}" if line else message)


class CGQLSyntaxError(CGQLError):
    """The text is not CGQL: ``token`` is the offending text (or "end of input"), ``expected``
    the sorted list of what the grammar would have accepted there."""

    def __init__(self, message: str, line: int, column: int, token: str = "", expected=(), context: str = ""):
        self.token = token
        self.expected = sorted(expected)
        super().__init__(message + (f"\n{context}" if context else ""), line, column)


def located(node, message: str, error=CGQLError) -> CGQLError:
    """An error about AST ``node`` (anything with ``line``/``column``)."""
    return error(message, getattr(node, "line", 0), getattr(node, "column", 0))
