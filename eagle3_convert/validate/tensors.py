"""Tensors: every stored name, shape and dtype against what the config implies."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..converters.layout import VOCAB_TENSORS, untrained_of
from ..converters.quantized import read_quantization
from ..errors import Eagle3Error
from ..drafter import DrafterConfig, expected_shapes, layer_index, optional_shapes
from ..quantization import companion, stored_shape
from ..safetensors_io import FLOAT_DTYPES, tensor_sha256
from .context import Context
from .profiles import engine_profiles


def check_quantization(ctx: Context) -> None:
    """The quantization config against the scales (converters/quantized.py says what is refused, and why)."""
    try:
        read_quantization(ctx.raw, {n: t for n, t in ctx.raw.tensors.items() if n not in VOCAB_TENSORS})
    except Eagle3Error as e:
        if e.code != "E-QUANT-ORPHAN-SCALE":  # (said of each such tensor by check_tensors)
            ctx.add(e.code or "E-QUANT-UNSUPPORTED", e.message, e.hint, where="$.quantization_config")


def check_tensors(ctx: Context) -> None:
    check_quantization(ctx)
    cfg = ctx.cfg
    if not ctx.layers_plausible():
        ctx.add("E-KEY-MISSING", f"config.json says {cfg.num_layers} decoder layers but the checkpoint holds "
                f"{len(ctx.raw.tensors)} tensors", "the checkpoint is incomplete or num_hidden_layers is wrong",
                where="$.num_hidden_layers")
        return
    expected, optional = expected_shapes(cfg), optional_shapes(cfg)
    seen: dict[str, str] = {}
    untrained: list[tuple[str, str]] = []  # (trained, untrained) twin norms of layers >= 1
    fc_bad = any(f.code == "E-SHAPE-FC" for f in ctx.out)
    for stored, intent in sorted(ctx.intents.items()):
        src = ctx.raw.tensors[stored]
        label = stored if intent in (None, stored) else f"{stored} ({intent})"
        scale_of = companion(stored)
        if scale_of is not None and intent is None:  # a quantized weight's scale: judged with its weight
            if scale_of[0] not in ctx.raw.tensors:
                ctx.add("E-QUANT-ORPHAN-SCALE", f"scale tensor {stored!r} has no weight {scale_of[0]!r} beside it: "
                        "no engine has a parameter to load it into", "re-export the drafter, or remove the scales "
                        "of weights it dropped", where=stored)
            continue
        if intent is None:
            ctx.add("E-KEY-UNKNOWN", f"tensor {stored!r} is no part of an EAGLE-3 drafter in the "
                    f"{ctx.layout.name} layout: no engine loads it (SGLang skips it without a word, vLLM's loader "
                    "fails on it)",
                    f"rename it to its drafter name or remove it (`{ctx.command_inspect()}` lists the names)",
                    where=stored)
            continue
        twin = _later_norm_twin(stored, ctx.raw.tensors)
        if twin is not None:  # one norm of a layer >= 1 under vLLM's and SGLang's names, as we write it
            if stored.endswith("hidden_norm.weight") and tensor_sha256(src) != tensor_sha256(ctx.raw.tensors[twin]):
                init = untrained_of(twin, stored, ctx.raw.tensors)
                if init is not None:  # the other one is the norm training applied: no choice to make
                    untrained.append((stored if init == twin else twin, init))
                else:
                    ctx.add("E-KEY-DUPLICATE", f"tensors {twin!r} and {stored!r} hold different weights: vLLM "
                            "reads the first, SGLang and TensorRT-LLM the second, and they would serve different "
                            "drafters", "keep the trained weight under both names, or one of them", where=stored)
            if intent in seen or intent not in expected:
                continue
        if intent in seen:
            ctx.add("E-KEY-DUPLICATE", f"tensors {seen[intent]!r} and {stored!r} both hold {intent}",
                    "the checkpoint stores one weight twice under two prefixes: keep one", where=stored)
            continue
        seen[intent] = stored
        want = expected.get(intent) or optional.get(intent)
        if want is None:
            ctx.add("E-KEY-UNUSED", f"tensor {label} is not used by this drafter's config "
                    f"({_unused_reason(cfg, intent)}): {_unused_effect(intent)}",
                    "set the config flag it belongs to, or remove the tensor", where=stored)
            continue
        quantized = f"{stored}_scale" in ctx.raw.tensors
        want = stored_shape(want, src.dtype) if quantized else want
        if src.dtype not in FLOAT_DTYPES and not quantized:
            ctx.add("E-DTYPE", f"tensor {label} has dtype {src.dtype}; drafter weights are float tensors",
                    "re-export the weights in bf16/fp16/fp32", where=stored)
        if tuple(src.shape) != want and not (intent == "fc.weight" and fc_bad):
            ctx.add("E-SHAPE", f"tensor {label} has shape {list(src.shape)}, the config implies {list(want)}",
                    "config.json and the weights disagree: fix the config field the shape depends on, or "
                    "re-export the weights", where=stored)
    if untrained:
        _untrained_twins(ctx, untrained)
    for name in sorted(set(expected) - set(seen)):
        extra = ""
        if name == "lm_head.weight" and cfg.draft_vocab_size < cfg.vocab_size:
            extra = (f"; the target's [{cfg.vocab_size}, {cfg.hidden_size}] head cannot stand in for it "
                     "(it does not fit the d2t path)")
        ctx.add("E-KEY-MISSING", f"required tensor {name} {list(expected[name])} is missing{extra}",
                "the checkpoint is incomplete: engines load it silently with random weights; re-export it "
                "from the training run", where=name)


def _untrained_twins(ctx: Context, pairs: list[tuple[str, str]]) -> None:
    """Layers >= 1 whose two pre-attention norms differ, one at RMSNorm's initial ones (SpecForge forks' multi-layer
    drafters: input_layernorm trained, hidden_norm never applied): the trained one is the drafter's, which convert
    keeps under both names. Only an engine that applies the untrained name serves the file wrong."""
    trained, init = pairs[0]
    more = f" (and in {len(pairs) - 1} more layers)" if len(pairs) > 1 else ""
    ctx.add("W-KEY-UNTRAINED-TWIN", f"tensor {init!r} holds RMSNorm's initial ones, a norm training never applied, "
            f"beside the trained {trained!r}{more}: the drafter was trained with the latter; convert keeps it under "
            "both names and drops the untrained copy", f"write the trained norm under both names: "
            f"`{ctx.command(ctx.layout.name)}`", where=init)
    norm = init.rsplit(".", 2)[-2]  # hidden_norm or input_layernorm
    for name in ctx.engines:
        p = engine_profiles().get(name)
        if p is not None and p.later_norms_built and p.later_norm_applied == norm:
            ctx.add("E-ENGINE-WRONG", f"{p.label} applies {init!r}, RMSNorm's initial ones, where the drafter was "
                    f"trained with {trained!r}{more}: it would serve this file wrong",
                    f"write the trained norm under both names: `{ctx.command(p.layout)}`", engine=name, where=init)


def _later_norm_twin(stored: str, tensors: Mapping[str, Any]) -> str | None:
    """For `layers.{i>=1}.hidden_norm.weight`, its `input_layernorm` twin when the file holds both: the
    pre-attention norm of that layer written for SGLang and for vLLM (converters.layout.with_both_later_norms)."""
    m = re.match(r"^((?:model\.)?(?:layers\.[1-9]\d*|additional_layers\.\d+)\.)(hidden_norm|input_layernorm)\.weight$",
                 stored)
    if not m:
        return None
    twin = f"{m.group(1)}{'input_layernorm' if m.group(2) == 'hidden_norm' else 'hidden_norm'}.weight"
    return twin if twin in tensors else None


def _unused_effect(canonical: str) -> str:
    """What the engines do with a weight the config builds no parameter for: vLLM's loader raises on it, but for an
    extra bias, which its load_weights skips (docs/formats.md §6.2; engines/vllm.py UNKNOWN_NAMES_REFUSED)."""
    if canonical.endswith(".bias"):
        return "engines drop it silently"
    return "no engine applies it (SGLang skips it without a word, vLLM's loader fails on it)"


def _unused_reason(cfg: DrafterConfig, canonical: str) -> str:
    index = layer_index(canonical)
    if index is not None and index >= cfg.num_layers:
        return f"num_hidden_layers is {cfg.num_layers}"
    if canonical == "input_norm.weight":
        return "norm_before_fc is off"
    if canonical.startswith("fc_norm."):
        return "fc_norm is off" if not cfg.fc_norm else f"only {cfg.num_aux_hidden_states} fc_norm weights exist"
    if canonical.endswith(".bias"):
        return "attention_bias / mlp_bias is off"
    if canonical.endswith(("q_norm.weight", "k_norm.weight")):
        return f"a {cfg.family} drafter has no q_norm/k_norm"
    return f"a {cfg.family} drafter has no such tensor"
