"""Capture ids: where the config keeps them, the boundaries they mean, and what each engine captures."""

from __future__ import annotations

from .. import provenance
from ..capture_ids import default_boundaries, depth_defaults, ids_for_engine
from ..converters.layout import ConvertOptions
from ..drafter import DrafterConfig
from ..engines.common import id_list
from ..errors import Eagle3Error, RefusalError
from ..json_values import short_repr
from ..names import BOUNDARY_CONVENTIONS
from .context import IDS_KEY, LOCATIONS, MAX_CAPTURE_IDS, Context
from .findings import Finding, finding, from_error
from .profiles import EngineProfile, engine_profiles


def read_capture_ids(ctx: Context) -> None:
    for location, value in (("top", ctx.config.get(IDS_KEY)), ("nested", ctx.eagle.get(IDS_KEY))):
        if value is None or value == []:  # (absent, null or empty: no ids)
            ctx.ids[location] = None
        elif id_list(value) is None or len(value) > MAX_CAPTURE_IDS:
            ctx.add("E-CAPTURE-FIELD", f"{LOCATIONS[location][2:]} is {short_repr(value)}: not a short list of "
                    "integers", "write the capture ids as a list of integers", where=LOCATIONS[location])
            ctx.ids[location] = None
        else:
            ctx.ids[location] = list(value)


def check_capture(ctx: Context) -> None:
    cfg, home = ctx.cfg, ctx.home
    if cfg.capture == "final":
        return  # fed the target's final state: no capture layers to check (listed ids are unused)
    other = "nested" if home == "top" else "top"
    written, elsewhere = ctx.ids[home], ctx.ids[other]
    if written is not None:
        ctx.intended = ctx.meaning(ctx.layout.engine, written)
        lowest = 0 if ctx.layout.engine in BOUNDARY_CONVENTIONS else -1
        if any(x < lowest for x in written):
            ctx.add("E-CAPTURE-RANGE", f"{LOCATIONS[home][2:]} {written}: an id below {lowest} names no layer "
                    f"in the {ctx.layout.name} convention", "fix the capture ids", where=LOCATIONS[home])
        if len(written) != cfg.num_aux_hidden_states:
            ctx.add("E-CAPTURE-COUNT", f"{LOCATIONS[home][2:]} lists {len(written)} capture ids {written} but "
                    f"fc.weight fuses {cfg.num_aux_hidden_states} states",
                    "the capture id list and the fc width must agree", where=LOCATIONS[home])
    elif elsewhere is None and ctx.depth:
        ctx.intended = default_boundaries(ctx.depth)
    if ctx.intended and ctx.depth:
        outside = [b for b in ctx.intended if not 0 <= b <= ctx.depth]
        if outside:
            ctx.add("E-CAPTURE-RANGE", f"capture boundaries {ctx.intended} include {outside}, outside "
                    f"[0, {ctx.depth}] of the {ctx.depth}-layer target",
                    "check --target is the model the drafter was trained for, and the ids' convention",
                    where=LOCATIONS[home])
    if elsewhere is not None and elsewhere != written:
        _convention_warning(ctx, other, elsewhere)


def _convention_warning(ctx: Context, location: str, ids: list[int]) -> None:
    """A list outside where this layout keeps ids: engines that read it there may mean other layers."""
    ours = ctx.meaning(ctx.layout.engine, ids)
    readers = ("vllm",) if location == "top" else ("sglang",)  # flat configs: SGLang nests, vLLM reads top
    readings = {e: ctx.meaning(e, ids) for e in readers}
    if ctx.intended is not None and all(b is not None and sorted(set(b)) == sorted(set(ctx.intended))
                                        for b in readings.values()):
        return  # the same layers, spelled for the engine that reads them there (as eagle3-convert writes)
    differ = {e: b for e, b in readings.items() if b != ours}
    if not differ:
        return
    who = " and ".join(engine_profiles()[e].label for e in differ)
    theirs = next(iter(differ.values()))
    ctx.add("W-CAPTURE-CONVENTION", f"{LOCATIONS[location][2:]} {ids} is read by {who} as boundaries {theirs}, "
            f"while in the {ctx.layout.name} layout's convention it means boundaries {ours}",
            f"keep one list where the serving engine reads it: move it to {LOCATIONS[ctx.home][2:]} if it "
            f"is in the {ctx.layout.name} convention, or, if the ids are "
            f"{'boundaries' if location == 'top' else 'block outputs'}, convert with "
            f"`{ctx.command(ctx.layout.name, '--from', 'vllm' if location == 'top' else 'sglang')}`",
            where=LOCATIONS[location])


