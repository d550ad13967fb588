"""The `Layout` interface and what it is made of: the rename tables from canonical to stored tensor
names, the options a conversion runs with, a detection, the write plan, and the markers that tell
the flat (`LlamaForCausalLMEagle3`-style) layouts apart."""

from __future__ import annotations

import hashlib
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping

from ..capture_ids import IDS_KEY
from ..drafter import Drafter
from ..target_identity import TargetIdentity
from ..errors import FormatError, RefusalError
from ..safetensors_io import TensorSource, tensor_sha256
from .checkpoint import Checkpoint


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


@dataclass(frozen=True)
class ShiftedLayers:
    """Read only: `{stored}{j}.` is canonical `layers.{j + shift}.` (SGLang at 03d5a77 kept layer 0 as `midlayer`
    and layers >= 1 as `additional_layers.{i - 1}`)."""

    stored: str
    shift: int


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


def to_canonical(name: str, renames: tuple[Rename | LayerRename | ShiftedLayers, ...], num_layers: int) -> str:
    for rule in renames:
        if isinstance(rule, ShiftedLayers):
            m = re.match(rf"^{re.escape(rule.stored)}(\d+)\.", name)
            if m:
                name = f"layers.{int(m.group(1)) + rule.shift}.{name[m.end():]}"
                break
            continue
        if isinstance(rule, LayerRename) or (rule.single_layer_only and num_layers != 1):
            continue
        if name.startswith(rule.stored):
            name = rule.canonical + name[len(rule.stored):]
            break
    return _swap_in_layer(name, renames, to_stored=False)


def to_stored(name: str, renames: tuple[Rename | LayerRename | ShiftedLayers, ...], num_layers: int) -> str:
    name = _swap_in_layer(name, renames, to_stored=True)
    for rule in renames:
        if isinstance(rule, (LayerRename, ShiftedLayers)) or rule.read_only or \
                (rule.single_layer_only and num_layers != 1):
            continue
        if name.startswith(rule.canonical):
            return rule.stored + name[len(rule.canonical):]
    return name


KNOWN_CANONICAL = re.compile(
    r"^(fc\.weight|norm\.weight|lm_head\.weight|embed_tokens\.weight|input_norm\.weight|fc_norm\.\d+\.weight"
    r"|layers\.\d+\.(self_attn\.[a-z_]+|mlp\.(gate|up|down)_proj|input_layernorm|hidden_norm"
    r"|post_attention_layernorm)\.(weight|bias)|mask_hidden)$")
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
                "no engine loads it (SGLang skips it without a word, vLLM's loader fails on it); rename it to "
                "the layout's key or remove it "
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
    # what the registry's record of these weights says (provenance.Known): checked against config.json
    known: list[Any] = field(default_factory=list)
    capture_restated: list[str] = field(default_factory=list)  # what --capture-layers overruled (set by convert)
    # --correct-record: --capture-layers corrects the training record (registry, sidecar) it contradicts
    correct_record: bool = False
    target_gguf: str | None = None  # --to gguf: the target's GGUF (tokenizer, depth, width)
    outtype: str = "auto"  # --to gguf: dtype of the 2-D weights
    releases: dict[str, list[str | None]] = field(default_factory=dict)  # --engine: engine -> releases judged
    drop_embed: str | None = None  # --drop-embed identical|frozen (target_options.py)
    rope_theta: str | None = None  # --rope-theta THETA|target (target_options.py)


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
    # Canonical name -> the tensor as the written file holds it, where that is not the source's bytes (a dtype
    # change, `--outtype`): the output is then another drafter, derived from the source (fingerprint.py)
    cast: dict[str, TensorSource] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)  # canonical names the output leaves out (--drop-embed)

    @property
    def derivation(self) -> str | None:
        """How the written weights differ from the source's (None: they are the source's bytes)."""
        if self.dropped:
            return f"{', '.join(self.dropped)} left out" + (" and the weights cast" if self.cast else "")
        return "the weights are cast to another dtype" if self.cast else None

    def written(self, drafter: Drafter) -> Drafter:
        """The drafter the output holds: the source's tensors, cast and left out as planned."""
        tensors = {k: v for k, v in {**drafter.tensors, **self.cast}.items() if k not in self.dropped}
        return Drafter(drafter.config, tensors, drafter.vocab)


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
    kinds: tuple[str, ...] = ("eagle3",)  # the drafter kinds (drafter.KINDS) the layout can hold
    writes = True  # False: a producer's training output this tool reads and never writes (plan refuses)

    def config_view(self, config: dict[str, Any]) -> dict[str, Any]:
        """config.json as the drafter is built from it (validate checks this view): the file itself, unless a
        producer writes another model's config (NeMo Automodel writes the target's)."""
        return config

    @abstractmethod
    def detect(self, ckpt: Checkpoint) -> Detection | None: ...

    @abstractmethod
    def read(self, ckpt: Checkpoint, options: ConvertOptions) -> Drafter: ...

    @abstractmethod
    def plan(self, drafter: Drafter, options: ConvertOptions) -> WritePlan: ...


