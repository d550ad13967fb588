"""LMDeploy's PyTorch engine (`--speculative-algorithm eagle3`), from its source, not loaded: docs/formats.md §9.2.

Read in InternLM/lmdeploy at v0.16.0 (`lmdeploy/pytorch/models/llama_eagle3.py`, `configurations/llama.py`,
`configurations/default.py`, `models/patch.py` `_get_model_class`, `spec_decode/proposers/eagle3.py`); the first
three files read the same from v0.11.0 (PR #3945, "Support speculative decoding") to v0.16.0:

- The draft config is read through transformers (`config_from_pretrained`), so it needs a `model_type`.
  `architectures[0] == "LlamaForCausalLM"` becomes `Eagle3LlamaForCausalLM` (`LlamaModelConfigBuilder`, the path
  its docs use with yuhuili/EAGLE3-LLaMA3.1-Instruct-8B); a declared `Eagle3LlamaForCausalLM` resolves the same
  class through the default config builder; any other name has no rewrite ("Can not found rewrite").
- `Eagle3LlamaForCausalLM` raises unless `num_hidden_layers == 1`, builds `model.midlayer`, sizes `fc` for 3
  captured states (`target_hidden_size` via getattr: null fails) and `lm_head` from `draft_vocab_size`.
- `load_weights`: a name containing `d2t` loads into `draft_id_to_target_id` plus arange (offsets to absolute);
  every name but `lm_head.weight` gets `model.` prepended; `t2d` and rotary buffers are skipped; `lm_head.weight`
  is skipped when `tie_word_embeddings` is true; q/k/v and gate/up are packed (no q/k/v bias); any other name is a
  KeyError. No completeness check: `draft_id_to_target_id` stays zeros without a `d2t` (every draft token is
  target id 0). `embed_tokens` is the checkpoint's when stored, else the target's.
- No `norm_before_residual`, `norm_before_fc`, `fc_norm` or `norm_output`: the residual is the raw fc output and
  the next draft step sees the pre-norm state (`hidden_states_prenorm`). fc is skipped when 3·Ht equals H.
- Capture layers are not read from the drafter: the target's config builder sets `aux_hidden_state_layers =
  (2, L//2, L-3)` for eagle3 (LlamaForCausalLM targets only) and `LlamaModel.forward` captures the input of those
  layers (boundaries).
- Sliding window: the draft's Llama attention layer passes none, while `DefaultModelConfigBuilder` copies a
  config `sliding_window` (unless `use_sliding_window` is false) into the model config its FA3 backend reads.
"""

from __future__ import annotations

from typing import Any, Collection, Mapping

from .common import Reading, TargetContext, architectures, flag, trained_window
from .releases import Releases

LABEL = "LMDeploy"
RELEASES = Releases("lmdeploy", LABEL, ("0.11.0", "0.11.1", "0.12.0", "0.12.1", "0.12.2", "0.12.3", "0.13.0",
                                        "0.14.0", "0.15.0", "0.16.0"))
RELEASE = f"{LABEL} {RELEASES.newest}"
DOCUMENTED_ARCH = "LlamaForCausalLM"  # rewritten to Eagle3LlamaForCausalLM for a draft (configurations/llama.py)
CLASS = "Eagle3LlamaForCausalLM"  # module_map.py
MAX_LAYERS = 1  # Eagle3LlamaForCausalLM: 'eagle3 only supports 1 decode layer'
FC_STATES = 3
_PROJ = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
         "mlp.up_proj", "mlp.down_proj")
TARGET_CAVEAT = ("LMDeploy sets the capture layers only for LlamaForCausalLM targets (configurations/llama.py: "
                 "aux_hidden_state_layers = (2, L//2, L-3))")


def loaded_names(attention_bias: bool, mlp_bias: bool) -> set[str]:
    """The stored names load_weights finds a parameter for (before `model.` is prepended), d2t/t2d aside."""
    out = {"embed_tokens.weight", "fc.weight", "norm.weight", "lm_head.weight"}
    out |= {f"midlayer.{n}.weight" for n in ("input_layernorm", "hidden_norm", "post_attention_layernorm")}
    out |= {f"midlayer.{p}.weight" for p in _PROJ}
    out |= {"midlayer.self_attn.o_proj.bias"} if attention_bias else set()  # qkv_proj is built with bias=False
    out |= {f"midlayer.{p}.bias" for p in _PROJ if p.startswith("mlp.")} if mlp_bias else set()
    return out


