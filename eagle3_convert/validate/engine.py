"""One engine's reading of the file (its classes, key names, vocab map, capture, fc), and the engine
modules' verdicts on it."""

from __future__ import annotations

from ..converters.layout import to_canonical, to_stored
from ..drafter import expected_shapes, optional_shapes
from ..engines import vllm
from ..engines import (MODULES, REFUSES, SERVING, UNKNOWN, WRONG, TargetContext, releases_of,
                       releases_that_serve, serve_verdicts)
from ..json_values import is_positive_int, short_repr
from ..names import ENGINE_RUNNERS, LABELS, engine_of
from .capture import engine_capture, fc_bypass
from .context import ABSENT, Context
from .profiles import ENGINE_LAYOUT, EngineProfile, engine_profiles
from .vocab import engine_vocab


def check_engine(ctx: Context, p: EngineProfile) -> None:
    cfg, raw = ctx.cfg, ctx.config
    unsupported = p.unsupported(cfg)
    if unsupported and _refuses_loudly(ctx, p.name):
        return  # it never serves the maths it lacks: check_engine_verdicts says the refusal (E-ENGINE-REFUSES)
    for reason in unsupported:
        ctx.add("E-ENGINE-UNSUPPORTED", f"{reason}: it would serve different maths or drop weights",
                _to_vllm(ctx, p.label), engine=p.name)
    if unsupported or not _engine_reads_config(ctx, p):
        return  # the real blocker is said; how this file is spelled for the engine is moot
    if cfg.family in p.families and ctx.raw.complete and ctx.layers_plausible():
        _engine_keys(ctx, p)
    if ctx.raw.complete:
        engine_vocab(ctx, p)
    head = ctx.tensor("lm_head.weight")
    rows = head.shape[0] if head is not None and len(head.shape) == 2 else None
    vd = raw.get("draft_vocab_size", ABSENT)
    if p.name == "sglang" and vd is ABSENT:
        ctx.add("E-CONFIG-DRAFT-VOCAB", "config.json has no draft_vocab_size: SGLang fails to construct the "
                "drafter", f"set draft_vocab_size to {rows or 'the lm_head rows'}", engine=p.name,
                where="$.draft_vocab_size")
    elif not is_positive_int(vd) and rows and rows != cfg.vocab_size:  # a head of no rows: E-SHAPE names it
        ctx.add("E-CONFIG-DRAFT-VOCAB", f"draft_vocab_size is {short_repr(vd)}: {p.label} then sizes the draft head "
                f"for the full vocab V={cfg.vocab_size}, but lm_head.weight has {rows} rows",
                f"set draft_vocab_size to {rows}", engine=p.name, where="$.draft_vocab_size")
    if p.name == "sglang" and "target_hidden_size" in raw and raw["target_hidden_size"] is None:
        ctx.add("E-CONFIG-TARGET-HIDDEN-NULL", "target_hidden_size is null: SGLang checks only that the key "
                "exists and sizes fc from None", "remove the key when Ht == H, or set it to the target's hidden "
                "size", engine=p.name, where="$.target_hidden_size")
    engine_capture(ctx, p)
    fc_bypass(ctx, p)


def _to_vllm(ctx: Context, label: str) -> str:
    return (f"no file makes {label} serve this drafter as trained; serve it with vLLM, which supports every variant: "
            f"`{ctx.command('vllm', '--engine', 'vllm')}`")


def _refuses_loudly(ctx: Context, engine: str) -> bool:
    """Whether every runner of `engine`, at its newest release, refuses this file (the engine modules' reading)."""
    cfg = ctx.cfg.model_copy(update={"capture_boundaries": ctx.intended})
    serves = serve_verdicts(ctx.config, ctx.raw.tensors, cfg, TargetContext(ctx.family, ctx.depth, ctx.mrope),
                            ENGINE_RUNNERS[engine], {})
    return all(v.verdict == REFUSES for v in serves.values())


