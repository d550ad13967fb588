"""SGLang 0.5.23: `llama_eagle3.py` (LlamaForCausalLMEagle3) and `kimi_k25_eagle3.py` (Eagle3DeepseekV2ForCausalLM).

Releases 0.5.9 to 0.5.22 read some facts otherwise: each `Change` below names the first release that reads it
the new way and its PR; `read(..., release)` replays the release named.

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
- `eagle_config.use_aux_hidden_state` (default true) read in every release modelled (the 0.5.9, 0.5.11 and 0.5.23
  wheels: speculative/eagle_worker.py, model_executor/model_runner.py; PR 14920 "GPT-OSS Eagle v2 support"):
  false, the target captures no layers (`set_eagle3_layers_to_capture` is called only when it is true:
  model_runner.py in 0.5.11, model_runner_components/attention_backend_setup.py in 0.5.23) and hands the draft
  its final post-norm hidden state
  (layers/logits_processor.py `_get_hidden_states_to_store`: `hidden_states`, after the model's norm), which
  skips fc at width H (`llama_eagle3.py` forward): a head trained on that state is served as trained.
- Weights: `midlayer.`, `layers.` or `model.layers.`; layers >= 1 normalise their input with
  `hidden_norm` (`LlamaDecoderLayer.forward`, which builds `input_layernorm` in every layer and applies it
  only in layer 0); biases, q/k norms and unknown names are dropped silently (`load_weights` skips a name
  that matches no parameter), among them `additional_layers.*`: 0.5.23 names every layer `model.layers.{i}`
  (mapping `midlayer` to `layers.0`), where sgl-project/sglang at 03d5a77 built layer 0 as `model.midlayer`
  (a stored `layers.0.*` matched nothing there) and layers >= 1 as `model.additional_layers.{i-1}`
  (`BasicDecoderLayer`: hidden_norm applied, no input_layernorm). The sglang layout reads those names.
- Activation: only `hidden_act: silu` builds. `LlamaMLP.__init__` (models/llama.py, used by llama_eagle3.py) and
  `DeepseekV2MLP.__init__` (deepseek_v2.py, used by kimi_k25_eagle3.py) raise "Unsupported activation: X. Only
  silu is supported for now." (read in the 0.5.11 and 0.5.23 wheels): a Gemma-4 draft's `gelu_pytorch_tanh`
  (NVIDIA-NeMo/Automodel #3071) fails at start-up.
- Sliding window: `LlamaForCausalLMEagle3` takes its window only from the server flag
  `--speculative-draft-window-size` (`_draft_window_size`, llama_eagle3.py in 0.5.23), never from config.json.
- `tie_word_embeddings: true` makes both classes set `self.lm_head = self.model.embed_tokens`
  (`LlamaForCausalLMEagle3.__init__` in llama_eagle3.py, `Eagle3DeepseekV2ForCausalLM.__init__` in
  kimi_k25_eagle3.py; read in 0.5.23 and in sgl-project/sglang at 03d5a77): the tied module dedups out of
  `named_parameters()`, so a stored `lm_head.weight` matches no parameter and is skipped without a word.
"""

from __future__ import annotations

from typing import Any, Collection, Mapping

from ..capture_ids import capturable, engine_boundaries
from .common import (IDS_KEY, Reading, TargetContext, architectures, dropped, flag, has, id_list, nested, num_layers,
                     trained_window, unread_later_norms, unsupported_activation, window_ignored)
from . import quantized
from .releases import Change, Releases

LABEL = "SGLang"

# What older releases read otherwise (each boundary read in the wheels on both sides of it).
LAYERS_N = Change(
    "tensor names", "one decoder layer, `midlayer` (midlayer.* and model.midlayer.* load; layers.0.* and "
    "model.layers.0.* match no parameter and are skipped without a word); num_hidden_layers != 1 refused; fc sized "
    "for exactly 3 captures", "layers.{i}.* (midlayer.* read as layers.0.*), any depth, fc sized from "
    "num_aux_hidden_states or the nested id list", "0.5.12",
    "PR 24663 (llama_eagle3.py; 0.5.11 has self.midlayer only, 0.5.12 the layers ModuleList)")
