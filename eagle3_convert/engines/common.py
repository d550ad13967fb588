"""What every engine module shares: the reading it returns, the target context it reads for, and small
readers of config.json and tensor names."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Collection, Mapping

from ..capture_ids import IDS_KEY, depth_defaults  # noqa: F401 (IDS_KEY: the engine modules read it from here)
from ..drafter import NORM_FLAGS
from ..json_values import is_int

FLAGS = NORM_FLAGS

# Verdicts, from best to worst.
AS_TRAINED = "as-trained"  # the engine captures the trained layers and computes the trained maths
DEFAULT_LAYERS = "default-layers"  # the file names no layers; the engine's defaults are the trained ones
RUNTIME_LAYERS = "runtime-layers"  # layers come from a serve-time argument: right when given the ids shown
REFUSES = "refuses"  # the engine fails loudly on this file
WRONG = "wrong"  # the engine loads it and serves something else, without a word
UNKNOWN = "unknown"  # a file the sources read do not decide (or a release they were not read in): no verdict

@dataclass(frozen=True)
class TargetContext:
    """What the id conventions depend on: the target's family (SGLang quirks) and depth L."""

    family: str = "default"  # capture_ids.target_family
    depth: int | None = None
    mrope: bool = False  # the target's config declares M-RoPE (engines/vllm.py mrope_section)


@dataclass
class Reading:
    """One engine's reading of one checkpoint."""

    engine: str
    label: str
    refusal: str | None = None  # the engine's own loud failure (every line showing it names the engine first)
    family: str | None = None  # drafter family of the class it builds
    kind: str = "eagle3"  # the drafter kind (drafter.KINDS) it builds
    captures: list[int] | None = None  # boundaries it captures (None: unknown depth, or runtime)
    from_default: bool = False  # the captures are the engine's defaults, not read from the file
    runtime: bool = False  # takes the capture layers as a serve-time argument (TensorRT-LLM)
    flags: dict[str, bool] = field(default_factory=dict)  # the maths flags as it applies them
    silent: list[str] = field(default_factory=list)  # what it drops or misreads without a word
    # what serves as trained only within limits or with a serve-time flag (said beside the verdict, never hidden)
    caveats: list[str] = field(default_factory=list)
    # drafter kind -> why the sources read do not decide how the engine serves a drafter of that kind (no verdict)
    undecided: dict[str, str] = field(default_factory=dict)

    def captures_defaults(self, depth: int | None) -> None:
        """The file names no ids the engine reads: it captures its defaults (unknown on a target of unknown depth)."""
        self.captures, self.from_default = depth_defaults(depth), True


_LAYER = re.compile(r"^(?:model\.)?(?:layers|midlayer)\.(\d+)\.")


def architectures(config: Mapping[str, Any]) -> list[str]:
    archs = config.get("architectures")
    return [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []


def nested(config: Mapping[str, Any]) -> Mapping[str, Any]:
    eagle = config.get("eagle_config")
    return eagle if isinstance(eagle, dict) else {}


def id_list(value: Any) -> list[int] | None:
    """A capture list as an engine takes it: None or [] means 'not given'."""
    if isinstance(value, list) and value and all(is_int(x) for x in value):
        return list(value)
    return None


def flag(config: Mapping[str, Any], key: str, default: bool = False) -> bool:
    value = config.get(key, default)
    return bool(value) if value is not None else default


def num_layers(names: Collection[str]) -> int:
    found = {int(m.group(1)) for n in names if (m := _LAYER.match(n))}
    return max(found) + 1 if found else 1  # layer 0 stored as midlayer.* (no index) counts as the default 1


def has(names: Collection[str], pattern: str) -> list[str]:
    rx = re.compile(pattern)
    return sorted(n for n in names if rx.search(n))


def dropped(names: list[str], what: str, label: str) -> list[str]:
    if not names:
        return []
    shown = ", ".join(names[:3]) + (f" (+{len(names) - 3} more)" if len(names) > 3 else "")
    return [f"{label} drops {what} ({shown}) without a word"]


def unread_later_norms(names: Collection[str], stored: str, read: str) -> list[str]:
    """Layers >= 1 whose pre-attention norm is stored only as `stored` where the engine reads `read`."""
    rx = re.compile(rf"^(?:model\.)?layers\.([1-9]\d*)\.{stored}\.weight$")
    return sorted(n for n in names if (m := rx.match(n)) and not any(
        other.endswith(f"layers.{m.group(1)}.{read}.weight") for other in names))


def unsupported_activation(config: Mapping[str, Any], supported: tuple[str, ...]) -> str | None:
    """The engine's own refusal of the decoder's `hidden_act` (a speculators config nests it in
    transformer_layer_config; absent, it is transformers' LlamaConfig default, silu), or None."""
    layer_cfg = config.get("transformer_layer_config")
    act = (layer_cfg if isinstance(layer_cfg, dict) else config).get("hidden_act", "silu")
    if act in supported:
        return None
    return f"Unsupported activation: {act}. Only {' or '.join(supported)} is supported for now."


def trained_window(config: Mapping[str, Any]) -> int | None:
    """The sliding window the drafter was trained with, from its decoder config (speculators nests it in
    transformer_layer_config): `sliding_window` where `layer_types` marks a layer "sliding_attention", the only
    way speculators 0.9.0 trains one (`Eagle3DraftModel.__init__`, models/eagle3/core.py) and vLLM applies one.
    `use_sliding_window` without `layer_types` is full attention to both for a Llama decoder. None: no window."""
    layer_cfg = config.get("transformer_layer_config")
    dec = layer_cfg if isinstance(layer_cfg, dict) else config
    window, types = dec.get("sliding_window"), dec.get("layer_types")
    if not isinstance(window, int) or isinstance(window, bool) or window <= 0 or not isinstance(types, list):
        return None
    return window if "sliding_attention" in types else None


def window_ignored(label: str, window: int, how: str = "") -> str:
    return (f"{label} attends over the whole context where the drafter was trained with a {window}-token sliding "
            f"window: the maths differ past {window} tokens{how}")
