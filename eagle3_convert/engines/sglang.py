"""SGLang 0.5.23: `llama_eagle3.py` (LlamaForCausalLMEagle3) and `kimi_k25_eagle3.py` (Eagle3DeepseekV2ForCausalLM).

Facts (docs/formats.md §2.2, §4, §6; checked by the engine tier):
- The model registry knows two EAGLE-3 classes (`EntryClass`); any other architecture,
  speculators' `Eagle3Speculator` included, is refused at start-up.
- Capture ids: ONLY the nested `eagle_config.eagle_aux_hidden_state_layer_ids`, as block
  outputs (boundary - 1), with per-target-family quirks (capture_ids.engine_boundaries); no list
  means the defaults. A top-level list is ignored. The last block's output is never captured.
- Flags: no norm_before_residual; norm_before_fc top level or nested; fc_norm (legacy
  use_aux_norm) and norm_output at the top level. The MLA class applies only fc_norm and
  norm_output, and builds one layer.
- fc is applied only when the incoming width k*Ht differs from H.
- Weights: `midlayer.`, `layers.` or `model.layers.`; layers >= 1 normalise their input with
  `hidden_norm` (`LlamaDecoderLayer.forward`, which builds `input_layernorm` in every layer and applies it
  only in layer 0); biases, q/k norms and unknown names are dropped silently (`load_weights` skips a name
  that matches no parameter), among them `additional_layers.*`: 0.5.23 names every layer `model.layers.{i}`
  (mapping `midlayer` to `layers.0`), where sgl-project/sglang at 03d5a77 built layer 0 as `model.midlayer`
  (a stored `layers.0.*` matched nothing there) and layers >= 1 as `model.additional_layers.{i-1}`
  (`BasicDecoderLayer`: hidden_norm applied, no input_layernorm). The sglang layout reads those names.
- Sliding window: `LlamaForCausalLMEagle3` takes its window only from the server flag
  `--speculative-draft-window-size` (`_draft_window_size`, llama_eagle3.py in 0.5.23), never from config.json.
- `tie_word_embeddings: true` makes both classes set `self.lm_head = self.model.embed_tokens`
  (`LlamaForCausalLMEagle3.__init__` in llama_eagle3.py, `Eagle3DeepseekV2ForCausalLM.__init__` in
  kimi_k25_eagle3.py; read in 0.5.23 and in sgl-project/sglang at 03d5a77): the tied module dedups out of
  `named_parameters()`, so a stored `lm_head.weight` matches no parameter and is skipped without a word.
"""

from __future__ import annotations

from typing import Any, Collection, Mapping

from ..capture_ids import capturable, default_boundaries, engine_boundaries
from .common import (IDS_KEY, Reading, TargetContext, architectures, dropped, flag, has, id_list, nested, num_layers,
                     trained_window, unread_later_norms, window_ignored)

LABEL = "SGLang"
RELEASE = "SGLang 0.5.23"  # the release these rules were read from and the engine tier loads
CLASSES = {"LlamaForCausalLMEagle3": "llama", "Eagle3DeepseekV2ForCausalLM": "deepseek_mla"}
ARCHITECTURE = {family: arch for arch, family in CLASSES.items()}
IDS_FROM = "nested"
CONVENTION = "sglang"  # block outputs, capture_ids
FLAGS_READ = {"llama": ("norm_before_fc", "fc_norm", "norm_output"), "deepseek_mla": ("fc_norm", "norm_output")}
MLA_MAX_LAYERS = 1
# Layers >= 1: the pre-attention norm applied, and the norms built (LlamaDecoderLayer, llama_eagle3.py).
LATER_NORM_APPLIED = "hidden_norm"
LATER_NORMS_BUILT = ("input_layernorm", "hidden_norm")



# What validate's replay needs (validate.profiles.EngineProfile is built from these).
FAMILIES = frozenset(CLASSES.values())
BUILDS_BIAS = False
NEEDS_T2D = False  # t2d is never read: hot_token_id = arange(Vd) + d2t
FC_SKIPPED_WHEN_WIDTH_MATCHES = True  # fc only when k*Ht != H

