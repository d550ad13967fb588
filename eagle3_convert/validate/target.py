"""`--target`: the verifier's facts, and the checks of the drafter against them."""

from __future__ import annotations

from ..capture_ids import target_family
from ..target_identity import TargetIdentity
from ..json_values import short_repr
from ..targets import load_target
from .context import Context


def load_target_facts(spec: str, revision: str | None = None, *, endpoint: str | None = None,
                      token: str | None = None) -> TargetIdentity:
    """`--target`: a config.json, its directory, or a Hub repo id (its config only): depth, width, vocab, family,
    context, and who it is (targets.load_target: every name it has, its config digest), named as given."""
    identity = load_target(spec, revision, endpoint=endpoint, token=token)
    if identity.name_or_path == spec:
        return identity
    return identity.model_copy(update={"name_or_path": spec}).named_also(identity.name_or_path).serving(
        identity.context_length, identity.uses_mrope)


def check_target(ctx: Context) -> None:
    cfg, target = ctx.cfg, ctx.target
    if target is None:
        return
    name = target.name_or_path or "the target"
    ht = cfg.resolved_target_hidden_size
    if target.hidden_size is not None and target.hidden_size != ht:
        ctx.add("E-TARGET-HIDDEN", f"{name} has hidden_size {target.hidden_size}, but the drafter fuses states "
                f"of width Ht={ht} (fc.weight [H, k*Ht])", "check that the target is the model the drafter was "
                "trained for; a drafter narrower than its target needs target_hidden_size", where="fc.weight")
    if target.vocab_size is not None and target.vocab_size != cfg.vocab_size:
        ctx.add("E-TARGET-VOCAB", f"{name} has vocab_size {target.vocab_size}, the drafter's target vocab is "
                f"V={cfg.vocab_size}", "check that the target is the model the drafter was trained for",
                where="$.vocab_size")
    if cfg.family == "deepseek_mla" and target.model_type and target_family(target.model_type) != "deepseek":
        ctx.add("W-TARGET-FAMILY", f"an MLA drafter (for DeepSeek-V3 / Kimi-K2.5 targets) checked against "
                f"{name}, a {target.model_type} model", "check --target")
    recorded = _verifier_architectures(ctx)
    if recorded and target.architectures and not set(recorded) & set(target.architectures):
        ctx.add("W-TARGET-FAMILY", f"config.json names a verifier of architecture {short_repr(recorded)}, {name} is "
                f"{target.architectures}", "check --target is the model the drafter was trained for",
                where="$.speculators_config.verifier.architectures")
    context = ctx.given_target.context_length if ctx.given_target else None
    mine = cfg.max_position_embeddings
    if context and (mine is None or mine < context):
        ctx.add("W-CONFIG-CONTEXT", f"max_position_embeddings is {mine if mine is not None else 'absent'}, below "
                f"the target's context of {context} tokens: SGLang refuses to start (unless "
                "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1) and drafts degrade past it",
                f"set max_position_embeddings to {context} (rope scaling as trained)",
                where="$.transformer_layer_config.max_position_embeddings" if ctx.speculators_format
                else "$.max_position_embeddings")


def _verifier_architectures(ctx: Context) -> list[str]:
    spec_cfg = ctx.config.get("speculators_config")
    verifier = spec_cfg.get("verifier") if isinstance(spec_cfg, dict) else None
    archs = verifier.get("architectures") if isinstance(verifier, dict) else None
    return [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []
