"""The speculators 0.9.0 library (`SpeculatorModel.from_pretrained`; what its trainer writes).

Facts (docs/formats.md §2.1, §6): reads only speculators-format configs (`speculators_model_type`),
Llama and Qwen3 decoder layers, capture ids as top-level BOUNDARIES, flags at the top level
with an absent norm_before_residual read as false (vLLM reads it as true). `Eagle3SpeculatorConfig`
refuses norm_before_fc together with fc_norm (`_check_norm_flags`, models/eagle3/config.py). A sliding
window is trained and applied where `layer_types` says "sliding_attention" (models/eagle3/core.py).
"""

from __future__ import annotations

from typing import Any, Collection, Mapping

from .common import FLAGS, IDS_KEY, Reading, TargetContext, flag, id_list
from .releases import Releases

LABEL = "speculators library"
RELEASES = Releases("speculators", "speculators", ("0.9.0",))  # the one release read
RELEASE = f"{RELEASES.label} {RELEASES.newest}"
MODEL_TYPES = {"llama": "llama", "qwen3": "qwen3"}
# speculators_model_type -> the kind it loads (SpeculatorModel.register("eagle3") / ("peagle"), models/*/core.py)
KINDS = {"eagle3": "eagle3", "peagle": "peagle"}



# What validate's replay of the library needs (validate.profiles.EngineProfile is built from these).
IDS_FROM = "top"  # capture ids: the top-level list, as boundaries
FAMILIES = frozenset({"llama", "qwen3"})
FLAGS_READ = frozenset(FLAGS)
MLA_FLAGS_READ: frozenset[str] = frozenset()
BUILDS_BIAS = True
NEEDS_T2D = True  # its d2t/t2d buffers are loaded as saved: a missing t2d stays uninitialised

def read(config: Mapping[str, Any], names: Collection[str], ctx: TargetContext, release: str | None = None) -> Reading:
    r = Reading("speculators", LABEL)
    if "speculators_model_type" not in config:
        r.refusal = "the speculators library reads only speculators-format configs (speculators_model_type)"
        return r
    named = config["speculators_model_type"]
    kind = KINDS.get(named) if isinstance(named, str) else None  # (a list or an object is no kind: no lookup)
    if kind is None:
        r.refusal = f"the speculators library builds no EAGLE-3-style drafter for {config['speculators_model_type']!r}"
        return r
    r.kind = kind
    layer_cfg = config.get("transformer_layer_config")
    model_type = layer_cfg.get("model_type") if isinstance(layer_cfg, dict) else None
    r.family = MODEL_TYPES.get(model_type)
    if r.family is None:
        r.refusal = f"the speculators library has no Eagle3 draft layer for model_type {model_type!r}"
        return r
    if flag(config, "norm_before_fc") and flag(config, "fc_norm"):
        r.refusal = "norm_before_fc and fc_norm are mutually exclusive"
        return r
    ids = id_list(config.get(IDS_KEY))
    if ids is None:
        r.captures_defaults(ctx.depth)
    else:
        r.captures = sorted(set(ids))
    r.flags = {f: flag(config, f) for f in FLAGS}
    return r
