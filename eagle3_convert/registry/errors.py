"""The registry's error type: a one-line message and a hint saying what to do."""

from __future__ import annotations

from ..errors import Eagle3Error


class RegistryError(Eagle3Error):
    """The registry cannot be opened, read or written, or a lookup is ambiguous."""

    code = "E-REGISTRY"


class NoRegistry(RegistryError):
    """A lookup found no registry where it was told to look: no file, or a database without our tables.
    Only a writing command creates one, so a read leaves the place as it was."""

    code = "E-REGISTRY-NONE"

    def __init__(self, where: object, why: str):
        super().__init__(f"no registry here: {where} {why}",
                         hint="a conversion or `eagle3-convert registry add` creates it; or point --registry "
                              "(or $EAGLE3_CONVERT_REGISTRY) at the registry you meant")