def read(config: Mapping[str, Any], names: Collection[str], ctx: TargetContext) -> Reading:
    r = Reading("sglang", LABEL)
    archs = architectures(config)
    family = next((CLASSES[a] for a in archs if a in CLASSES), None)
    if "speculators_model_type" in config or family is None:
        r.refusal = f"SGLang refuses it: model architectures {archs} are not supported"
        return r
    if "draft_vocab_size" not in config:
        r.refusal = "SGLang fails to construct the drafter: config.json has no draft_vocab_size"
        return r
    if "target_hidden_size" in config and config["target_hidden_size"] is None:
        r.refusal = "SGLang fails to construct fc: target_hidden_size is null"
        return r
    r.family = family
    eagle = nested(config)
    layers = num_layers(names)
    if family == "deepseek_mla" and layers > MLA_MAX_LAYERS:
        r.silent.append(f"SGLang's MLA class builds {MLA_MAX_LAYERS} layer and drops the other {layers - 1}")
    ids = id_list(eagle.get(IDS_KEY))
    if ids is None:
        r.captures, r.from_default = (default_boundaries(ctx.depth) if ctx.depth else None), True
    else:
        captured = engine_boundaries(CONVENTION, ids, ctx.family, ctx.depth)
        if captured is None:
            r.silent.append(f"SGLang captures nothing for ids {ids} on a {ctx.family}-family target")
        else:
            lost = [b for b in captured if not capturable(CONVENTION, b, ctx.family, ctx.depth)]
            if lost:
                r.silent.append(f"SGLang cannot capture boundaries {lost} (the last block's output) and serves "
                                "without them")
            r.captures = captured
    read_flags = FLAGS_READ[family]
    values = {"norm_before_residual": False,
              "norm_before_fc": flag(config, "norm_before_fc") or flag(eagle, "norm_before_fc"),
              "fc_norm": flag(config, "fc_norm") or flag(config, "use_aux_norm"),
              "norm_output": flag(config, "norm_output")}
    r.flags = {f: v and f in read_flags for f, v in values.items()}
    if eagle.get("use_aux_hidden_state", True) is False:
        r.silent.append("SGLang never applies fc: eagle_config.use_aux_hidden_state is false")
    k = len(ids) if ids else 3
    ht = config.get("target_hidden_size") or config.get("hidden_size")
    if isinstance(ht, int) and k * ht == config.get("hidden_size"):
        r.silent.append(f"SGLang skips fc: k*Ht == H ({k}*{ht})")
    r.silent += dropped(has(names, r"\.bias$"), "bias tensors", LABEL)
    r.silent += dropped(has(names, r"^(model\.)?additional_layers\."), "additional_layers.* (it names every layer "
                        "model.layers.{i})", LABEL)
    r.silent += dropped(has(names, r"\.(q_norm|k_norm)\.weight$"), "q/k norms (it has no Qwen3 drafter class)",
                        LABEL)
    unapplied = unread_later_norms(names, "input_layernorm", LATER_NORM_APPLIED)
    if unapplied:  # LlamaDecoderLayer builds input_layernorm in every layer and applies it only in layer 0
        r.silent.append(f"SGLang loads {', '.join(unapplied[:3])} into a norm it never applies in layers >= 1 (it "
                        "normalises them with hidden_norm, left at its initial ones)")
    if flag(config, "tie_word_embeddings") and "lm_head.weight" in names:
        r.silent.append("SGLang ties lm_head to embed_tokens (tie_word_embeddings is true) and never loads the "
                        "trained lm_head.weight")
    window = trained_window(config)
    if window and family == "llama":
        r.caveats.append(window_ignored(LABEL, window, f" unless launched with --speculative-draft-window-size "
                                                       f"{window}"))
    if values["norm_before_fc"] and "norm_before_fc" not in read_flags:
        r.silent += dropped(has(names, r"^input_norm\.weight$"), "input_norm (norm_before_fc)", LABEL)
    return r
