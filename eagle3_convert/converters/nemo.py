"""NVIDIA NeMo Automodel's EAGLE-3 / P-EAGLE training output (`LlamaEagle3DraftModel`), read only.

Facts (NVIDIA-NeMo/Automodel `nemo_automodel/components/speculative/eagle/draft_llama.py`, and the recipe that
builds its config, `nemo_automodel/recipes/llm/train_eagle3.py`: `draft_config = target_config.to_dict()`):
- config.json is the TARGET's config (`target_config.to_dict()`) with `architectures: ["LlamaEagle3DraftModel"]`,
  `draft_vocab_size`, `target_hidden_size`, `tie_word_embeddings: false`, `parallel_drafting` (P-EAGLE, with
  `mask_token_id`) and optional `fc_norm` / `norm_output` / `num_aux_hidden_states`. So `model_type` and
  `num_hidden_layers` are the target's: the draft always builds Llama-style layers (no q/k norms), one of them,
  or `num_hidden_layers` of them when `parallel_drafting` is on.
- Weights: `model.embed_tokens`, `model.fc`, `model.fc_norm.{j}`, `model.layers.{i}.*`, `model.norm` under the
  `model.` prefix; `lm_head.weight`, `d2t`, `t2d` and P-EAGLE's `mask_hidden` unprefixed.
- Layer 0 is SGLang's: residual = raw h, `input_layernorm` on the embedding, `hidden_norm` on h (no
  norm_before_residual, no norm_before_fc); later P-EAGLE layers are plain Llama layers (`input_layernorm`).
- No capture ids are written: its trainer captures vLLM's defaults {2, L//2, L-3} (output-of-layer ids minus 1).
No engine loads this file as it is (no engine resolves `LlamaEagle3DraftModel`, and vLLM drops `model.` weights):
convert it to a layout an engine serves.
"""

from __future__ import annotations

from typing import Any

from ..drafter import Drafter
from ..target_identity import TargetIdentity
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
    flat_fields,
    infer_num_aux,
    source_config,
)

ARCHITECTURE = "LlamaEagle3DraftModel"
# Its backbone is `model.` (base_model_prefix); lm_head, the vocab buffers and mask_hidden sit beside it.
RENAMES: tuple[Rename, ...] = tuple(Rename(name, f"model.{name}") for name in (
    "embed_tokens.", "fc.", "fc_norm.", "layers.", "norm."))
MODELED = {"architectures", "draft_vocab_size", "target_hidden_size", "parallel_drafting", "mask_token_id",
           "fc_norm", "norm_output", "num_aux_hidden_states"}
# The target's own keys that describe the target, not the draft (carried into no output).
TARGET_ONLY = {"layer_types", "max_window_layers", "sliding_window", "use_sliding_window", "num_target_layers"}


def draft_view(config: dict[str, Any]) -> dict[str, Any]:
    """The config as the draft is built from it: Llama layers, as many as it builds."""
    view = dict(config)
    view["model_type"] = "llama"
    view["num_hidden_layers"] = draft_layers(config)
    return view


def draft_layers(config: dict[str, Any]) -> int:
    layers = config.get("num_hidden_layers", 1)
    return layers if config.get("parallel_drafting") is True and isinstance(layers, int) else 1


class NemoLayout(Layout):
    name = "nemo"
    summary = "NVIDIA NeMo Automodel LlamaEagle3DraftModel training output (read only)"
    engine = "vllm"  # (no ids are written: its trainer captures vLLM's defaults)
    renames = RENAMES
    home_engines = ()
    kinds = ("eagle3", "peagle")
    writes = False

    def detect(self, ckpt: Checkpoint) -> Detection | None:
        archs = ckpt.config.get("architectures")
        if isinstance(archs, list) and ARCHITECTURE in archs:
            return Detection(self.name, True, f"{ARCHITECTURE} (NeMo Automodel's EAGLE-3 draft)")
        return None

    def config_view(self, config: dict[str, Any]) -> dict[str, Any]:
        return draft_view(config)

    def read(self, ckpt: Checkpoint, options: ConvertOptions) -> Drafter:
        stored = source_config(ckpt)
        raw = draft_view(stored)
        notes = list(ckpt.notes)
        refuse_key_errors(self.name, raw, notes)
        fields = flat_fields({k: v for k, v in raw.items() if k not in TARGET_ONLY}, MODELED, (), notes)
        vd = raw.get("draft_vocab_size")
        fields["draft_vocab_size"] = fields["vocab_size"] if vd is None else vd
        fields["fc_norm"] = raw.get("fc_norm") is True
        fields["norm_output"] = raw.get("norm_output") is True
        if raw.get("parallel_drafting") is True:
            fields["kind"] = "peagle"
            mask = raw.get("mask_token_id")
            if not isinstance(mask, int) or isinstance(mask, bool) or mask < 0:
                raise FormatError(f"parallel_drafting is on but mask_token_id is {mask!r}",
                                  "write the mask token the P-EAGLE draft was trained with into a copy of config.json",
                                  code="E-CONFIG-FIELD")
            fields["mask_token_id"] = mask
        # The config is the target's: its depth, width and family are the target's own.
        fields["target"] = TargetIdentity(model_type=stored.get("model_type"),
                                          num_hidden_layers=stored.get("num_hidden_layers"),
                                          hidden_size=stored.get("target_hidden_size") or stored.get("hidden_size"),
                                          vocab_size=stored.get("vocab_size"))
        notes.append(f"read NeMo Automodel's {ARCHITECTURE}: config.json is the target's "
                     f"({stored.get('model_type')!r}, {stored.get('num_hidden_layers')} layers); the draft is "
                     f"{fields['num_layers']} Llama-style layer(s), capturing the default layers")
        tensors = canonical_tensors(ckpt, RENAMES, fields["num_layers"], self.name)
        declared = raw.get("num_aux_hidden_states")
        fields["num_aux_hidden_states"] = infer_num_aux(tensors.get("fc.weight"), fields,
                                                        declared if isinstance(declared, int) else None, None)
        return build_drafter(ckpt, fields, tensors, options, notes)

    def plan(self, drafter: Drafter, options: ConvertOptions) -> WritePlan:
        raise RefusalError("the nemo layout is NeMo Automodel's training output, which no engine loads; this tool "
                           "reads it and does not write it", "convert to a layout an engine serves: `--to vllm`, "
                           "`--to sglang` or `--to speculators`", code="E-LAYOUT-READ-ONLY")


LAYOUT = NemoLayout()
