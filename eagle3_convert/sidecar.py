"""The sidecar file every artifact this tool writes carries beside config.json.

Engines ignore unknown files, so the facts a layout's config cannot hold (the target,
keys only another layout has, where the weights came from) travel with the checkpoint
to the Hub and back. It is trusted only while config.json is the one it was written with.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from . import __version__
from .atomic import CONFIG_NAME, SIDECAR_NAME

SIDECAR_VERSION = 1
MAX_SIDECAR_BYTES = 4 * 1024 * 1024


def config_digest(config_bytes: bytes) -> str:
    return hashlib.sha256(config_bytes).hexdigest()


def read(root: Path, config: Path | bytes | None = None) -> tuple[dict[str, Any] | None, bool]:
    """The sidecar in `root`, if present and well-formed, and whether it was written with this exact config.json
    (`config`: its path, by default the one in `root`, or its bytes: a GGUF holds them inside); (None, False) else.

    One that was not still CLAIMS what it knew of the weights (its drafter id names them, whatever the config now
    says; their target, capture layers, vocabulary, flags): config.json was edited since, and the edit is what
    provenance.py checks against it. Its config facts (ids as written, layout extras) are trusted only with the
    config it was written with.
    """
    path = root / SIDECAR_NAME
    try:
        if not path.is_file() or path.stat().st_size > MAX_SIDECAR_BYTES:
            return None, False
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None, False
    if not isinstance(data, dict) or data.get("sidecar_version") != SIDECAR_VERSION:
        return None, False
    if not isinstance(config, bytes):
        config_path = config or root / CONFIG_NAME
        if not config_path.is_file():  # a FIFO or device named config.json would block the read
            return data, False
        try:
            config = config_path.read_bytes()
        except OSError:
            return data, False
    return data, data.get("config_sha256") == config_digest(config)


def tool_name() -> str:
    """This tool and its version, as sidecars and lineage edges name it."""
    return f"eagle3-convert {__version__}"


def build(*, layout: str, config_bytes: bytes, facts: dict[str, Any]) -> bytes:
    data = {"sidecar_version": SIDECAR_VERSION, "tool": tool_name(), "layout": layout,
            "config_sha256": config_digest(config_bytes), **facts}
    return (json.dumps(data, indent=2, sort_keys=False) + "\n").encode()
