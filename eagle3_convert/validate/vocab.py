"""The vocabulary map (d2t / t2d): its consistency, and which of the two each engine needs."""

from __future__ import annotations

from ..errors import FormatError
from ..vocab_map import DEFAULT_MAP_WAY_OUT, default_map
from .context import Context
from .findings import Finding, from_error
from .profiles import EngineProfile


def check_vocab(ctx: Context) -> None:
    cfg = ctx.cfg
    d2t = ctx.raw.tensors.get("d2t")
    if {"d2t", "t2d"} & ctx.raw.cut:
        return  # reported as truncation
    try:
        vocab = ctx.raw.checkpoint().vocab_map(cfg.vocab_size, cfg.draft_vocab_size)
    except FormatError as exc:
        about_t2d = exc.code == "E-VOCAB-T2D" or exc.message.startswith("t2d") or d2t is None
        found = from_error(exc, where="t2d" if about_t2d else "d2t")
        if exc.code == "E-VOCAB-ABSOLUTE":
            found = Finding(found.code, found.severity, found.message,
                            "only if you confirm it, repair it: `"
                            + ctx.command(ctx.layout.name, "--repair-d2t-absolute") +
                            "` (d2t := d2t - arange(Vd))", "d2t")
        ctx.out.append(found)
        return
    implied = default_map(vocab)
    if implied:
        ctx.add("W-VOCAB-DEFAULT", implied, DEFAULT_MAP_WAY_OUT, where="d2t")


def engine_vocab(ctx: Context, p: EngineProfile) -> None:
    cfg = ctx.cfg
    if cfg.draft_vocab_size == cfg.vocab_size:
        return
    has_d2t, has_t2d = "d2t" in ctx.raw.tensors, "t2d" in ctx.raw.tensors
    if p.needs_t2d and has_d2t and not has_t2d:
        ctx.add("E-VOCAB-NO-T2D", f"{p.label} needs t2d (the target-vocab mask) and the checkpoint has only d2t",
                f"`{ctx.command(p.layout)}` rebuilds t2d from d2t", engine=p.name, where="t2d")
    if p.needs_d2t and has_t2d and not has_d2t:
        ctx.add("E-VOCAB-NO-D2T", f"{p.label} maps draft tokens with d2t and the checkpoint has only t2d: every "
                "draft token would map to the wrong target token", f"`{ctx.command(p.layout)}` rebuilds d2t "
                "from t2d", engine=p.name, where="d2t")
