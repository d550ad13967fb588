"""The source checkpoint as found on disk: config.json (a small, strict JSON object), the tensors by
stored name, the sidecar. A GGUF file or directory is read by converters/gguf_file.py instead."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .. import sidecar
from ..atomic import CONFIG_NAME
from ..errors import Eagle3Error, FormatError
from ..safetensors_io import INDEX_NAME, TensorSource, read_tensor_table, reject_duplicate_keys
from ..vocab_map import VocabMap, read_vocab_map
from . import kimi_k3, nemo_meta
from .gguf_file import gguf_file, read_gguf_drafter

MAX_CONFIG_BYTES = 16 * 1024 * 1024  # a drafter config is a few KB; anything this big is hostile


def read_json_file(path: Path, what: str) -> dict[str, Any]:
    """A small JSON object file, refusing huge, non-UTF-8, duplicate-key or non-object content."""
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise FormatError(f"{what} is {size} bytes; a config this large is not a drafter config",
                              "point at the drafter's own directory", code="E-CONFIG-SIZE")
        data = json.loads(path.read_bytes().decode("utf-8"), object_pairs_hook=reject_duplicate_keys)
    except FormatError:
        raise
    except OSError as exc:
        raise FormatError(f"{what}: cannot read ({exc.strerror or exc})", "check the path and permissions",
                          code="E-CONFIG-READ") from None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise FormatError(f"{what} is not valid JSON ({str(exc)[:120]})", "fix or re-download the file",
                          code="E-CONFIG-JSON") from None
    if not isinstance(data, dict):
        raise FormatError(f"{what} is not a JSON object", "fix or re-download the file", code="E-CONFIG-JSON")
    return data


@dataclass
class Checkpoint:
    """A checkpoint directory as found on disk: raw config, tensors by stored name, sidecar."""

    path: Path
    config: dict[str, Any]
    tensors: dict[str, TensorSource]
    weight_files: list[str]
    sidecar: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    # What a command reads from the files once and passes on: the layout detection (converters.registry.detect),
    # the d2t/t2d map for each (V, Vd) a reader asked for, and each layout's reading or refusal (read_as).
    detection: Any = field(default=None, repr=False, compare=False)
    vocab_maps: dict[tuple[int, int], VocabMap | None] = field(default_factory=dict, repr=False, compare=False)
    readings: list[tuple[str, Any, Any]] = field(default_factory=list, repr=False, compare=False)

    def vocab_map(self, vocab_size: int, draft_vocab_size: int) -> VocabMap | None:
        """d2t/t2d decoded and cross-checked once (vocab_map.read_vocab_map raises what is wrong with them)."""
        key = (vocab_size, draft_vocab_size)
        if key not in self.vocab_maps:
            try:
                self.vocab_maps[key] = read_vocab_map(self.tensors.get("d2t"), self.tensors.get("t2d"), *key)
            except FormatError as exc:
                raise nemo_meta.missing_map(self.config, self.weight_files, exc) from None
        return self.vocab_maps[key]

    def read_as(self, layout: Any, options: Any) -> Any:
        """The Drafter `layout` (a converters.layout.Layout) reads from this checkpoint with `options`, read once: a
        command that asks again with equal options (validate's last word, inspect's view) gets the same object, so
        what a caller changes in it (convert.apply_training_capture fills the capture layers, idempotently) the
        next one sees. A refusal is kept too (ValueError: pydantic's, a field the canonical model refuses): asking
        again raises it again, unread (so a caller words a refusal in a new error, never by changing this one)."""
        for name, given, drafter in self.readings:
            if name == layout.name and given == options:
                if isinstance(drafter, Exception):
                    raise drafter
                return drafter
        try:
            unserved = kimi_k3.refusal(self.config, self.tensors)  # maths no layout's reading may change
            if unserved is not None:
                raise unserved
            drafter = layout.read(self, options)
        except (Eagle3Error, ValueError) as exc:
            self.readings.append((layout.name, replace(options), exc))
            raise
        self.readings.append((layout.name, replace(options), drafter))
        return drafter


def missing_config_hint(root: Path) -> str:
    """The hint for a directory without config.json: name the subfolder that has one (a download often nests the
    checkpoint one level down), else say what a drafter directory holds."""
    found = []
    try:
        with os.scandir(root) as entries:
            for _, entry in zip(range(256), entries):  # a hostile folder may hold millions of entries
                if entry.is_dir(follow_symlinks=False) and (Path(entry.path) / CONFIG_NAME).is_file():
                    found.append(entry.name)
    except OSError:
        pass
    if len(found) == 1:
        return f"{root / found[0]} holds a config.json: pass that folder"
    if found:
        return f"these subfolders hold a config.json: {', '.join(sorted(found)[:4])}; pass the drafter's folder"
    return "a drafter directory needs config.json beside its weights"


def pickled_weights(root: Path) -> list[str]:
    """pytorch_model*.bin, else NeMo Automodel's draft_model.pt (converters/nemo_meta.py)."""
    bins = sorted(p.name for p in root.glob("*.bin") if p.name.startswith("pytorch_model"))
    return bins or ([nemo_meta.WEIGHTS_NAME] if (root / nemo_meta.WEIGHTS_NAME).is_file() else [])


def pickles_ignored(bins: list[str]) -> list[str]:
    """The note for pickled weights beside safetensors ones (none when there are none)."""
    return [f"ignored {', '.join(bins)}: safetensors weights are present and are never second-guessed by a "
            "pickle"] if bins else []


def load_checkpoint(path: str | os.PathLike) -> Checkpoint:
    root = Path(path)
    if gguf_file(root) is not None:  # a .gguf, or a directory holding one and no config.json
        return Checkpoint(*read_gguf_drafter(root), [])
    if not root.is_dir():
        raise FormatError(f"{root}: not a directory", "pass the directory that holds config.json and the weights",
                          code="E-SRC-MISSING")
    config_path = root / CONFIG_NAME
    if not config_path.is_file():
        raise FormatError(f"{root}: no config.json", missing_config_hint(root), code="E-SRC-MISSING")
    config = read_json_file(config_path, f"{root}/config.json")
    notes: list[str] = []
    has_st = (root / INDEX_NAME).is_file() or any(root.glob("*.safetensors"))
    bins = pickled_weights(root)
    if has_st:
        tensors, files = read_tensor_table(root)
        notes += pickles_ignored(bins)
    elif bins:
        from ..bin_reader import read_bin_tensors  # torch is heavy: only for pickled checkpoints

        tensors, files = read_bin_tensors(root, bins)
    else:
        raise FormatError(f"{root}: no weights (model.safetensors, shards, pytorch_model.bin or draft_model.pt)",
                          "download the complete checkpoint", code="E-SRC-MISSING")
    if not tensors:
        raise FormatError(f"{root}: the weight files hold no tensors", "download the complete checkpoint",
                          code="E-SRC-EMPTY")
    tensors = nemo_meta.with_selected_vocab(root, config, dict(tensors), files, notes)
    claims, trusted = sidecar.read(root)
    return Checkpoint(root, config, tensors, files, claims if trusted else None, notes)
