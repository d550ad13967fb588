"""The trained maths of an EAGLE-3 drafter in plain torch: what an engine's forward must reproduce.

Runs in the pytest process (torch is a test dependency), from the SOURCE drafter's canonical
tensors (FORMATS §1 names), never from what an engine or our converter made of them. The
semantics are those of the trainer (speculators): layer 0 attends over
cat(input_layernorm(embed), hidden_norm(h)) with residual h (hidden_norm(h) under
norm_before_residual); later layers normalise with input_layernorm; norm_before_fc normalises
the fused input, fc_norm each captured state; the output is norm(h + residual) and the state
handed to the next draft step is the pre-norm sum (the post-norm one under norm_output).

Kept apart from eagle3_convert/verify/reference.py on purpose: this is the judge of what our converter wrote,
built from the spec's tensors and flags; verify's maths is built from a drafter as our readers read it, so a flag
misread on the way in would pass both the conversion and a judge made from it. The two are not left to drift:
tests/test_verify.py checks verify's equals this one for every Llama/Qwen3 flag case, and tests/test_engines_verify.py
checks verify's against the engines' own forward.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def rms(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope(x: torch.Tensor, positions: torch.Tensor, theta: float) -> torch.Tensor:
    """Rotate-half (GPT-NeoX style) rotary embedding over the last dim of x [T, heads, d]."""
    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    freqs = positions.float()[:, None] * inv[None, :]
    cos, sin = torch.cat([freqs, freqs], -1).cos()[:, None, :], torch.cat([freqs, freqs], -1).sin()[:, None, :]
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def attention(x: torch.Tensor, w: dict, p: str, cfg: dict, positions: torch.Tensor) -> torch.Tensor:
    nh, nkv, hd, eps = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"], cfg["rms_norm_eps"]
    t = x.shape[0]
    q = (x @ w[p + "self_attn.q_proj.weight"].T).view(t, nh, hd)
    k = (x @ w[p + "self_attn.k_proj.weight"].T).view(t, nkv, hd)
    v = (x @ w[p + "self_attn.v_proj.weight"].T).view(t, nkv, hd)
    if p + "self_attn.q_norm.weight" in w:  # Qwen3: per-head RMSNorm of q and k before the rotation
        q = rms(q, w[p + "self_attn.q_norm.weight"], eps)
        k = rms(k, w[p + "self_attn.k_norm.weight"], eps)
    q, k = rope(q, positions, cfg["rope_theta"]), rope(k, positions, cfg["rope_theta"])
    k = k.repeat_interleave(nh // nkv, dim=1)
    v = v.repeat_interleave(nh // nkv, dim=1)
    out = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), is_causal=True,
                                         scale=hd ** -0.5)
    return out.transpose(0, 1).reshape(t, nh * hd) @ w[p + "self_attn.o_proj.weight"].T


def mlp(x: torch.Tensor, w: dict, p: str) -> torch.Tensor:
    gate, up = x @ w[p + "mlp.gate_proj.weight"].T, x @ w[p + "mlp.up_proj.weight"].T
    return (F.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T


def drafter_forward(w: dict[str, torch.Tensor], cfg: dict, flags: dict, embeds: torch.Tensor,
                    states: torch.Tensor, boundaries: list[int] | None, positions: torch.Tensor):
    """(hidden for the lm_head, state for the next draft step), both [T, H], float32. `boundaries` None: a head fed
    the target's final post-norm state, `states` [T, H] itself, with no fc (docs/formats.md §4.4)."""
    eps = cfg["rms_norm_eps"]
    if boundaries is None:
        h = states
    else:
        x = torch.cat([states[b] for b in sorted(boundaries)], -1)
        if flags["norm_before_fc"]:
            x = rms(x, w["input_norm.weight"], eps)
        if flags["fc_norm"]:
            chunks = x.chunk(len(boundaries), -1)
            x = torch.cat([rms(c, w[f"fc_norm.{j}.weight"], eps) for j, c in enumerate(chunks)], -1)
        h = x @ w["fc.weight"].T
    residual = h
    for i in range(cfg["num_hidden_layers"]):
        p = f"layers.{i}."
        if i == 0:
            normed = rms(h, w[p + "hidden_norm.weight"], eps)
            residual = normed if flags["norm_before_residual"] else h
            attn_in = torch.cat([rms(embeds, w[p + "input_layernorm.weight"], eps), normed], -1)
        else:
            residual = h + residual
            attn_in = rms(residual, w[p + "input_layernorm.weight"], eps)
        residual = attention(attn_in, w, p, cfg, positions) + residual
        h = mlp(rms(residual, w[p + "post_attention_layernorm.weight"], eps), w, p)
    pre = h + residual
    out = rms(pre, w["norm.weight"], eps)
    return out, (out if flags["norm_output"] else pre)
