"""The drafter registry: which target, revision and capture layers each drafter was
trained on, where copies of it live, and what each copy was converted from."""

from .api import (
    Recorded,
    RegistryFact,
    add_checkpoint,
    lineage,
    list_records,
    record_conversion,
    record_of,
    record_publication,
    recorded_capture,
    remove,
    show,
    stated_capture,
)
from .errors import RegistryError
from .models import DrafterRecord, LineageEdge, Location, LocationRef, TargetInfo, split_uri
from .recording import CONVENTIONS, training_boundaries
from .schema import MIGRATIONS, SCHEMA_VERSION
from .store import RegistryStore, SQLiteStore, default_registry_path, open_registry

__all__ = [
    "CONVENTIONS",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "DrafterRecord",
    "LineageEdge",
    "Location",
    "LocationRef",
    "Recorded",
    "RegistryError",
    "RegistryFact",
    "RegistryStore",
    "SQLiteStore",
    "TargetInfo",
    "add_checkpoint",
    "default_registry_path",
    "lineage",
    "list_records",
    "open_registry",
    "record_conversion",
    "record_of",
    "record_publication",
    "recorded_capture",
    "remove",
    "show",
    "split_uri",
    "stated_capture",
    "training_boundaries",
]