def _misplaced(ctx: Context) -> list[int] | None:
    """The ids the config keeps only outside the place this layout keeps them (None: that place holds some)."""
    return ctx.ids["nested" if ctx.home == "top" else "top"] if ctx.ids[ctx.home] is None else None


def trained_boundaries(ctx: Context) -> list[int] | None:
    """The boundaries the config says the drafter was trained on: its ids where the layout keeps them (or, naming
    none, the engines' default on a target of known depth), else the layout's reading of a list kept elsewhere."""
    misplaced = _misplaced(ctx)
    if ctx.intended is None and misplaced:
        return ctx.meaning(ctx.layout.engine, misplaced)
    return ctx.intended


def engine_capture(ctx: Context, p: EngineProfile) -> None:
    """What engine `p` captures against what the drafter was trained on: the ids it reads (or its default, or its
    runtime argument), then each disagreement with the trained boundaries as one finding."""
    if ctx.cfg.capture == "final":
        return  # the head is fed the target's final state: the engines' verdicts say who feeds it so
    truth = trained_boundaries(ctx)
    misplaced = _misplaced(ctx)
    # The layout's reader refuses a list outside its place unless --capture-layers says how it counts.
    settle = ("--capture-layers", ",".join(map(str, misplaced)), "--convention", ctx.layout.engine) \
        if misplaced else ()
    convert = f"`{ctx.command(p.layout, *settle)}`"
    default = depth_defaults(ctx.depth)
    if p.ids_from is None:
        _runtime_capture(ctx, p, truth or default)
        return
    read = ctx.ids[p.ids_from]
    if read is None:
        captured = default
        _default_capture(ctx, p, truth, default, convert)
    else:
        captured = ctx.meaning(p.name, read)
        if captured is None:
            _nothing_captured(ctx, p, read)
            return
    if truth is None or any(b < 0 or (ctx.depth and b > ctx.depth) for b in truth):
        return  # unknown, or outside the target: E-CAPTURE-RANGE says so once
    try:
        ids_for_engine(p.name, truth, ctx.family, ctx.depth)
    except RefusalError as exc:
        ctx.out.append(from_error(exc, where=LOCATIONS[ctx.home], engine=p.name))
        return
    if captured is not None and sorted(set(captured)) != sorted(set(truth)):
        _capture_mismatch(ctx, p, truth, captured, read, convert)


def _runtime_capture(ctx: Context, p: EngineProfile, wanted: list[int] | None) -> None:
    """An engine that takes the capture layers from its runtime argument: the ids to give it, if known."""
    if wanted is None:
        ctx.add("I-CAPTURE-RUNTIME", f"{p.label} takes the capture layers from its runtime argument, not "
                "config.json; pass --target to learn which ids to give it", engine=p.name)
        return
    try:
        ids = ids_for_engine(p.name, wanted, ctx.family, ctx.depth)
    except RefusalError as exc:
        ctx.out.append(from_error(exc, where=LOCATIONS[ctx.home], engine=p.name))
        return
    ctx.add("I-CAPTURE-RUNTIME", f"{p.label} takes the capture layers from its runtime argument, not "
            f"config.json: pass ids {ids} (block outputs) to capture boundaries {wanted}", engine=p.name)


