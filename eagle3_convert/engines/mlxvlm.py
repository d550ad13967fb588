"""mlx-vlm's EAGLE-3 drafter (Apple MLX), from its source, not loaded: docs/formats.md §9.1.

Read in Blaizzy/mlx-vlm at v0.6.15 (`mlx_vlm/speculative/drafters/eagle3/config.py` and `eagle3.py`, added by
PR #1180 and byte-identical from v0.6.0 to v0.6.15; `mlx_vlm/utils.py` `get_model_and_args`, `load_model`,
`_drop_modules_without_weights` as in v0.6.15; `mlx_vlm/speculative/eagle3.py` for the capture hooks):

- The module is picked by `model_type`, else `speculators_model_type`: only "eagle3" reaches the drafter, so it
  reads speculators configs (a flat config's `model_type: llama` loads mlx-vlm's own Llama model instead).
- `Eagle3DraftModel` always builds `embed_tokens` [V, H] of its own; a checkpoint without one loses the module
  (`_drop_modules_without_weights`, text-only configs) and the first draft step fails calling it.
- Weights load with `load_weights(strict=True)`: every stored name must be a parameter and every parameter stored.
  `sanitize` first drops `t2d`, `verifier_*`, rotary buffers, `input_norm.weight` without `norm_before_fc`, and
  `lm_head.weight` when `tie_word_embeddings` is true with Vd = V (the head is then `embed_tokens`).
  Layer 0 (`layers.0.*`) has input_layernorm, hidden_norm, post_attention_layernorm; layers >= 1 are plain decoder
  layers (`input_layernorm` applied, no `hidden_norm`); no q/k norms, no MLP bias; attention biases only with
  `attention_bias`. `d2t` (int32 offsets) is a parameter only when Vd != V.
- Flags: `norm_before_residual` and `norm_before_fc` at the top level (absent = false); `fc_norm` and
  `norm_output` are not read (no fc_norm module; the next step sees the pre-norm state).
- `fc` is built for exactly 3 captured states (3·Ht) and skipped when the captured width equals H.
- Capture: `target_layer_ids` (its own key), else the top-level `eagle_aux_hidden_state_layer_ids` (boundaries),
  else `[2, n//2, max(n-3, 0)]` with n the DRAFTER's `num_hidden_layers`; the hooks are decoder-layer outputs
  `max(b - 1, 0)` (`capture_layer_ids`, its own key, wins), collected as a set in layer order.
- RoPE: `nn.RoPE(head_dim, base=rope_theta)`: rope_theta from `rope_parameters` or the top level; no scaling type
  is applied. No sliding window (its attention mask is plain causal).
"""

from __future__ import annotations

import re
from typing import Any, Collection, Mapping

from ..capture_ids import default_boundaries
from ..drafter import layer_index
from ..json_values import is_int
from .common import IDS_KEY, Reading, TargetContext, flag, trained_window, window_ignored
from .releases import Releases

LABEL = "mlx-vlm"
RELEASES = Releases("mlx-vlm", LABEL, ("0.6.15",),
                    note="read at v0.6.15; its EAGLE-3 drafter files are unchanged since v0.6.0, its loader is not")
RELEASE = f"{LABEL} {RELEASES.newest}"
DRAFTER_MODEL_TYPE = "eagle3"
FC_STATES = 3  # Eagle3DraftModel: nn.Linear(3 * target_hidden_size, hidden_size)
DEFAULT_VOCAB = 32000  # Eagle3Config.draft_vocab_size and TextConfig.vocab_size defaults
DEPTH_DEFAULTS = "the defaults it derives from the drafter's own depth, not the target's"
SANITIZED = re.compile(r"^(t2d|verifier_.*|.*rotary_emb\.inv_freq.*)$")  # Eagle3DraftModel.sanitize drops these
# The target models that take its capture hooks (`capture_layer_ids` in mlx_vlm/models/*, v0.6.15).
TARGET_CAVEAT = ("mlx-vlm captures only on targets whose model takes its hooks (gemma4, gemma4_unified, lfm2, "
                 "minimax_m3_vl, muse_glimmer, qwen3_5 at 0.6.15)")
