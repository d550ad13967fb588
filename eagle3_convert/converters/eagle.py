"""Original EAGLE-3 layout (SafeAILab/EAGLE research code; the yuhuili/EAGLE3-* repos). docs/formats.md §2.4.

One decoder layer named `midlayer.*`, `fc` over exactly 3 captured states, `d2t`/`t2d` buffers,
a plain Llama config with `draft_vocab_size`. The capture layers are hard-coded in EAGLE's
target wrapper (boundaries {2, L//2, L-3}, the engine default), so the config holds no ids and
the drafter reads with capture_boundaries None, unless our own sidecar recorded the explicit
(default-equal) list it was written from. Checkpoints come as `pytorch_model.bin` (read without torch or
running the pickle, see torch_zip and bin_reader) or safetensors. This tool WRITES
`model.safetensors`: EAGLE's loader falls back to it, and writing a pickle would need torch.
"""

from __future__ import annotations

from typing import Any

from ..drafter import NORM_FLAGS, Drafter, DrafterConfig
from ..errors import FormatError, RefusalError
from .config_keys import refuse_key_errors
from .base import (
    Checkpoint,
    ConvertOptions,
    Detection,
    Layout,
    Rename,
    WritePlan,
    build_drafter,
    canonical_tensors,
    decoder_dict,
    flat_fields,
    flat_markers,
    infer_num_aux,
    int_list,
    modelopt_first_layer_note,
    refuse_unless,
    restore_from_sidecar,
    source_config,
    to_stored,
)
from ..capture_ids import IDS_KEY, default_boundaries
from ..vocab_map import identity_map

RENAMES: tuple[Rename, ...] = (Rename("layers.0.", "midlayer."),)
# What the published drafters say (EAGLE's training template says LlamaForCausalLM).
ARCHITECTURES = ["LlamaForCausalLMEagle3"]
MODELED = {"architectures", "draft_vocab_size", "target_hidden_size"}
# Keys of other layouts that change the maths; EAGLE's code reads none of them.
FOREIGN_FLAGS = ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output", "eagle_config",
                 IDS_KEY, "num_aux_hidden_states")
CAPTURED_STATES = 3  # EAGLE's fc is Linear(3 * hidden, hidden)
# What EAGLE's code builds (SafeAILab/EAGLE main at cb7e084, eagle/model/cnets.py `LlamaAttention` and
# eagle/model/configs.py `EConfig._rope_scaling_validation`): head_dim = hidden_size // num_attention_heads
# (raising when not divisible; config.head_dim is never read), full rotary width, and rope_scaling either null
# (plain RoPE with rope_theta) or exactly {"type": linear|dynamic, "factor": float > 1}; rope_parameters is never
# read, and any other type fails in EConfig or `_init_rope`.
ROPE_TYPES_BUILT = ("default", "linear", "dynamic")


def eagle_rope_scaling(cfg: DrafterConfig) -> dict[str, Any] | None:
    """The rope_scaling EAGLE's code builds the drafter's RoPE from (None: plain RoPE); refuses what it cannot."""
    rope = cfg.rope_normalized()
    kind = str(rope.get("rope_type")).lower()
    refuse_unless(kind in ROPE_TYPES_BUILT,
                  f"rope type {kind!r} (rope_scaling / rope_parameters): original EAGLE-3 builds only linear and "
                  "dynamic RoPE scaling (cnets.py _init_rope) and would fail to load it",
                  "serve it with an engine that builds this RoPE: `--to sglang` or `--to vllm`", "E-ROPE-UNSUPPORTED")
    partial = rope.get("partial_rotary_factor", 1)
    refuse_unless(partial == 1, f"partial_rotary_factor is {partial}: original EAGLE-3 rotates the full head_dim "
                  "and would serve different maths", "serve it with `--to sglang` or `--to vllm`",
                  "E-ROPE-UNSUPPORTED")
    # An mrope_section (Qwen-VL) or any other rope key is maths EAGLE's two-field rope_scaling cannot hold.
    taken = {"rope_type", "rope_theta", "partial_rotary_factor"} | ({"factor"} if kind != "default" else set())
    extra = sorted(set(rope) - taken)
    factor = rope.get("factor")
    refuse_unless(not extra and (kind == "default" or isinstance(factor, (int, float)) and factor > 1),
                  f"{kind} RoPE with {', '.join(extra) or f'factor {factor!r}'}: original EAGLE-3 takes no rope "
                  "settings but a type and a factor > 1 (EConfig) and would build other maths",
                  "serve it with `--to sglang` or `--to vllm`", "E-ROPE-UNSUPPORTED")
    return None if kind == "default" else {"type": kind, "factor": float(factor)}


