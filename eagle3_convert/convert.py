"""read -> check -> write: the conversion pipeline and its Python API."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from pydantic import ValidationError

from . import provenance, sidecar
from .atomic import force_replaces, json_bytes, write_directory
from .converters.base import (
    Checkpoint,
    ConvertOptions,
    Detection,
    WritePlan,
    load_checkpoint,
    model_refusal,
)
from .capture_ids import capture_context, default_boundaries, ids_for_engine, target_family, training_boundaries
from .converters.final_state import fused, refuse_capture_mode
from .converters.layout import drafter_kind, refuse_other_kind
from .converters.registry import detect, get_layout, judge_explicit_from, plan_layout
from .drafter import BLOCK_KINDS, MATH_FLAGS, Drafter, DrafterConfig
from .target_identity import TargetIdentity, compare
from .engines import (REFUSES, SERVING, WRONG, Verdict, releases_of, releases_that_serve, serve_verdicts,
                      target_context)
from .errors import Eagle3Error, FormatError, RefusalError, UsageError
from .fingerprint import config_and_weights_id, drafter_id, tensor_digests
from .names import LABELS
from .sources import resolve_source
from .target_options import plan_with_target_options
from .targets import load_target, read_target_config


@dataclass
class Source:
    """A drafter read from a directory or Hub repo, with how its layout was decided."""

    drafter: Drafter
    detection: Detection
    path: Path
    uri: str  # the local path, or hf://org/name@commit
    commit: str | None = None
    sidecar: dict | None = None  # eagle3-convert.json, when it was written with this config.json
    stored_config: dict | None = None  # config.json as stored, and the stored tensor names: what engines read
    stored_names: list[str] = field(default_factory=list)
    # what the sidecar says of these weights, even when config.json was edited since it was written
    known: provenance.Known | None = None


@dataclass
class ConvertResult:
    source: Source
    dest: Path
    layout: str
    files: list[str]
    plan: WritePlan
    notes: list[str] = field(default_factory=list)
    drafter_id: str = ""
    facts: dict = field(default_factory=dict)  # what the sidecar records
    serves: dict[str, Verdict] = field(default_factory=dict)  # each engine's verdict on the output
    replaced: list[str] = field(default_factory=list)  # the files of DST that --force replaced
    source_id: str = ""  # the source's drafter id: drafter_id unless the output is a cast (facts["derived_from"])
    former_ids: list[str] = field(default_factory=list)  # the source's id before ids were its weights alone


def resolve_verifier(spec: str | None, target: TargetIdentity | None) -> TargetIdentity | None:
    """`--verifier`: the name the target is served by (a local copy: read); with `--target`, one target by the user's
    word (`--verifier ORG/NAME --target DIR`), unless their facts disagree."""
    if spec is None:
        return None
    local = Path(spec)
    if local.is_dir() and (local / "config.json").is_file() or local.is_file():
        # named as the repo its config says it came from, else by its resolved path (targets.load_target); a path
        # is served through --speculative-config only (engines/vllm.py SHORTCUT_REFUSES says how)
        verifier = load_target(spec)
    elif spec.startswith((".", "/", "~")):  # written as given, a path that is nowhere would name no model at all
        raise FormatError(f"--verifier {spec}: no such directory, and no Hub repo id (ORG/NAME)",
                          "pass the target's Hub repo id, or the directory that holds its config.json",
                          code="E-TARGET-MISSING")
    else:
        verifier = TargetIdentity(name_or_path=spec)
    if target is None:
        return verifier
    found = compare(verifier, target)
    if found.verdict == "differ":
        raise UsageError(f"--verifier {spec} and --target name two different models ({found.said()})",
                         "pass the target the drafter was trained on to both, or --verifier alone")
    return verifier.joined(target)  # one target: the --verifier name serves it, --target's facts and names are its own


def make_options(verifier: str | None = None, target: str | None = None, repair_d2t_absolute: bool = False, *,
                 endpoint: str | None = None, token: str | None = None) -> ConvertOptions:
    """Options from CLI-style strings; a --target given as a Hub repo id is fetched (config.json only)."""
    target_identity = load_target(target, endpoint=endpoint, token=token) if target else None
    return ConvertOptions(verifier=resolve_verifier(verifier, target_identity), target=target_identity,
                          repair_d2t_absolute=repair_d2t_absolute)


def state_capture(options: ConvertOptions, ids: list[int] | None, convention: str | None) -> None:
    """--capture-layers IDS --convention C: the boundaries the training used, read for the target in
    `options`; they fill a config that lost its ids and settle an ambiguous or conflicting list."""
    if (ids is None) != (convention is None):
        raise UsageError("--capture-layers and --convention go together",
                         "e.g. --capture-layers 1,15,28 --convention specforge")
    if ids is None:
        return
    target = options.target
    boundaries = training_boundaries(ids, convention, family=target_family(target.model_type if target else None),
                                     num_layers=target.num_hidden_layers if target else None)
    options.training_capture = (boundaries, f"--capture-layers ({convention} ids {ids})")
    options.capture_stated = True


def read_source(src: str, from_layout: str = "auto", options: ConvertOptions | None = None,
                revision: str | None = None, endpoint: str | None = None, token: str | None = None,
                load: Callable[[Path], Checkpoint] = load_checkpoint) -> Source:
    """SRC read into the canonical drafter (`load`: a caller that reads SRC more than once keeps what it loaded,
    with what was read of it: its detection, its vocab map)."""
    options = options or ConvertOptions()
    path, commit = resolve_source(src, revision, endpoint=endpoint, token=token)
    ckpt = load(path)
    if from_layout == "auto":
        detection = detect(ckpt)
    else:
        layout = get_layout(from_layout)
        detection = Detection(layout.name, True, "given with --from")

    try:
        drafter = ckpt.read_as(get_layout(detection.layout), options)
    except Eagle3Error as exc:
        if from_layout != "auto":
            raise judge_explicit_from(ckpt, detection.layout, options, error=exc) or exc from None
        raise
    except ValidationError as exc:  # a config value of the wrong type reached the canonical model
        raise model_refusal(exc)[1] from None
    if from_layout != "auto":
        problem = judge_explicit_from(ckpt, detection.layout, options, drafter=drafter)
        if problem is not None:
            raise problem
    uri = f"hf://{src}@{commit}" if commit else str(path.resolve())
    return Source(drafter, detection, path, uri, commit, ckpt.sidecar, ckpt.config, list(ckpt.tensors),
                  provenance.sidecar_known(path, ckpt.sidecar))


def apply_training_capture(drafter: Drafter, options: ConvertOptions, beside: provenance.Known | None = None
                           ) -> None:
    """The capture layers known from training against config.json's. What is known: --capture-layers
    (options.training_capture, stated), the registry's record (options.known) and the sidecar (`beside`).

    A record fills a config that names none (SpecForge's export drops them), and says so. A config that
    names other layers than a record is refused, never overridden in silence. --capture-layers stating the
    record's layers writes them (the output's sidecar and lineage keep the restatement); stating others than
    a record is refused unless --correct-record says the record is being corrected (its history keeps the
    change); stating others than config.json with no record to agree with is refused."""
    cfg = drafter.config
    known = [*options.known, *([beside] if beside is not None else [])]
    depth = capture_context(cfg.family, options.target, cfg.target)[1] or next(
        (k.depth for k in known if k.depth), None)
    written = cfg.capture_boundaries
    if options.training_capture is not None and options.capture_stated:
        boundaries, said_by = options.training_capture
        differs = written is not None and sorted(set(written)) != sorted(set(boundaries))
        contradicted = [k for k in known if provenance.capture_contradiction(boundaries, k, depth)]
        if contradicted and not options.correct_record:  # the record changes only when the user says so
            record = contradicted[0].boundaries(depth)
            raise RefusalError(f"{said_by} says the drafter was trained on boundaries {boundaries} but "
                               f"{contradicted[0].label} says {record}",
                               f"`--capture-layers {','.join(map(str, record))} --convention boundary` writes the "
                               "recorded layers", code="E-CAPTURE-RECORD")
        if differs and not contradicted and not any(
                sorted(set(k.boundaries(depth) or [])) == sorted(set(boundaries)) for k in known):
            raise RefusalError(f"config.json captures boundaries {written} but {said_by} says the drafter was trained "
                               f"on {boundaries}", "drop --capture-layers if config.json is right (it already names "
                               "the layers); if it is wrong, fix the ids in a copy of config.json and convert that",
                               code="E-CAPTURE-RECORD")
        overruled = [f"{written} of config.json"] * differs + [f"{k.boundaries(depth)} of {k.label}" for k in contradicted]
        options.capture_restated = overruled
        if overruled:
            drafter.notes.append(f"{said_by} states the capture layers as boundaries {boundaries}, "
                                 f"{'correcting' if contradicted else 'overruling'} {' and '.join(overruled)}: the "
                                 "output's sidecar and lineage keep the restatement"
                                 + (", the registry's record its history" if contradicted else ""))
        _take_capture(drafter, boundaries, said_by, depth, replace=differs)
        return
    for k in known:
        if written is None and k.capture_boundaries is not None:
            # the config names none: the record's layers are restored (unless the engine default is exactly them)
            _take_capture(drafter, list(k.capture_boundaries), k.label, depth)
            written = drafter.config.capture_boundaries
        clash = provenance.capture_contradiction(written, k, depth)
        if clash is None:
            continue
        mine, theirs = clash
        raise RefusalError(
            f"config.json captures boundaries {mine} but {k.label} says the drafter was trained on {theirs}",
            f"`--capture-layers {','.join(map(str, theirs))} --convention boundary` writes the recorded layers",
            code="E-CAPTURE-RECORD")


def _take_capture(drafter: Drafter, boundaries: list[int], said_by: str, depth: int | None, replace: bool = False
                  ) -> None:
    cfg = drafter.config
    if cfg.capture_boundaries == boundaries:
        return
    if not replace and depth is not None and boundaries == default_boundaries(depth):
        return  # the engine default already captures exactly these
    if len(boundaries) != cfg.num_aux_hidden_states or cfg.capture == "final":
        raise RefusalError(f"{said_by} names {len(boundaries)} capture layers but {fused(cfg)}",
                           "check the capture layers given", code="E-CAPTURE-COUNT")
    drafter.config = cfg.model_copy(update={"capture_boundaries": list(boundaries)})
    if not replace:
        drafter.notes.append(f"capture layers {boundaries} taken from {said_by}: config.json names none")


def restore_target(source: Source, options: ConvertOptions) -> None:
    """The target the records name, where config.json names none (or less): a fact an edited config (or a layout
    with no place for it) lost, restored and said so (unless --verifier names it: the file names it so)."""
    cfg = source.drafter.config
    for k in [*options.known, *([source.known] if source.known is not None else [])]:
        merged = TargetIdentity.merged(cfg.target, k.target)
        if merged is not None and merged != cfg.target:
            if k.target and k.target.name_or_path and not (cfg.target and cfg.target.name_or_path) and \
                    options.verifier is None:
                source.drafter.notes.append(f"target {k.target.name_or_path} taken from {k.label}")
            cfg = cfg.model_copy(update={"target": merged})
    source.drafter.config = cfg


def command_target(cfg: DrafterConfig, options: ConvertOptions) -> TargetIdentity | None:
    """Who a conversion (or `registry add`) records the target as: --verifier (one with --target if given), else the
    config's name one with --target (--target alone where their facts differ: never a mix), else --target."""
    named = cfg.target if cfg.target is not None and cfg.target.name_or_path else None
    if options.verifier is not None or named is None or options.target is None:
        return options.verifier or named or TargetIdentity.merged(options.target, cfg.target)
    return named.joined(options.target) if compare(named, options.target).verdict != "differ" else options.target