_PROJ = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj",
         "mlp.up_proj", "mlp.down_proj")


def parameters(layers: int, attention_bias: bool, norm_before_fc: bool, own_head: bool, vocab_map: bool) -> set[str]:
    """The parameter names Eagle3DraftModel builds (what strict load_weights wants, no more, no less)."""
    out = {"embed_tokens.weight", "fc.weight", "norm.weight"}
    out |= {"input_norm.weight"} if norm_before_fc else set()
    out |= {"lm_head.weight"} if own_head else set()
    out |= {"d2t"} if vocab_map else set()
    for i in range(layers):
        norms = ("input_layernorm", "hidden_norm", "post_attention_layernorm") if i == 0 else (
            "input_layernorm", "post_attention_layernorm")
        out |= {f"layers.{i}.{n}.weight" for n in norms} | {f"layers.{i}.{p}.weight" for p in _PROJ}
        if attention_bias:
            out |= {f"layers.{i}.{p}.bias" for p in _PROJ if p.startswith("self_attn.")}
    return out


def capture_hooks(config: Mapping[str, Any], drafter_layers: int) -> tuple[list[int] | None, list[int], str]:
    """The decoder-layer outputs mlx-vlm hooks (sorted, deduplicated; None: not integers), the boundaries it shifted
    into them ([] when its own capture_layer_ids gave the hooks), and where they came from."""
    boundaries, hooks = config.get("target_layer_ids") or [], config.get("capture_layer_ids") or []
    source = "its capture_layer_ids" if hooks else "its target_layer_ids" if boundaries else IDS_KEY
    if not boundaries:
        listed = config.get(IDS_KEY)
        if listed is None:  # mlx-vlm clamps n - 3 at 0, as the hook's max(b - 1, 0) below does anyway
            boundaries = default_boundaries(drafter_layers)
            source = f"{DEPTH_DEFAULTS} (num_hidden_layers {drafter_layers})"
        else:
            boundaries = listed
    if not hooks:
        if not isinstance(boundaries, list) or not all(is_int(b) for b in boundaries):
            return None, [], source
        hooks = [max(b - 1, 0) for b in boundaries]
    else:
        boundaries = []
    if not isinstance(hooks, list) or not all(is_int(h) for h in hooks):
        return None, [], source
    return sorted(set(hooks)), boundaries, source


