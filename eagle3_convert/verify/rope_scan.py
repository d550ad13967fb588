"""`verify --scan-rope`: the drafter's acceptance at each RoPE base it may have been trained at, best first.

The candidates (issue 35): the base the engines read from its config (transformers 5: the rope object's theta
first, target_weights.engine_rope), each base the config spells (`rope_theta`, `rope_parameters.rope_theta`), the
target's, and 10000 (what SpecForge trained at before #270 whatever the config said, SpecForge #265; and NeMo
Automodel's DeepSeek draft under transformers 5 before #2920). Only the base changes: the scaling is the drafter's.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from ..target_weights import DEFAULT_THETA, engine_rope, spelled_thetas
from .reference import make_rope


@dataclass
class RopeCandidate:
    theta: float
    labels: list[str]
    result: Any  # VerifyResult


def target_theta(model_config: Any) -> float | None:
    """The RoPE base of the loaded target (transformers 5 keeps it in rope_parameters, 4 at the top)."""
    text = model_config.get_text_config()
    params = getattr(text, "rope_parameters", None)
    theta = params.get("rope_theta") if isinstance(params, dict) else None
    theta = theta if theta is not None else getattr(text, "rope_theta", None)
    return float(theta) if isinstance(theta, (int, float)) else None


def rope_candidates(rope: dict[str, Any], target: float | None) -> dict[float, list[str]]:
    out: dict[float, list[str]] = {}
    out.setdefault(float(engine_rope(rope)["rope_theta"]), []).append("config, as the engines read it")
    for key, theta in spelled_thetas(rope).items():
        out.setdefault(theta, []).append(key)
    if target is not None:
        out.setdefault(target, []).append("the target's")
    out.setdefault(DEFAULT_THETA, []).append("10000 (SpecForge before #270)")
    return out


def with_theta(maths: Any, theta: float) -> Any:
    """The drafter's maths with its rotary base set to `theta` (weights shared, scaling kept)."""
    cfg = maths.cfg
    params = {**cfg.rope_normalized(), "rope_theta": theta}
    mla = cfg.family == "deepseek_mla"
    dim = (cfg.mla or {})["qk_rope_head_dim"] if mla else cfg.resolved_head_dim
    other = copy.copy(maths)
    other.rope = make_rope(params, dim, cfg.max_position_embeddings, mla, maths.device)
    return other
