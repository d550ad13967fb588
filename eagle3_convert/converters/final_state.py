"""Heads fed the target's final state (`DrafterConfig.capture == "final"`; docs/formats.md §4.4).

ModelOpt writes them with `eagle_config.use_aux_hidden_state: false` (nvidia/gpt-oss-120b-Eagle3-v2): an EAGLE-3
head with no fc whose first layer takes [embedding, target's final post-norm hidden state] (2H). vLLM and SGLang
read the nested flag (engines/vllm.py, engines/sglang.py), so a layout that nests an `eagle_config` can say it;
the others cannot, and refuse it. The same flag false over an `fc.weight` is an EAGLE-1 module (ModelOpt's fc over
[embedding, hidden], 2H -> H) or a mislabelled EAGLE-3 head: refused as before. A first layer of width H is what
ModelOpt's HF trainer builds for the flag false (modelopt/torch/speculative/plugins/modeling_eagle.py: no
embedding, no hidden_norm): no engine's Eagle3 class builds it.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..drafter import DrafterConfig
from ..errors import RefusalError

FLAG = "use_aux_hidden_state"  # nested in eagle_config; absent means true in every engine that reads it
SAYS_FINAL = ("modelopt", "vllm", "sglang")  # the layouts whose config nests the flag where engines read it


def flag_false(eagle: Mapping[str, Any]) -> bool:
    return eagle.get(FLAG, True) is False


def read_final_head(eagle: Mapping[str, Any], tensors: Mapping[str, Any], hidden_size: int) -> bool:
    """Whether the file is a head fed the final state; refuses what the flag false means otherwise."""
    if not flag_false(eagle):
        return False
    if "fc.weight" in tensors:
        raise RefusalError("eagle_config.use_aux_hidden_state is false and the file has an fc.weight: an EAGLE-1 "
                           "module (fc over [embedding, hidden]), or an EAGLE-3 head whose flag is wrong",
                           "if fc.weight fuses the k captured states the head was trained on ([H, k*Ht]), set the "
                           "flag true; an EAGLE-1 module is not converted",
                           code="E-CONFIG-ALGORITHM")
    q = next((t for name, t in tensors.items() if name.endswith(("layers.0.self_attn.q_proj.weight",
                                                                  "midlayer.self_attn.q_proj.weight"))), None)
    if q is not None and len(q.shape) == 2 and q.shape[1] == hidden_size:
        raise RefusalError(f"eagle_config.use_aux_hidden_state is false and the first layer takes width {hidden_size}"
                           " (no embedding beside the hidden state): ModelOpt's HF no-aux module, which no engine's "
                           "Eagle3 class builds (their first layer takes 2H)",
                           "serve it from the ModelOpt export with TensorRT-LLM, or retrain as EAGLE-3",
                           code="E-CONFIG-ALGORITHM")
    return True


def final_fields(fields: dict[str, Any], notes: list[str]) -> None:
    """The canonical fields of a head fed the final state (one state of the drafter's width, no capture ids)."""
    fields.update(capture="final", num_aux_hidden_states=1, capture_boundaries=None)
    notes.append("eagle_config.use_aux_hidden_state is false: the head is fed the target's final (post-norm) hidden "
                 "state, no fc; capture ids, if listed, are unused")


def refuse_capture_mode(cfg: DrafterConfig, layout: str, writes: bool = True) -> None:
    """A head fed the final state, written where no engine reading the layout would feed it so (`writes` False: a
    layout never written, whose own plan refuses)."""
    if cfg.capture == "final" and writes and layout not in SAYS_FINAL:
        raise RefusalError(f"the head is fed the target's final hidden state (no fc), and the {layout} layout "
                           "cannot say so: its engines would feed it captured states through an fc it lacks",
                           f"convert to a layout that nests eagle_config.{FLAG}: --to "
                           f"{' / --to '.join(SAYS_FINAL)}", code="E-FLAG-UNSUPPORTED")


def fused(cfg: DrafterConfig) -> str:
    """What the head takes in, said where capture layers are given for it."""
    if cfg.capture == "final":
        return "the head is fed the target's final post-norm state (eagle_config.use_aux_hidden_state false), no layers"
    return f"fc fuses {cfg.num_aux_hidden_states} hidden states"


def write_flag(eagle: dict[str, Any], cfg: DrafterConfig) -> None:
    """Write the flag into `eagle` (the nested eagle_config) for a final-state head; nothing for an aux one."""
    if cfg.capture == "final":
        eagle[FLAG] = False

