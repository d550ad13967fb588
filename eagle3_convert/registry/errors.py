"""The registry's error type: a one-line message and a hint saying what to do."""

from __future__ import annotations


class RegistryError(Exception):
    """The registry cannot be opened, read or written, or a lookup is ambiguous."""

    code = "E-REGISTRY"

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message
