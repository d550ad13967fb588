"""convert's options about what the drafter shares with its target: `--drop-embed` and `--rope-theta`.

`--drop-embed identical` leaves out a stored `embed_tokens` that is the target's table value for value (read from
`--target`'s local weights): every engine then drafts with the target's, as vLLM already did with the copy
(`torch.equal`, engines/embedding.py) and SGLang and TensorRT-LLM always do. `--drop-embed frozen` states that the
drafter was trained on the target's frozen embedding (SpecForge, TorchSpec and speculators load and freeze it) and
leaves out whatever table the file holds (TorchSpec #38 exported a random one, which vLLM drafts with). Either is
refused for a layout whose engines do not take the target's embedding when the file has none.

`--rope-theta THETA` (a number, or `target`: the target's rope, scaling included) states the RoPE the drafter was
trained at and writes it in every spelling (`rope_theta` and the rope object), so that no reader picks another.
"""

from __future__ import annotations

from typing import Any

from .converters.layout import ConvertOptions, Layout, WritePlan
from .drafter import Drafter
from .engines.embedding import cannot_do_without
from .errors import RefusalError, UsageError
from .names import LABELS
from .target_weights import compare_tables, engine_rope, rope_fields, spelled_thetas, target_config, target_embedding

EMBED = "embed_tokens.weight"
DROP_CHOICES = ("identical", "frozen")


def plan_with_target_options(layout: Layout, drafter: Drafter, options: ConvertOptions) -> WritePlan:
    """The layout's plan of `drafter`, with the rope restated and the embedding left out as the options say."""
    rope, notes = restated_rope(drafter, options)
    dropped = embedding_to_drop(drafter, options, layout)
    if rope is not None or dropped:  # a copy: the source as read stays as read (hints plan on it again)
        drafter = Drafter(drafter.config if rope is None else drafter.config.model_copy(update={"rope": rope}),
                          {k: v for k, v in drafter.tensors.items() if not (dropped and k == EMBED)}, drafter.vocab,
                          drafter.notes)
    plan = layout.plan(drafter, options)
    plan.dropped = [EMBED] if dropped else []
    plan.notes += notes + ([dropped] if dropped else [])
    return plan


def embedding_to_drop(drafter: Drafter, options: ConvertOptions, layout: Layout) -> str | None:
    """Why the stored embedding is left out (a note), None when it is kept; refused where that changes a drafter."""
    how = options.drop_embed
    if how is None or EMBED not in drafter.tensors:
        return None
    cfg = drafter.config
    if cfg.resolved_target_hidden_size != cfg.hidden_size:
        raise RefusalError(f"--drop-embed: the drafter (hidden {cfg.hidden_size}) is narrower or wider than its target "
                           f"({cfg.resolved_target_hidden_size}): every engine drafts with its own embed_tokens, the "
                           "target's has another width", "keep the embedding", code="E-EMBED-DROP-REFUSED")
    lacking = cannot_do_without(layout.home_engines)
    if lacking:
        runner, does = lacking[0]
        raise RefusalError(f"--drop-embed: the {layout.name} layout is for {LABELS[runner]}, which {does} when a "
                           "drafter stores no embed_tokens", "convert to a layout whose engines take the target's "
                           "embedding (`--to vllm` or `--to sglang`), or keep the embedding",
                           code="E-EMBED-DROP-REFUSED")
    if how == "frozen":
        return "embed_tokens left out (--drop-embed frozen: trained on the target's frozen embedding, which every " \
               "engine then drafts with)"
    theirs = target_embedding(options.target)
    if theirs is None:
        raise UsageError("--drop-embed identical compares the stored embed_tokens with the target's, and no local "
                         "--target holding weights was given", "pass --target DIR, the target model's directory "
                         "with its safetensors weights", code="E-EMBED-NO-TARGET")
    mine = drafter.tensors[EMBED]
    compared = compare_tables(mine, theirs)
    if compared is None or not compared.equal:
        rows = f"{len(compared.differing)} of {compared.rows} rows differ" if compared else \
            f"{list(mine.shape)} {mine.dtype} against the target's {list(theirs.shape)} {theirs.dtype}"
        raise RefusalError(f"--drop-embed identical: embed_tokens is not the target's table ({rows}); vLLM drafts "
                           "with it, SGLang and TensorRT-LLM with the target's", "if it was trained on the target's "
                           "frozen embedding, say so: --drop-embed frozen; else keep it", code="E-EMBED-NOT-TARGET")
    return "embed_tokens left out: it is the target's table value for value (--drop-embed identical), which every " \
           "engine drafts with"


def restated_rope(drafter: Drafter, options: ConvertOptions) -> tuple[dict[str, Any] | None, list[str]]:
    """--rope-theta: the drafter's rope fields rewritten, every spelling saying the one rope stated, and the note."""
    said = options.rope_theta
    if said is None:
        return None, []
    before = engine_rope(drafter.config.rope)
    if said == "target":
        config = target_config(options.target)
        if config is None or not rope_fields(config):
            raise UsageError("--rope-theta target takes the target's rope from --target's config.json, and no local "
                             "--target with rope fields was given", "pass --target DIR (the target model's "
                             "directory), or --rope-theta THETA", code="E-ROPE-NO-TARGET")
        params = engine_rope(rope_fields(config))
    else:
        try:
            theta = float(said)
        except ValueError:
            raise UsageError(f"--rope-theta {said!r} is not a number", "e.g. --rope-theta 500000, or --rope-theta "
                             "target", code="E-USAGE") from None
        if not theta > 1:
            raise UsageError(f"--rope-theta {said} is no RoPE base", "e.g. --rope-theta 500000", code="E-USAGE")
        params = {**before, "rope_theta": theta}
    rope: dict[str, Any] = {"rope_theta": params["rope_theta"], "rope_parameters": dict(params)}
    if params.get("rope_type", "default") != "default":
        rope["rope_scaling"] = {k: v for k, v in params.items() if k != "rope_theta"}
    kept = {k: v for k, v in drafter.config.rope.items() if k not in ("rope_theta", "rope_parameters", "rope_scaling")}
    overwritten = "".join(f"; {key} was {theta:g}" for key, theta in spelled_thetas(drafter.config.rope).items()
                          if theta != params["rope_theta"])
    return {**kept, **rope}, [f"rope restated (--rope-theta {said}): the base the engines read "
                              f"{before['rope_theta']:g} ({before['rope_type']}) -> {params['rope_theta']:g} "
                              f"({params.get('rope_type', 'default')}), in every spelling{overwritten}"]
