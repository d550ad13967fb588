"""The drafter registry: which target, revision and capture layers each drafter was
trained on, where copies of it live, and what each copy was converted from."""

from .base import RegistryStore
from .errors import RegistryError
from .models import DrafterRecord, LineageEdge, Location, LocationRef, TargetInfo, split_uri
from .recording import CONVENTIONS, training_boundaries
from .schema import MIGRATIONS, SCHEMA_VERSION
from .store import SQLiteStore, default_registry, default_registry_path, open_registry, registry_exists

__all__ = [
    "CONVENTIONS",
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
    "default_registry",
    "default_registry_path",
    "open_registry",
    "registry_exists",
    "split_uri",
    "training_boundaries",
]
