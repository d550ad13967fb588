"""TensorRT-LLM (PyTorch backend), from its source, not loaded: see docs/formats.md §8.

Facts: by default (`eagle3_one_model: true`, `eagle3_model_arch: llama3` in `llm_args.py`) the drafter
is built as `Eagle3ForCausalLM` whatever its `architectures` say (`modeling_speculative.py`,
`_build_eagle3_one_model_draft`), with MLA attention when the config has `kv_lora_rank`; the config
is read through transformers (or TensorRT-LLM's own registry, which maps `kimi_k2` to DeepseekV3Config),
so it needs a `model_type`; a missing `draft_vocab_size` becomes `vocab_size` with a warning. Capture
layers are a serve-time argument (`eagle3_layers_to_capture`, block outputs b - 1, defaults
{1, L//2-1, L-4}); norm_before_fc is read only nested in eagle_config, fc_norm and norm_output only at
the top level, norm_before_residual never; a null target_hidden_size breaks fc. The two-model path
(`eagle3_one_model: false`) resolves `"EAGLE3" + architectures[0].replace("Eagle3", "")` instead and
fails loudly on a name it lacks.

Read in NVIDIA/TensorRT-LLM `tensorrt_llm/_torch/models/modeling_speculative.py` @ 00679c66:
- `Eagle3DraftModel.__init__`: norm_output is `eagle_config.return_hidden_post_norm` OR top-level
  `norm_output`; `apply_eagle3_fc` applies `fc_norm` if set, ELSE `input_norm` (norm_before_fc): with both
  flags on, the input_norm is built and never applied.
- `Eagle3DecoderLayer`: layers >= 1 (`next_layer_regular`, default true) build no `input_layernorm` and
  normalise their input with `hidden_norm`; `Eagle3ForCausalLM.load_weights` maps `layers.{i}.` to
  `midlayer.{i}.` and loads by module, so a later layer's stored `input_layernorm` is never read, nor is a
  multi-layer drafter's layer 0 stored as `midlayer.*` (its module is `midlayer.0`).
- `Eagle3Attention` passes no sliding window: the drafter attends over the whole context.

P-EAGLE (issue 22 says TensorRT-LLM serves it; its sources read do not show it): `SpeculativeDecodingMode`
(`_torch/speculative/interface.py` @ 00b6d5a2) has EAGLE3, EAGLE3_ONE_MODEL, PARD, DFLASH, DSPARK, MTP and others,
no P-EAGLE; its parallel-draft modes are PARD (`speculative/pard.py`: drafts from the draft model's own embeddings
and mask tokens, "not target hidden states"), DFlash and DSpark. A P-EAGLE drafter served as Eagle3 would draft
autoregressively where it was trained to draft in parallel; whether its loader takes `mask_hidden` is not
established. So no verdict ("unknown"), with that reason.
"""

from __future__ import annotations

import json
import re
from typing import Any, Collection, Mapping

from ..capture_ids import default_boundaries
from .common import (Reading, TargetContext, dropped, flag, has, nested, num_layers, trained_window,
                     unread_later_norms, window_ignored)
from .releases import Change, Releases

LABEL = "TensorRT-LLM"
RELEASE = "TensorRT-LLM, 2026 sources"  # read from source, no release loaded (docs/formats.md §8)
# Layers >= 1: the pre-attention norm applied, and the norms built (Eagle3DecoderLayer, next_layer_regular).
LATER_NORM_APPLIED = "hidden_norm"
LATER_NORMS_BUILT = ("hidden_norm",)
# The rules are read from one source snapshot, not a release: every numbered release is unknown to us.
FC_NORM_OUTPUT = Change(
    "flags", "fc_norm and norm_output not read", "fc_norm (fc_norm.{j}.weight) and norm_output read at the top level",
    None, "PR 14988 (merged 2026-06-05; in the sources read; its first release is not established here: unknown)")
RELEASES = Releases("trtllm", LABEL, ("2026-sources",), (FC_NORM_OUTPUT,),
                    note="TensorRT-LLM's rules come from a 2026 source snapshot, not from a numbered release")


PEAGLE_UNDECIDED = (
    "TensorRT-LLM's sources read have no P-EAGLE mode (SpeculativeDecodingMode, _torch/speculative/interface.py @ "
    "00b6d5a2; its PARD mode drafts from mask tokens without the target's hidden states): as Eagle3 it would draft "
    "autoregressively a drafter trained to draft in parallel, if its loader takes mask_hidden at all; not served as "
    "trained, whether loudly or not is not established")


def built_family(config: Mapping[str, Any]) -> str:
    """The drafter class the default (one-model) path builds: Eagle3ForCausalLM, MLA iff kv_lora_rank."""
    return "deepseek_mla" if config.get("kv_lora_rank") else "llama"


def runtime_ids(boundaries: list[int]) -> list[int]:
    """`eagle3_layers_to_capture` for these boundaries (output-of-block ids, sorted)."""
    return sorted(b - 1 for b in boundaries)