def check_known_facts(source: Source, options: ConvertOptions) -> None:
    """The target, vocabulary, widths and norm flags the records of these weights hold, against config.json: a
    contradiction is refused (E-RECORD-CONFLICT), a target name no fact ties or parts said (W-TARGET-UNTOLD)."""
    named, named_by = (options.verifier, "--verifier") if options.verifier is not None else (
        provenance.verifier_named(source.stored_config), "config.json")
    # SRC as a command takes it (a Hub copy: its repo at the commit read)
    src = shlex.quote(str(source.path)) if source.commit is None else source.uri[5:].replace("@", " --revision ", 1)
    for k in provenance.with_names_learned([*options.known, *([source.known] if source.known is not None else [])]):
        found = provenance.fact_contradictions(source.drafter.config, named, options.target, k, named_by)
        errors = [c for c in found if c.severity == "error"]
        if errors:
            raise RefusalError(errors[0].message, provenance.way_out(errors[0], src), code="E-RECORD-CONFLICT")
        said = " ".join(source.drafter.notes)
        source.drafter.notes += [f"WARNING: {c.message} [W-TARGET-UNTOLD]; {provenance.way_out(c, src)}" for c in found
                                 if c.message not in said]


def sidecar_facts(drafter: Drafter, options: ConvertOptions, source: Source | None, dest_layout: str | None = None,
                  trained_with: str | None = None) -> dict:
    cfg = drafter.config
    # Who the target is (name, revision), completed with what its config says (depth, width, family).
    target = TargetIdentity.merged(TargetIdentity.merged(command_target(cfg, options), options.target), cfg.target)
    for known in [*options.known, *([source.known] if source is not None and source.known else [])]:
        target = TargetIdentity.merged(target, known.target)  # what the records knew of it fills the gaps
    written_by = [name for name in (source.detection.layout if source else None, dest_layout) if name]
    facts = {
        "target": target.model_dump() if target else None,
        "capture_boundaries": cfg.capture_boundaries,
        "ids_as_written": ids_as_written(cfg, options, written_by),
        "num_aux_hidden_states": cfg.num_aux_hidden_states,
        "hidden_size": cfg.hidden_size,
        "draft_vocab_size": cfg.draft_vocab_size,
        "vocab_size": cfg.vocab_size,
        "drafter_kind": cfg.kind, "quantization": cfg.quantization.model_dump() if cfg.quantization else None,
        "flags": {f: getattr(cfg, f) for f in MATH_FLAGS},
        "layout_extra": cfg.layout_extra,
        "trained_with": trained_with,  # free-form provenance: trainer, data, run
        "lineage": [],  # conversions that led here, oldest first (see conversion_edge)
    }
    if source is not None:
        facts["converted_from"] = {"layout": source.detection.layout, "uri": source.uri}
    return facts


