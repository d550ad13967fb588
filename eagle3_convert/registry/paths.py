"""Where the registry is: its default path or URL, and whether one exists there.

Apart from store.py so that asking "is there a registry?" imports no store, no SQL and no record model
(`validate` and `convert --no-record` skip the lookup when there is none).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .errors import RegistryError

ENV_VAR = "EAGLE3_CONVERT_REGISTRY"
_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]+)://")


def is_url(registry: object) -> bool:
    """A registry named by URL (`postgresql://...`) rather than by file path."""
    return isinstance(registry, str) and _URL.match(registry) is not None


def url_scheme(url: str) -> str:
    return _URL.match(url).group(1).lower()  # type: ignore[union-attr]


def default_registry_path() -> Path:
    """`$EAGLE3_CONVERT_REGISTRY`, else `$XDG_DATA_HOME/eagle3-convert/registry.db`
    (XDG_DATA_HOME defaulting to ~/.local/share)."""
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        return Path(explicit).expanduser().absolute()
    xdg = os.environ.get("XDG_DATA_HOME")
    if xdg and os.path.isabs(xdg):  # the XDG spec says to ignore relative values
        base = Path(xdg)
    else:
        try:
            base = Path.home() / ".local" / "share"
        except RuntimeError as exc:
            raise RegistryError(
                "cannot find a home directory for the default registry",
                hint=f"set {ENV_VAR} to the registry file to use",
            ) from exc
    return base / "eagle3-convert" / "registry.db"


def default_registry() -> str | Path:
    """`$EAGLE3_CONVERT_REGISTRY` when it holds a URL, else `default_registry_path()`."""
    explicit = os.environ.get(ENV_VAR, "").strip()
    return explicit if is_url(explicit) else default_registry_path()


def registry_exists(registry: str | os.PathLike[str] | None) -> bool:
    """Whether opening `registry` would find one rather than create a file (a server always counts)."""
    target = default_registry() if registry is None else registry
    return is_url(target) or os.path.exists(target)
