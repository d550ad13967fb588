"""The canonical EAGLE-3 drafter every layout reads into and writes out of.

`DrafterConfig` holds what changes the maths or the wiring, in canonical names; keys no
layout models are carried verbatim (`hf_extra` for decoder-config keys, `layout_extra`
for keys only one layout knows). `Drafter.tensors` maps CANONICAL tensor names
(speculators spelling: `layers.{i}.*`, `fc.weight`, ...) to lazy byte references;
d2t/t2d live in `Drafter.vocab`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .quantization import QuantScheme
from .target_identity import TargetIdentity
from .vocab_map import VocabMap
from .safetensors_io import TensorSource

Family = Literal["llama", "qwen3", "deepseek_mla"]
FAMILIES = ("llama", "qwen3", "deepseek_mla")
# The drafter kinds this tool knows: EAGLE-3, P-EAGLE (vllm-project/speculators `models/peagle`: EAGLE-3 layers
# plus a learned `mask_hidden` and a `mask_token_id`, drafting several tokens in one pass), and the block-diffusion
# drafters DFlash and DSpark (speculators `models/dflash`, `models/dspark`; z-lab/SpecForge `DFlashDraftModel`,
# `DSparkDraftModel`): plain decoder layers over their own captured target states, a `mask_token_id` block drafted
# in one pass, and the verifier's embedding and head borrowed when the file has none (converters/block_diffusion.py).
# DFlash2 (speculators `models/dflash2`, PR 1006) is DFlash with a grouped dynamic convolution around each layer's
# attention and MLP and a low-rank candidate selector over the full verifier vocabulary (converters/dflash2.py).
Kind = Literal["eagle3", "peagle", "dflash", "dspark", "dflash2"]
KINDS = ("eagle3", "peagle", "dflash", "dspark", "dflash2")
BLOCK_KINDS = ("dflash", "dspark", "dflash2")
KIND_LABELS = {"eagle3": "EAGLE-3", "peagle": "P-EAGLE", "dflash": "DFlash", "dspark": "DSpark", "dflash2": "DFlash2"}
# What the head is fed (docs/formats.md §4.4): "aux", k captured target states fused by fc; "final", the target's
# final post-norm hidden state as it is, no fc (ModelOpt's `eagle_config.use_aux_hidden_state: false`, as in
# nvidia/gpt-oss-120b-Eagle3-v2; vLLM and SGLang feed it so when the flag is false, engines/vllm.py, sglang.py).
Capture = Literal["aux", "final"]
# DSpark's Markov and confidence heads (speculators models/dspark), each built when a config field says so
BLOCK_HEADS = {"markov_head.": "markov_rank", "confidence_head.": "enable_confidence_head"}

# Drafter decoder model_type -> family. MLA drafters serve DeepSeek-V3 / Kimi-K2.5 targets.
FAMILY_BY_MODEL_TYPE: dict[str, Family] = {
    "llama": "llama",
    "qwen3": "qwen3",
    "deepseek_v2": "deepseek_mla",
    "deepseek_v3": "deepseek_mla",
    "kimi_k2": "deepseek_mla",
}
# What a writer spells for each family. Not deepseek_v3 for MLA: vLLM turns a deepseek_v3 draft config into
# DeepSeek MTP and refuses it (engines.vllm.MTP_MODEL_TYPES); it reads kimi_k2 with the same DeepseekV3Config.
MODEL_TYPE_BY_FAMILY: dict[Family, str] = {"llama": "llama", "qwen3": "qwen3", "deepseek_mla": "kimi_k2"}

# The variant flags that change the maths (docs/formats.md §1); a layout that cannot express one refuses.
NORM_FLAGS = ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output")  # in vLLM/SGLang meaning
MATH_FLAGS = (*NORM_FLAGS, "input_layernorm_on_hidden")
ROPE_KEYS = ("rope_theta", "rope_scaling", "rope_parameters", "partial_rotary_factor")
MLA_KEYS = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")


class DrafterConfig(BaseModel):
    """Canonical drafter configuration; capture layers as boundaries (docs/formats.md §4)."""

    model_config = ConfigDict(extra="forbid")

    kind: Kind = "eagle3"
    family: Family = "llama"
    hidden_size: int = Field(gt=0)
    intermediate_size: int = Field(gt=0)
    num_attention_heads: int = Field(gt=0)
    num_key_value_heads: int = Field(gt=0)
    head_dim: int | None = Field(default=None, gt=0)
    num_layers: int = Field(default=1, ge=1)
    rms_norm_eps: float = 1e-5
    hidden_act: str = "silu"
    max_position_embeddings: int | None = None
    rope: dict[str, Any] = Field(default_factory=dict, description="rope fields, verbatim as the source spelled them")
    mla: dict[str, int] | None = None

    vocab_size: int = Field(gt=0, description="target vocab V")
    draft_vocab_size: int = Field(gt=0, description="draft vocab Vd")
    target_hidden_size: int | None = Field(default=None, description="Ht; None when equal to hidden_size")
    num_aux_hidden_states: int = Field(default=3, ge=1, description="k, the number of captured target states")
    capture_boundaries: list[int] | None = Field(default=None, description="None: the engine default {2, L//2, L-3}")
    capture: Capture = "aux"

    norm_before_residual: bool = False
    norm_before_fc: bool = False
    fc_norm: bool = False
    norm_output: bool = False
    # ModelOpt's HF trainer runs input_layernorm over h before hidden_norm in the first layer:
    # hidden_norm(input_layernorm(h)) where every engine computes hidden_norm(h).
    input_layernorm_on_hidden: bool = False
    attention_bias: bool = False
    mlp_bias: bool = False
    tie_word_embeddings: bool = False
    # P-EAGLE: the token id its parallel positions are filled with (vLLM's update_peagle reads it as pard_token);
    # DFlash/DSpark: the token of the masked block positions
    mask_token_id: int | None = Field(default=None, ge=0)
    # DFlash/DSpark: the algorithm's own fields (block_size, markov_rank, ...), as speculators spells them flat
    algorithm: dict[str, Any] = Field(default_factory=dict)
    # A ModelOpt-quantized drafter's scheme (quantization.py); which modules stay plain is read from the tensors
    quantization: QuantScheme | None = None

    target: TargetIdentity | None = None
    hf_extra: dict[str, Any] = Field(default_factory=dict, description="decoder-config keys carried verbatim")
    top_extra: dict[str, Any] = Field(default_factory=dict, description="top-level keys every layout keeps (dtype)")
    layout_extra: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="keys only one layout has, re-emitted when writing that layout")

    @model_validator(mode="after")
    def _mla_widths_stated(self) -> "DrafterConfig":
        if self.family == "deepseek_mla" and not (self.mla and all(k in self.mla for k in MLA_KEYS)):
            raise ValueError(f"an MLA drafter needs every latent width: {', '.join(MLA_KEYS)}")
        if self.capture == "final" and (self.num_aux_hidden_states != 1 or self.capture_boundaries is not None
                                        or self.resolved_target_hidden_size != self.hidden_size or self.fc_norm
                                        or self.norm_before_fc or self.kind in BLOCK_KINDS):
            raise ValueError("a head fed the target's final state takes one state of the drafter's own width, "
                             "with no capture layers and no fc (nor fc_norm / norm_before_fc)")
        return self

    def block_tokens(self) -> int | None:
        """A DFlash/DSpark block's drafted tokens: the block less its anchor, or all of it when it samples from the
        anchor (speculators models/dflash/core.py `_build_base_config_kwargs`)."""
        block = self.algorithm.get("block_size")
        if not isinstance(block, int) or isinstance(block, bool):
            return None
        return block if self.algorithm.get("sample_from_anchor") else block - 1

    @property
    def resolved_head_dim(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def resolved_target_hidden_size(self) -> int:
        return self.target_hidden_size or self.hidden_size

    def rope_normalized(self) -> dict[str, Any]:
        """Rope settings independent of the transformers 4/5 spelling."""
        params = dict(self.rope.get("rope_parameters") or {})
        scaling = self.rope.get("rope_scaling") or {}
        for key, value in scaling.items():
            params.setdefault("rope_type" if key == "type" else key, value)
        if "rope_theta" in self.rope:
            params.setdefault("rope_theta", self.rope["rope_theta"])
        params.setdefault("rope_type", "default")
        if "partial_rotary_factor" in self.rope:
            params.setdefault("partial_rotary_factor", self.rope["partial_rotary_factor"])
        return params

    def semantic_dict(self) -> dict[str, Any]:
        """What defines the model besides its weights (for equality across layouts and readings)."""
        data = self.model_dump(exclude={"hf_extra", "top_extra", "layout_extra", "rope", "target"})
        if self.kind not in BLOCK_KINDS:  # what a drafter was before block-diffusion kinds existed
            del data["algorithm"]
        if self.kind == "eagle3":  # an EAGLE-3 drafter's id stays what it was before kinds existed
            del data["kind"], data["mask_token_id"]
        if self.quantization is None:  # a plain drafter's id stays what it was before quantized ones were read
            del data["quantization"]
        if self.capture == "aux":  # likewise before capture modes existed
            del data["capture"]
        data["head_dim"] = self.resolved_head_dim
        data["target_hidden_size"] = self.resolved_target_hidden_size
        data["rope"] = self.rope_normalized()
        return data


TORCH_DTYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}  # safetensors dtype -> config spelling


def dtype_of_weights(cfg: DrafterConfig, weights_dtype: str | None, notes: list[str]) -> DrafterConfig:
    """`cfg` with the `dtype` / `torch_dtype` it carries saying `weights_dtype` (config.json's dtype always names the
    tensors': a cast must not keep its source's), and a note when that changed it."""
    spelled = TORCH_DTYPES.get(weights_dtype or "")
    stale = {key: value for key, value in cfg.top_extra.items() if key in ("dtype", "torch_dtype") and value != spelled}
    if spelled is None or not stale:
        return cfg
    notes.append(f"config {', '.join(f'{k} {v!r}' for k, v in stale.items())} set to {spelled!r}: the weights are "
                 f"{weights_dtype}")
    return cfg.model_copy(update={"top_extra": {**cfg.top_extra, **{key: spelled for key in stale}}})


@dataclass
class Drafter:
    """A drafter in canonical form: config, tensors by canonical name, vocab map."""

    config: DrafterConfig
    tensors: dict[str, TensorSource]
    vocab: VocabMap | None = None
    notes: list[str] = field(default_factory=list)


# ------------------------------------------------------------ tensor roles
# Each canonical tensor name with the shape the config implies. A role table, not code
# per layout: layouts only rename prefixes (see converters/*.RENAMES).

_LAYER_RE = re.compile(r"^layers\.(\d+)\.(.+)$")


def wrong_target_width(fc_width: int, count: int | None, declared_ht: int | None, hidden_size: int,
                       target_width: int | None = None) -> tuple[str, str] | None:
    """(message, hint) when config.json's target_hidden_size contradicts fc.weight, else None.

    `count` states (the capture ids', or num_aux_hidden_states) split fc's input columns into another width
    than the declared one: the width is wrong, not the count, when that width is the drafter's own or the
    target's, or when the declared one divides the columns into no whole number of states.
    """
    if not declared_ht or not count or fc_width % count or fc_width // count == declared_ht:
        return None
    width = fc_width // count
    if fc_width % declared_ht == 0 and width not in (hidden_size, target_width):
        return None  # as likely a wrong number of capture ids (E-CAPTURE-COUNT)
    known = f"; the target's hidden_size is {target_width}" if target_width else ""
    default = " (or remove it: it defaults to hidden_size)" if width == hidden_size else ""
    return (f"target_hidden_size is {declared_ht}, but fc.weight's {fc_width} input columns fuse {count} captured "
            f"states of width {width}{known}", f"set target_hidden_size in config.json to {width}{default}")


def expected_shapes(cfg: DrafterConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor the config implies (embed_tokens excluded: it is optional everywhere)."""
    H, Ht, k = cfg.hidden_size, cfg.resolved_target_hidden_size, cfg.num_aux_hidden_states
    nh, nkv, hd, I = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.resolved_head_dim, cfg.intermediate_size
    block = cfg.kind in BLOCK_KINDS
    shapes: dict[str, tuple[int, ...]] = {"norm.weight": (H,)}
    if cfg.capture == "aux":  # a head fed the final state has no fc
        shapes["fc.weight"] = (H, k * Ht)
    if block:  # DFlash/DSpark: one hidden_norm over fc's output, every layer a plain decoder layer (H input)
        shapes["hidden_norm.weight"] = (H,)
    else:  # (a block-diffusion drafter borrows the verifier's head when it stores none: optional_shapes)
        shapes["lm_head.weight"] = (cfg.draft_vocab_size, H)
    if cfg.norm_before_fc:
        shapes["input_norm.weight"] = (k * Ht,)
    if cfg.kind == "peagle":  # the hidden state of the masked positions (speculators PEagleDraftModel.mask_hidden)
        shapes["mask_hidden"] = (1, 1, k * Ht)
    if cfg.fc_norm:
        for j in range(k):
            shapes[f"fc_norm.{j}.weight"] = (Ht,)
    for i in range(cfg.num_layers):
        p = f"layers.{i}."
        width = 2 * H if i == 0 and not block else H
        if cfg.family == "deepseek_mla":
            m = cfg.mla or {}
            shapes.update({
                p + "self_attn.q_a_proj.weight": (m["q_lora_rank"], width),
                p + "self_attn.q_a_layernorm.weight": (m["q_lora_rank"],),
                p + "self_attn.q_b_proj.weight": (nh * (m["qk_nope_head_dim"] + m["qk_rope_head_dim"]), m["q_lora_rank"]),
                p + "self_attn.kv_a_proj_with_mqa.weight": (m["kv_lora_rank"] + m["qk_rope_head_dim"], width),
                p + "self_attn.kv_a_layernorm.weight": (m["kv_lora_rank"],),
                p + "self_attn.kv_b_proj.weight": (nh * (m["qk_nope_head_dim"] + m["v_head_dim"]), m["kv_lora_rank"]),
                p + "self_attn.o_proj.weight": (H, nh * m["v_head_dim"]),
            })
        else:
            shapes.update({
                p + "self_attn.q_proj.weight": (nh * hd, width),
                p + "self_attn.k_proj.weight": (nkv * hd, width),
                p + "self_attn.v_proj.weight": (nkv * hd, width),
                p + "self_attn.o_proj.weight": (H, nh * hd),
            })
            if cfg.attention_bias:  # HF Llama/Qwen3 put the bias on o_proj too
                shapes.update({p + "self_attn.q_proj.bias": (nh * hd,), p + "self_attn.k_proj.bias": (nkv * hd,),
                               p + "self_attn.v_proj.bias": (nkv * hd,), p + "self_attn.o_proj.bias": (H,)})
            if cfg.family == "qwen3":
                shapes.update({p + "self_attn.q_norm.weight": (hd,), p + "self_attn.k_norm.weight": (hd,)})
        shapes.update({
            p + "mlp.gate_proj.weight": (I, H),
            p + "mlp.up_proj.weight": (I, H),
            p + "mlp.down_proj.weight": (H, I),
            p + "input_layernorm.weight": (H,),
            p + "post_attention_layernorm.weight": (H,),
        })
        if cfg.mlp_bias:
            shapes.update({p + "mlp.gate_proj.bias": (I,), p + "mlp.up_proj.bias": (I,), p + "mlp.down_proj.bias": (H,)})
        if i == 0 and not block:
            shapes[p + "hidden_norm.weight"] = (H,)
    if cfg.kind == "dflash2":
        shapes.update(dflash2_shapes(cfg))
    return shapes


def dflash2_shapes(cfg: DrafterConfig) -> dict[str, tuple[int, ...]]:
    """DFlash2's own tensors (speculators 0.9.0 models/dflash2/model_definitions.py: GroupedDynamicCausalConv
    `base_kernel` [2, K, H] and `kernel_projection` [2*K*(H/G), H] in each layer's attention_conv and mlp_conv;
    CandidateSelector `predecessor_codebook`, `successor_codebook` [V, R], `hidden_projection` [R, H]); none where a
    field is not a usable size (the reader refuses those)."""
    H, V, alg = cfg.hidden_size, cfg.vocab_size, cfg.algorithm
    k, g, r = (alg.get(key) for key in ("conv_kernel_size", "conv_group_size", "selector_rank"))
    if not all(isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in (k, g, r)) or H % g:
        return {}
    shapes: dict[str, tuple[int, ...]] = {}
    for i in range(cfg.num_layers):
        for conv in ("attention_conv", "mlp_conv"):
            shapes[f"layers.{i}.{conv}.base_kernel"] = (2, k, H)
            shapes[f"layers.{i}.{conv}.kernel_projection.weight"] = (2 * k * (H // g), H)
    shapes.update({"candidate_selector.predecessor_codebook": (V, r), "candidate_selector.successor_codebook": (V, r),
                   "candidate_selector.hidden_projection.weight": (r, H)})
    return shapes


def optional_shapes(cfg: DrafterConfig) -> dict[str, tuple[int, ...]]:
    shapes = {"embed_tokens.weight": (cfg.vocab_size, cfg.hidden_size)}
    if cfg.kind in BLOCK_KINDS:  # speculators saves the verifier's (frozen) head; z-lab and SpecForge save none
        shapes["lm_head.weight"] = (cfg.draft_vocab_size, cfg.hidden_size)
    return shapes


def layer_index(canonical_name: str) -> int | None:
    m = _LAYER_RE.match(canonical_name)
    return int(m.group(1)) if m else None