def check_engine_verdicts(ctx: Context) -> None:
    """The engine modules' verdict on this file, as a last word: an engine that would serve it wrong is
    never left unsaid, even where no finding above names the cause."""
    readers = [r for name in ctx.engines for r in ENGINE_RUNNERS[name]]  # validate_checkpoint refuses other names
    cfg = ctx.cfg.model_copy(update={"capture_boundaries": ctx.intended})
    serves = serve_verdicts(ctx.config, ctx.raw.tensors, cfg, TargetContext(ctx.family, ctx.depth, ctx.mrope), readers,
                            ctx.releases)
    # an engine an error above names; a warning is no verdict (SGLang ignoring ids it does not read captures its
    # defaults: whether they are the trained layers is the verdict's to say when --target is not given)
    said = {f.engine for f in ctx.out if f.severity == "error"}
    if "W-CONFIG-DEFAULTS-DIFFER" in ctx.codes():
        said.add("vllm")  # the absent norm_before_residual: the warning says vLLM reads it otherwise
    said_of_release: set[tuple[str, str]] = set()  # (engine, release) said below: both vLLM runners often agree
    stood_in: set[tuple[str, str]] = set()  # (engine, release) judged by another release's rules, said so
    profiled = engine_profiles()
    cautioned: set[str] = set()
    for reader, verdict in serves.items():
        engine = engine_of(reader)
        newest = releases_of(engine).newest
        if verdict.caveats and verdict.verdict in SERVING and engine not in cautioned:
            cautioned.add(engine)
            hint = ("serve it as the caveat says, or with an engine that reads the file in full: "
                    f"`{ctx.command('vllm', '--engine', 'vllm')}`")
            if vllm.MROPE_CAVEAT in verdict.caveats:  # the engine's own limit: no conversion changes it
                hint = vllm.MROPE_WAY_OUT + ("; the other caveats: serve it as they say" if len(verdict.caveats) > 1
                                             else "")
            ctx.add("W-ENGINE-CAVEAT", "; ".join(verdict.caveats), hint, engine=engine)
        serving = [s for s in verdict.across if s.verdict in SERVING]  # newest first
        for release, judged in verdict.judged or ((verdict.release, verdict),):
            label = LABELS[reader] if release == newest else f"{LABELS[reader]} {release}"
            fix = _engine_fix(ctx, engine, release, newest)
            release_fix = releases_that_serve(engine, release, serving, fix)
            if (engine, release) in said_of_release:
                continue
            if judged.judged_by and (engine, release) not in stood_in:  # once for both vLLM runners
                stood_in.add((engine, release))
                known = releases_of(engine)
                ctx.add("W-ENGINE-RELEASE-UNKNOWN", known.stand_in_why(release), f"name the release this tool "
                        f"models that yours behaves as ({known.modelled()}), or check the verdict on {known.label} "
                        f"{release} itself", engine=engine)
            rules = judged.judged_by or release  # the release whose rules judged it
            unsaid = engine not in said or rules != newest  # the checks above judge the newest release only
            if judged.verdict == WRONG and unsaid:
                ctx.add("E-ENGINE-WRONG", f"{label}: {judged.why}; it would serve this file wrong", release_fix,
                        engine=engine)
                said_of_release.add((engine, release))
            elif judged.verdict == REFUSES and rules != newest:
                ctx.add("E-ENGINE-REFUSES", f"{label} refuses this file: {judged.why}", release_fix, engine=engine)
                said_of_release.add((engine, release))
            elif judged.verdict == REFUSES and unsaid:
                # a refusal no check above names: what only a kind's own rules decide (P-EAGLE's mask token), an
                # engine judged by its module alone (llama.cpp, mlx-vlm, LMDeploy), or one no EngineProfile models
                # (vLLM's of a local verifier path, of a DeepSeek MTP model_type)
                lacks = engine in profiled and profiled[engine].unsupported(ctx.cfg)
                ctx.add("E-ENGINE-REFUSES", f"{LABELS[reader]}: {judged.why}", _to_vllm(ctx, profiled[engine].label)
                        if lacks else fix if cfg.kind == "eagle3" or engine not in profiled else "add the field the "
                        "engine names to a copy of config.json (for P-EAGLE, the mask token the drafter was trained "
                        "with)", engine=engine)
                said_of_release.add((engine, release))
            elif judged.verdict in SERVING and engine not in profiled and unsaid and rules == newest:
                # judged by its module alone: no check above says how it reads a file it serves
                ctx.add("I-ENGINE-READING", f"{LABELS[reader]} {release}: {judged.verdict} ({judged.why})",
                        engine=engine)
            elif judged.verdict == UNKNOWN:
                ctx.add("W-ENGINE-UNKNOWN", f"{LABELS[reader]}: {judged.why}", "judge the file on the engine itself, "
                        "or serve it with an engine whose reading is known (check one with validate --engine)",
                        engine=engine)
        _say_release_disagreement(ctx, reader, verdict)


def _engine_fix(ctx: Context, engine: str, release: str, newest: str) -> str:
    """The conversion that makes `engine` (at `release`) read the file right, named for it: hints.py then offers it only
    where that engine serves what it writes."""
    cfg = ctx.cfg
    if cfg.num_layers > getattr(MODULES[engine], "MAX_LAYERS", cfg.num_layers):
        return (f"no file makes {releases_of(engine).label} serve a {cfg.num_layers}-layer drafter (it builds one "
                f"layer); serve it with vLLM: `{ctx.command('vllm', '--engine', 'vllm')}`")
    layout = ENGINE_LAYOUT[engine]
    if engine in ("mlx-vlm", "lmdeploy"):  # two steps: the conversion, then an edit no command makes
        then = ("add the target's embed_tokens.weight if the drafter stores none" if engine == "mlx-vlm" else
                'set architectures to ["LlamaForCausalLM"], the name LMDeploy\'s docs load')
        return f"write the {layout} layout ({ctx.command(layout)}), then {then}"
    named = engine if release == newest else f"{engine}=={release}"
    fix = f"write the file the engine reads right: `{ctx.command(layout, '--engine', named)}`"
    if engine == "llamacpp":  # or skip its converter (the GGUF holds what the file does: both work, or neither)
        fix += " (or the GGUF itself: eagle3-convert --to gguf --target-gguf TARGET.gguf)"
    return fix


