"""The `Layout` interface and what it is made of: the rename tables from canonical to stored tensor
names, the options a conversion runs with, a detection, the write plan, and the markers that tell
the flat (`LlamaForCausalLMEagle3`-style) layouts apart."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from ..drafter import Drafter, TargetIdentity
from ..errors import FormatError, RefusalError
from ..safetensors_io import TensorSource, tensor_sha256
from .checkpoint import Checkpoint
from ..capture_ids import IDS_KEY


# --------------------------------------------------------------- tensor names

@dataclass(frozen=True)
class Rename:
    """`canonical` prefix <-> `stored` prefix; rules are tried in order, both directions."""

    canonical: str
    stored: str
    single_layer_only: bool = False
    read_only: bool = False  # an alias the engine accepts, never written


@dataclass(frozen=True)
class LayerRename:
    """Inside `layers.{i}.` for i >= from_layer: `canonical` <-> `stored` name of the same module.

    SGLang calls the pre-attention norm of layers >= 1 `hidden_norm`; the canonical (HF,
    speculators, vLLM) name is `input_layernorm`.
    """

    canonical: str
    stored: str
    from_layer: int = 1


_LAYER_NAME = re.compile(r"^layers\.(\d+)\.(.+)$")


def _swap_in_layer(name: str, renames: tuple[Rename | LayerRename, ...], to_stored: bool) -> str:
    m = _LAYER_NAME.match(name)
    if not m:
        return name
    index, rest = int(m.group(1)), m.group(2)
    for rule in renames:
        if isinstance(rule, LayerRename) and index >= rule.from_layer:
            old, new = (rule.canonical, rule.stored) if to_stored else (rule.stored, rule.canonical)
            if rest.startswith(old):
                return f"layers.{index}.{new}{rest[len(old):]}"
    return name


def to_canonical(name: str, renames: tuple[Rename | LayerRename, ...], num_layers: int) -> str:
    for rule in renames:
        if isinstance(rule, LayerRename) or (rule.single_layer_only and num_layers != 1):
            continue
        if name.startswith(rule.stored):
            name = rule.canonical + name[len(rule.stored):]
            break
    return _swap_in_layer(name, renames, to_stored=False)


def to_stored(name: str, renames: tuple[Rename | LayerRename, ...], num_layers: int) -> str:
    name = _swap_in_layer(name, renames, to_stored=True)
    for rule in renames:
        if isinstance(rule, LayerRename) or rule.read_only or (rule.single_layer_only and num_layers != 1):
            continue
        if name.startswith(rule.canonical):
            return rule.stored + name[len(rule.canonical):]
    return name


KNOWN_CANONICAL = re.compile(
    r"^(fc\.weight|norm\.weight|lm_head\.weight|embed_tokens\.weight|input_norm\.weight|fc_norm\.\d+\.weight"
    r"|layers\.\d+\.(self_attn\.[a-z_]+|mlp\.(gate|up|down)_proj|input_layernorm|hidden_norm"
    r"|post_attention_layernorm)\.(weight|bias))$")
VOCAB_TENSORS = ("d2t", "t2d")


def canonical_tensors(ckpt: Checkpoint, renames: tuple[Rename | LayerRename, ...], num_layers: int,
                      layout: str) -> dict[str, TensorSource]:
    """Stored names -> canonical names; refuses names the layout does not know (they would be lost)."""
    out: dict[str, TensorSource] = {}
    for stored, ref in ckpt.tensors.items():
        if stored in VOCAB_TENSORS:
            continue
        canonical = to_canonical(stored, renames, num_layers)
        if not KNOWN_CANONICAL.match(canonical):
            raise RefusalError(
                f"tensor {stored!r} is not part of an EAGLE-3 drafter in the {layout} layout",
                "engines drop unknown tensors silently; rename it to the layout's key or remove it "
                "(`eagle3-convert inspect SRC` lists the expected names)", code="E-KEY-UNKNOWN")
        if canonical in out:
            raise FormatError(f"tensors {stored!r} and another name both map to {canonical!r}",
                              "the checkpoint stores one weight twice under two prefixes; keep one",
                              code="E-KEY-DUPLICATE")
        out[canonical] = ref
    return out


# ----------------------------------------------------------------- layouts


@dataclass
class ConvertOptions:
    verifier: TargetIdentity | None = None  # who the drafter proposes for, written where a layout names it
    target: TargetIdentity | None = None  # the target's config: depth and family for capture-id quirks
    repair_d2t_absolute: bool = False
    training_capture: tuple[list[int], str] | None = None  # boundaries the training used, and who says so
    # training_capture was stated with --capture-layers (not taken from a record): it may settle which of
    # two readings of an ambiguous or conflicting id list the drafter was trained on
    capture_stated: bool = False
    target_gguf: str | None = None  # --to gguf: the target's GGUF (tokenizer, depth, width)
    outtype: str = "auto"  # --to gguf: dtype of the 2-D weights
    releases: dict[str, list[str | None]] = field(default_factory=dict)  # --engine: engine -> releases judged


@dataclass
class WritePlan:
    """Everything a destination directory will hold, before any byte is written."""

    layout: str
    config: dict[str, Any]
    tensors: dict[str, TensorSource]
    notes: list[str] = field(default_factory=list)
    derived_keys: list[str] = field(default_factory=list)  # added for an engine's sake; dropped when read back
    # Writes the weights into the temp dir instead of config.json + safetensors (GGUF): (tmp, dest, progress) -> files
    writer: Callable[[Path, Path, Callable[[int], None] | None], list[str]] | None = None


@dataclass(frozen=True)
class Detection:
    layout: str
    confident: bool
    reason: str


class Layout(ABC):
    """One checkpoint layout: how to recognise it, read it into a Drafter, and plan writing one."""

    name: str
    summary: str  # one line: who writes it, who serves it
    engine: str  # the engine whose capture-id convention this layout's config follows
    renames: tuple[Rename | LayerRename, ...] = ()  # canonical -> stored tensor names (none: the canonical ones)
    # The engines (eagle3_convert.engines names) a file in this layout is written for: each must
    # serve it as trained, or the write is refused.
    home_engines: tuple[str, ...] = ()

    @abstractmethod
    def detect(self, ckpt: Checkpoint) -> Detection | None: ...

    @abstractmethod
    def read(self, ckpt: Checkpoint, options: ConvertOptions) -> Drafter: ...

    @abstractmethod
    def plan(self, drafter: Drafter, options: ConvertOptions) -> WritePlan: ...


def refuse_unless(cond: bool, message: str, hint: str, code: str) -> None:
    if not cond:
        raise RefusalError(message, hint, code=code)


# ---------------------------------------------------- flat-config layout markers

# The same flat `LlamaForCausalLMEagle3` config is written for SGLang, vLLM, original EAGLE and
# ModelOpt; these are the facts that tell them apart (see each layout's `detect`).
EAGLE3_ARCHITECTURES = frozenset({
    "LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM", "Eagle3Qwen3ForCausalLM", "Eagle3DeepseekV2ForCausalLM",
    "Eagle3DeepseekV3ForCausalLM", "Eagle3Qwen2_5vlForCausalLM", "Eagle3Qwen3vlForCausalLM",
    "Eagle3MiniMaxM2ForCausalLM", "LlamaForCausalLMEagle3Deep"})
# The drafter family of the class each engine builds for an architecture (vLLM's registry, SGLang's EntryClass).
ARCHITECTURE_FAMILY = {
    "LlamaForCausalLMEagle3": "llama", "Eagle3LlamaForCausalLM": "llama", "Eagle3Qwen2_5vlForCausalLM": "llama",
    "Eagle3Qwen3vlForCausalLM": "llama", "Eagle3MiniMaxM2ForCausalLM": "llama", "LlamaForCausalLMEagle3Deep": "llama",
    "Eagle3Qwen3ForCausalLM": "qwen3",
    "Eagle3DeepseekV2ForCausalLM": "deepseek_mla", "Eagle3DeepseekV3ForCausalLM": "deepseek_mla",
}
# Keys only NVIDIA ModelOpt writes into the nested eagle_config.
MODELOPT_EAGLE_FIELDS = ("use_input_layernorm_in_first_layer", "use_last_layernorm", "use_mtp_layernorm",
                         "next_layer_regular", "parallel_draft_step", "parallel_draft_heads_num_layers")


@dataclass(frozen=True)
class FlatMarkers:
    architectures: tuple[str, ...]
    eagle3_architecture: bool  # an architecture some engine serves as EAGLE-3
    midlayer: bool  # tensors named midlayer.* (SpecForge, original EAGLE, ModelOpt's Megatron export)
    pickled: bool  # weights in pytorch_model*.bin (original EAGLE research code)
    top_level_ids: bool  # vLLM reads ids there; SGLang ignores them
    nested_ids: bool  # SGLang and ModelOpt keep their ids in eagle_config (ours add a top-level copy for vLLM)
    has_eagle_config: bool
    modelopt_fields: tuple[str, ...]
    norm_before_residual_key: bool  # a vLLM key SGLang, EAGLE and ModelOpt never write
    quantized: bool  # ModelOpt quantized export


def flat_markers(ckpt: Checkpoint) -> FlatMarkers:
    cfg = ckpt.config
    archs = cfg.get("architectures")
    archs = tuple(a for a in archs if isinstance(a, str)) if isinstance(archs, list) else ()
    eagle = cfg.get("eagle_config") if isinstance(cfg.get("eagle_config"), dict) else {}
    return FlatMarkers(
        architectures=archs,
        eagle3_architecture=any(a in EAGLE3_ARCHITECTURES for a in archs),
        midlayer=any(name.startswith("midlayer.") for name in ckpt.tensors),
        pickled=any(f.endswith(".bin") for f in ckpt.weight_files),
        top_level_ids=bool(cfg.get(IDS_KEY)),
        nested_ids=bool(eagle.get(IDS_KEY)),
        has_eagle_config=isinstance(cfg.get("eagle_config"), dict),
        modelopt_fields=tuple(k for k in MODELOPT_EAGLE_FIELDS if k in eagle),
        norm_before_residual_key="norm_before_residual" in cfg,
        quantized="quantization_config" in cfg or (ckpt.path / "hf_quant_config.json").is_file(),
    )



# --------------------------------------------- the pre-attention norm of layers >= 1

LATER_NORMS = ("input_layernorm", "hidden_norm")  # vLLM's and SGLang's pre-attention norm of layers >= 1


def with_both_later_norms(tensors: dict[str, TensorSource], num_layers: int) -> dict[str, TensorSource]:
    """Layers >= 1 normalise their input with `input_layernorm` in vLLM and with `hidden_norm` in SGLang,
    and each engine leaves the other name unset without a word. Writing the one weight under both names
    makes a multi-layer file right in both engines (each builds both, and reads its own)."""
    out = dict(tensors)
    for i in range(1, num_layers):
        names = [f"layers.{i}.{norm}.weight" for norm in LATER_NORMS]
        present = [n for n in names if n in out]
        if len(present) == 1:
            out[next(n for n in names if n not in out)] = out[present[0]]
    return out


def drop_unused_layer_norms(ckpt: Checkpoint, unused: str, used: str, engine: str, other_layout: str,
                            notes: list[str]) -> Checkpoint:
    """Layers >= 1 carry one pre-attention norm the engine reads (`used`) and one its class builds
    but never reads (`unused`): drop the unread one with a note when both hold the same weight; refuse when
    they differ (E-KEY-DUPLICATE, as validate says) or when only the unread one is there."""
    pattern = re.compile(rf"^(model\.)?layers\.([1-9]\d*)\.{re.escape(unused)}\.")
    found = sorted(n for n in ckpt.tensors if pattern.match(n))
    if not found:
        return ckpt
    orphans = [n for n in found if n.replace(f".{unused}.", f".{used}.") not in ckpt.tensors]
    if orphans:
        raise FormatError(f"{orphans[0]} has no {used} beside it: {engine} normalises layers >= 1 with {used} and "
                          "would leave it random", f"the names look like {other_layout}'s: convert with "
                          f"--from {other_layout}", code="E-KEY-MISSING")
    for name in found:  # one canonical norm under two names: merged only when the two hold the same weight
        twin = name.replace(f".{unused}.", f".{used}.")
        mine, theirs = ckpt.tensors[name], ckpt.tensors[twin]
        if (mine.dtype, tuple(mine.shape), tensor_sha256(mine)) != (theirs.dtype, tuple(theirs.shape),
                                                                      tensor_sha256(theirs)):
            raise FormatError(f"tensors {twin!r} and {name!r} hold different weights for one pre-attention norm: "
                              f"{engine} reads the first, the {other_layout} layout's engine the second, and converting "
                              "would keep one of them", f"put the weight the drafter was trained to apply under both names "
                              "in a copy of the source, then convert", code="E-KEY-DUPLICATE")
    notes.append(f"merged {', '.join(found)} into {used} (identical weights): {engine}'s layers >= 1 normalise with "
                 f"{used} and never read {unused}")
    return replace(ckpt, tensors={n: t for n, t in ckpt.tensors.items() if n not in found})