FC_NORM_OUTPUT = Change(
    "flags", "fc_norm, use_aux_norm and norm_output not read: fc_norm.* / aux_norm_* tensors skipped without a word",
    "fc_norm (legacy use_aux_norm, aux_norm_low/mid/high names) and norm_output read at the top level", "0.5.12",
    "PR 24663 (llama_eagle3.py, 0.5.11 vs 0.5.12)")
MLA_CLASS = Change(
    "architectures", "only LlamaForCausalLMEagle3: Eagle3DeepseekV2ForCausalLM refused at start-up",
    "Eagle3DeepseekV2ForCausalLM (kimi_k25_eagle3.py) registered", "0.5.12",
    "kimi_k25_eagle3.py, first in the 0.5.12 wheel (the PR is not identified)")
DEEPSEEK_IDS_AS_IS = Change(
    "capture ids", "DeepSeek/Kimi targets: nested ids +1 always (output of block x)",
    "DeepSeek/Kimi targets: +1 only when the first id is 1, else read as boundaries", "0.5.13",
    "PR 25454 (deepseek_v2.py set_eagle3_layers_to_capture; 0.5.12.post1 vs 0.5.13)")
GPT_OSS_BOUNDARIES = Change(
    "capture ids", "gpt-oss targets: nested ids +1 always; the final boundary L is never captured",
    "gpt-oss targets: ids read as boundaries when the largest is L (captured before the final norm), else +1",
    "0.5.17", "PR 32334 (gpt_oss.py set_eagle3_layers_to_capture; 0.5.16 vs 0.5.17)")
NORM_BEFORE_FC = Change(
    "flags", "norm_before_fc not read: input_norm.weight skipped without a word",
    "norm_before_fc read at the top level or nested in eagle_config", "0.5.17",
    "PR 32334 (llama_eagle3.py input_norm; 0.5.16 vs 0.5.17)")
RELEASES = Releases(
    "sglang", LABEL,
    ("0.5.9", "0.5.10", "0.5.10.post1", "0.5.11", "0.5.12", "0.5.12.post1", "0.5.13", "0.5.13.post1", "0.5.14",
     "0.5.15", "0.5.15.post1", "0.5.16", "0.5.17", "0.5.18", "0.5.19", "0.5.20", "0.5.21", "0.5.22", "0.5.23"),
    (LAYERS_N, FC_NORM_OUTPUT, MLA_CLASS, DEEPSEEK_IDS_AS_IS, GPT_OSS_BOUNDARIES, NORM_BEFORE_FC,
     *quantized.SGLANG_CHANGES))
RELEASE = f"{LABEL} {RELEASES.newest}"  # the newest release read, which the engine tier loads

# The SGLang target families whose id reading a change above moves (capture_ids.engine_boundaries).
ID_QUIRKS = {"deepseek": DEEPSEEK_IDS_AS_IS, "gpt_oss": GPT_OSS_BOUNDARIES}
CLASSES = {"LlamaForCausalLMEagle3": "llama", "Eagle3DeepseekV2ForCausalLM": "deepseek_mla"}
ARCHITECTURE = {family: arch for arch, family in CLASSES.items()}
IDS_FROM = "nested"
CONVENTION = "sglang"  # block outputs, capture_ids
FLAGS_READ = {"llama": ("norm_before_fc", "fc_norm", "norm_output"), "deepseek_mla": ("fc_norm", "norm_output")}
MLA_MAX_LAYERS = 1
# Layers >= 1: the pre-attention norm applied, and the norms built (LlamaDecoderLayer, llama_eagle3.py).
LATER_NORM_APPLIED = "hidden_norm"
LATER_NORMS_BUILT = ("input_layernorm", "hidden_norm")
ACTIVATIONS = ("silu",)  # read in two wheels (module doc), taken for every release we know


# What validate's replay needs (validate.profiles.EngineProfile is built from these).
FAMILIES = frozenset(CLASSES.values())
BUILDS_BIAS = False
NEEDS_T2D = False  # t2d is never read: hot_token_id = arange(Vd) + d2t
FC_SKIPPED_WHEN_WIDTH_MATCHES = True  # fc only when k*Ht != H

