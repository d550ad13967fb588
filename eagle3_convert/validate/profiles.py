"""Engine profiles: how each serving engine reads a drafter checkpoint, built from eagle3_convert.engines."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..converters import sglang, speculators, vllm
from ..converters.layout import LayerRename, Rename
from ..drafter import NORM_FLAGS, DrafterConfig, layer_index
from ..engines import (sglang as sglang_rules, speculators as speculators_rules, trtllm as trtllm_rules,
                       vllm as vllm_rules)

FLAGS = NORM_FLAGS


@dataclass(frozen=True)
class EngineProfile:
    """How one serving engine reads a drafter checkpoint (docs/formats.md §5)."""

    name: str  # also its capture-id convention in capture_ids
    label: str
    layout: str  # the layout eagle3-convert writes for it
    ids_from: str | None  # "top" or "nested" config location; None = a runtime argument
    key_rules: tuple[Rename | LayerRename, ...]  # stored name -> the parameter it loads into
    mla_key_rules: tuple[Rename | LayerRename, ...] | None  # its MLA drafter class, when it loads other names
    classes: Mapping[str, str] | None  # architecture -> drafter family it builds; None: speculators format only
    reads_speculators_format: bool
    families: frozenset[str]
    flags: frozenset[str]
    mla_flags: frozenset[str]
    bias: bool  # loads attention/MLP biases (MLA classes never do)
    mla_max_layers: int | None
    needs_t2d: bool
    needs_d2t: bool
    fc_skipped_when_width_matches: bool  # applies fc only when the incoming width differs from H
    eagle3_alias: bool = False  # builds Eagle3XForCausalLM for a plain XForCausalLM architecture
    # the family it builds from the config whatever its architectures (TensorRT-LLM's default one-model path)
    family_from_config: Callable[[Mapping[str, Any]], str] | None = None
    later_norms_built: tuple[str, ...] = ()  # the pre-attention norms it builds in layers >= 1, applied or not
    later_norm_applied: str = "input_layernorm"
    unknown_names_refused: bool = False  # its loader fails on a name matching no parameter (instead of skipping it)

    def rules_for(self, family: str) -> tuple[Rename, ...]:
        return self.mla_key_rules if family == "deepseek_mla" and self.mla_key_rules is not None else self.key_rules

    def served_family(self, architectures: Sequence[Any]) -> str | None:
        for arch in architectures:
            if not isinstance(arch, str) or self.classes is None:
                continue
            family = self.classes.get(arch) or (self.classes.get(f"Eagle3{arch}") if self.eagle3_alias else None)
            if family:
                return family
        return None

    def unsupported(self, cfg: DrafterConfig) -> list[str]:
        """Why this engine cannot serve `cfg` as trained (its maths or weights would change)."""
        mla = cfg.family == "deepseek_mla"
        out = []
        if cfg.family not in self.families:
            out.append(f"{self.label} has no {cfg.family} EAGLE-3 drafter class")
            return out
        if mla and self.mla_max_layers and cfg.num_layers > self.mla_max_layers:
            out.append(f"{self.label}'s MLA drafter class builds {self.mla_max_layers} layer, the drafter has "
                       f"{cfg.num_layers}")
        allowed = self.mla_flags if mla else self.flags
        out += [f"{flag} is true and {self.label} has no such option" for flag in FLAGS
                if getattr(cfg, flag) and flag not in allowed]
        if self.name == "speculators" and cfg.norm_before_fc and cfg.fc_norm:
            out.append("norm_before_fc and fc_norm are both true; speculators allows only one")
        if self.name == "trtllm" and cfg.norm_before_fc and cfg.fc_norm:  # apply_eagle3_fc: fc_norm, else input_norm
            out.append("norm_before_fc and fc_norm are both true; TensorRT-LLM applies fc_norm and skips input_norm")
        if (cfg.attention_bias or cfg.mlp_bias) and (mla or not self.bias):
            out.append(f"the drafter has bias tensors and {self.label} builds none")
        return out

    def builds_unapplied(self, cfg: DrafterConfig, loaded: str) -> bool:
        """Whether `loaded` is a parameter the engine builds but does not apply: a later layer's twin norm (vLLM
        builds hidden_norm there, SGLang input_layernorm). Such a weight is loaded, not dropped."""
        index = layer_index(loaded)
        return bool(index) and cfg.num_layers > 1 and any(
            loaded == f"layers.{index}.{norm}.weight" for norm in self.later_norms_built
            if norm != self.later_norm_applied)


_UNPREFIXED_MIDLAYER = (Rename("layers.0.", "midlayer.", single_layer_only=True),)
# TensorRT-LLM's Eagle3DecoderLayer names the pre-attention norm of layers >= 1 hidden_norm, the one it applies there
_TRTLLM_NAMES = (*_UNPREFIXED_MIDLAYER, LayerRename("input_layernorm.", f"{trtllm_rules.LATER_NORM_APPLIED}."))
_profiles: dict[str, EngineProfile] = {}


def engine_profiles() -> dict[str, EngineProfile]:
    """speculators (the library), vLLM, SGLang, TensorRT-LLM; key rules shared with their layouts."""
    if not _profiles:
        _profiles.update({
            "speculators": EngineProfile(
                name="speculators", label="the speculators library", layout="speculators",
                ids_from=speculators_rules.IDS_FROM, key_rules=speculators.RENAMES, mla_key_rules=None, classes=None,
                reads_speculators_format=True, families=speculators_rules.FAMILIES,
                flags=speculators_rules.FLAGS_READ, mla_flags=speculators_rules.MLA_FLAGS_READ,
                bias=speculators_rules.BUILDS_BIAS, mla_max_layers=None, needs_t2d=speculators_rules.NEEDS_T2D,
                needs_d2t=True, fc_skipped_when_width_matches=False),
            "vllm": EngineProfile(
                name="vllm", label="vLLM", layout="vllm", ids_from=vllm_rules.IDS_FROM["vllm-v2"][0],
                key_rules=vllm.RENAMES, mla_key_rules=None, classes=vllm_rules.CLASSES, reads_speculators_format=True,
                families=vllm_rules.FAMILIES, flags=vllm_rules.FLAGS_READ, mla_flags=vllm_rules.MLA_FLAGS_READ,
                bias=vllm_rules.BUILDS_BIAS, mla_max_layers=None, needs_t2d=vllm_rules.NEEDS_T2D, needs_d2t=True,
                fc_skipped_when_width_matches=False, eagle3_alias=True,
                later_norms_built=vllm_rules.LATER_NORMS_BUILT, later_norm_applied=vllm_rules.LATER_NORM_APPLIED,
                unknown_names_refused=vllm_rules.UNKNOWN_NAMES_REFUSED),
            "sglang": EngineProfile(
                name="sglang", label="SGLang", layout="sglang", ids_from=sglang_rules.IDS_FROM,
                key_rules=sglang.RENAMES, mla_key_rules=_UNPREFIXED_MIDLAYER, classes=sglang_rules.CLASSES,
                reads_speculators_format=False, families=sglang_rules.FAMILIES,
                flags=frozenset(sglang_rules.FLAGS_READ["llama"]),
                mla_flags=frozenset(sglang_rules.FLAGS_READ["deepseek_mla"]), bias=sglang_rules.BUILDS_BIAS,
                mla_max_layers=sglang_rules.MLA_MAX_LAYERS, needs_t2d=sglang_rules.NEEDS_T2D, needs_d2t=True,
                fc_skipped_when_width_matches=sglang_rules.FC_SKIPPED_WHEN_WIDTH_MATCHES,
                later_norms_built=sglang_rules.LATER_NORMS_BUILT, later_norm_applied=sglang_rules.LATER_NORM_APPLIED),
            "trtllm": EngineProfile(
                name="trtllm", label="TensorRT-LLM", layout="modelopt", ids_from=trtllm_rules.IDS_FROM,
                key_rules=_TRTLLM_NAMES, mla_key_rules=None, classes={},
                family_from_config=trtllm_rules.built_family,
                reads_speculators_format=False, families=trtllm_rules.FAMILIES, flags=trtllm_rules.FLAGS_READ,
                mla_flags=trtllm_rules.FLAGS_READ, bias=trtllm_rules.BUILDS_BIAS, mla_max_layers=None,
                needs_t2d=trtllm_rules.NEEDS_T2D, needs_d2t=True, fc_skipped_when_width_matches=False,
                later_norms_built=trtllm_rules.LATER_NORMS_BUILT, later_norm_applied=trtllm_rules.LATER_NORM_APPLIED),
        })
    return _profiles


# The layout whose file each engine reads right, for hints (llama.cpp's converter reads vLLM's top-level ids).
# mlx-vlm reads speculators configs (plus its own embed_tokens); LMDeploy the `midlayer.*` names of the eagle layout.
ENGINE_LAYOUT = {"speculators": "speculators", "vllm": "vllm", "sglang": "sglang", "trtllm": "modelopt",
                 "llamacpp": "vllm", "mlx-vlm": "speculators", "lmdeploy": "eagle"}
# Who serves each layout when --engine is not given.
LAYOUT_ENGINES: dict[str, tuple[str, ...]] = {
    "speculators": ("speculators", "vllm"), "vllm": ("vllm",), "sglang": ("sglang",),
    "eagle": ("sglang", "vllm"), "modelopt": ("trtllm",),  # ModelOpt's ids are TensorRT-LLM's; vLLM: --engine
    "gguf": ("llamacpp",),
    "nemo": ("vllm",),  # served by none as it is: vLLM's refusal says why
    "dflash": ("vllm", "sglang"),
}