def refuse_unless(cond: bool, message: str, hint: str, code: str) -> None:
    if not cond:
        raise RefusalError(message, hint, code=code)


# ---------------------------------------------------------------- drafter kinds

# The kind a config names, by the name its producer gives it. speculators: `speculators_model_type`, as each config
# class registers it (speculators models/{eagle3,peagle,dflash,dspark}/config.py: SpeculatorModelConfig.register).
# Flat configs: the architecture. SpecForge writes PEagleDraftModel, DFlashDraftModel, DSparkDraftModel
# (configs/qwen3-8b-{peagle,dflash,dspark}.json); vLLM's speculators path turns peagle into PeagleLlamaForCausalLM /
# PeagleQwen3ForCausalLM (transformers_utils/configs/speculators/algos.py, update_peagle).
KIND_BY_SPECULATORS_TYPE = {"eagle3": "eagle3", "peagle": "peagle", "dflash": "dflash", "dspark": "dspark"}
KIND_BY_ARCHITECTURE = {"PEagleSpeculator": "peagle", "PEagleDraftModel": "peagle", "PeagleLlamaForCausalLM": "peagle",
                        "PeagleQwen3ForCausalLM": "peagle", "DFlashSpeculator": "dflash", "DFlashDraftModel": "dflash",
                        "DSparkSpeculator": "dspark", "DSparkDraftModel": "dspark"}
def drafter_kind(config: dict[str, Any]) -> tuple[str | None, str]:
    """The drafter kind config.json names (None: a speculators type this tool does not know), and the field naming
    it, as `field 'value'`. A config that names no kind is EAGLE-3."""
    named = config.get("speculators_model_type")
    if named is not None:
        return KIND_BY_SPECULATORS_TYPE.get(named) if isinstance(named, str) else None, \
            f"speculators_model_type {named!r}"
    archs = config.get("architectures") if isinstance(config.get("architectures"), list) else []
    arch = next((a for a in archs if isinstance(a, str) and a in KIND_BY_ARCHITECTURE), None)
    if arch is not None:
        return KIND_BY_ARCHITECTURE[arch], f"architectures {archs}"
    return "eagle3", "no kind named (EAGLE-3)"


def refuse_other_kind(kind: str, layout: str, kinds: tuple[str, ...], where: str, own: str) -> None:
    """A layout holds only the kinds its engines build: anything else is refused, naming the field and the layouts
    that hold it (`own`: the source's layout, which holds it as it is)."""
    if kind in kinds:
        return
    homes, why = f"an EAGLE-3 layout: its own, {own} (`--to {own}`), or `--to vllm` (vLLM serves every variant)", ""
    if kind == "peagle":
        homes = "the speculators layout (`--to speculators`, served by vLLM)"
    elif kind in ("dflash", "dspark"):
        homes = "the speculators or dflash layout (`--to speculators`, `--to dflash`: vLLM and SGLang serve them)"
        why = ": a block-diffusion drafter (plain decoder layers over its own target layers, a masked block drafted " \
              "in one pass), which no EAGLE-3 class builds"
    elif own in ("vllm", "nemo"):  # (nemo is read only)
        homes = "the vllm layout (`--to vllm`): vLLM serves every variant"
    raise RefusalError(f"the drafter is a {kind} drafter ({where}), and the {layout} layout holds "
                       f"{' and '.join(kinds)} drafters only{why}", f"convert it to {homes}", code="E-KIND-UNSUPPORTED")


# ---------------------------------------------------- flat-config layout markers

# The same flat `LlamaForCausalLMEagle3` config is written for SGLang, vLLM, original EAGLE and
# ModelOpt; these are the facts that tell them apart (see each layout's `detect`).
EAGLE3_ARCHITECTURES = frozenset({
    "LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM", "Eagle3Qwen3ForCausalLM", "Eagle3DeepseekV2ForCausalLM",
    "Eagle3DeepseekV3ForCausalLM", "Eagle3Qwen2_5vlForCausalLM", "Eagle3Qwen3vlForCausalLM",
    "Eagle3MiniMaxM2ForCausalLM", "LlamaForCausalLMEagle3Deep",
    # P-EAGLE drafters vLLM builds from its Eagle3 classes (registry.py; speculators algos.py update_peagle)
    "PEagleDraftModel", "PeagleLlamaForCausalLM", "PeagleQwen3ForCausalLM",
    # TensorRT-LLM's registered names (modeling_speculative.py: @register_auto_model on Eagle3ForCausalLM)
    "EAGLE3LlamaForCausalLM", "Eagle3DeepSeekV3ForCausalLM"})
