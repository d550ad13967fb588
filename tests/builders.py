"""Tiny EAGLE-3 drafters written from code in any layout, independently of eagle3_convert's writers.

The layouts are spelled out here a second time, from the layout facts (docs/formats.md) and the peers'
source (key names, config keys, capture-id conventions, which vocab tensors each writes), so
a test can compare what the tool writes against what the layout is, not against itself.

    spec = DrafterSpec(family="qwen3", num_layers=2, draft_vocab_size=None, norm_before_fc=True)
    path = build_drafter(tmp_path / "d", "vllm", spec)      # or build_drafter(dest, layout, **fields)
    target_dir = write_target(tmp_path / "t", spec)          # the target's config.json (depth, family)

`DrafterSpec` fields (all optional):
    family                "llama" | "qwen3" | "deepseek_mla" (the Kimi-K2.5 / DeepSeek MLA drafter)
    num_layers            decoder layers (>= 1)
    hidden_size ... head_dim, intermediate_size, mla_*   dimensions (tiny by default)
    vocab_size            target vocab V; draft_vocab_size Vd (None = V: no draft->target map)
    vocab_ids             the draft vocab as sorted target ids (None: Vd ids drawn with `seed`)
    num_aux               k, captured target states fused by fc
    capture_boundaries    FORMATS §4 boundaries, or None = engine default {2, L//2, L-3}
    target_layers         target depth L; target_model_type (llama, deepseek_v3, ...)
    target_hidden_size    Ht when it differs from hidden_size
    norm_before_residual, norm_before_fc, fc_norm, norm_output   the maths-changing flags
    modelopt_hf_trained   first layer computes hidden_norm(input_layernorm(h)) (ModelOpt's HF trainer)
    attention_bias        q/k/v/o biases; embed_tokens: save the embedding too
    dtype                 float dtype of the weights (safetensors spelling); seed: tensor bytes
    pickled               eagle only: pytorch_model.bin through torch.save (needs torch)
    verifier              the target's name written where a layout names it (speculators)

Other helpers:
    canonical_tensors(spec)     {canonical name: RawTensor} (bytes depend on seed and name only,
                                so one drafter has the same bytes in every layout)
    stored_tensors(layout, spec) {stored name: RawTensor}, vocab tensors included
    config_for(layout, spec)    the config.json `layout` writes for `spec`
    write_safetensors(path, {name: RawTensor})   a .safetensors file by hand (header + bytes)
    draft_vocab(spec)           the sorted target ids of the draft vocab (None when Vd == V)
    expected_refusal(layout, spec)  the error code the tool must give when asked to write `spec`
                                in `layout` (None when the layout can hold it), with the reason
    capture_refusal(layout, spec)   the code for a drafter the layout can hold but whose capture layers
                                its engine cannot read back (SGLang's rules); such a file can still be built
    LAYOUTS                     the five built-in layout names
"""

from __future__ import annotations

import hashlib
import json
import random
import struct
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

LAYOUTS = ("speculators", "sglang", "vllm", "eagle", "modelopt")
MODEL_TYPE = {"llama": "llama", "qwen3": "qwen3", "deepseek_mla": "deepseek_v3"}
FLAGS = ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output")
DTYPE_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "I64": 8, "BOOL": 1}


@dataclass(frozen=True)
class DrafterSpec:
    family: str = "llama"
    num_layers: int = 1
    hidden_size: int = 32
    intermediate_size: int = 64
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    head_dim: int = 8
    mla_q_lora_rank: int = 16
    mla_kv_lora_rank: int = 8
    mla_qk_nope_head_dim: int = 8
    mla_qk_rope_head_dim: int = 4
    mla_v_head_dim: int = 8
    vocab_size: int = 96
    draft_vocab_size: int | None = 32
    num_aux: int = 3
    capture_boundaries: tuple[int, ...] | None = (2, 4, 5)
    target_layers: int = 8
    target_model_type: str = "llama"
    target_hidden_size: int | None = None
    norm_before_residual: bool = False
    norm_before_fc: bool = False
    fc_norm: bool = False
    norm_output: bool = False
    modelopt_hf_trained: bool = False
    attention_bias: bool = False
    embed_tokens: bool = False
    dtype: str = "BF16"
    seed: int = 0
    pickled: bool = False
    verifier: str = "org/target-model"
    vocab_ids: tuple[int, ...] | None = None  # Vd must be len(vocab_ids)
    extra: dict[str, Any] = field(default_factory=dict)  # decoder-config keys written verbatim
    # P-EAGLE (speculators models/peagle): its mask token; set, the drafter is a P-EAGLE one with `mask_hidden`
    peagle_mask_token_id: int | None = None

    @property
    def vd(self) -> int:
        return self.draft_vocab_size or self.vocab_size

    @property
    def ht(self) -> int:
        return self.target_hidden_size or self.hidden_size

    def with_(self, **changes: Any) -> "DrafterSpec":
        return replace(self, **changes)


