"""The registry's error type: a one-line message and a hint saying what to do."""

from __future__ import annotations

from ..errors import Eagle3Error


class RegistryError(Eagle3Error):
    """The registry cannot be opened, read or written, or a lookup is ambiguous."""

    code = "E-REGISTRY"