def ids_as_written(cfg: DrafterConfig, options: ConvertOptions, layout_names: list[str]) -> dict[str, list[int]]:
    """The capture ids each layout's config spells for the drafter's boundaries; none for the engine default."""
    if cfg.capture_boundaries is None:
        return {}
    family, depth = capture_context(cfg.family, options.target, cfg.target)  # as the layouts' writers do
    written = {}
    for name in layout_names:
        try:
            written[name] = ids_for_engine(get_layout(name).engine, cfg.capture_boundaries, family, depth)
        except RefusalError:
            continue  # this layout cannot spell them, so it wrote none
    return written


def conversion_edge(source: Source, dest_layout: str, dest: Path, derived_from: str | None = None,
                    restated: bool = False) -> dict:
    """One lineage edge: `dest` written from `source` by this tool (a registry LineageEdge, as JSON); a cast
    (`derived_from`: the source's drafter id) when `dest` holds other bytes than the source; a restatement when
    --capture-layers overruled what config.json or a record said."""
    return {"source": {"layout": source.detection.layout, "uri": source.uri},
            "dest": {"layout": dest_layout, "uri": str(Path(dest).resolve())},
            "tool": sidecar.tool_name(), "created_at": datetime.now(timezone.utc).isoformat(timespec="microseconds"),
            "kind": "cast" if derived_from else "restate" if restated else "convert", "derived_from": derived_from}