@dataclass(frozen=True)
class RawTensor:
    dtype: str
    shape: tuple[int, ...]
    data: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


# ------------------------------------------------------------------ tensors

def canonical_shapes(spec: DrafterSpec) -> dict[str, tuple[int, ...]]:
    H, Ht, k, I = spec.hidden_size, spec.ht, spec.num_aux, spec.intermediate_size
    nh, nkv, hd = spec.num_attention_heads, spec.num_key_value_heads, spec.head_dim
    shapes: dict[str, tuple[int, ...]] = {"fc.weight": (H, k * Ht), "norm.weight": (H,), "lm_head.weight": (spec.vd, H)}
    if spec.embed_tokens:
        shapes["embed_tokens.weight"] = (spec.vocab_size, H)
    if spec.norm_before_fc:
        shapes["input_norm.weight"] = (k * Ht,)
    if spec.fc_norm:
        shapes.update({f"fc_norm.{j}.weight": (Ht,) for j in range(k)})
    if spec.peagle_mask_token_id is not None:  # PEagleDraftModel.mask_hidden
        shapes["mask_hidden"] = (1, 1, k * Ht)
    for i in range(spec.num_layers):
        p, width = f"layers.{i}.", 2 * H if i == 0 else H
        if spec.family == "deepseek_mla":
            q, kv = spec.mla_q_lora_rank, spec.mla_kv_lora_rank
            nope, rope, v = spec.mla_qk_nope_head_dim, spec.mla_qk_rope_head_dim, spec.mla_v_head_dim
            shapes.update({
                p + "self_attn.q_a_proj.weight": (q, width), p + "self_attn.q_a_layernorm.weight": (q,),
                p + "self_attn.q_b_proj.weight": (nh * (nope + rope), q),
                p + "self_attn.kv_a_proj_with_mqa.weight": (kv + rope, width),
                p + "self_attn.kv_a_layernorm.weight": (kv,),
                p + "self_attn.kv_b_proj.weight": (nh * (nope + v), kv), p + "self_attn.o_proj.weight": (H, nh * v),
            })
        else:
            shapes.update({p + "self_attn.q_proj.weight": (nh * hd, width),
                           p + "self_attn.k_proj.weight": (nkv * hd, width),
                           p + "self_attn.v_proj.weight": (nkv * hd, width),
                           p + "self_attn.o_proj.weight": (H, nh * hd)})
            if spec.attention_bias:
                shapes.update({p + "self_attn.q_proj.bias": (nh * hd,), p + "self_attn.k_proj.bias": (nkv * hd,),
                               p + "self_attn.v_proj.bias": (nkv * hd,), p + "self_attn.o_proj.bias": (H,)})
            if spec.family == "qwen3":
                shapes.update({p + "self_attn.q_norm.weight": (hd,), p + "self_attn.k_norm.weight": (hd,)})
        shapes.update({p + "mlp.gate_proj.weight": (I, H), p + "mlp.up_proj.weight": (I, H),
                       p + "mlp.down_proj.weight": (H, I), p + "input_layernorm.weight": (H,),
                       p + "post_attention_layernorm.weight": (H,)})
        if i == 0:
            shapes[p + "hidden_norm.weight"] = (H,)
    return shapes


def _bytes_for(seed: int, name: str, n: int) -> bytes:
    return hashlib.shake_256(f"{seed}:{name}".encode()).digest(n)