def _say_release_disagreement(ctx: Context, reader: str, verdict) -> None:
    """Where the releases we know read the file differently: one line. Information, not a fault: the release
    judged (named with --engine, else the newest) decides; naming an older one turns its line into a finding."""
    line = verdict.disagreement()
    if line is None:
        return
    engine = engine_of(reader)
    if not any(f.code == "I-ENGINE-RELEASES" and f.engine == engine for f in ctx.out):  # once per engine (runners)
        ctx.add("I-ENGINE-RELEASES", f"{releases_of(engine).label} releases disagree on this file: {line}",
                engine=engine)


def _engine_reads_config(ctx: Context, p: EngineProfile) -> bool:
    cfg = ctx.cfg
    archs = ctx.config.get("architectures") if isinstance(ctx.config.get("architectures"), list) else []
    if ctx.speculators_format:
        problem = None if p.reads_speculators_format else (
            f"{p.label} does not read speculators-format configs (speculators_model_type)")
    elif p.family_from_config is not None:  # the class follows the config, not architectures
        served = p.family_from_config(ctx.config)
        problem = None if served == cfg.family or cfg.family not in p.families else (
            f"{p.label} builds its {served} drafter class for this config, but the config describes a "
            f"{cfg.family} drafter")
    elif p.classes is None:
        problem = f"{p.label} reads only speculators-format configs; this is a flat {ctx.layout.name} config"
    else:
        served = p.served_family(archs)
        problem = None if served == cfg.family else (
            f"architectures {short_repr(archs)} name no {p.label} EAGLE-3 drafter class" if served is None else
            f"architectures {short_repr(archs)} make {p.label} build its {served} drafter class, but the config "
            f"describes a {cfg.family} drafter")
    if problem:
        own_class = next((a for a, fam in (p.classes or {}).items() if fam == cfg.family), None)
        fix = (f"set architectures to [{own_class!r}], the class {p.label} builds for a {cfg.family} drafter"
               if own_class and not ctx.speculators_format and p.classes is not None
               else f"write the config {p.label} reads: `{ctx.command(p.layout)}`")
        ctx.add("E-CONFIG-ARCH", problem, fix, engine=p.name, where="$.architectures")
        return False
    if ctx.speculators_format and "norm_before_residual" not in ctx.config and p.name in ("speculators", "vllm"):
        ctx.add("W-CONFIG-DEFAULTS-DIFFER", "norm_before_residual is absent: vLLM serves a speculators config "
                "without it as true, the speculators library reads it as false (and convert refuses it)",
                "write norm_before_residual into config.json, true or false as the drafter was trained (the "
                "speculators trainer writes true): no conversion can choose it for you",
                where="$.norm_before_residual")
    return True


def _engine_keys(ctx: Context, p: EngineProfile) -> None:
    cfg = ctx.cfg
    expected = {**expected_shapes(cfg), **optional_shapes(cfg)}
    rules = p.rules_for(cfg.family)
    refused: list[str] = []
    for stored, intent in sorted(ctx.intents.items()):
        if intent is None or intent not in expected:
            continue  # unknown or unused: reported once, not per engine (what the engine cannot build: unsupported)
        loaded = to_canonical(stored, rules, cfg.num_layers)
        applied = to_stored(intent, rules, cfg.num_layers)
        if loaded != intent and p.builds_unapplied(cfg, loaded):
            if applied not in ctx.intents:
                ctx.add("E-KEY-UNAPPLIED", f"{p.label} loads tensor {stored!r} ({intent}) into a norm it builds in "
                        f"every layer but never applies in layers >= 1; the norm it applies there, {applied!r}, "
                        "keeps its initial ones", f"store the weight under {applied!r} too (`{ctx.command(p.layout)}` "
                        "writes both names)", engine=p.name, where=stored)
        elif loaded != intent and p.unknown_names_refused and not stored.endswith(".bias"):
            refused.append(stored)  # loud, not a silent drop (engines/vllm.py)
        elif loaded != intent:
            why = (f"it adds `model.` itself, so {stored!r} matches no parameter" if stored.startswith("model.")
                   else f"it has no parameter named {loaded!r}")
            ctx.add("E-KEY-DROPPED", f"{p.label} drops tensor {stored!r} ({intent}) silently: {why}; the weight "
                    "keeps its random initialisation",
                    f"rename it to the name {p.label} loads"
                    + f" ({to_stored(intent, rules, cfg.num_layers)!r})",
                    engine=p.name, where=stored)
    if refused:
        ctx.add("E-KEY-REFUSED", f"{p.label} fails to load this file: its loader raises on {refused[0]!r}, a name that "
                f"matches no parameter (it adds `model.` to every name but lm_head's itself)"
                + (f"; {len(refused) - 1} more such names" if len(refused) > 1 else ""),
                f"store the names {p.label} loads: `{ctx.command(p.layout)}` writes them", engine=p.name,
                where=refused[0])
