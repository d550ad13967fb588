"""Kimi K3 EAGLE-3 drafts (NVIDIA-NeMo/Automodel #3286, `components/speculative/eagle/draft_kimi_k3.py`): refused,
naming each feature of their maths that no engine's drafter class serves.

The draft is one K3 MLA layer (the recipe saves it as every Automodel draft: the target's text config, here
`model_type: kimi_linear` with `mla_use_nope`, `mla_use_output_gate`, `hidden_act: situ`, under
`architectures: ["LlamaEagle3DraftModel"]`, `recipes/llm/train_eagle3.py`). Against the DeepSeek MLA draft the engines
serve (`Eagle3DeepseekV2ForCausalLM`):
- NoPE: `mla_use_nope` carries the rope slice unrotated, no rotary anywhere; vLLM's (`deepseek_eagle3.py`, 0.24.0 to
  0.33.0) and SGLang's (`kimi_k25_eagle3.py`, 0.5.23) MLA drafts read no such key and always rotate it (`get_rope`).
- A sigmoid output gate, `self_attn.g_proj.weight` (`mla_use_output_gate`): attn * sigmoid(g_proj(x)) before o_proj;
  neither class has a g_proj (the weight is dropped or refused, the gate never applied).
- The SiTU MLP (`hidden_act: situ`, `KimiK3MLP`: beta * tanh(gate / beta) * sigmoid(gate) * up): DeepseekV2MLP
  raises "Only silu is supported for now" (vLLM 0.33.0 `deepseek_v2.py:280`, SGLang 0.5.23 `deepseek_v2.py:332`).
- Its fp32-variance RMSNorm (`KimiRMSNorm`) is not a reason: every engine's RMSNorm computes the variance in fp32
  too (whether the weight multiplies before or after the cast back was not compared: unconfirmed, not refused).
TensorRT-LLM's `Eagle3DeepSeekV3ForCausalLM` (MLA when the config has kv_lora_rank) was not checked for these
features here (its source is not installed); llama.cpp's eagle3 arch serves no MLA draft at all. The canonical
drafter has no field for any of the three, so reading the file as a DeepSeek MLA draft would change its maths in
silence: refused in every layout until an engine serves them.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..errors import RefusalError

CODE = "E-DRAFT-UNSERVED"
NESTED = ("transformer_layer_config", "text_config")  # where other layouts keep the decoder's keys
GATE_SUFFIX = "self_attn.g_proj.weight"
HIDDEN_NORM = "hidden_norm.weight"  # EAGLE-3's first layer norms the target state apart from the embedding


def _keys(config: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [config, *(config[k] for k in NESTED if isinstance(config.get(k), dict))]


def unserved_features(config: Mapping[str, Any], tensor_names: Any) -> list[str]:
    """Each Kimi K3 feature an EAGLE-3 draft shows, in words that say where it is seen. Only an EAGLE-3 draft: its
    fused first layer's `hidden_norm` marks one (a K3 target, and K3's DSpark draft, which vLLM 0.33.0 serves
    through `models/kimi_k3/nvidia/dspark_mla.py`, have none)."""
    names = list(tensor_names)
    if not any(n.endswith(HIDDEN_NORM) for n in names):
        return []
    scopes = _keys(config)
    found = []
    if any(scope.get("mla_use_nope") is True for scope in scopes):
        found.append("NoPE MLA (mla_use_nope: the rope slice is never rotated; the engines' MLA drafts rotate it)")
    gates = sorted(n for n in names if n.endswith(GATE_SUFFIX))
    if gates or any(scope.get("mla_use_output_gate") is True for scope in scopes):
        found.append(f"a sigmoid output gate ({gates[0] if gates else 'mla_use_output_gate'}: no engine's MLA "
                     "draft has a g_proj)")
    if any(scope.get("hidden_act") == "situ" for scope in scopes):
        found.append("a SiTU MLP (hidden_act: situ; the engines' DeepseekV2MLP takes silu only)")
    return found


def refusal(config: Mapping[str, Any], tensor_names: Any) -> RefusalError | None:
    found = unserved_features(config, tensor_names)
    if not found:
        return None
    return RefusalError(f"a Kimi K3 EAGLE-3 draft (NeMo Automodel draft_kimi_k3.py): {'; '.join(found)}. No engine "
                        "serves these (vLLM to 0.33.0, SGLang to 0.5.23, llama.cpp); read as a DeepSeek MLA draft "
                        "its maths would change",
                        "serve it with the runtime it was trained in until an engine serves Kimi K3 drafts, or train "
                        "a DeepSeek MLA EAGLE-3 draft (Eagle3DeepseekV2ForCausalLM), which vLLM and SGLang serve",
                        code=CODE)