def canonical_tensors(spec: DrafterSpec) -> dict[str, RawTensor]:
    out = {}
    for name, shape in canonical_shapes(spec).items():
        count = 1
        for d in shape:
            count *= d
        out[name] = RawTensor(spec.dtype, shape, _bytes_for(spec.seed, name, count * DTYPE_BYTES[spec.dtype]))
    return out


def draft_vocab(spec: DrafterSpec) -> list[int] | None:
    if spec.vd == spec.vocab_size:
        return None
    if spec.vocab_ids is not None:
        assert len(spec.vocab_ids) == spec.vd and list(spec.vocab_ids) == sorted(set(spec.vocab_ids)), spec.vocab_ids
        return list(spec.vocab_ids)
    return sorted(random.Random(spec.seed).sample(range(spec.vocab_size), spec.vd))


def _d2t(ids: list[int]) -> RawTensor:
    return RawTensor("I64", (len(ids),), b"".join(struct.pack("<q", t - i) for i, t in enumerate(ids)))


def _t2d(ids: list[int], vocab_size: int) -> RawTensor:
    mask = bytearray(vocab_size)
    for t in ids:
        mask[t] = 1
    return RawTensor("BOOL", (vocab_size,), bytes(mask))


def stored_name(layout: str, spec: DrafterSpec, canonical: str) -> str:
    if layout == "eagle" or (layout == "sglang" and spec.num_layers == 1):
        return canonical.replace("layers.0.", "midlayer.", 1) if canonical.startswith("layers.0.") else canonical
    if layout == "sglang" and canonical.startswith("layers.") and not canonical.startswith("layers.0."):
        return canonical.replace(".input_layernorm.", ".hidden_norm.")  # SGLang's later layers
    return canonical


def stored_tensors(layout: str, spec: DrafterSpec) -> dict[str, RawTensor]:
    out = {stored_name(layout, spec, n): t for n, t in canonical_tensors(spec).items()}
    if layout in ("sglang", "vllm", "modelopt"):
        # Layers >= 1: vLLM reads input_layernorm, SGLang and TensorRT-LLM hidden_norm, and each leaves the other's name unset
        # without a word; the one weight under both names is right in both engines (docs/formats.md §6).
        for i in range(1, spec.num_layers):
            both = [f"layers.{i}.input_layernorm.weight", f"layers.{i}.hidden_norm.weight"]
            have = next(n for n in both if n in out)
            out.update({n: out[have] for n in both})
    ids = draft_vocab(spec)
    if ids is None and layout in ("sglang", "eagle"):
        ids = list(range(spec.vocab_size))  # both always carry d2t/t2d; the identity when Vd == V
    if ids is not None:
        out["d2t"] = _d2t(ids)
        if layout != "modelopt":  # ModelOpt never writes t2d
            out["t2d"] = _t2d(ids, spec.vocab_size)
    return out


# ------------------------------------------------------------------ configs

def _decoder(spec: DrafterSpec) -> dict[str, Any]:
    dec: dict[str, Any] = {
        "model_type": MODEL_TYPE[spec.family], "hidden_size": spec.hidden_size,
        "intermediate_size": spec.intermediate_size, "num_attention_heads": spec.num_attention_heads,
        "num_key_value_heads": spec.num_key_value_heads, "num_hidden_layers": spec.num_layers,
        "rms_norm_eps": 1e-5, "hidden_act": "silu", "vocab_size": spec.vocab_size,
        "max_position_embeddings": 2048, "tie_word_embeddings": False, "rope_theta": 10000.0,
    }
    if spec.family == "deepseek_mla":
        dec.update({"q_lora_rank": spec.mla_q_lora_rank, "kv_lora_rank": spec.mla_kv_lora_rank,
                    "qk_nope_head_dim": spec.mla_qk_nope_head_dim, "qk_rope_head_dim": spec.mla_qk_rope_head_dim,
                    "v_head_dim": spec.mla_v_head_dim})
    else:
        dec.update({"head_dim": spec.head_dim, "attention_bias": spec.attention_bias, "mlp_bias": False})
    return {**dec, **spec.extra}


def _boundaries(spec: DrafterSpec) -> list[int] | None:
    return list(spec.capture_boundaries) if spec.capture_boundaries is not None else None