def read(config: Mapping[str, Any], names: Collection[str], ctx: TargetContext, release: str | None = None) -> Reading:
    """SGLang `release` (None: the newest we know)'s reading of the file."""
    r = Reading("sglang", LABEL)
    # eagle_config.use_aux_hidden_state false: the target captures no layers and hands over its final post-norm
    # state (the logits processor's hidden_states), which skips fc when its width is H (the module doc)
    r.capture = "final" if nested(config).get("use_aux_hidden_state", True) is False else "aux"
    archs = architectures(config)
    family = next((CLASSES[a] for a in archs if a in CLASSES), None)
    if family == "deepseek_mla" and not RELEASES.reads(MLA_CLASS, release):
        family = None
    if "speculators_model_type" in config or family is None:
        r.refusal = f"model architectures {archs} are not supported"
        return r
    if "draft_vocab_size" not in config:
        r.refusal = "SGLang fails to construct the drafter: config.json has no draft_vocab_size"
        return r
    r.refusal = unsupported_activation(config, ACTIVATIONS)
    if r.refusal:
        return r
    quantized.read_sglang(r, config, names, lambda change: RELEASES.reads(change, release))
    if r.refusal:
        return r
    if "target_hidden_size" in config and config["target_hidden_size"] is None:
        r.refusal = "SGLang fails to construct fc: target_hidden_size is null"
        return r
    eagle = nested(config)
    layers = num_layers(names)
    ids = id_list(eagle.get(IDS_KEY))
    multi_layer = RELEASES.reads(LAYERS_N, release)
    if not multi_layer and config.get("num_hidden_layers", 1) != 1:
        r.refusal = "EAGLE3 currently only supports 1 layer (num_hidden_layers != 1)"
        return r
    if not multi_layer and ids is not None and len(ids) != 3:
        r.refusal = f"SGLang fails to load fc: it is sized for 3 captured layers, the file names {len(ids)}"
        return r
    r.family = family
    if family == "deepseek_mla" and layers > MLA_MAX_LAYERS:
        r.silent.append(f"SGLang's MLA class builds {MLA_MAX_LAYERS} layer and drops the other {layers - 1}")
    if ids is None:
        r.captures_defaults(ctx.depth)
    else:
        quirk = ID_QUIRKS.get(ctx.family)  # a release before the quirk reads this family's ids as any other's
        target_family = ctx.family if quirk is None or RELEASES.reads(quirk, release) else "default"
        captured = engine_boundaries(CONVENTION, ids, target_family, ctx.depth)
        if captured is None:
            r.silent.append(f"SGLang captures nothing for ids {ids} on a {ctx.family}-family target")
        else:
            lost = [b for b in captured if not capturable(CONVENTION, b, target_family, ctx.depth)]
            if lost:
                r.silent.append(f"SGLang cannot capture boundaries {lost} (the last block's output) and serves "
                                "without them")
            r.captures = captured
    read_flags = tuple(f for f in FLAGS_READ[family] if RELEASES.reads(FC_NORM_OUTPUT if f != "norm_before_fc"
                                                                      else NORM_BEFORE_FC, release))
    values = {"norm_before_residual": False,
              "norm_before_fc": flag(config, "norm_before_fc") or flag(eagle, "norm_before_fc"),
              "fc_norm": flag(config, "fc_norm") or flag(config, "use_aux_norm"),
              "norm_output": flag(config, "norm_output")}
    r.flags = {f: v and f in read_flags for f, v in values.items()}
    k = len(ids) if ids else 3
    ht = config.get("target_hidden_size") or config.get("hidden_size")
    if r.capture == "aux" and isinstance(ht, int) and k * ht == config.get("hidden_size"):
        r.silent.append(f"SGLang skips fc: k*Ht == H ({k}*{ht})")
    r.silent += dropped(has(names, r"\.bias$"), "bias tensors", LABEL)
    if not multi_layer:
        r.silent += dropped(has(names, r"^(model\.)?layers\.0\."), "layers.0.* weights (it loads midlayer.* only)",
                            LABEL)
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
