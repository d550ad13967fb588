"""The drafter registry: which target, revision and capture layers each drafter was
trained on, where copies of it live, and what each copy was converted from.

The names below are imported when first asked for (PEP 562), so that importing one submodule
(`registry.paths` to ask whether a registry exists, `registry.store` to open one) does not import
the rest: a command pays only for what it uses (issue 16).
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "training_boundaries": "recording",
    "MIGRATIONS": "schema", "SCHEMA_VERSION": "schema",
    "Acceptance": "models", "DrafterRecord": "models", "LineageEdge": "models", "Location": "models",
    "LocationRef": "models",
    "RECORDED_TARGET": "models", "split_uri": "models",
    "RegistryError": "errors", "NoRegistry": "errors", "RegistryStore": "base",
    "SQLiteStore": "store", "open_registry": "store",
    "default_registry": "paths", "default_registry_path": "paths", "registry_exists": "paths",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