def _block_output_ids(spec: DrafterSpec) -> list[int] | None:
    """SGLang / ModelOpt ids: the block whose output is captured (boundary - 1)."""
    b = _boundaries(spec)
    return [x - 1 for x in b] if b is not None else None


def config_for(layout: str, spec: DrafterSpec) -> dict[str, Any]:
    b, out_ids = _boundaries(spec), _block_output_ids(spec)
    if layout == "speculators":
        spec_cfg = {
            "architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3", "speculators_version": "0.9.0",
            "speculators_config": {"algorithm": "eagle3", "default_proposal_method": "greedy",
                                   "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3,
                                                         "verifier_accept_k": 1, "accept_tolerance": 0.0}],
                                   "verifier": {"name_or_path": spec.verifier, "architectures": ["LlamaForCausalLM"]}},
            "transformer_layer_config": _decoder(spec), "draft_vocab_size": spec.vd,
            "target_hidden_size": spec.target_hidden_size, "eagle_aux_hidden_state_layer_ids": b,
            **{f: getattr(spec, f) for f in FLAGS}, "embed_requires_grad": False, "tie_word_embeddings": False,
        }
        return spec_cfg if spec.peagle_mask_token_id is None else _as_peagle(spec_cfg, spec.peagle_mask_token_id)
    cfg: dict[str, Any] = {**_decoder(spec), "draft_vocab_size": spec.vd}
    if spec.target_hidden_size is not None:
        cfg["target_hidden_size"] = spec.target_hidden_size
    mla = spec.family == "deepseek_mla"
    if layout == "sglang":
        cfg["architectures"] = ["Eagle3DeepseekV2ForCausalLM" if mla else "LlamaForCausalLMEagle3"]
        cfg["eagle_config"] = {"use_aux_hidden_state": True}
        if out_ids is not None:
            cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = out_ids
        if spec.num_aux != 3:
            cfg["num_aux_hidden_states"] = spec.num_aux
        cfg.update({f: True for f in ("norm_before_fc", "fc_norm", "norm_output") if getattr(spec, f)})
    elif layout == "vllm":
        arch = {"llama": "LlamaForCausalLMEagle3", "qwen3": "Eagle3Qwen3ForCausalLM",
                "deepseek_mla": "Eagle3DeepseekV2ForCausalLM"}[spec.family]
        cfg.update({"architectures": [arch], "eagle_config": {"use_aux_hidden_state": True},
                    **{f: getattr(spec, f) for f in FLAGS}})
        if mla:  # vLLM turns a deepseek_v3 draft config into DeepSeek MTP and refuses it; it reads kimi_k2 alike
            cfg["model_type"] = "kimi_k2"
        if b is not None:
            cfg["eagle_aux_hidden_state_layer_ids"] = b
            cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = b
        if spec.num_aux != 3:
            cfg["num_aux_hidden_states"] = spec.num_aux
        if spec.peagle_mask_token_id is not None:  # as SpecForge names it, with the token where vLLM reads it
            cfg.update({"architectures": ["PEagleDraftModel"], "pard_token": spec.peagle_mask_token_id})
    elif layout == "eagle":
        cfg["architectures"] = ["LlamaForCausalLMEagle3"]
    elif layout == "modelopt":
        cfg["architectures"] = ["Eagle3DeepseekV2ForCausalLM" if mla else "LlamaForCausalLMEagle3"]
        if mla:
            cfg["model_type"] = "kimi_k2"  # how ModelOpt exports the MLA drafter
        cfg["eagle_config"] = {
            "use_aux_hidden_state": True, "use_input_layernorm_in_first_layer": spec.modelopt_hf_trained,
            "use_last_layernorm": True, "use_mtp_layernorm": False, "next_layer_regular": True,
            "parallel_draft_step": 1, "parallel_draft_heads_num_layers": 1}
        if out_ids is not None:
            cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = out_ids
        if spec.norm_before_fc:  # where TensorRT-LLM reads it (NVIDIA's gpt-oss exports nest it)
            cfg["eagle_config"]["norm_before_fc"] = True
        cfg.update({f: True for f in ("fc_norm", "norm_output") if getattr(spec, f)})
    else:
        raise ValueError(f"unknown layout {layout!r}")
    return cfg


