"""llama.cpp GGUF (`general.architecture = eagle3`; `dflash`: converters/gguf_dflash.py): docs/formats.md §7.

The `eagle3` architecture holds one Llama-style decoder layer fusing exactly 3 captured states.
What it reads: `eagle3.target_layers` (capture BOUNDARIES, used in file order: written sorted),
`eagle3.target_hidden_size`, `eagle3.norm_before_residual` / `eagle3.norm_before_fc` (absent
means false: both are always written), the generic Llama keys from the DRAFTER config, and the
TARGET's tokenizer (`tokenizer.*`, copied from `--target-gguf`). Tensors carry llama.cpp's names;
q/k rows are permuted for GGML's interleaved RoPE; `hidden_norm` is `blk.0.attn_norm_2`,
`input_norm` is `enc.output_norm`; d2t is I64 ABSOLUTE target ids and t2d is not stored; llama3
rope scaling is the `rope_freqs` factor table. Norms are F32 (GGML's CPU multiply has no F32 x
BF16 kernel), d2t I64; the 2-D weights keep the source dtype unless `--outtype` says bf16, f16 or
f32. q8_0 and other quantized types are not written: quantize afterwards with `llama-quantize`.

Reading back (`--from gguf`) inverts every step: rows un-permuted, d2t as offsets, t2d rebuilt, norms
in their source dtype (recorded in `eagle3_convert.record`, a key llama.cpp ignores, with the canonical
config its keys cannot hold). Tensor bytes are streamed in bounded chunks both ways.

PyPI's `gguf` (0.19.0) writes header, keys and tensor infos; the target's `tokenizer.*` records are
copied as byte spans, tensor bytes streamed (gguf_file.py). `--to gguf` of an 8B drafter (850 MB) with
a 128k-token target: 3.5 s, 75 MiB peak RSS. Imported lazily (`pip install eagle3-convert[gguf]`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..capture_ids import a_layer_target, as_captured, default_boundaries
from ..drafter import Drafter, DrafterConfig, dtype_of_weights
from ..target_identity import TargetIdentity
from ..engines.common import id_list
from ..errors import FormatError, RefusalError, UsageError
from ..json_values import is_positive_int
from ..safetensors_io import InMemoryTensor, TensorSource, read_tensor_bytes
from .base import (
    Checkpoint,
    ConvertOptions,
    Detection,
    Layout,
    WritePlan,
    check_tensor_table,
    json_bytes,
    modelopt_first_layer_note,
    refuse_unless,
)
from . import gguf_dflash
from .gguf_file import (  # noqa: F401 (gguf_file, scan_gguf: re-exported)
    ARCH, FILE_TYPE, RECORD_KEY, TargetGGUF, file_name, gguf_file, key_types, read_target_gguf, scan_gguf,
    write_gguf)
from .gguf_tensors import (ELEMENT, OUTTYPES, StreamedTensor, cast_weights, exactly_back, llama3_rope_factors,
                           vocab_map_from_d2t, written_dtype)

# Targets whose llama.cpp graph exposes the layer inputs (t_layer_inp), and those that also set t_h_nextn,
# which a capture at boundary L needs (docs/formats.md §7.3, grep of b11434 src/models/*.cpp).
LAYER_INP_ARCHS = frozenset({
    "bailingmoe3", "deepseek4", "gemma4", "hunyuan-vl", "lfm2", "llama", "mimo2", "minimax-01", "minimax-m2",
    "muse-glimmer", "nanbeige", "nemotron_h", "nemotron-h", "gpt-oss", "openai-moe", "qwen3", "qwen35", "qwen35moe",
    "qwen3moe", "qwen3next", "qwen4exp"})
NEXTN_ARCHS = frozenset({"bailingmoe3", "deepseek4", "gemma4", "mimo2", "nemotron_h", "nemotron-h", "gpt-oss",
                         "openai-moe", "qwen35", "qwen35moe", "qwen3next", "qwen4exp"})

# canonical name -> llama.cpp's GGUF name (single-layer Llama drafter)
NAMES = {
    "fc.weight": "fc.weight",
    "input_norm.weight": "enc.output_norm.weight",
    "embed_tokens.weight": "token_embd.weight",
    "layers.0.input_layernorm.weight": "blk.0.attn_norm.weight",
    "layers.0.hidden_norm.weight": "blk.0.attn_norm_2.weight",
    "layers.0.self_attn.q_proj.weight": "blk.0.attn_q.weight",
    "layers.0.self_attn.k_proj.weight": "blk.0.attn_k.weight",
    "layers.0.self_attn.v_proj.weight": "blk.0.attn_v.weight",
    "layers.0.self_attn.o_proj.weight": "blk.0.attn_output.weight",
    "layers.0.post_attention_layernorm.weight": "blk.0.ffn_norm.weight",
    "layers.0.mlp.gate_proj.weight": "blk.0.ffn_gate.weight",
    "layers.0.mlp.up_proj.weight": "blk.0.ffn_up.weight",
    "layers.0.mlp.down_proj.weight": "blk.0.ffn_down.weight",
    "norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
CANONICAL = {v: k for k, v in NAMES.items()}
ROPE_FREQS = "rope_freqs.weight"
D2T = "d2t"


def _stored_record(ckpt: Checkpoint) -> dict[str, Any] | None:
    text = ckpt.config.get(RECORD_KEY)
    if not isinstance(text, str):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    data = data.get(RECORD_KEY) if isinstance(data, dict) else None  # the plan's config: {gguf, record}
    return data if isinstance(data, dict) and isinstance(data.get("drafter"), dict) else None


def _int(cfg: dict[str, Any], key: str, required: bool = True) -> int | None:
    value = cfg.get(key)
    if is_positive_int(value):
        return value
    if required:
        raise FormatError(f"GGUF key {key} is {value!r}", "llama.cpp needs it: the file is not a complete eagle3 "
                          "GGUF", code="E-GGUF-KEY")
    return None


@dataclass(frozen=True)
class _Keys:
    """What llama.cpp reads of an eagle3 GGUF, checked as it checks it."""

    ids: list[int]  # eagle3.target_layers, in file order
    hidden: int
    heads: int
    kv_heads: int
    target_hidden: int
    draft_vocab: int  # output.weight's rows
    vocab: int
    norm_before_residual: bool
    norm_before_fc: bool


def _keys_llamacpp_reads(meta: dict[str, Any], tensors: dict[str, TensorSource]) -> _Keys:
    a = ARCH
    layers = _int(meta, f"{a}.block_count")
    refuse_unless(layers == 1, f"{a}.block_count is {layers}; llama.cpp's eagle3 graph asserts one layer",
                  "the file is not a valid eagle3 drafter", "E-LAYERS-UNSUPPORTED")
    ids = id_list(meta.get(f"{a}.target_layers"))
    if ids is None or len(ids) != 3:
        raise FormatError(f"{a}.target_layers is {meta.get(f'{a}.target_layers')!r}; llama.cpp requires exactly "
                          "3 ids", "the file is not a loadable eagle3 drafter", code="E-CAPTURE-COUNT")
    H = _int(meta, f"{a}.embedding_length")
    nh = _int(meta, f"{a}.attention.head_count")
    nkv = _int(meta, f"{a}.attention.head_count_kv", False) or nh
    ht = _int(meta, f"{a}.target_hidden_size")
    for name in tensors:
        if name not in CANONICAL and name not in (D2T, ROPE_FREQS):
            raise RefusalError(f"tensor {name!r} is not part of llama.cpp's eagle3 architecture",
                               "llama.cpp refuses extra tensors (wrong number of tensors)", code="E-KEY-UNKNOWN")
    if "output.weight" not in tensors:
        raise RefusalError("the GGUF has no output.weight: llama.cpp then uses the target's head, which the "
                           "other layouts cannot express", "convert a drafter that carries its own lm_head",
                           code="E-GGUF-NO-LM-HEAD")
    vd = tensors["output.weight"].shape[0]
    vocab = meta.get(f"{a}.vocab_size") or meta["_gguf"].get("tokenizer_size")
    if not isinstance(vocab, int) or vocab <= 0:
        raise FormatError("the GGUF names no target vocabulary size (eagle3.vocab_size, tokenizer)",
                          "the file is incomplete", code="E-GGUF-KEY")
    if D2T not in tensors and vd != vocab:
        raise FormatError(f"output.weight has {vd} rows but there is no d2t and the vocabulary has {vocab}",
                          "the file is damaged", code="E-VOCAB-MISSING")
    return _Keys(ids, H, nh, nkv, ht, vd, vocab, bool(meta.get(f"{a}.norm_before_residual", False)),
                 bool(meta.get(f"{a}.norm_before_fc", False)))


def _fields_from_record(record: dict[str, Any] | None, keys: _Keys, notes: list[str]) -> dict[str, Any] | None:
    """The canonical config our own record holds, where it agrees with the keys llama.cpp reads."""
    if record is None:
        return None
    try:
        rec = DrafterConfig.model_validate(record["drafter"])
    except ValueError:
        return None
    depth = rec.target.num_hidden_layers if rec.target else None
    rec_ids = as_captured(rec.capture_boundaries, depth)
    agrees = (rec.hidden_size == keys.hidden and rec.num_attention_heads == keys.heads
              and rec.num_key_value_heads == keys.kv_heads and rec.resolved_target_hidden_size == keys.target_hidden
              and rec.norm_before_residual == keys.norm_before_residual and rec.norm_before_fc == keys.norm_before_fc
              and rec_ids is not None and sorted(rec_ids) == sorted(keys.ids)
              and rec.draft_vocab_size == keys.draft_vocab and rec.vocab_size == keys.vocab)
    if agrees:
        return rec.model_dump()
    notes.append(f"{RECORD_KEY} describes another drafter than the GGUF's own keys (edited after writing?): read "
                 "from the keys llama.cpp reads")
    return None


def _fields_from_keys(meta: dict[str, Any], keys: _Keys, tensors: dict[str, TensorSource],
                      notes: list[str]) -> dict[str, Any]:
    """A GGUF another tool wrote (llama.cpp's converter): only what its keys say."""
    a = ARCH
    H, nh, ht, boundaries = keys.hidden, keys.heads, keys.target_hidden, list(keys.ids)
    if any(k.startswith(f"{a}.rope.scaling.") for k in meta) or ROPE_FREQS in tensors:
        raise RefusalError("the GGUF's rope scaling (rope_freqs or eagle3.rope.scaling.*) cannot be turned back "
                           "into the drafter's rope_scaling config", "convert the original safetensors drafter",
                           code="E-GGUF-ROPE")
    head_dim = _int(meta, f"{a}.attention.key_length", False) or _int(meta, f"{a}.rope.dimension_count", False)
    fc = tensors.get("fc.weight")
    fields: dict[str, Any] = {
        "family": "llama", "hidden_size": H, "num_attention_heads": nh, "num_key_value_heads": keys.kv_heads,
        "intermediate_size": _int(meta, f"{a}.feed_forward_length"),
        "head_dim": head_dim if head_dim and head_dim != H // nh else None,
        "num_layers": 1, "vocab_size": keys.vocab, "draft_vocab_size": keys.draft_vocab,
        "target_hidden_size": ht if ht != H else None,
        "num_aux_hidden_states": fc.shape[1] // ht if fc is not None and ht else 3,
        "capture_boundaries": sorted(boundaries), "norm_before_residual": keys.norm_before_residual,
        "norm_before_fc": keys.norm_before_fc,
    }
    eps = meta.get(f"{a}.attention.layer_norm_rms_epsilon")
    if isinstance(eps, float):
        fields["rms_norm_eps"] = float(f"{eps:.6g}")  # stored as float32
    ctx = meta.get(f"{a}.context_length")
    if isinstance(ctx, int):
        fields["max_position_embeddings"] = ctx
    theta = meta.get(f"{a}.rope.freq_base")
    if isinstance(theta, float):
        fields["rope"] = {"rope_theta": float(f"{theta:.7g}")}
    if boundaries != sorted(boundaries):
        notes.append(f"eagle3.target_layers {boundaries} are not ascending: llama.cpp fuses them in file order, "
                     "fc's column blocks follow ascending layers; read as sorted")
    notes.append("read from llama.cpp's keys alone (no eagle3_convert.record): decoder-config extras are not "
                 "known")
    return fields


def _config(ckpt: Checkpoint, keys: _Keys, notes: list[str]) -> tuple[DrafterConfig, dict[str, str]]:
    """The canonical config, and the source dtype of each tensor: our own record where it agrees with the keys
    llama.cpp reads, else what those keys alone say (and no dtypes: the GGUF's are the source's)."""
    record = _stored_record(ckpt)
    fields = _fields_from_record(record, keys, notes)
    if fields is None:
        return DrafterConfig.model_validate(_fields_from_keys(ckpt.config, keys, ckpt.tensors, notes)), {}
    dtypes = record.get("dtypes") if record else None
    return DrafterConfig.model_validate(fields), dtypes if isinstance(dtypes, dict) else {}


def _canonical_tensors(tensors: dict[str, TensorSource], cfg: DrafterConfig,
                       dtypes: dict[str, str]) -> dict[str, TensorSource]:
    """The GGUF's tensors by canonical name: q/k rows un-permuted, norms back in the source's dtype (`dtypes`)."""
    canonical: dict[str, TensorSource] = {}
    for name, ref in tensors.items():
        if name in (D2T, ROPE_FREQS):
            continue
        cname = CANONICAL[name]
        want = dtypes.get(cname, ref.dtype)
        if cname.endswith("q_proj.weight") or cname.endswith("k_proj.weight"):
            heads = cfg.num_attention_heads if cname.endswith("q_proj.weight") else cfg.num_key_value_heads
            if ref.shape[0] % (2 * heads):
                raise FormatError(f"{name} has {ref.shape[0]} rows, not 2 x {heads} heads' worth",
                                  "the file is damaged", code="E-SHAPE")
            canonical[cname] = StreamedTensor(ref, ref.dtype, ref.shape, heads=heads, inverse=True)
        elif want != ref.dtype and len(ref.shape) == 1 and want in ELEMENT:
            back = exactly_back(read_tensor_bytes(ref), ref.dtype, want)
            canonical[cname] = InMemoryTensor(want, ref.shape, back) if back is not None else ref
        else:
            canonical[cname] = ref
    return canonical


def _check_rope_freqs(rope: TensorSource | None, cfg: DrafterConfig, notes: list[str]) -> None:
    """rope_freqs (llama3 rope scaling) must be what the config's rope_scaling gives."""
    if rope is None:
        return
    params = cfg.rope_normalized()
    if str(params.get("rope_type", "")).lower() != "llama3":
        raise RefusalError("the GGUF carries rope_freqs (llama3 rope scaling) that no rope_scaling in the "
                           "config explains", "convert the original safetensors drafter instead",
                           code="E-GGUF-ROPE")
    if read_tensor_bytes(rope) != llama3_rope_factors(params, cfg.resolved_head_dim):
        notes.append("rope_freqs differs from the factors the config's llama3 rope_scaling gives; the "
                     "config's rope_scaling is kept")


# ------------------------------------------------------------------ the layout

class GGUFLayout(Layout):
    name = "gguf"
    summary = "llama.cpp GGUF (general.architecture eagle3), one file; `llama-server -md FILE --spec-type draft-eagle3`"
    engine = "vllm"  # eagle3.target_layers are capture boundaries, vLLM's convention
    home_engines = ("llamacpp",)
    kinds = ("eagle3", "dflash")

    def detect(self, ckpt: Checkpoint) -> Detection | None:
        if "_gguf" not in ckpt.config:
            return None
        if ckpt.config.get("general.architecture") == gguf_dflash.ARCH:
            return Detection(self.name, True, "a GGUF with general.architecture dflash")
        if ckpt.config.get("general.architecture") != ARCH:
            raise FormatError(f"{ckpt.path.name}: general.architecture is {ckpt.config.get('general.architecture')!r}, "
                              "not eagle3", "this is not an EAGLE-3 drafter GGUF", code="E-GGUF-ARCH")
        return Detection(self.name, True, "a GGUF with general.architecture eagle3")

    # ---------------------------------------------------------------- read
    def read(self, ckpt: Checkpoint, options: ConvertOptions) -> Drafter:
        if "_gguf" not in ckpt.config:
            raise FormatError(f"{ckpt.path}: not a GGUF", "--from gguf reads a .gguf file or a directory holding one",
                              code="E-GGUF-READ")
        self.detect(ckpt)
        if ckpt.config.get("general.architecture") == gguf_dflash.ARCH:
            return gguf_dflash.read(ckpt)
        keys = _keys_llamacpp_reads(ckpt.config, ckpt.tensors)
        notes = list(ckpt.notes)
        cfg, dtypes = _config(ckpt, keys, notes)
        canonical = _canonical_tensors(ckpt.tensors, cfg, dtypes)
        _check_rope_freqs(ckpt.tensors.get(ROPE_FREQS), cfg, notes)
        cfg = dtype_of_weights(cfg, getattr(canonical.get("fc.weight"), "dtype", None), notes)
        vmap = vocab_map_from_d2t(ckpt.tensors.get(D2T), keys.draft_vocab, keys.vocab)
        drafter = Drafter(cfg, canonical, vmap, notes)
        check_tensor_table(drafter)
        return drafter

    # ---------------------------------------------------------------- plan
    def plan(self, drafter: Drafter, options: ConvertOptions) -> WritePlan:
        cfg = drafter.config
        if cfg.kind != "eagle3":
            return gguf_dflash.plan(drafter, options, _target_gguf(options), _outtype(options), _record_to_store)
        _refuse_what_llamacpp_cannot_build(cfg)
        target = _target_gguf(options)
        boundaries = _capturable_boundaries(cfg, options, target)
        outtype = _outtype(options)
        notes = modelopt_first_layer_note(cfg, self.name)
        if cfg.capture_boundaries is None:
            notes.append(f"eagle3.target_layers written as {boundaries}: the engine default {{2, L//2, L-3}} on the "
                         f"{target.identity.num_hidden_layers}-layer target")
        tensors, dtypes = _gguf_tensors(drafter, outtype)
        main_dtype = _main_dtype(drafter, outtype)
        cast = cast_weights(drafter.tensors, OUTTYPES.get(outtype), NAMES)  # other bytes: a new drafter (convert)
        # What the sidecar is bound to (config_sha256): this exact record, stored in the GGUF.
        rec = dtype_of_weights(cfg, main_dtype, notes) if cast else cfg  # a cast's record names its own dtype
        plan_config = {"gguf": _metadata(cfg, boundaries, main_dtype), RECORD_KEY: _record_to_store(rec, dtypes, target)}
        return WritePlan(self.name, plan_config, tensors, notes,
                         writer=_writer(plan_config, main_dtype, target, tensors), cast=cast)


def _refuse_what_llamacpp_cannot_build(cfg: DrafterConfig) -> None:
    where = "llama.cpp's eagle3 architecture"
    refuse_unless(cfg.family == "llama", f"the drafter is a {cfg.family} drafter; {where} builds a Llama layer "
                  "(no q/k norms, no MLA)", "serve it with vLLM (--to vllm)", "E-FAMILY-UNSUPPORTED")
    refuse_unless(cfg.num_layers == 1, f"the drafter has {cfg.num_layers} layers; {where} builds exactly one",
                  "serve it with vLLM (--to vllm)", "E-LAYERS-UNSUPPORTED")
    refuse_unless(cfg.num_aux_hidden_states == 3, f"fc fuses {cfg.num_aux_hidden_states} captured states; "
                  f"{where} requires exactly 3", "serve it with vLLM (--to vllm)", "E-CAPTURE-COUNT")
    for flag in ("fc_norm", "norm_output"):
        refuse_unless(not getattr(cfg, flag), f"{flag} is true and {where} has no {flag}",
                      "serve it with vLLM (--to vllm)", "E-FLAG-UNSUPPORTED")
    refuse_unless(not (cfg.attention_bias or cfg.mlp_bias), f"the drafter has bias tensors; {where} loads none",
                  "serve it with vLLM (--to vllm)", "E-BIAS-UNSUPPORTED")


def _target_gguf(options: ConvertOptions) -> TargetGGUF:
    if not options.target_gguf:
        raise UsageError("the gguf layout needs the target's GGUF: --target-gguf PATH", "llama.cpp reads the "
                         "drafter's tokenizer from the file, so it is copied from the target's GGUF (made by "
                         "llama.cpp's convert_hf_to_gguf.py; a tokenizer directory would need llama.cpp's own "
                         "tokenizer conversion)", code="E-GGUF-TARGET")
    return read_target_gguf(options.target_gguf)


def _capturable_boundaries(cfg: DrafterConfig, options: ConvertOptions, target: TargetGGUF) -> list[int]:
    """The boundaries eagle3.target_layers will hold, refused unless llama.cpp's graph of this target exposes
    them (and the target GGUF is the drafter's target)."""
    L, Ht, V = target.identity.num_hidden_layers, target.identity.hidden_size, target.identity.vocab_size
    refuse_unless(cfg.resolved_target_hidden_size == Ht, f"the drafter fuses target states of width "
                  f"{cfg.resolved_target_hidden_size} but the target GGUF's embedding_length is {Ht}", "pass the GGUF "
                  "of the target the drafter was trained for", "E-HIDDEN-UNSUPPORTED")
    refuse_unless(cfg.vocab_size == V, f"the drafter's target vocabulary is {cfg.vocab_size} tokens, the target "
                  f"GGUF's tokenizer has {V}", "pass the GGUF of the target the drafter was trained for", "E-GGUF-VOCAB")
    known = next((t.num_hidden_layers for t in (options.target, cfg.target) if t and t.num_hidden_layers), None)
    refuse_unless(known in (None, L), f"the drafter was trained on {a_layer_target(known)}; the target GGUF has "
                  f"{L} blocks", "pass the GGUF of the target the drafter was trained for", "E-GGUF-TARGET")
    boundaries = sorted(cfg.capture_boundaries) if cfg.capture_boundaries is not None else default_boundaries(L)
    refuse_unless(target.arch in LAYER_INP_ARCHS, f"llama.cpp's {target.arch} graph exposes no layer inputs: "
                  "EAGLE-3 cannot capture from this target", "llama.cpp serves EAGLE-3 on llama, qwen3, gpt-oss, "
                  "qwen3.5, deepseek4, gemma4 and a few more targets", "E-CAPTURE-UNREACHABLE")
    for b in boundaries:
        refuse_unless(0 <= b <= L, f"boundary {b} is past the target's {L} blocks", "check the capture layers",
                      "E-CAPTURE-UNREACHABLE")
        refuse_unless(b < L or target.arch in NEXTN_ARCHS, f"boundary {b} is the last block's output, which "
                      f"llama.cpp's {target.arch} graph does not expose (no t_h_nextn): llama.cpp would abort",
                      "serve it with vLLM (--to vllm), or retrain on capturable layers", "E-CAPTURE-UNREACHABLE")
    return boundaries


def _outtype(options: ConvertOptions) -> str:
    outtype = (options.outtype or "auto").lower()
    if outtype not in ("auto", *OUTTYPES):
        raise UsageError(f"--outtype {outtype}: not written here", "choose auto, bf16, f16 or f32 (quantize "
                         "afterwards with llama-quantize)", code="E-GGUF-OUTTYPE")
    return outtype


def _gguf_tensors(drafter: Drafter, outtype: str) -> tuple[dict[str, TensorSource], dict[str, str]]:
    """The tensors by GGUF name, in the order llama.cpp's converter writes them (q/k rows permuted for GGML's
    RoPE, norms F32, rope_freqs for llama3 rope, d2t as absolute ids), and the source dtype of each."""
    cfg = drafter.config
    tensors: dict[str, TensorSource] = {}
    dtypes: dict[str, str] = {}
    for cname, gname in NAMES.items():
        src = drafter.tensors.get(cname)
        if src is None:
            continue
        dtypes[cname], dst = src.dtype, written_dtype(cname, src, outtype)
        heads = 0
        if cname.endswith("q_proj.weight"):
            heads = cfg.num_attention_heads
        elif cname.endswith("k_proj.weight"):
            heads = cfg.num_key_value_heads
        if heads and src.shape[0] % (2 * heads):
            raise RefusalError(f"{cname} has {src.shape[0]} rows, not an even number per head",
                               "GGML's RoPE permutation needs an even head_dim", code="E-SHAPE")
        tensors[gname] = src if (dst == src.dtype and not heads) else \
            StreamedTensor(src, dst, tuple(src.shape), heads=heads)
    params = cfg.rope_normalized()
    if str(params.get("rope_type", "")).lower() == "llama3":
        tensors[ROPE_FREQS] = InMemoryTensor("F32", (cfg.resolved_head_dim // 2,),
                                             llama3_rope_factors(params, cfg.resolved_head_dim))
    elif params.get("rope_type", "default") not in ("default", None):
        raise RefusalError(f"rope_type {params.get('rope_type')!r}: this writer carries default and llama3 rope",
                           "serve it with vLLM (--to vllm)", code="E-GGUF-ROPE")
    if drafter.vocab is not None:
        import numpy as np

        tensors[D2T] = InMemoryTensor("I64", (cfg.draft_vocab_size,),
                                      np.array(drafter.vocab.target_ids, dtype="<i8").tobytes())
    return tensors, dtypes


def _metadata(cfg: DrafterConfig, boundaries: list[int], main_dtype: str) -> dict[str, Any]:
    """The GGUF keys llama.cpp reads of an eagle3 drafter."""
    a = ARCH
    metadata: dict[str, Any] = {
        "general.architecture": a,
        "general.file_type": FILE_TYPE[main_dtype],
        f"{a}.block_count": 1,
        f"{a}.context_length": cfg.max_position_embeddings or 4096,
        f"{a}.embedding_length": cfg.hidden_size,
        f"{a}.feed_forward_length": cfg.intermediate_size,
        f"{a}.attention.head_count": cfg.num_attention_heads,
        f"{a}.attention.head_count_kv": cfg.num_key_value_heads,
        f"{a}.attention.layer_norm_rms_epsilon": cfg.rms_norm_eps,
        f"{a}.rope.freq_base": float(cfg.rope_normalized().get("rope_theta", 10000.0)),
        f"{a}.rope.dimension_count": cfg.resolved_head_dim,
        f"{a}.vocab_size": cfg.vocab_size,
        f"{a}.target_layers": boundaries,
        f"{a}.target_hidden_size": cfg.resolved_target_hidden_size,
        f"{a}.norm_before_residual": cfg.norm_before_residual,
        f"{a}.norm_before_fc": cfg.norm_before_fc,
    }
    if cfg.head_dim is not None:
        metadata[f"{a}.attention.key_length"] = cfg.head_dim
        metadata[f"{a}.attention.value_length"] = cfg.head_dim
    return metadata


def _main_dtype(drafter: Drafter, outtype: str) -> str:
    """The dtype of the 2-D weights, which general.file_type names: --outtype's, else fc.weight's if a GGUF
    file type, else F32."""
    fc_dtype = drafter.tensors["fc.weight"].dtype
    return OUTTYPES.get(outtype) or (fc_dtype if fc_dtype in FILE_TYPE else "F32")


def _record_to_store(cfg: DrafterConfig, dtypes: dict[str, str], target: TargetGGUF) -> dict[str, Any]:
    """eagle3_convert.record: the canonical config (with the target the GGUF was written against) and the source
    dtypes, which llama.cpp's keys cannot hold."""
    target_id = TargetIdentity.merged(cfg.target, target.identity)  # (its width is the drafter's: plan checked it)
    return {"drafter": cfg.model_copy(update={"target": target_id}).model_dump(mode="json"), "dtypes": dtypes,
            "target_gguf": {"architecture": target.arch, "block_count": target.identity.num_hidden_layers,
                            "file": target.path.name}}


def _writer(plan_config: dict[str, Any], main_dtype: str, target: TargetGGUF,
            tensors: dict[str, TensorSource]) -> Callable[[Path, Path, Callable[[int], None] | None], list[str]]:
    """The plan's writer: one GGUF file holding the keys, the record, the target's tokenizer and the tensors."""
    metadata = plan_config["gguf"]
    record_text = json_bytes(plan_config).decode()
    types = key_types(metadata)

    def write(tmp: Path, dest: Path, on_progress: Callable[[int], None] | None) -> list[str]:
        name = file_name(dest, main_dtype)
        write_gguf(tmp / name, metadata, types, record_text, target, tensors, on_progress)
        return [name]

    return write


LAYOUT = GGUFLayout()