def read(config: Mapping[str, Any], names: Collection[str], ctx: TargetContext, release: str | None = None) -> Reading:
    r = Reading("trtllm", LABEL)
    if "speculators_model_type" in config or "model_type" not in config:
        r.refusal = "TensorRT-LLM reads the config through transformers and needs a model_type (speculators " \
                    "configs have none)"
        return r
    if "draft_vocab_size" not in config and "d2t" in names:
        r.refusal = "without draft_vocab_size TensorRT-LLM takes vocab_size as the draft vocabulary, and the " \
                    "drafter's d2t and smaller lm_head fail to load"
        return r
    if "target_hidden_size" in config and config["target_hidden_size"] is None:
        r.refusal = "TensorRT-LLM fails to size fc: target_hidden_size is null"
        return r
    r.family = built_family(config)
    eagle = nested(config)
    fc_norm = flag(config, "fc_norm")
    r.flags = {"norm_before_residual": False, "norm_before_fc": flag(eagle, "norm_before_fc") and not fc_norm,
               "fc_norm": fc_norm,
               "norm_output": flag(eagle, "return_hidden_post_norm") or flag(config, "norm_output")}
    if flag(config, "norm_before_fc") and not flag(eagle, "norm_before_fc"):
        r.silent += dropped(has(names, r"^input_norm\.weight$"), "input_norm (it reads norm_before_fc only nested)",
                            LABEL)
    r.silent += dropped(has(names, r"\.(q_norm|k_norm)\.weight$"), "q/k norms", LABEL)
    if num_layers(names) > 1:
        r.silent += dropped(unread_later_norms(names, "input_layernorm", LATER_NORM_APPLIED),
                            "the pre-attention norm of layers >= 1 (it reads hidden_norm there)", LABEL)
        r.silent += dropped(has(names, r"^midlayer\.(?!\d)"), "layer 0 stored as midlayer.* (a multi-layer "
                            "drafter's is midlayer.0)", LABEL)
    window = trained_window(config)
    if window:
        r.caveats.append(window_ignored(LABEL, window))
    r.runtime = True
    r.undecided = {"peagle": PEAGLE_UNDECIDED}
    return r


# What validate's replay needs (validate.profiles.EngineProfile is built from these). Capture ids: a runtime argument.
# A quantized drafter: what was read, and why no verdict. Read in NVIDIA/TensorRT-LLM: `ModelConfig.from_pretrained`
# (`_torch/model_config.py` @ 008e0af8) takes the draft directory's hf_quant_config.json as authoritative (config.json's
# quantization_config only warned about where it differs, `warn_if_inline_diverges`; read instead when the file is
# absent), and `read_modelopt_quant_config` (`quantization/modelopt_config.py`) reads a flat config's `ignore` as
# `exclude_modules`; `SpecDecOneEngineForCausalLM.__init__` (`modeling_speculative.py` @ b35ac1b6) then overwrites the
# draft's kv_cache_quant_algo with the target's. How its Eagle3 draft modules' names meet exclude_modules was not read.
QUANTIZED_UNDECIDED = ("TensorRT-LLM reads the draft's hf_quant_config.json (else config.json's quantization_config, "
                       "`ignore` as exclude_modules) and takes the KV-cache algo from the target, not the draft "
                       "(model_config.py, modeling_speculative.py); how its draft modules' names meet "
                       "exclude_modules was not read")
IDS_FROM = None
FAMILIES = frozenset({"llama", "deepseek_mla"})  # MLA attention inside its Llama-named class, with kv_lora_rank
FLAGS_READ = frozenset({"norm_before_fc", "fc_norm", "norm_output"})  # norm_before_fc nested only (read())
BUILDS_BIAS = True
NEEDS_T2D = False


# ------------------------------------------------------------------ the serve snippet (issue 14, Deliver 4)

MAX_DRAFT_LEN = 3  # the draft length every serve command we print uses (model_card.NUM_SPECULATIVE_TOKENS)


def serve_snippet(boundaries: list[int] | None, depth: int | None, model_dir: str) -> dict[str, Any]:
    """The `speculative_config` TensorRT-LLM needs to serve the drafter in `model_dir` (an LLM API /
    `trtllm-serve --extra_llm_api_options` YAML): capture layers are a runtime argument there.

    `boundaries` are the trained ones (None: the file names none, so the engines' defaults for a
    `depth`-layer target). Returns {"speculative_config", "yaml", "layers_unknown"}: the last says why
    no `eagle3_layers_to_capture` is given (then TensorRT-LLM captures its defaults), else None."""
    if boundaries is None and depth:
        boundaries = default_boundaries(depth)
    spec: dict[str, Any] = {"decoding_type": "Eagle3", "max_draft_len": MAX_DRAFT_LEN,
                            "speculative_model_dir": model_dir}
    why = None
    if boundaries is None:
        why = ("the drafter names no capture layers and the target's depth L is unknown: TensorRT-LLM will capture "
               "its defaults {1, L//2-1, L-4}, right only if training used the defaults (give --target for the ids)")
    elif min(boundaries) < 1:
        why = (f"TensorRT-LLM cannot capture boundary {min(boundaries)} (the embedding output): its id -1 means the "
               "final norm's output")
    else:
        spec["eagle3_layers_to_capture"] = runtime_ids(list(boundaries))
    lines = ["speculative_config:"] + [f"  {key}: {_yaml(value)}" for key, value in spec.items()]
    if why:
        lines.append(f"  # eagle3_layers_to_capture not given: {why}")
    return {"speculative_config": spec, "yaml": "\n".join(lines), "layers_unknown": why}


def _yaml(value: Any) -> str:
    if isinstance(value, str) and not re.fullmatch(r"[A-Za-z0-9_./~][A-Za-z0-9_./~@+-]*", value):
        return json.dumps(value)  # a JSON string is a YAML double-quoted scalar
    return json.dumps(value) if isinstance(value, list) else str(value)  # [1, 15, 28]: a YAML flow sequence
