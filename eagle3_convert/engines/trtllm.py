"""TensorRT-LLM (PyTorch backend), from its source, not loaded: see docs/formats.md §8.

Facts: the class is resolved as `"EAGLE3" + architectures[0].replace("Eagle3", "")` when the
config has `draft_vocab_size` (registered: EAGLE3LlamaForCausalLM); capture layers are a
serve-time argument (`eagle3_layers_to_capture`, block outputs b - 1, defaults
{1, L//2-1, L-4}); norm_before_fc is read only nested in eagle_config, fc_norm and
norm_output only at the top level, norm_before_residual never; a null target_hidden_size
breaks fc.
"""

from __future__ import annotations

from typing import Any, Collection, Mapping

from . import Reading, TargetContext
from .common import architectures, flag, has, nested, dropped

LABEL = "TensorRT-LLM"
REGISTERED = {"EAGLE3LlamaForCausalLM": "llama",
              # NVIDIA's MLA (Kimi) exports name Eagle3DeepseekV2ForCausalLM; the source shows the MLA drafter
              # as Eagle3DeepSeekV3ForCausalLM / kv_lora_rank inside the Llama class. Unverified: not loaded.
              "EAGLE3DeepseekV2ForCausalLM": "deepseek_mla"}



def resolved_class(archs: list[str]) -> str | None:
    return "EAGLE3" + archs[0].replace("Eagle3", "") if archs else None


def runtime_ids(boundaries: list[int]) -> list[int]:
    """`eagle3_layers_to_capture` for these boundaries (output-of-block ids, sorted)."""
    return sorted(b - 1 for b in boundaries)


def read(config: Mapping[str, Any], names: Collection[str], ctx: TargetContext) -> Reading:
    r = Reading("trtllm", LABEL)
    archs = architectures(config)
    resolved = resolved_class(archs)
    if "speculators_model_type" in config or "model_type" not in config:
        r.refusal = "TensorRT-LLM reads the config through transformers and needs a model_type (speculators " \
                    "configs have none)"
        return r
    if "draft_vocab_size" not in config:
        r.refusal = "without draft_vocab_size TensorRT-LLM loads the drafter as a plain Llama and fails on its names"
        return r
    if resolved not in REGISTERED:
        r.refusal = f"TensorRT-LLM has no class {resolved} (from architectures {archs})"
        return r
    if "target_hidden_size" in config and config["target_hidden_size"] is None:
        r.refusal = "TensorRT-LLM fails to size fc: target_hidden_size is null"
        return r
    r.family = REGISTERED[resolved]
    eagle = nested(config)
    r.flags = {"norm_before_residual": False, "norm_before_fc": flag(eagle, "norm_before_fc"),
               "fc_norm": flag(config, "fc_norm"), "norm_output": flag(config, "norm_output")}
    if flag(config, "norm_before_fc") and not flag(eagle, "norm_before_fc"):
        r.silent += dropped(has(names, r"^input_norm\.weight$"), "input_norm (it reads norm_before_fc only nested)",
                            LABEL)
    r.silent += dropped(has(names, r"\.(q_norm|k_norm)\.weight$"), "q/k norms", LABEL)
    r.runtime = True
    return r

# What validate's replay needs (validate.profiles.EngineProfile is built from these). Capture ids: a runtime argument.
IDS_FROM = None
# Architecture names drafters ship with, and the family TensorRT-LLM builds for each under its rule.
CLASSES = {a: REGISTERED[resolved_class([a])] for a in (
    "LlamaForCausalLM", "LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM", "Eagle3DeepseekV2ForCausalLM",
    "Eagle3DeepseekV3ForCausalLM", "Eagle3Speculator") if resolved_class([a]) in REGISTERED}
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
    from ..converters.layer_ids import default_boundaries

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
    import json
    import re

    if isinstance(value, str) and not re.fullmatch(r"[A-Za-z0-9_./~][A-Za-z0-9_./~@+-]*", value):
        return json.dumps(value)  # a JSON string is a YAML double-quoted scalar
    return json.dumps(value) if isinstance(value, list) else str(value)  # [1, 15, 28]: a YAML flow sequence
