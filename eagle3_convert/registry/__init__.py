"""The drafter registry: which target, revision and capture layers each drafter was
trained on, where copies of it live, and what each copy was converted from."""

from .errors import RegistryError
from .models import DrafterRecord, LineageEdge, Location, LocationRef, TargetInfo, split_uri
from .store import (
    MIGRATIONS,
    SCHEMA_VERSION,
    RegistryStore,
    SQLiteStore,
    default_registry_path,
    open_registry,
)

__all__ = [
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "DrafterRecord",
    "LineageEdge",
    "Location",
    "LocationRef",
    "RegistryError",
    "RegistryStore",
    "SQLiteStore",
    "TargetInfo",
    "default_registry_path",
    "open_registry",
    "split_uri",
]
