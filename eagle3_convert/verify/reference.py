"""An EAGLE-3 drafter's maths in plain torch, from its canonical tensors (FORMATS §1 names), for every family and
flag this tool writes: Llama, Qwen3 (per-head q/k norms), MLA (DeepSeek-V2/V3, Kimi-K2.5), several layers, biases,
norm_before_residual, norm_before_fc, fc_norm, norm_output and ModelOpt's input_layernorm_on_hidden.

The semantics are the trainer's (speculators), which vLLM and SGLang reproduce (the engine tier checks both against
tests/engines/reference.py, and this module against both on a trained drafter: tests/test_engines_verify.py):
layer 0 attends over cat(input_layernorm(embed), hidden_norm(h)) with residual h (hidden_norm(h) under
norm_before_residual); later layers normalise their input with input_layernorm; the head reads norm(h + residual),
and the state handed to the next draft step is the pre-norm sum (the post-norm one under
norm_output). Computed in float32 whatever the stored dtype.

Drafting is a chain (top-1), as SGLang and vLLM run it: a draft-extend step over every verified position, each
pairing the token at i+1 with the target's states at i (its keys and values stay in the drafter's cache), then
k-1 decode steps, each feeding the drafted token and the drafter's own state back at the next position.
`Chain.extend` runs the first (over the whole text, or over each round's newly verified positions); `Chain.step`
runs one decode step for many starting positions at once, each attending to the verified cache up to its start and
to its own drafted positions only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..drafter import Drafter
from ..errors import RefusalError
from ..safetensors_io import read_tensor_bytes
from .dequant import dequantized

DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64,
          "I64": torch.int64, "I32": torch.int32, "BOOL": torch.bool, "U8": torch.uint8,
          "F8_E4M3": torch.float8_e4m3fn}  # FP8 and packed NVFP4: dequantized by verify/dequant.py
ACTIVATIONS = {"silu": F.silu, "gelu": F.gelu, "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
               "relu": F.relu}


def load_tensor(source) -> torch.Tensor:
    """One canonical tensor (any TensorSource: a file range, bytes this tool computed, a GGUF tensor un-permuted
    while read) as a torch tensor of its stored dtype."""
    dtype = DTYPES.get(source.dtype)
    if dtype is None:
        raise RefusalError(f"a tensor is stored as {source.dtype}, which verify's reference maths cannot read",
                           "verify reads BF16, F16, F32 and ModelOpt FP8 / NVFP4 weights: measure an unquantized "
                           "copy of the drafter",
                           code="E-VERIFY-DTYPE")
    data = bytearray(read_tensor_bytes(source))
    return torch.frombuffer(data, dtype=dtype).reshape(source.shape) if data else torch.empty(source.shape, dtype=dtype)


def rms(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


@dataclass
class Rope:
    """Rotary embedding of `dim` dims: inverse frequencies and the cos/sin scale (transformers' rope functions, so
    llama3, yarn, linear and dynamic scaling read as the engines' own rope classes read them)."""

    inv_freq: torch.Tensor
    scale: float
    interleaved: bool  # DeepSeek rotates pairs (x0, x1), (x2, x3)...; Llama rotates halves

    def __call__(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """x [N, heads, dim] at `positions` [N]."""
        freqs = positions.to(torch.float32)[:, None] * self.inv_freq[None, :]
        cos, sin = (freqs.cos() * self.scale)[:, None, :], (freqs.sin() * self.scale)[:, None, :]
        if self.interleaved:  # the rotated pairs are laid out as [evens, odds]: the same for q and k
            x1, x2 = x[..., 0::2], x[..., 1::2]
        else:
            x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


def make_rope(params: dict, dim: int, max_positions: int | None, interleaved: bool, device: torch.device) -> Rope:
    from transformers import LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    params = {"rope_theta": 10000.0, **params}
    kind = params.get("rope_type", "default")
    if kind == "default":
        inv = 1.0 / (params["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
        return Rope(inv.to(device), 1.0, interleaved)
    if kind not in ROPE_INIT_FUNCTIONS:
        raise RefusalError(f"the drafter's rope_type {kind!r} is not one verify models",
                           f"verify models {', '.join(['default', *ROPE_INIT_FUNCTIONS])}", code="E-VERIFY-ROPE")
    config = LlamaConfig(hidden_size=dim, num_attention_heads=1, head_dim=dim, rope_parameters=params,
                         max_position_embeddings=max_positions or params.get("original_max_position_embeddings")
                         or 4096)
    inv, scale = ROPE_INIT_FUNCTIONS[kind](config, device)
    return Rope(inv.to(device=device, dtype=torch.float32), float(scale), interleaved)


def yarn_mscale(factor: float, mscale: float) -> float:
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


class DrafterMaths:
    """One drafter's weights on `device`, in float32, and its forward pieces."""

    def __init__(self, drafter: Drafter, device: torch.device):
        cfg = drafter.config
        if cfg.kind != "eagle3":
            raise RefusalError(f"the drafter is a {cfg.kind} drafter: verify models EAGLE-3's chain drafting only",
                               "measure its acceptance in the engine that serves it", code="E-VERIFY-KIND")
        if cfg.hidden_act not in ACTIVATIONS:
            raise RefusalError(f"the drafter's hidden_act {cfg.hidden_act!r} is not one verify models",
                               f"verify models {', '.join(ACTIVATIONS)}", code="E-VERIFY-ACT")
        self.cfg, self.device = cfg, device
        self.w = dequantized(drafter.tensors, load_tensor, device)  # (a plain weight: only cast to float32)
        self.act = ACTIVATIONS[cfg.hidden_act]
        # draft id -> target id (the d2t offsets decoded and cross-checked by the reader); None: the full vocab
        vocab = drafter.vocab
        self.draft_to_target = (torch.tensor(vocab.target_ids, dtype=torch.long, device=device)
                                if vocab is not None and not vocab.is_identity else None)
        rope = cfg.rope_normalized()
        if cfg.family == "deepseek_mla":
            m = cfg.mla or {}
            self.rope = make_rope(rope, m["qk_rope_head_dim"], cfg.max_position_embeddings, True, device)
            scale = (m["qk_nope_head_dim"] + m["qk_rope_head_dim"]) ** -0.5
            if rope.get("rope_type", "default") != "default" and rope.get("mscale_all_dim"):
                scale *= yarn_mscale(float(rope.get("factor", 1.0)), float(rope["mscale_all_dim"])) ** 2
            self.scale = scale
        else:
            self.rope = make_rope(rope, cfg.resolved_head_dim, cfg.max_position_embeddings, False, device)
            self.scale = cfg.resolved_head_dim ** -0.5

    # ------------------------------------------------------------ pieces
    def linear(self, x: torch.Tensor, name: str) -> torch.Tensor:
        bias = self.w.get(name + ".bias")
        return F.linear(x, self.w[name + ".weight"], bias)

    def fuse(self, states: list[torch.Tensor]) -> torch.Tensor:
        """fc over the captured target states, given in ASCENDING boundary order (fc's column blocks)."""
        cfg, eps = self.cfg, self.cfg.rms_norm_eps
        if cfg.capture == "final":
            return states[0]  # the target's final post-norm state as it is: such a head has no fc
        if cfg.fc_norm:
            states = [rms(s, self.w[f"fc_norm.{j}.weight"], eps) for j, s in enumerate(states)]
        x = torch.cat(states, -1)
        if cfg.norm_before_fc:
            x = rms(x, self.w["input_norm.weight"], eps)
        return self.linear(x, "fc")

    def qkv(self, i: int, x: torch.Tensor, positions: torch.Tensor):
        """Layer i's queries [N, nh, d], keys [N, nh, d] and values [N, nh, dv] (kv heads repeated for GQA)."""
        cfg, p, eps = self.cfg, f"layers.{i}.self_attn.", self.cfg.rms_norm_eps
        n, nh = x.shape[0], cfg.num_attention_heads
        if cfg.family == "deepseek_mla":
            m = cfg.mla or {}
            nope, rot, dv = m["qk_nope_head_dim"], m["qk_rope_head_dim"], m["v_head_dim"]
            q_latent = rms(self.linear(x, p + "q_a_proj"), self.w[p + "q_a_layernorm.weight"], eps)
            q = self.linear(q_latent, p + "q_b_proj")
            q_nope, q_rot = q.view(n, nh, nope + rot).split([nope, rot], -1)
            latent, k_rot = self.linear(x, p + "kv_a_proj_with_mqa").split([m["kv_lora_rank"], rot], -1)
            kv = self.linear(rms(latent, self.w[p + "kv_a_layernorm.weight"], eps), p + "kv_b_proj")
            k_nope, v = kv.view(n, nh, nope + dv).split([nope, dv], -1)
            k_rot = self.rope(k_rot.view(n, 1, rot), positions).expand(n, nh, rot)
            return torch.cat([q_nope, self.rope(q_rot, positions)], -1), torch.cat([k_nope, k_rot], -1), v
        hd, nkv = cfg.resolved_head_dim, cfg.num_key_value_heads
        q = self.linear(x, p + "q_proj").view(n, nh, hd)
        k = self.linear(x, p + "k_proj").view(n, nkv, hd)
        v = self.linear(x, p + "v_proj").view(n, nkv, hd)
        if p + "q_norm.weight" in self.w:  # Qwen3: per-head RMSNorm of q and k before the rotation
            q, k = rms(q, self.w[p + "q_norm.weight"], eps), rms(k, self.w[p + "k_norm.weight"], eps)
        q, k = self.rope(q, positions), self.rope(k, positions)
        return q, k.repeat_interleave(nh // nkv, dim=1), v.repeat_interleave(nh // nkv, dim=1)

    def mlp(self, i: int, x: torch.Tensor) -> torch.Tensor:
        p = f"layers.{i}.mlp."
        return self.linear(self.act(self.linear(x, p + "gate_proj")) * self.linear(x, p + "up_proj"), p + "down_proj")

    def outputs(self, pre: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(the hidden the lm_head reads, its logits over the draft vocabulary, the state for the next step) from
        the last layer's pre-norm sum: what an engine's drafter forward and its lm_head compute."""
        out = rms(pre, self.w["norm.weight"], self.cfg.rms_norm_eps)
        return out, self.linear(out, "lm_head"), (out if self.cfg.norm_output else pre)

    def to_target(self, draft_ids: torch.Tensor) -> torch.Tensor:
        return self.draft_to_target[draft_ids] if self.draft_to_target is not None else draft_ids

    def head(self, pre: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(the drafted target token ids, the state for the next step) from the last layer's pre-norm sum."""
        _, logits, state = self.outputs(pre)
        return self.to_target(logits.argmax(-1)), state

    def layers(self, embeds: torch.Tensor, h: torch.Tensor, positions: torch.Tensor, attend) -> torch.Tensor:
        """The decoder layers over [N] positions; `attend(i, q, k, v)` is the attention of layer i. The pre-norm sum."""
        cfg, eps = self.cfg, self.cfg.rms_norm_eps
        residual = h
        for i in range(cfg.num_layers):
            p = f"layers.{i}."
            if i == 0:
                hidden_in = rms(h, self.w[p + "input_layernorm.weight"], eps) if cfg.input_layernorm_on_hidden else h
                normed = rms(hidden_in, self.w[p + "hidden_norm.weight"], eps)
                residual = normed if cfg.norm_before_residual else h
                x = torch.cat([rms(embeds, self.w[p + "input_layernorm.weight"], eps), normed], -1)
            else:
                residual = h + residual
                x = rms(residual, self.w[p + "input_layernorm.weight"], eps)
            q, k, v = self.qkv(i, x, positions)
            attn = attend(i, q, k, v)
            residual = self.linear(attn.reshape(attn.shape[0], -1), p + "self_attn.o_proj") + residual
            h = self.mlp(i, rms(residual, self.w[p + "post_attention_layernorm.weight"], eps))
        return h + residual


class Chain:
    """Top-1 chain drafting over one verified sequence: every starting position at once after one extend over the
    whole text, or round by round (speculative decoding) with an extend over each round's newly verified positions."""

    def __init__(self, maths: DrafterMaths):
        self.maths = maths
        self.cache: list[tuple[torch.Tensor, torch.Tensor]] = []  # per layer: the verified positions' keys, values
        self.drafted: list[list[tuple[torch.Tensor, torch.Tensor]]] = []  # per layer: each decode step's k, v

    @property
    def verified(self) -> int:
        """Positions in the cache: the next extend starts there."""
        return self.cache[0][0].shape[0] if self.cache else 0

    def extend(self, embeds: torch.Tensor, fused: torch.Tensor) -> torch.Tensor:
        """The draft-extend step over the next N verified positions s..s+N-1 (embeds of tokens s+1..s+N, the fused
        target states at s..s+N-1), appended to the cache; a new round's decode steps start from it. Each
        position's pre-norm sum (DrafterMaths.head: the first drafted token and the state handed on)."""
        start = self.verified
        positions = torch.arange(start, start + embeds.shape[0], device=embeds.device)
        # a later extend's queries see the earlier positions too: is_causal aligns its mask top-left, so it is spelled
        mask = None if start == 0 else (torch.arange(start + embeds.shape[0], device=embeds.device)[None, :]
                                        <= positions[:, None])

        def attend(i, q, k, v):
            if start:
                k, v = torch.cat([self.cache[i][0], k]), torch.cat([self.cache[i][1], v])
                self.cache[i], self.drafted[i] = (k, v), []
            else:
                self.cache.append((k, v))
                self.drafted.append([])
            out = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
                                                 attn_mask=mask, is_causal=mask is None, scale=self.maths.scale)
            return out.transpose(0, 1)

        return self.maths.layers(embeds, fused, positions, attend)

    def step(self, starts: torch.Tensor, tokens: torch.Tensor, states: torch.Tensor, depth: int,
             embed) -> torch.Tensor:
        """Decode step `depth` (2..k) for each start p, feeding the token drafted last and the state handed on, at
        position p + depth - 1, attending to the verified positions 0..p and to this start's own drafted positions:
        the pre-norm sum (DrafterMaths.head: the next drafted token and state)."""
        positions = starts + depth - 1
        verified = torch.arange(self.cache[0][0].shape[0], device=starts.device)
        hidden_mask = verified[None, :] > starts[:, None]  # [S, T]: past the start is not verified yet

        def attend(i, q, k, v):
            keys, values = self.cache[i]
            self.drafted[i].append((k, v))
            own_k = torch.stack([kk for kk, _ in self.drafted[i]], 1)  # [S, depth-1, nh, d]
            own_v = torch.stack([vv for _, vv in self.drafted[i]], 1)
            on_cache = torch.einsum("shd,thd->sht", q, keys) * self.maths.scale
            on_cache = on_cache.masked_fill(hidden_mask[:, None, :], float("-inf"))
            on_own = torch.einsum("shd,smhd->shm", q, own_k) * self.maths.scale
            weights = torch.softmax(torch.cat([on_cache, on_own], -1), -1)
            return (torch.einsum("sht,thd->shd", weights[..., :keys.shape[0]], values)
                    + torch.einsum("shm,smhd->shd", weights[..., keys.shape[0]:], own_v))

        return self.maths.layers(embed(tokens), states, positions, attend)