def _default_capture(ctx: Context, p: EngineProfile, truth: list[int] | None, default: list[int] | None,
                     convert: str) -> None:
    """No ids where `p` reads them: it captures its defaults, ignoring a list kept elsewhere."""
    shown = f"{default}" if default else "{2, L//2, L-3}"
    placed = [loc for loc, ids in ctx.ids.items() if ids is not None]
    if placed:
        loc = placed[0]
        coincide = f", which here equals the {ctx.layout.name} reading {truth}" if (
            truth and sorted(truth) == sorted(default or [])) else ""
        # Converting helps only when the layout's own reader understands where the ids are.
        fix = f"{convert} writes them there"
        if p.name == "vllm" and loc == "nested":
            # One rule for the V1 runner, whatever the depth or layer count: its fallback reads the nested
            # list as boundaries (gpu_model_runner._get_eagle3_aux_layers_from_config); other layers than the
            # trained ones are an error, the V2 runner's defaults below a warning unless --target shows them wrong.
            v1 = ctx.meaning("vllm", ctx.ids[loc])
            coincide += (f" (its V1 runner instead falls back to that list, read as boundaries {v1})" if v1 is not None
                         else " (its V1 runner instead falls back to that list, which names no boundaries it "
                              "reads: what it captures then is not established)")
            if truth and v1 is not None and sorted(set(v1)) != sorted(set(truth)):
                ctx.add("E-CAPTURE-MISMATCH", f"vLLM's V1 runner falls back to {LOCATIONS[loc][2:]} "
                        f"{ctx.ids[loc]} and reads it as boundaries {v1}, but the drafter was trained on "
                        f"boundaries {truth}", f"write the ids where vLLM reads them: {fix}", engine=p.name,
                        where=LOCATIONS[loc])
        ctx.add("W-CAPTURE-IDS-IGNORED", f"{p.label} reads capture ids only from "
                f"{LOCATIONS[p.ids_from][2:]}: it ignores {LOCATIONS[loc][2:]} {ctx.ids[loc]} and captures "
                f"its default boundaries {shown}{coincide}",
                f"write the ids where {p.label} reads them: {fix}",
                engine=p.name, where=LOCATIONS[loc])
    else:
        ctx.add("I-CAPTURE-DEFAULT", f"config.json names no capture ids: {p.label} captures its default "
                f"boundaries {shown}", engine=p.name)
    if ctx.cfg.num_aux_hidden_states != 3:
        ctx.add("E-CAPTURE-COUNT", f"{p.label} captures its 3 default states but fc.weight fuses "
                f"{ctx.cfg.num_aux_hidden_states}", f"write the capture ids the drafter was trained with where "
                f"{p.label} reads them", engine=p.name, where="fc.weight")


def _nothing_captured(ctx: Context, p: EngineProfile, read: list[int]) -> None:
    """The ids `p` reads name no layer in its convention, or none it can capture on this target's family."""
    lowest = 0 if p.name in BOUNDARY_CONVENTIONS else -1
    if any(x < lowest for x in read):
        ctx.add("E-CAPTURE-RANGE", f"{p.label} reads {LOCATIONS[p.ids_from][2:]} {read}: an id below "
                f"{lowest} names no layer in its convention", "fix the capture ids", engine=p.name,
                where=LOCATIONS[p.ids_from])
    else:
        ctx.add("E-CAPTURE-UNREACHABLE", f"{p.label} reads {LOCATIONS[p.ids_from][2:]} {read} and captures "
                f"nothing for some of them on a {ctx.family}-family target (-1 names no layer there)",
                "retrain on capturable layers, or serve the drafter with vLLM", engine=p.name,
                where=LOCATIONS[p.ids_from])


def _capture_mismatch(ctx: Context, p: EngineProfile, truth: list[int], captured: list[int],
                      read: list[int] | None, convert: str) -> None:
    where = LOCATIONS[p.ids_from] if read is not None else LOCATIONS[ctx.home]
    how = (f"reads {LOCATIONS[p.ids_from][2:]} {read} as boundaries {captured}" if read is not None
           else f"captures its default boundaries {captured}")
    if 0 in truth and 0 not in captured:
        ctx.add("E-CAPTURE-EMBEDDING", f"the drafter was trained with the embedding output (boundary 0) among "
                f"its taps {truth}, but {p.label} {how}: the embedding tap is replaced by a block output",
                f"{convert} writes ids {p.label} reads as {truth}"
                + (" (SGLang captures the embedding with id -1)" if p.name == "sglang" else ""),
                engine=p.name, where=where)
    else:
        ctx.add("E-CAPTURE-MISMATCH", f"{p.label} {how}, but the drafter was trained on boundaries {truth}",
                f"{convert} writes ids {p.label} reads as {truth}", engine=p.name, where=where)


def fc_bypass(ctx: Context, p: EngineProfile) -> None:
    cfg = ctx.cfg
    k, ht, h = cfg.num_aux_hidden_states, cfg.resolved_target_hidden_size, cfg.hidden_size
    if cfg.capture == "final":
        return  # no fc: the flag false is the trained maths (converters/final_state.py); the verdicts judge it
    if p.name in ("sglang", "vllm") and ctx.eagle.get("use_aux_hidden_state", True) is False:
        # only over an fc.weight (without one the head is read as fed the final state): that fc is trained
        ctx.add("E-CAPTURE-FC-BYPASSED", f"eagle_config.use_aux_hidden_state is false: {p.label} passes the "
                f"target's last hidden state alone and never applies fc.weight [{h}, {k * ht}]",
                "set eagle_config.use_aux_hidden_state to true (an EAGLE-3 drafter fuses captured states)",
                engine=p.name, where="$.eagle_config.use_aux_hidden_state")
    elif p.fc_skipped_when_width_matches and k * ht == h:
        ctx.add("E-CAPTURE-FC-BYPASSED", f"fc.weight fuses k={k} states of width Ht={ht} and k*Ht == H={h}: "
                f"{p.label} applies fc only when the incoming width differs from H, so the trained fc is "
                "silently skipped", "serve this drafter with vLLM: "
                f"`{ctx.command('vllm')}`", engine=p.name, where="fc.weight")