class EagleLayout(Layout):
    name = "eagle"
    summary = "SafeAILab/EAGLE original EAGLE-3 (midlayer.*, pytorch_model.bin); read by EAGLE's ea_model"
    engine = "eagle"
    renames = RENAMES
    home_engines = ("sglang", "vllm-v1", "vllm-v2")

    def detect(self, ckpt: Checkpoint) -> Detection | None:
        m = flat_markers(ckpt)
        if "speculators_model_type" in ckpt.config:
            return None
        if m.pickled and (m.midlayer or m.eagle3_architecture):
            return Detection(self.name, True, "pytorch_model.bin with midlayer.* tensors (SafeAILab EAGLE)")
        if m.midlayer and "LlamaForCausalLM" in m.architectures and "draft_vocab_size" in ckpt.config:
            return Detection(self.name, True, "LlamaForCausalLM config with draft_vocab_size and midlayer.* "
                                              "(EAGLE's training template)")
        return None

    def read(self, ckpt: Checkpoint, options: ConvertOptions) -> Drafter:
        raw = source_config(ckpt)
        notes = list(ckpt.notes)
        refuse_key_errors(self.name, raw, notes)
        fields = flat_fields(raw, MODELED | set(FOREIGN_FLAGS), ckpt.tensors, notes)
        refuse_unless(fields["num_layers"] == 1 and fields["family"] == "llama",
                      f"num_hidden_layers {fields['num_layers']} / model_type {raw.get('model_type')!r}: original "
                      "EAGLE-3 builds exactly one Llama decoder layer",
                      "read it with the layout that wrote it (--from sglang or --from vllm)", "E-LAYERS-UNSUPPORTED")
        stray = sorted(n for n in ckpt.tensors if n.startswith(("layers.", "model.")))
        if stray:
            raise RefusalError(f"tensor {stray[0]!r}: original EAGLE loads midlayer.* only and would leave this "
                               "layer randomly initialised", "read it with the layout that wrote it "
                               "(--from sglang or --from vllm)", code="E-KEY-UNKNOWN")
        if "draft_vocab_size" not in raw:
            raise FormatError("config.json has no draft_vocab_size", "EAGLE-3 builds its draft head from it: set it "
                              "to the lm_head rows", code="E-CONFIG-FIELD")
        fields["draft_vocab_size"] = raw["draft_vocab_size"]
        ignored = [k for k in FOREIGN_FLAGS if raw.get(k)]
        if ignored:
            notes.append(f"ignored {', '.join(ignored)}: original EAGLE's code reads none of them")
        archs = raw.get("architectures")  # another spelling is kept; none is written as the published one
        own = {} if archs in (None, ARCHITECTURES) else {"architectures": archs}
        fields["layout_extra"] = {self.name: own} if own else {}
        restore_from_sidecar(ckpt, fields)
        # Our writer checked an explicit list against EAGLE's default before dropping it from config.json.
        recorded = (ckpt.sidecar or {}).get("capture_boundaries")
        fields["capture_boundaries"] = int_list(recorded, "eagle3-convert.json capture_boundaries")
        tensors = canonical_tensors(ckpt, RENAMES, 1, self.name)
        k = infer_num_aux(tensors.get("fc.weight"), fields, None, None)
        if k != CAPTURED_STATES:
            raise FormatError(f"fc.weight fuses {k} captured states; original EAGLE-3 always fuses 3",
                              "read it with the layout that wrote it (--from sglang or --from vllm)",
                              code="E-CAPTURE-COUNT")
        fields["num_aux_hidden_states"] = k
        return build_drafter(ckpt, fields, tensors, options, notes)

    def plan(self, drafter: Drafter, options: ConvertOptions) -> WritePlan:
        cfg = drafter.config
        refuse_unless(cfg.family == "llama", f"original EAGLE-3 has no {cfg.family} drafter (its decoder layer is "
                      "Llama's)", "serve it with vLLM: `--to vllm`", "E-FAMILY-UNSUPPORTED")
        refuse_unless(cfg.num_layers == 1, f"the drafter has {cfg.num_layers} decoder layers; original EAGLE-3 "
                      "builds one", "serve a multi-layer drafter with vLLM or SGLang (`--to vllm`)",
                      "E-LAYERS-UNSUPPORTED")
        flags = [f for f in NORM_FLAGS if getattr(cfg, f)]
        refuse_unless(not flags, f"{', '.join(flags)} set: original EAGLE-3 has no such option and would serve "
                      "different maths", "serve it with vLLM (`--to vllm` or `--to speculators`)",
                      "E-FLAG-UNSUPPORTED")
        refuse_unless(not (cfg.attention_bias or cfg.mlp_bias), "the drafter has bias tensors; original EAGLE-3's "
                      "layers have none", "serve it with vLLM: `--to vllm`", "E-BIAS-UNSUPPORTED")
        refuse_unless(cfg.num_aux_hidden_states == CAPTURED_STATES,
                      f"the drafter fuses {cfg.num_aux_hidden_states} captured states; original EAGLE-3 fuses 3",
                      "serve it with vLLM: `--to vllm`", "E-CAPTURE-COUNT")
        if cfg.capture_boundaries is not None:
            target = options.target or cfg.target
            depth = target.num_hidden_layers if target else None
            if depth is None:
                raise RefusalError(
                    f"the drafter captures boundaries {cfg.capture_boundaries}; original EAGLE-3 hard-codes "
                    "{2, L//2, L-3} and the target depth L is unknown", "pass --target (the target's config.json "
                    "or repo id) so the two can be compared", code="E-CAPTURE-DEPTH-UNKNOWN")
            refuse_unless(cfg.capture_boundaries == default_boundaries(depth),
                          f"the drafter captures boundaries {cfg.capture_boundaries}; original EAGLE-3 hard-codes "
                          f"{default_boundaries(depth)} for a {depth}-layer target",
                          "serve it with an engine that reads capture ids (`--to vllm` or `--to sglang`)",
                          "E-CAPTURE-UNEXPRESSIBLE")
        built_head_dim, indivisible = divmod(cfg.hidden_size, cfg.num_attention_heads)
        refuse_unless(not indivisible and cfg.resolved_head_dim == built_head_dim,
                      f"head_dim is {cfg.resolved_head_dim} with hidden_size {cfg.hidden_size} and "
                      f"num_attention_heads {cfg.num_attention_heads}: original EAGLE-3 derives head_dim = "
                      "hidden_size // num_attention_heads (cnets.py) and could not load these q/k/v/o weights",
                      "serve it with `--to sglang` or `--to vllm`, which read head_dim", "E-HEAD-DIM-UNSUPPORTED")
        rope_scaling = eagle_rope_scaling(cfg)
        own = dict(cfg.layout_extra.get(self.name, {}))
        config: dict[str, Any] = {**decoder_dict(cfg), **cfg.top_extra, "architectures": ARCHITECTURES, **own,
                                  "draft_vocab_size": cfg.draft_vocab_size}
        if rope_scaling is not None or config.get("rope_scaling") is not None:
            config["rope_scaling"] = rope_scaling  # in the one spelling EConfig accepts (null: plain RoPE)
        derived = []
        if "rope_theta" not in config and "rope_theta" in cfg.rope_normalized():
            config["rope_theta"] = cfg.rope_normalized()["rope_theta"]  # EAGLE reads the transformers-4 spelling
            derived.append("rope_theta")
        if cfg.target_hidden_size is not None:
            config["target_hidden_size"] = cfg.target_hidden_size
        tensors = {to_stored(n, RENAMES, 1): src for n, src in drafter.tensors.items()}
        vocab = drafter.vocab or identity_map(cfg.vocab_size)  # EAGLE registers both buffers whatever Vd is
        tensors["d2t"] = vocab.d2t_tensor()
        tensors["t2d"] = vocab.t2d_tensor()
        notes = ["written as model.safetensors (EAGLE's loader falls back to it when pytorch_model.bin is absent)"]
        if "embed_tokens.weight" in drafter.tensors:
            notes.append("embed_tokens.weight kept: EAGLE's exporter leaves it out, its loader takes it if present")
        notes += modelopt_first_layer_note(cfg, self.name)
        return WritePlan(self.name, dict(sorted(config.items())), tensors, notes, derived_keys=derived)


LAYOUT = EagleLayout()
