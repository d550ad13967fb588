"""llama.cpp GGUF of a DFlash drafter (`general.architecture = dflash`): docs/formats.md §7.5, docs/gguf.md.

What llama.cpp's loader reads (src/models/dflash.cpp `llama_model_dflash::load_arch_hparams` /
`load_arch_tensors`, stored copy ggml-org/llama.cpp@01b78a1; the tier's build 0c1e57098 loads the same keys):
`dflash.target_layers` at the top level (absent: "DFlash model requires 'target_layers' in GGUF metadata", llama.cpp
#25116), `dflash.block_size` (optional, 16 when absent in common/speculative.cpp), the generic Qwen3 keys, and the
tensors `fc` {n_layers_ids * n_embd, n_embd} (so the target's width must be the drafter's), `enc.output_norm`
(hidden_norm, after fc), `output_norm` (the final norm), per layer the Qwen3 decoder with `attn_q_norm` /
`attn_k_norm` required, and an optional `output` (lm_head). The rope is NeoX for a non-DSV4 DFlash
(src/llama-model.cpp `llama_model_rope_type`: `case LLM_ARCH_DFLASH`), so q/k rows are NOT permuted (llama.cpp's
converter `DFlashModel(Qwen3Model)` has no modify_tensors of its own; Qwen2Model's only maps names).

`dflash.target_layers` are the ids llama.cpp taps with `llama_set_embeddings_layer_inp(ctx_tgt, id)`: the INPUT of
target layer `id`, i.e. the output of layer id - 1 (common/speculative.cpp, draft-dflash impl). llama.cpp's converter
writes `[i + 1 for i in dflash_config.target_layer_ids]`; that is exactly our capture boundary
(capture_ids.block_diffusion_boundaries), so the key holds `capture_boundaries` as they are.

Written: DFlash only (DSpark's Markov/confidence heads and DFlash2's convolutions and selector have their own GGUF
tensors whose converter was not read at a citable commit: refused, E-KIND-UNSUPPORTED); a reduced vocabulary as
`output` {n_embd, Vd} and an I64 `d2t` of ABSOLUTE target ids (the graph asserts I64 and scatters draft row i to
target row d2t[i] with ggml_set_rows, as for eagle3); no embed_tokens (the converter maps none: "Can
not map tensor 'model.embed_tokens.weight'"; llama.cpp uses the target's embedding: the tensor is left out and the
output says so). The target's tokenizer is copied from `--target-gguf`, the mask token written as
`tokenizer.ggml.mask_token_id`. Reading back needs our record (`eagle3_convert.record`): a DFlash GGUF without it
is refused (reading llama.cpp's own DFlash GGUFs from their keys alone is not done).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable

from ..drafter import Drafter, DrafterConfig
from ..engines.block_diffusion import FULL, layer_types
from ..engines.common import id_list
from ..errors import FormatError, RefusalError
from ..safetensors_io import InMemoryTensor, TensorSource, read_tensor_bytes
from .base import Checkpoint, ConvertOptions, WritePlan, check_tensor_table, json_bytes, refuse_unless
from .gguf_file import FILE_TYPE, RECORD_KEY, TargetGGUF, key_types, write_gguf
from .gguf_tensors import (ELEMENT, OUTTYPES, StreamedTensor, cast_weights, exactly_back, vocab_map_from_d2t,
                           written_dtype)

ARCH = "dflash"
MASK_KEY = "tokenizer.ggml.mask_token_id"
D2T = "d2t"
# canonical name -> llama.cpp's GGUF name (gguf-py MODEL_ARCH.DFLASH; per-layer names as Qwen3's)
TOP = {"fc.weight": "fc.weight", "hidden_norm.weight": "enc.output_norm.weight", "norm.weight": "output_norm.weight",
       "lm_head.weight": "output.weight"}
LAYER = {
    "input_layernorm.weight": "attn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight", "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def names(layers: int) -> dict[str, str]:
    out = dict(TOP)
    for i in range(layers):
        out.update({f"layers.{i}.{k}": f"blk.{i}.{v}" for k, v in LAYER.items()})
    return out


def refuse_what_llamacpp_cannot_build(cfg: DrafterConfig, target: TargetGGUF) -> None:
    where = "llama.cpp's dflash architecture"
    refuse_unless(cfg.kind == "dflash", f"the drafter is a {cfg.kind} drafter; this writer holds DFlash drafters "
                  f"only ({cfg.kind}'s own GGUF tensors come from a llama.cpp converter not read here)",
                  "serve it with vLLM or SGLang (--to speculators, --to dflash)", "E-KIND-UNSUPPORTED")
    refuse_unless(cfg.family == "qwen3", f"the drafter is a {cfg.family} drafter; {where} builds Qwen3 layers "
                  "(attn_q_norm / attn_k_norm required: src/models/dflash.cpp)", "serve it with vLLM (--to dflash)",
                  "E-FAMILY-UNSUPPORTED")
    refuse_unless(not (cfg.attention_bias or cfg.mlp_bias), f"the drafter has bias tensors; {where} loads none",
                  "serve it with vLLM (--to dflash)", "E-BIAS-UNSUPPORTED")
    refuse_unless(all(t == FULL for t in layer_types(cfg)), f"the drafter has sliding-window layers; this writer "
                  "does not write llama.cpp's sliding_window_pattern", "serve it with vLLM (--to dflash)",
                  "E-FLAG-UNSUPPORTED")
    rope = cfg.rope_normalized()
    refuse_unless(rope.get("rope_type", "default") in ("default", None), f"rope_type {rope.get('rope_type')!r}: this "
                  "writer carries plain rope_theta only", "serve it with vLLM (--to dflash)", "E-GGUF-ROPE")
    L, Ht, V = target.identity.num_hidden_layers, target.identity.hidden_size, target.identity.vocab_size
    refuse_unless(cfg.resolved_target_hidden_size == cfg.hidden_size == Ht, f"the drafter fuses states of width "
                  f"{cfg.resolved_target_hidden_size} into a {cfg.hidden_size}-wide drafter and the target GGUF is "
                  f"{Ht} wide; {where} sizes fc as ids x n_embd of the drafter", "pass the GGUF of the target the "
                  "drafter was trained for, or serve it with vLLM", "E-HIDDEN-UNSUPPORTED")
    refuse_unless(cfg.vocab_size == V, f"the drafter's target vocabulary is {cfg.vocab_size} tokens, the target "
                  f"GGUF's tokenizer has {V}", "pass the GGUF of the target the drafter was trained for",
                  "E-GGUF-VOCAB")
    known = cfg.target.num_hidden_layers if cfg.target else None
    refuse_unless(known in (None, L), f"the drafter was trained on a {known}-layer target; the target GGUF has "
                  f"{L} blocks", "pass the GGUF of the target the drafter was trained for", "E-GGUF-TARGET")
    for b in cfg.capture_boundaries or []:
        refuse_unless(0 <= b < L, f"boundary {b} is not the input of one of the target's {L} layers, which is "
                      "all llama.cpp's DFlash taps (llama_set_embeddings_layer_inp)", "serve it with vLLM",
                      "E-CAPTURE-UNREACHABLE")


def plan(drafter: Drafter, options: ConvertOptions, target: TargetGGUF, outtype: str,
         record: Callable[[DrafterConfig, dict[str, str], TargetGGUF], dict[str, Any]]) -> WritePlan:
    cfg = drafter.config
    refuse_what_llamacpp_cannot_build(cfg, target)
    table = names(cfg.num_layers)
    tensors: dict[str, TensorSource] = {}
    dtypes: dict[str, str] = {}
    notes: list[str] = []
    for cname, gname in table.items():
        src = drafter.tensors.get(cname)
        if src is None:
            continue
        dtypes[cname], dst = src.dtype, written_dtype(cname, src, outtype)
        tensors[gname] = src if dst == src.dtype else StreamedTensor(src, dst, tuple(src.shape))
    if drafter.vocab is not None:  # the graph scatters draft row i to target id d2t[i]: absolute I64 ids
        import numpy as np

        tensors[D2T] = InMemoryTensor("I64", (cfg.draft_vocab_size,),
                                      np.array(drafter.vocab.target_ids, dtype="<i8").tobytes())
    dropped = [n for n in ("embed_tokens.weight",) if n in drafter.tensors]
    if dropped:
        notes.append("embed_tokens.weight is left out: llama.cpp's DFlash uses the target's embedding (its "
                     "converter maps no embed_tokens)")
    main = OUTTYPES.get(outtype) or (drafter.tensors["fc.weight"].dtype
                                     if drafter.tensors["fc.weight"].dtype in FILE_TYPE else "F32")
    cast = cast_weights(drafter.tensors, OUTTYPES.get(outtype), table)
    plan_config = {"gguf": _metadata(cfg, main), RECORD_KEY: record(cfg, dtypes, target)}
    return WritePlan("gguf", plan_config, tensors, notes, writer=_writer(plan_config, main, target, tensors),
                     cast=cast, dropped=dropped)


def _metadata(cfg: DrafterConfig, main_dtype: str) -> dict[str, Any]:
    a = ARCH
    metadata: dict[str, Any] = {
        "general.architecture": a,
        "general.file_type": FILE_TYPE[main_dtype],
        f"{a}.block_count": cfg.num_layers,
        f"{a}.context_length": cfg.max_position_embeddings or 4096,
        f"{a}.embedding_length": cfg.hidden_size,
        f"{a}.feed_forward_length": cfg.intermediate_size,
        f"{a}.attention.head_count": cfg.num_attention_heads,
        f"{a}.attention.head_count_kv": cfg.num_key_value_heads,
        f"{a}.attention.key_length": cfg.resolved_head_dim,
        f"{a}.attention.value_length": cfg.resolved_head_dim,
        f"{a}.attention.layer_norm_rms_epsilon": cfg.rms_norm_eps,
        f"{a}.rope.freq_base": float(cfg.rope_normalized().get("rope_theta", 10000.0)),
        f"{a}.rope.dimension_count": cfg.resolved_head_dim,
        f"{a}.target_layers": list(cfg.capture_boundaries or []),  # top level: llama.cpp #25116
    }
    if isinstance(cfg.algorithm.get("block_size"), int):
        metadata[f"{a}.block_size"] = cfg.algorithm["block_size"]
    if cfg.mask_token_id is not None:
        metadata[MASK_KEY] = cfg.mask_token_id
    return metadata


def file_name(dest: Path, dtype: str) -> str:
    """`dflash-<name>-<TYPE>.gguf` (not the `eagle3-*` name llama.cpp's -hf pickup serves as EAGLE-3)."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", dest.name).strip("-.") or "drafter"
    stem = re.sub(r"^dflash-", "", stem, flags=re.IGNORECASE)
    stem = re.sub(r"-(gguf|bf16|f16|f32)$", "", stem, flags=re.IGNORECASE) or "drafter"
    return f"dflash-{stem}-{dtype}.gguf"


def _writer(plan_config: dict[str, Any], main_dtype: str, target: TargetGGUF, tensors: dict[str, TensorSource]):
    metadata = plan_config["gguf"]
    record_text = json_bytes(plan_config).decode()
    types = key_types(metadata)
    # our mask token replaces the target tokenizer's own (a GGUF key appears once)
    tokenizer = TargetGGUF(target.path, target.arch, target.identity,
                           [r for r in target.tokenizer if r[0] != MASK_KEY or MASK_KEY not in metadata])

    def write(tmp: Path, dest: Path, on_progress: Callable[[int], None] | None) -> list[str]:
        name = file_name(dest, main_dtype)
        write_gguf(tmp / name, metadata, types, record_text, tokenizer, tensors, on_progress, arch=ARCH)
        return [name]

    return write


# ------------------------------------------------------------------ reading back

def read(ckpt: Checkpoint) -> Drafter:
    meta, tensors = ckpt.config, ckpt.tensors
    ids = id_list(meta.get(f"{ARCH}.target_layers"))
    if not ids:
        raise FormatError(f"{ARCH}.target_layers is {meta.get(f'{ARCH}.target_layers')!r}", "llama.cpp refuses it: "
                          "\"DFlash model requires 'target_layers' in GGUF metadata\" (the key must be top level)",
                          code="E-GGUF-KEY")
    record = _record(meta)
    if record is None:
        raise RefusalError("this DFlash GGUF carries no eagle3_convert.record; reading llama.cpp's own DFlash GGUFs "
                           "from their keys alone is not done", "convert the original safetensors drafter",
                           code="E-GGUF-KEY")
    cfg = DrafterConfig.model_validate(record["drafter"])
    if sorted(ids) != sorted(cfg.capture_boundaries or []) or meta.get(f"{ARCH}.embedding_length") != cfg.hidden_size \
            or meta.get(f"{ARCH}.block_count") != cfg.num_layers:
        raise FormatError(f"{RECORD_KEY} describes another drafter than the GGUF's own keys (edited after writing?)",
                          "convert the original safetensors drafter", code="E-GGUF-KEY")
    dtypes = record.get("dtypes") if isinstance(record.get("dtypes"), dict) else {}
    canonical_of = {g: c for c, g in names(cfg.num_layers).items()}
    canonical: dict[str, TensorSource] = {}
    for name, ref in tensors.items():
        if name == D2T:
            continue
        cname = canonical_of.get(name)
        if cname is None:
            raise RefusalError(f"tensor {name!r} is not part of a DFlash drafter this tool reads",
                               "llama.cpp's DSpark and DFlash2 GGUFs are not read", code="E-KEY-UNKNOWN")
        want = dtypes.get(cname, ref.dtype)
        if want != ref.dtype and len(ref.shape) == 1 and want in ELEMENT:
            back = exactly_back(read_tensor_bytes(ref), ref.dtype, want)
            canonical[cname] = InMemoryTensor(want, ref.shape, back) if back is not None else ref
        else:
            canonical[cname] = ref
    drafter = Drafter(cfg, canonical, vocab_map_from_d2t(tensors.get(D2T), cfg.draft_vocab_size, cfg.vocab_size),
                      list(ckpt.notes))
    check_tensor_table(drafter)
    return drafter


def _record(meta: dict[str, Any]) -> dict[str, Any] | None:
    try:
        data = json.loads(meta.get(RECORD_KEY) or "")
    except (TypeError, ValueError):
        return None
    data = data.get(RECORD_KEY) if isinstance(data, dict) else None
    return data if isinstance(data, dict) and isinstance(data.get("drafter"), dict) else None