def _as_peagle(config: dict[str, Any], mask_token_id: int) -> dict[str, Any]:
    """A speculators EAGLE-3 config as speculators' PEagleSpeculatorConfig writes it."""
    config.update({"speculators_model_type": "peagle", "architectures": ["PEagleSpeculator"],
                   "mask_token_id": mask_token_id})
    config["speculators_config"]["algorithm"] = "peagle"
    return config


# ------------------------------------------------------------- what holds what

def expected_refusal(layout: str, spec: DrafterSpec) -> tuple[str, str] | None:
    """(error code, why) when `layout` cannot express `spec` without changing the model; else None."""
    mla, flags = spec.family == "deepseek_mla", [f for f in FLAGS if getattr(spec, f)]
    uncaptured = spec.capture_boundaries is None and spec.num_aux != 3
    rules: dict[str, list[tuple[bool, str, str]]] = {
        "speculators": [
            (mla, "E-FAMILY-UNSUPPORTED", "speculators has no MLA drafter class"),
            (spec.norm_before_fc and spec.fc_norm, "E-FLAG-UNSUPPORTED", "nbf and fc_norm exclude each other"),
            (uncaptured, "E-CAPTURE-COUNT", "k != 3 with no capture ids"),
        ],
        "sglang": [
            (spec.norm_before_residual, "E-FLAG-UNSUPPORTED", "SGLang has no norm_before_residual"),
            (spec.family == "qwen3", "E-FAMILY-UNSUPPORTED", "SGLang has no Qwen3 EAGLE-3 class"),
            (spec.attention_bias, "E-BIAS-UNSUPPORTED", "SGLang's Eagle3 loader drops biases"),
            (mla and spec.num_layers > 1, "E-LAYERS-UNSUPPORTED", "SGLang's MLA drafter class builds one layer"),
            (mla and spec.norm_before_fc, "E-FLAG-UNSUPPORTED", "SGLang's MLA class has no input_norm"),
            (uncaptured, "E-CAPTURE-COUNT", "k != 3 with no capture ids"),
        ],
        "vllm": [
            (uncaptured, "E-CAPTURE-COUNT", "k != 3 with no capture ids"),
            (mla and spec.norm_before_fc, "E-FLAG-UNSUPPORTED", "vLLM's MLA class has no input_norm"),
            (mla and spec.attention_bias, "E-BIAS-UNSUPPORTED", "vLLM's MLA class has no biases"),
        ],
        "eagle": [
            (spec.family != "llama", "E-FAMILY-UNSUPPORTED", "original EAGLE-3 builds a Llama layer"),
            (spec.num_layers != 1, "E-LAYERS-UNSUPPORTED", "original EAGLE-3 builds one layer"),
            (bool(flags), "E-FLAG-UNSUPPORTED", "original EAGLE-3 has none of the norm flags"),
            (spec.attention_bias, "E-BIAS-UNSUPPORTED", "original EAGLE-3 has no biases"),
            (spec.num_aux != 3, "E-CAPTURE-COUNT", "original EAGLE-3 fuses exactly 3 states"),
            (spec.head_dim * spec.num_attention_heads != spec.hidden_size, "E-HEAD-DIM-UNSUPPORTED",
             "original EAGLE-3 derives head_dim = hidden_size // num_attention_heads"),
            (spec.capture_boundaries is not None and list(spec.capture_boundaries) != [
                2, spec.target_layers // 2, spec.target_layers - 3], "E-CAPTURE-UNEXPRESSIBLE",
             "original EAGLE-3 hard-codes boundaries {2, L//2, L-3}"),
        ],
        "modelopt": [
            (spec.family == "qwen3", "E-FAMILY-UNSUPPORTED", "ModelOpt exports Llama and MLA modules only"),
            (spec.norm_before_residual, "E-FLAG-UNSUPPORTED", "TensorRT-LLM has no norm_before_residual"),
            (spec.norm_before_fc and spec.fc_norm, "E-FLAG-UNSUPPORTED",
             "TensorRT-LLM applies fc_norm or input_norm, never both"),
            (spec.ht != spec.hidden_size, "E-HIDDEN-UNSUPPORTED", "ModelOpt sizes fc from the drafter's hidden size"),
            (uncaptured, "E-CAPTURE-COUNT", "k != 3 with no capture ids"),
        ],
    }
    for applies, code, why in rules[layout]:
        if applies:
            return code, why
    return None


# SGLang's DeepSeek/Kimi rule (docs/formats.md §4): ids + 1 only when ids[0] == 1, else the ids as they are.
SGLANG_DEEPSEEK_TARGETS = ("deepseek_v2", "deepseek_v3", "kimi_k2")


def capture_refusal(layout: str, spec: DrafterSpec) -> tuple[str, str] | None:
    """(error code, why) when converting `spec` TO `layout` must be refused because the layout's engine would not
    capture the trained boundaries; else None. build_drafter still writes such a file (a trainer may)."""
    b = spec.capture_boundaries
    if layout != "sglang" or b is None or spec.target_model_type == "gpt_oss":
        return None
    if max(b) >= spec.target_layers:
        return "E-CAPTURE-UNREACHABLE", "SGLang never sees the last block's output (boundary L)"
    if spec.target_model_type in SGLANG_DEEPSEEK_TARGETS and b[0] == 1:
        # ids [0, ...] are read as they are (first boundary 0), ids [1, ...] as +1 (first boundary 2)
        return "E-CAPTURE-UNEXPRESSIBLE", "no SGLang id list on a DeepSeek target reads as first boundary 1"
    return None


# ------------------------------------------------------------------ writing

def write_safetensors(path: Path, tensors: dict[str, RawTensor]) -> None:
    """The file format by hand: u64 header length, JSON header, the bytes in header order."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset, chunks = 0, []
    for name in sorted(tensors):
        t = tensors[name]
        header[name] = {"dtype": t.dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(t.data)]}
        offset += len(t.data)
        chunks.append(t.data)
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + b"".join(chunks))


def write_checkpoint(dest: Path, config: dict[str, Any], tensors: dict[str, RawTensor]) -> Path:
    """`config` and `tensors` as they are, in a new directory `dest` (a file no builder spec spells)."""
    dest.mkdir(parents=True)
    (dest / "config.json").write_text(json.dumps(config, indent=2))
    write_safetensors(dest / "model.safetensors", tensors)
    return dest


def _write_pickle(path: Path, tensors: dict[str, RawTensor]) -> None:
    import torch

    dtypes = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32, "I64": torch.int64,
              "BOOL": torch.bool}
    state = {name: torch.frombuffer(bytearray(t.data), dtype=dtypes[t.dtype]).reshape(t.shape).clone()
             for name, t in tensors.items()}
    torch.save(state, path)


def build_drafter(dest: Path, layout: str, spec: DrafterSpec | None = None, **changes: Any) -> Path:
    """Write `spec` (with `changes`) in `layout` under `dest` (created); ValueError if the layout cannot hold it."""
    spec = (spec or DrafterSpec()).with_(**changes)
    refusal = expected_refusal(layout, spec)
    if refusal is not None:
        raise ValueError(f"the {layout} layout cannot hold this drafter: {refusal[1]}")
    if spec.pickled and layout != "eagle":
        raise ValueError("only the eagle layout is written as pytorch_model.bin")
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.json").write_text(json.dumps(config_for(layout, spec), indent=2) + "\n")
    tensors = stored_tensors(layout, spec)
    if spec.pickled:
        _write_pickle(dest / "pytorch_model.bin", tensors)
    else:
        write_safetensors(dest / "model.safetensors", tensors)
    return dest


def write_target(dest: Path, spec: DrafterSpec | None = None) -> Path:
    """A target model's config.json (no weights): depth, width, vocab and family of `spec`'s target, and its
    Hub name in `_name_or_path`, as transformers' save_pretrained writes it."""
    spec = spec or DrafterSpec()
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    arch = "DeepseekV3ForCausalLM" if spec.target_model_type.startswith("deepseek") else "LlamaForCausalLM"
    (dest / "config.json").write_text(json.dumps({
        "_name_or_path": spec.verifier,
        "architectures": [arch], "model_type": spec.target_model_type, "num_hidden_layers": spec.target_layers,
        "hidden_size": spec.ht, "vocab_size": spec.vocab_size}))
    return dest