def check_capture_record(intended: list[int] | None, recorded: list[int], label: str,
                         where: str | None = None, hint: str | None = None, names_none: bool = False) -> list[Finding]:
    """A config whose capture layers are not those the drafter was trained on, as `label` (the sidecar, the
    registry) records them. `names_none`: the config names no ids, and `intended` is its engines' default."""
    if intended is None or sorted(set(intended)) == sorted(set(recorded)):
        return []
    captures = (f"config.json names no capture ids, so its engines capture their default boundaries {intended}"
                if names_none else f"the config captures boundaries {intended}")
    if 0 in recorded and 0 not in intended:
        return [finding("E-CAPTURE-EMBEDDING", f"{label} says the drafter was trained with the embedding output "
                        f"(boundary 0) among its taps {recorded}, but {captures.replace('the config', 'config.json')}",
                        hint or "rewrite the ids from the record: block-output engines (SGLang) capture the embedding "
                        "with id -1", where=where)]
    return [finding("E-CAPTURE-RECORD", f"{captures}, {label} says the drafter was trained on {recorded}",
                    hint or "convert again from the trained checkpoint, or fix the ids to the record", where=where)]


def check_known(ctx: Context, known: list[provenance.Known]) -> None:
    """config.json against each thing we know of these weights (the sidecar, the registry's record): capture
    layers, target, vocabulary, widths, norm flags. With or without --target: the record names the target."""
    names_ids = any(ids is not None for ids in ctx.ids.values())
    # A list kept where the layout does not read it is held against the record in the layout's reading, as
    # engine_capture judges the engines by it: a misplaced list the record contradicts must not pass as OK.
    mine, misplaced = trained_boundaries(ctx), _misplaced(ctx)
    where = LOCATIONS[ctx.home if misplaced is None else "nested" if ctx.home == "top" else "top"]
    reading = _reader_config(ctx)
    known = provenance.with_names_learned(list(known))
    for k in known:
        if not names_ids or mine is not None:  # ids that name no boundaries cannot be compared
            clash = provenance.capture_contradiction(mine, k, ctx.depth)
            if clash is not None:
                way_out = _capture_way_out(ctx, clash, names_ids, misplaced is not None)
                ctx.extend(check_capture_record(clash[0], clash[1], k.label, where, way_out,
                                                names_none=not names_ids))
        if reading is None:
            continue
        given = ctx.given_target
        for found in provenance.fact_contradictions(reading, provenance.verifier_named(ctx.config), given, k):
            ctx.add(_CODE[found.severity], found.message, provenance.way_out(found, ctx.src_args), where=found.where)
    beside = [k for k in known if not k.in_registry]
    for record in (k for k in known if k.in_registry):
        for found in (c for side in beside for c in provenance.record_contradictions(side, record)):
            ctx.add(_CODE[found.severity], found.message, provenance.way_out(found, ctx.src_args))


_CODE = {"error": "E-RECORD-CONFLICT", "warning": "W-TARGET-UNTOLD"}


def _capture_way_out(ctx: Context, clash: tuple[list[int], list[int]], names_ids: bool, misplaced: bool) -> str:
    mine, theirs = clash
    if not names_ids:
        return f"`{ctx.command(ctx.layout.name)}` restores them from the record"
    if misplaced:  # moved first: the layout's reader takes a list kept there only with --capture-layers, or never
        return (f"keep one list, at {LOCATIONS[ctx.home][2:]} where the {ctx.layout.name} layout reads it: the "
                f"recorded boundaries {theirs} in its convention, or config.json's {mine} if those are the trained ones")
    spelled = ",".join(map(str, theirs))
    return (f"`{ctx.command(ctx.layout.name, '--capture-layers', spelled, '--convention', 'boundary')}` writes the "
            "recorded layers")


def _reader_config(ctx: Context) -> DrafterConfig | None:
    """The layout reader's config (the flags as that layout means them); None when it refuses the file (the
    other findings say why)."""
    try:
        return ctx.raw.checkpoint().read_as(ctx.layout, ConvertOptions(target=ctx.target)).config
    except (Eagle3Error, ValueError):
        return None