def _skipped(name: str) -> bool:
    return "d2t" in name or "t2d" in name or "rotary_emb." in name


def read(config: Mapping[str, Any], names: Collection[str], ctx: TargetContext, release: str | None = None) -> Reading:
    r = Reading("lmdeploy", LABEL)
    if "model_type" not in config:
        r.refusal = ("LMDeploy reads the draft config through transformers and needs a model_type (speculators "
                     "configs have none)")
        return r
    archs = architectures(config)
    documented = bool(archs) and archs[0] == DOCUMENTED_ARCH
    if not documented and CLASS not in archs:
        r.refusal = (f"LMDeploy builds its EAGLE-3 drafter only from architectures[0] {DOCUMENTED_ARCH!r} (or a "
                     f"declared {CLASS!r}); {archs} have no EAGLE-3 rewrite there")
        return r
    if config.get("num_hidden_layers", 1) != MAX_LAYERS:
        r.refusal = "'eagle3 only supports 1 decode layer'"
        return r
    if config.get("draft_vocab_size") is None:
        r.refusal = ("LMDeploy sizes lm_head from draft_vocab_size, which the config lacks (or sets null): it fails to "
                     "build")
        return r
    if "target_hidden_size" in config and config["target_hidden_size"] is None:
        r.refusal = "LMDeploy fails to size fc: target_hidden_size is null"
        return r
    ids = config.get("eagle_aux_hidden_state_layer_ids")
    k = len(ids) if isinstance(ids, list) and ids else config.get("num_aux_hidden_states", FC_STATES)
    if k != FC_STATES:
        r.refusal = (f"LMDeploy builds fc for exactly {FC_STATES} captured states; this drafter fuses {k}: fc "
                     "fails to load")
        return r
    unknown = sorted(n for n in names if not _skipped(n)
                     and n not in loaded_names(flag(config, "attention_bias"), flag(config, "mlp_bias")))
    if unknown:
        r.refusal = (f"LMDeploy's load_weights raises KeyError on {unknown[0]!r} (it loads model.midlayer.*, fc, "
                     "norm, embed_tokens, lm_head and d2t only)" + (f"; {len(unknown) - 1} more" if len(unknown) > 1
                                                                    else ""))
        return r
    r.family = "llama"
    r.flags = {"norm_before_residual": False, "norm_before_fc": False, "fc_norm": False, "norm_output": False}
    r.captures_defaults(ctx.depth)
    if not any("d2t" in n for n in names):
        r.silent.append("LMDeploy maps every draft token to target id 0: without a d2t its draft_id_to_target_id "
                        "stays zeros")
    if "lm_head.weight" in names and flag(config, "tie_word_embeddings"):
        r.silent.append("LMDeploy skips the stored lm_head.weight (tie_word_embeddings) and drafts with a head "
                        "it never loads")
    # (without target_hidden_size Ht is H, and 3·H is never H)
    hidden, target_hidden = config.get("hidden_size"), config.get("target_hidden_size")
    if isinstance(hidden, int) and isinstance(target_hidden, int) and FC_STATES * target_hidden == hidden:
        r.silent.append("LMDeploy skips fc: the captured width 3·Ht equals H")
    r.caveats.append(TARGET_CAVEAT)
    if not documented:
        r.caveats.append(f"architectures {archs} reach {CLASS} through LMDeploy's default config builder, not the "
                         f"{DOCUMENTED_ARCH!r} path its docs use (no draft vocab or 'ar_spec' paradigm set there): "
                         "not established that it serves")
    window = config.get("sliding_window")
    if isinstance(window, int) and not isinstance(window, bool) and window > 0 and \
            config.get("use_sliding_window") is not False:
        trained = "trained through layer_types" if trained_window(config) else "no layer_types trains it"
        r.caveats.append(f"config.json has sliding_window {window} ({trained}): LMDeploy's draft attention layer "
                         "passes no window while its FA3 backend reads this one; whether a window is applied is not "
                         "established")
    return r