# The drafter family of the class each engine builds for an architecture (vLLM's registry, SGLang's EntryClass).
ARCHITECTURE_FAMILY = {
    "LlamaForCausalLMEagle3": "llama", "Eagle3LlamaForCausalLM": "llama", "Eagle3Qwen2_5vlForCausalLM": "llama",
    "Eagle3Qwen3vlForCausalLM": "llama", "Eagle3MiniMaxM2ForCausalLM": "llama", "LlamaForCausalLMEagle3Deep": "llama",
    "Eagle3Qwen3ForCausalLM": "qwen3",
    "Eagle3DeepseekV2ForCausalLM": "deepseek_mla", "Eagle3DeepseekV3ForCausalLM": "deepseek_mla",
    "PEagleDraftModel": "llama", "PeagleLlamaForCausalLM": "llama", "PeagleQwen3ForCausalLM": "qwen3",
    "EAGLE3LlamaForCausalLM": "llama", "Eagle3DeepSeekV3ForCausalLM": "deepseek_mla",
}
# Architecture names only TensorRT-LLM registers (vLLM's registry and SGLang's EntryClass have neither): a flat
# config that declares one is read as the drafter family it names, and written with each layout's own name.
TRTLLM_ONLY_ARCHITECTURES = frozenset({"EAGLE3LlamaForCausalLM", "Eagle3DeepSeekV3ForCausalLM"})


def miscased_architecture(archs: list[Any]) -> tuple[str, str] | None:
    """(as written, the known name) for an architecture that differs from a known EAGLE-3 class in case only
    (AngelSlim's configs/qwen3/eagle3/qwen3-4b-eagle3.json writes Eagle3LLamaforCausalLM): every engine matches
    class names exactly and refuses it, but the class it means is not in doubt."""
    # (EAGLE3LlamaForCausalLM and Eagle3LlamaForCausalLM differ in case only: the name vLLM resolves wins)
    known = {name.casefold(): name for name in sorted(EAGLE3_ARCHITECTURES, key=TRTLLM_ONLY_ARCHITECTURES.__contains__,
                                                        reverse=True)}
    for arch in archs:
        if isinstance(arch, str) and arch not in EAGLE3_ARCHITECTURES and arch.casefold() in known:
            return arch, known[arch.casefold()]
    return None
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
    but never reads (`unused`): drop the unread one with a note when both hold the same weight, or keep the trained
    one when the other holds RMSNorm's initial ones (training never applied it: SpecForge forks' multi-layer
    drafters train `input_layernorm` there, as vLLM applies it, and leave `hidden_norm` at its init); refuse when
    they differ otherwise (E-KEY-DUPLICATE, as validate says) or when only the unread one is there."""
    pattern = re.compile(rf"^(model\.)?(layers\.[1-9]\d*|additional_layers\.\d+)\.{re.escape(unused)}\.")
    found = sorted(n for n in ckpt.tensors if pattern.match(n))
    if not found:
        return ckpt
    orphans = [n for n in found if n.replace(f".{unused}.", f".{used}.") not in ckpt.tensors]
    if orphans:
        raise FormatError(f"{orphans[0]} has no {used} beside it: {engine} normalises layers >= 1 with {used} and "
                          "would leave it random", f"the names look like {other_layout}'s: convert with "
                          f"--from {other_layout}", code="E-KEY-MISSING")
    tensors = dict(ckpt.tensors)
    merged, untrained = [], []
    for name in found:  # one canonical norm under two names: merged when the two hold the same weight
        twin = name.replace(f".{unused}.", f".{used}.")
        mine, theirs = ckpt.tensors[name], ckpt.tensors[twin]
        if (mine.dtype, tuple(mine.shape), tensor_sha256(mine)) == (theirs.dtype, tuple(theirs.shape),
                                                                      tensor_sha256(theirs)):
            merged.append(name)
        elif (init := untrained_of(twin, name, ckpt.tensors)) is not None:
            tensors[twin] = ckpt.tensors[name if init == twin else twin]  # the trained weight, under the read name
            untrained.append((name if init == twin else twin, init))
        else:
            raise FormatError(f"tensors {twin!r} and {name!r} hold different weights for one pre-attention norm: "
                              f"{engine} reads the first, the {other_layout} layout's engine the second, and converting "
                              "would keep one of them", "put the weight the drafter was trained to apply under both "
                              "names in a copy of the source, then convert", code="E-KEY-DUPLICATE")
        del tensors[name]
    if merged:
        notes.append(f"merged {', '.join(merged)} into {used} (identical weights): {engine}'s layers >= 1 normalise "
                     f"with {used} and never read {unused}")
    for trained, init in untrained:
        notes.append(f"kept {trained}, the trained pre-attention norm of its layer, and dropped {init}: it holds "
                     "RMSNorm's initial ones, a norm training never applied")
    return replace(ckpt, tensors=tensors)


_ONE = {"BF16": b"\x80\x3f", "F16": b"\x00\x3c", "F32": b"\x00\x00\x80\x3f"}  # 1.0, little-endian


def untrained_of(a: str, b: str, tensors: Mapping[str, TensorSource]) -> str | None:
    """Of two twins that differ, the one holding RMSNorm's initial ones when exactly one does, else None."""
    untrained = [n for n in (a, b) if all_ones(tensors[n])]
    return untrained[0] if len(untrained) == 1 else None


def all_ones(src: TensorSource) -> bool:
    """Whether a norm weight is exactly RMSNorm's initial value (every element 1.0)."""
    one = _ONE.get(src.dtype)
    count = 1
    for dim in src.shape:
        count *= dim
    return one is not None and tensor_sha256(src) == hashlib.sha256(one * count).hexdigest()