def carry_history(facts: dict, previous: dict | None, same: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """Hand on what an earlier sidecar of this same drafter knew: provenance, lineage, ids as written.

    `facts` must hold its drafter_id; `same` names the other ids the sidecar may know these weights by (their
    id before ids were the weights alone; the source of a cast). Returns notes on what could not be handed on.
    """
    if not previous:
        return []
    if previous.get("drafter_id") not in {facts["drafter_id"], *same}:
        # The weights changed since that sidecar was written: its history is another drafter's.
        return ["eagle3-convert.json describes another drafter (its drafter_id does not match these weights): "
                "its provenance and lineage were not carried over"]
    if not facts.get("trained_with") and isinstance(previous.get("trained_with"), str):
        facts["trained_with"] = previous["trained_with"]
    if isinstance(previous.get("ids_as_written"), dict) and \
            previous.get("capture_boundaries") == facts.get("capture_boundaries"):  # spellings of these layers
        spelled = {layout: ids for layout, ids in previous["ids_as_written"].items()
                   if isinstance(ids, list) and all(type(x) is int for x in ids)}
        facts["ids_as_written"] = {**spelled, **facts["ids_as_written"]}
    if isinstance(previous.get("lineage"), list):
        facts["lineage"] = [edge for edge in previous["lineage"] if isinstance(edge, dict)] + facts["lineage"]
    return []


def convert(src: str, dest: str | Path, to: str, from_layout: str = "auto", *,
            options: ConvertOptions | None = None, revision: str | None = None, force: bool = False,
            max_shard_bytes: int | None = None, endpoint: str | None = None, token: str | None = None,
            progress: Callable[[int], Callable[[int], None]] | None = None,
            on_source: Callable[[Source], None] | None = None, trained_with: str | None = None,
            registry_lookup: Callable[[Source], dict | None] | None = None) -> ConvertResult:
    """Convert the drafter at `src` (directory or Hub repo id) into layout `to` at `dest`.

    Writes `dest` and nothing else: it neither records in the registry (records.record_conversion does, as
    the CLI does after every conversion) nor reads it: `registry_lookup(source)`, called once SRC is read, puts
    the registry's record of its weights into options.known (config.json is checked against it, as against the
    sidecar beside SRC) and returns the capture layers it states (a registry.RegistryFact as a dict), which the
    sidecar keeps as `from_registry` when they were used.
    """
    options = options or ConvertOptions()
    layout = get_layout(to)
    source = read_source(src, from_layout, options, revision, endpoint, token)
    if on_source:
        on_source(source)
    registry_facts = registry_lookup(source) if registry_lookup else None
    as_read = source.drafter.config.capture_boundaries
    plan, serves = plan_conversion(source, layout.name, options)
    on_progress = progress(total_bytes(plan)) if progress else None
    facts = sidecar_facts(source.drafter, options, source, layout.name, trained_with)
    if registry_facts and as_read is None and source.drafter.config.capture_boundaries is not None:
        facts["from_registry"] = registry_facts  # what the file did not say and the registry did
    if options.capture_restated:
        facts["capture_restated"] = {"boundaries": source.drafter.config.capture_boundaries,
                                     "by": options.training_capture[1] if options.training_capture else None,
                                     "overruled": options.capture_restated,
                                     "corrects_record": options.correct_record}
    history_notes: list[str] = []
    ids: dict[str, str] = {}
    # the sidecar's history is handed on when it describes these weights, even over an edited config.json
    previous = source.sidecar or (sidecar.read(source.path)[0] if source.known is not None else None)
    if plan.derived_keys:
        facts["derived_config_keys"] = plan.derived_keys
    # Hash the source while the kernel copies it: the id costs no extra wall time on 2+ cores.
    from concurrent.futures import ThreadPoolExecutor  # (with logging and queue: inspect and validate need none)

    with ThreadPoolExecutor(max_workers=1) as pool:
        digests = pool.submit(tensor_digests, source.drafter, min(2, os.cpu_count() or 1))

        def sidecar_files() -> dict[str, bytes]:
            ids["source"] = drafter_id(source.drafter, digests.result())
            ids["former"] = config_and_weights_id(source.drafter, digests.result())
            refuse_other_weights_record(options.known, ids["source"], ids["former"])
            derived_from = None
            facts["drafter_id"] = ids["source"]
            if plan.derivation:  # the output holds other bytes: a new drafter, derived from the source
                cast = plan.written(source.drafter)
                facts["drafter_id"] = drafter_id(cast, tensor_digests(cast))
                derived_from = facts["derived_from"] = ids["source"]
            history_notes[:] = carry_history(facts, previous, {ids["source"], ids["former"]})
            if derived_from:
                history_notes.append(f"{plan.derivation}: a new drafter {facts['drafter_id'][:12]}, "
                                     f"derived from {derived_from[:12]} (lineage: cast)")
            facts["lineage"].append(conversion_edge(source, layout.name, Path(dest), derived_from,
                                                    restated=bool(options.capture_restated)))
            return {sidecar.SIDECAR_NAME: sidecar.build(layout=layout.name, config_bytes=json_bytes(plan.config),
                                                        facts=facts)}

        replaced = force_replaces(Path(dest)) if force else []  # write_directory refuses if anything else is there
        files = write_directory(Path(dest), plan.config, plan.tensors, sidecar_files,
                                src=source.path if not source.commit else None, force=force,
                                max_shard_bytes=max_shard_bytes, on_progress=on_progress, writer=plan.writer)
    return ConvertResult(source, Path(dest), layout.name, files, plan,
                         source.drafter.notes + plan.notes + history_notes, facts["drafter_id"], facts, serves, replaced,
                         ids["source"], [ids["former"]])


def refuse_other_weights_record(known: list[provenance.Known], *ids: str) -> None:
    """A record found by a sample of the weights (fingerprint.weights_key) or by where it was recorded must be of
    exactly these weights: checked once every byte is hashed, before DST appears."""
    for k in known:  # (a record `registry sync` made without the weights has no weights id to compare)
        if k.in_registry and k.of_the_weights and k.drafter_id not in ids:
            raise RefusalError(f"{k.label} was found for SRC, but SRC's weights are drafter {ids[0][:12]}, not that "
                               "one: their lookup key or location matched another drafter's",
                               f"record SRC as its own drafter first: `eagle3-convert registry add SRC`",
                               code="E-RECORD-OTHER-WEIGHTS")


def plan_conversion(source: Source, to: str, options: ConvertOptions) -> tuple[WritePlan, dict[str, Verdict]]:
    """Everything a conversion decides, without writing: the capture layers from training, the destination
    layout's plan, and every engine's verdict on it. Raises what convert would refuse with."""
    layout = get_layout(to)
    kind_named = drafter_kind(source.stored_config or {})[1]
    refuse_other_kind(source.drafter.config.kind, layout.name, layout.kinds, kind_named, source.detection.layout)
    apply_training_capture(source.drafter, options, source.known)
    check_known_facts(source, options)
    restore_target(source, options)
    check_capture_range(source.drafter.config, options)
    refuse_capture_mode(source.drafter.config, layout.name, layout.writes)
    plan = plan_with_target_options(layout, source.drafter, options)
    return plan, judge_output(plan, source.drafter, options, layout.home_engines)


def check_capture_range(cfg: DrafterConfig, options: ConvertOptions) -> None:
    """Boundaries outside [0, L] of a known target are no layer: no engine captures them (validate: E-CAPTURE-RANGE)."""
    _, depth = capture_context(cfg.family, options.target, cfg.target)
    outside = [b for b in cfg.capture_boundaries or () if depth is not None and not 0 <= b <= depth]
    if outside:
        raise RefusalError(f"capture boundaries {cfg.capture_boundaries} include {outside}, outside [0, {depth}] of "
                           f"the {depth}-layer target: no engine captures them",
                           "check --target is the model the drafter was trained for, and the ids' convention",
                           code="E-CAPTURE-RANGE")


def judge_output(plan: WritePlan, drafter: Drafter, options: ConvertOptions,
                 home_engines: tuple[str, ...]) -> dict[str, Verdict]:
    """Every engine's verdict on the file about to be written. A file its own engines would serve wrong
    is refused before any byte is written; another engine's wrong reading is reported, never hidden."""
    ctx = target_context(drafter.config, options.target)
    serves = serve_verdicts(plan.config, plan.tensors, drafter.config, ctx, releases=options.releases)
    home = {e: serves[e] for e in home_engines}
    plan.notes += stand_in_notes(serves) + older_release_warnings(home)
    wrong = [v for v in home.values() if v.verdict == WRONG]
    if home and (wrong or all(v.verdict == REFUSES for v in home.values())):
        bad = wrong[0] if wrong else next(iter(home.values()))
        # other releases that serve it first; no way out of a layout to itself, nor of what vLLM refuses alike
        alike = plan.layout != "vllm" and any(v.verdict == REFUSES and v.why == bad.why
                                              for e, v in serves.items() if e.startswith("vllm"))
        way = ("dflash", "`--to dflash`: the flat layout vLLM and SGLang both read") if drafter.config.kind in \
            BLOCK_KINDS else ("vllm", "`--to vllm` serves every variant")  # (no EAGLE-3 layout takes a DFlash)
        fix = "vLLM refuses it alike, in every layout it reads" if alike else "convert to a layout whose engine " \
            "serves the drafter as trained" + (f" ({way[1]})" if plan.layout != way[0] else "")
        stood_in = stand_in_notes({bad.engine: bad})  # the release refused is one this tool does not model
        raise RefusalError(f"the {plan.layout} layout is for {', '.join(LABELS[e] for e in home_engines)}, and "
                           f"{LABELS[bad.engine]} would {'serve this file wrong' if wrong else 'refuse it'}: "
                           f"{bad.why}" + "".join(f" ({line})" for line in stood_in),
                           releases_that_serve(bad.engine, worst_release(bad), [
                               s for s in bad.across if s.verdict in SERVING], fix),
                           code="E-ENGINE-WRONG" if wrong else "E-ENGINE-REFUSES")
    return serves


def worst_release(v: Verdict) -> str:
    """The release whose verdict is `v`'s: of a fleet, the first named that reads the file as badly."""
    return next((r for r, each in v.judged if each.verdict == v.verdict), v.release or "")


def stand_in_notes(serves: dict[str, Verdict]) -> list[str]:
    """Each release named that this tool does not model, and the known one whose rules judged it: once per engine."""
    return list(dict.fromkeys(releases_of(engine).stand_in_why(release) for engine, v in serves.items()
                              for release, each in v.judged or ((v.release, v),) if each.judged_by and release))


def older_release_warnings(home: dict[str, Verdict]) -> list[str]:
    """The releases of the layout's own engines that serve the file wrong or refuse it, while the release judged
    serves it: no spelling of this layout is right there (the layouts already write the spelling most releases read)."""
    notes: dict[str, str] = {}  # both vLLM runners often say the same: once
    for engine, v in home.items():
        bad = [s for s in v.across if s.verdict in (WRONG, REFUSES)]
        if v.verdict in (WRONG, REFUSES) or not bad:
            continue
        what = "; ".join(f"{s.releases} {'would serve this file wrong' if s.verdict == WRONG else 'refuses it'}: "
                         f"{s.why}" for s in bad)
        notes.setdefault(what, f"WARNING: {releases_of(engine).label} {what} (judged for {v.release}; no spelling "
                               "of this layout is right on those releases)")
    return list(notes.values())


def total_bytes(plan: WritePlan) -> int:
    return sum(t.nbytes for t in plan.tensors.values())
