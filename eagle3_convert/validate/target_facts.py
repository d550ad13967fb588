"""What the target's own files say against the drafter's: its input embedding and its RoPE (issue 35).

- The stored `embed_tokens` against the target's table (`--target DIR` with weights, or with `--deep` the target
  recorded for these weights when it names a local copy): engines disagree on which one a drafter drafts with
  (engines/embedding.py), so a table that is not the target's is one drafter to vLLM and another to SGLang.
- The drafter's rope fields against each other (`rope_theta` and the rope object's theta: transformers 5 reads the
  object's, a transformers-4 reader the top-level one) and against the target's (`--target DIR`): SpecForge before
  #270 trained at 10000 whatever rope_theta said (SpecForge #265), NeMo Automodel's DeepSeek draft fell back to
  10000 under transformers 5 (#2920), speculators' Eagle3 converter dropped `rope_scaling` (#574).
"""

from __future__ import annotations

import shlex

from ..engines.embedding import READINGS, cannot_do_without, drafts_with_stored, label
from ..names import runners_of
from ..target_weights import (compare_tables, engine_rope, local_dirs, rope_fields, spelled_thetas, target_config,
                              target_embedding)
from .context import Context


def check_target_facts(ctx: Context, deep: bool) -> None:
    check_rope_spellings(ctx)
    check_target_rope(ctx)
    check_target_embedding(ctx, deep)


def _target_flags(ctx: Context, target) -> tuple[str, ...]:
    """`--target DIR` for a command, where ctx.command does not name it already (a target found by --deep)."""
    return () if ctx.given_target else ("--target", shlex.quote(str(local_dirs(target)[0])))


def _way_out_layout(ctx: Context) -> str:
    """The layout a conversion that leaves the embedding out writes: the source's, when its engines do without."""
    return ctx.layout.name if not cannot_do_without(ctx.layout.home_engines) else "vllm"


def check_target_embedding(ctx: Context, deep: bool) -> None:
    stored = ctx.tensor("embed_tokens.weight")
    target = ctx.given_target or (ctx.target if deep else None)
    if stored is None or target is None:
        return
    theirs = target_embedding(target)
    compared = compare_tables(stored, theirs) if theirs is not None else None
    if compared is None:  # no local weights, or a dtype not decoded: nothing measured, nothing said
        return
    runners = [r for e in ctx.engines for r in runners_of(e) if r in READINGS]
    name = target.name_or_path or "the target"
    to = _way_out_layout(ctx)
    flags = _target_flags(ctx, target)
    if compared.equal:
        ctx.add("I-EMBED-TARGET-COPY", f"embed_tokens is {name}'s input embedding value for value: every engine "
                f"drafts with these values (vLLM shares the target's when torch.equal holds, SGLang and "
                f"TensorRT-LLM always take it), and the file holds {stored.nbytes / 2**20:.1f} MiB it need not",
                f"`{ctx.command(to, *flags, '--drop-embed', 'identical')}` leaves the copy out",
                where="embed_tokens.weight")
        return
    own = [label(r) for r in runners if drafts_with_stored(r, equal=False)]
    theirs_ = [label(r) for r in runners if not drafts_with_stored(r, equal=False)]
    rows = f"{len(compared.differing)} of {compared.rows} rows"
    split = ""
    if len(compared.differing) < compared.rows and any(r.startswith("vllm") for r in runners):
        split = ("; vLLM with tensor parallelism compares each rank's vocabulary shard alone and mixes both tables "
                 "(vllm #50158: acceptance collapsed)")
    # speculators 0.9.0 (models/eagle3/core.py load_verifier_weights) loads the verifier's table and freezes it
    # unless embed_requires_grad (default false): a config saying false was trained on the target's
    frozen = ("; its config says embed_requires_grad: false, so it was trained on the target's table (speculators "
              "loads the verifier's and freezes it)" if ctx.config.get("embed_requires_grad") is False else "")
    ctx.add("W-EMBED-NOT-TARGET", f"embed_tokens differs from {name}'s input embedding in {rows}: "
            f"{', '.join(own) or 'no engine checked'} draft with the stored table, "
            f"{', '.join(theirs_) or 'no engine checked'} with the target's, so one of them does not draft as "
            f"trained (TorchSpec #38 exported a random table for a drafter trained on the target's){frozen}{split}",
            f"if it was trained on the target's frozen embedding (SpecForge, TorchSpec and speculators freeze it), "
            f"`{ctx.command(to, *flags, '--drop-embed', 'frozen')}` leaves the stray table out; if it trained "
            "its own, serve it with an engine that drafts with the stored table", where="embed_tokens.weight")


def _where(ctx: Context, key: str) -> str:
    return f"$.transformer_layer_config.{key}" if "transformer_layer_config" in ctx.config else f"$.{key}"


def check_rope_spellings(ctx: Context) -> None:
    if ctx.cfg is None:
        return
    spelled = spelled_thetas(ctx.cfg.rope)
    if len(set(spelled.values())) < 2:
        return
    read = engine_rope(ctx.cfg.rope)["rope_theta"]
    said = ", ".join(f"{k} {v:g}" for k, v in spelled.items())
    top = spelled.get("rope_theta")
    older = f"; a transformers-4 reader takes rope_theta {top:g}" if top is not None and top != read else ""
    ctx.add("W-ROPE-SPELLINGS", f"the config spells the RoPE base twice, differently ({said}): vLLM 0.24.0-0.33.0 "
            f"and SGLang 0.5.11-0.5.23 (transformers 5: the rope object's theta first, a rope_scaling object "
            f"replacing rope_parameters) draft at {read:g}{older}",
            f"state the base it was trained at, e.g. `{ctx.command(ctx.layout.name, '--rope-theta', f'{read:g}')}` "
            "(verify's RoPE scan measures which base drafts best)", where=_where(ctx, "rope_theta"))


def check_target_rope(ctx: Context) -> None:
    if ctx.cfg is None or ctx.given_target is None:
        return
    config = target_config(ctx.given_target)
    if config is None or not rope_fields(config):
        return
    mine, theirs = engine_rope(ctx.cfg.rope), engine_rope(rope_fields(config))
    kind = {k: v for k, v in mine.items() if k != "rope_theta"}
    if mine["rope_theta"] == theirs["rope_theta"] and kind == {k: v for k, v in theirs.items() if k != "rope_theta"}:
        return
    name = ctx.given_target.name_or_path or "the target"
    ctx.add("W-ROPE-TARGET", f"the drafter's RoPE (base {mine['rope_theta']:g}, {mine['rope_type']}) is not "
            f"{name}'s (base {theirs['rope_theta']:g}, {theirs['rope_type']}): trainers draft at the target's "
            "positions unless they lost it (speculators' Eagle3 converter dropped rope_scaling, #574; NeMo's "
            "DeepSeek draft fell back to 10000, #2920) or never read it (SpecForge before #270 trained at 10000)",
            f"if it was trained at the target's rope, `{ctx.command(ctx.layout.name, '--rope-theta', 'target')}` "
            "writes it (verify's RoPE scan measures which base drafts best)", where=_where(ctx, "rope_theta"))