def read(config: Mapping[str, Any], names: Collection[str], ctx: TargetContext, release: str | None = None) -> Reading:
    r = Reading("mlx-vlm", LABEL)
    model_type = config.get("model_type") or config.get("speculators_model_type")
    if not isinstance(model_type, str) or model_type.lower() != DRAFTER_MODEL_TYPE:
        r.refusal = (f"mlx-vlm builds its EAGLE-3 drafter only for model_type / speculators_model_type "
                     f"{DRAFTER_MODEL_TYPE!r} (get_model_and_args); {model_type!r} loads another model or none, and "
                     "its strict load_weights fails on the drafter's tensors")
        return r
    layer_cfg = config.get("transformer_layer_config")
    dec = layer_cfg if isinstance(layer_cfg, dict) else {}
    hidden = dec.get("hidden_size")
    target_hidden = config.get("target_hidden_size") or hidden
    layers = dec.get("num_hidden_layers", 1)
    vd, v = config.get("draft_vocab_size", DEFAULT_VOCAB), dec.get("vocab_size", DEFAULT_VOCAB)
    if not is_int(vd) or not is_int(v):
        r.refusal = "mlx-vlm fails to build the drafter: draft_vocab_size and vocab_size must be integers (int(None))"
        return r
    tied = flag(config, "tie_word_embeddings") and vd == v
    nbf = flag(config, "norm_before_fc")
    # Layers past the deepest stored one plus one only add more missing names of the same verdict: not built, so a
    # config claiming 10**9 layers is answered without a set of billions of names.
    deepest = max((i for i in map(layer_index, names) if i is not None), default=-1)
    depth = min(layers, deepest + 2) if is_int(layers) else 1
    built = parameters(depth, flag(dec, "attention_bias"), nbf, not tied, vd != v)
    stored = {n for n in names if not SANITIZED.match(n) and not (n == "input_norm.weight" and not nbf)
              and not (n == "lm_head.weight" and tied)}
    unexpected, missing = sorted(stored - built), sorted(built - stored - {"embed_tokens.weight"})
    if unexpected:
        r.refusal = (f"mlx-vlm's strict load_weights raises on {unexpected[0]!r}: no such parameter in its EAGLE-3 "
                     "drafter" + (f" (+{len(unexpected) - 1} more)" if len(unexpected) > 1 else ""))
        return r
    if "embed_tokens.weight" not in stored:
        r.refusal = ("mlx-vlm's drafter embeds tokens with its own embed_tokens, which this checkpoint does not store: "
                     "the module is dropped at load and the first draft step fails")
        return r
    if missing:
        r.refusal = f"mlx-vlm's strict load_weights raises: missing parameter {missing[0]!r}"
        return r
    ids = config.get(IDS_KEY)
    k = len(ids) if isinstance(ids, list) and ids else config.get("num_aux_hidden_states", FC_STATES)
    if k != FC_STATES:
        r.refusal = (f"mlx-vlm builds fc for exactly {FC_STATES} captured states; this drafter fuses {k}: fc "
                     "fails to load")
        return r
    hooks, shifted, source = capture_hooks(config, layers if is_int(layers) else 1)
    if hooks is None:
        r.refusal = f"mlx-vlm fails on the capture list from {source}: not a list of integers"
        return r
    if is_int(target_hidden) and is_int(hidden) and len(hooks) * target_hidden == hidden:
        r.silent.append(f"mlx-vlm hooks {len(hooks)} target layer(s) from {source}, a width equal to H, so it skips fc")
    elif len(hooks) != FC_STATES:
        r.refusal = (f"mlx-vlm hooks {len(hooks)} distinct target layer(s) {hooks} from {source}, where fc takes "
                     f"{FC_STATES}: the first draft step fails")
        return r
    r.family = "llama"  # Eagle3FirstLayer + DecoderLayer, whatever transformer_layer_config.model_type says
    r.captures = [h + 1 for h in hooks]  # the output of decoder layer h is boundary h + 1
    if source.startswith(DEPTH_DEFAULTS):
        r.silent.append(f"mlx-vlm captures boundaries {r.captures} from {source}")
    elif 0 in shifted:
        r.silent.append(f"mlx-vlm hooks boundary 0 (the embedding output) as decoder layer 0's output, boundary 1: "
                        f"it captures {r.captures}")
    r.flags = {"norm_before_residual": flag(config, "norm_before_residual"), "norm_before_fc": nbf,
               "fc_norm": False, "norm_output": False}
    if tied and "lm_head.weight" in names:
        r.silent.append("mlx-vlm drops the stored lm_head.weight (tie_word_embeddings with Vd = V) and drafts "
                        "through embed_tokens")
    rope = _rope_type(dec)
    if rope not in (None, "default"):
        r.silent.append(f"mlx-vlm applies plain RoPE (base rope_theta), not the drafter's {rope} scaling")
    r.caveats.append(TARGET_CAVEAT)
    window = trained_window(config)
    if window:
        r.caveats.append(window_ignored(LABEL, window))
    return r


def _rope_type(dec: Mapping[str, Any]) -> str | None:
    for key in ("rope_parameters", "rope_scaling"):
        rope = dec.get(key)
        if isinstance(rope, dict):
            kind = rope.get("rope_type") or rope.get("type")
            if kind not in (None, "default"):
                return str(kind)
    return None
