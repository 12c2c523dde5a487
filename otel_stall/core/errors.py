"""Errors about bad input that name where it is, so one bad line never hides the rest.

Readers collect these instead of raising: the other lines and files go on,
and the user sees every problem at once with its position.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["InputError"]


@dataclass(frozen=True, slots=True)
class InputError:
    """One problem in one input: the file, the line or byte offset, and the reason."""

    path: str
    line: int | None
    """1-based line number, for line-oriented input."""
    offset: int | None
    """Byte offset from the start of the file, for binary input."""
    message: str

    def __str__(self) -> str:
        if self.line is not None:
            return f"{self.path}:{self.line}: {self.message}"
        if self.offset is not None:
            return f"{self.path}:@{self.offset}: {self.message}"
        return f"{self.path}: {self.message}"
