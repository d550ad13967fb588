"""`validate_checkpoint`, which runs every check in order into a Report."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from ..atomic import CONFIG_NAME
from ..converters import kimi_k3
from ..converters.layout import ConvertOptions, Layout, drafter_kind
from ..converters.registry import detect, get_layout, judge_explicit_from, layouts, refuse_target_model
from ..drafter import BLOCK_KINDS, KIND_LABELS
from ..target_identity import TargetIdentity
from ..engines import REFUSES, SERVING, UNKNOWN, WRONG, releases_of, serve_verdicts, target_context
from ..engines.block_diffusion import vllm_runner_only
from ..names import ENGINE_RUNNERS, LABELS, engine_of, runners_of
from ..errors import CaptureConflict, Eagle3Error, FormatError, UsageError
from .. import provenance, schemas
from ..hints import Planned, checked
from .capture import check_capture, check_known, read_capture_ids
from .config import check_rope, check_schema, read_config
from .context import Context, sidecar_target
from .deep import deep_scan
from .engine import check_engine, check_engine_verdicts
from .findings import READER_CODES_EXPLAINED, SEVERITIES, Finding, Report, finding, from_error
from .gguf import validate_gguf
from .profiles import LAYOUT_ENGINES, engine_profiles
from .raw import RawCheckpoint, read_raw
from .target import check_target
from .target_facts import check_target_facts
from .tensors import check_tensors
from .vocab import check_vocab


def validate_checkpoint(path: str | os.PathLike, *, engines: Sequence[str] | None = None,
                        target: TargetIdentity | None = None, deep: bool = False, from_layout: str = "auto",
                        known: Sequence[provenance.Known] = (), source_label: str | None = None,
                        progress: Callable[[int], Callable[[int], None]] | None = None,
                        read: tuple[RawCheckpoint, list[Finding]] | None = None,
                        releases: Mapping[str, Sequence[str | None]] | None = None) -> Report:
    """Every finding about the drafter checkpoint in directory `path`.

    `engines`: which engines to replay (default: those that serve the detected layout).
    `known`: what the registry's record (or any training record) of these weights says (provenance.Known);
    config.json is checked against it and against the sidecar beside it (read here), with or without `target`.
    `releases`: engine -> the releases to judge (None: its newest); default, each engine's newest.
    `read`: what read_raw already read of `path` (the list of findings is extended), else it is read here.
    """
    unknown = [name for name in engines or () if name not in ENGINE_RUNNERS]
    if unknown:  # else nothing would be judged for it, in silence
        raise UsageError(f"unknown engine {unknown[0]!r}", f"name one of {', '.join(ENGINE_RUNNERS)}")
    root = Path(path)
    label = source_label or str(root)
    raw, findings = read or read_raw(root)
    if "_gguf" in (raw.config or {}):
        return validate_gguf(raw, engines, label, deep, progress, target)
    beside = provenance.sidecar_known(root, raw.sidecar)
    known = [*known, *([beside] if beside is not None else [])]
    report = Report(label, None, None, list(engines or ()), findings, releases={k: list(v) for k, v in
                                                                               (releases or {}).items()})
    candidates = _layouts(raw, from_layout, report) if raw.config is not None else []
    if from_layout != "auto" and candidates:
        findings.extend(_explicit_from(raw, from_layout, target))
    if len(candidates) == 1:
        report.layout = candidates[0].name
    for layout in candidates:
        chosen = list(engines or LAYOUT_ENGINES.get(layout.name, ("vllm",)))
        report.engines += [e for e in chosen if e not in report.engines]
        ctx = Context(raw, layout, chosen, target, label, findings,
                      name_layout=len(candidates) > 1 or from_layout != "auto",
                      recorded_target=next((k.target for k in known if k.target is not None), None))
        ctx.releases = report.releases
        run_checks(ctx, deep)
        if ctx.cfg is not None:
            check_known(ctx, known)
        if not any(f.severity == "error" for f in findings):
            reader_cross_check(ctx, known)
    if deep:
        total = sum(t.nbytes for n, t in raw.tensors.items() if n not in raw.cut)
        report.manifest, deep_findings = deep_scan(raw.tensors, raw.cut,
                                                   on_bytes=progress(total) if progress else None)
        findings.extend(deep_findings)
    planned = Planned(known=[k for k in known if k.in_registry], read=lambda _root: raw.load(fresh=True))
    report.findings = [replace(f, hint=checked(f.hint, label, root, planned)) for f in _dedupe(findings)]
    return report


def _layouts(raw: RawCheckpoint, from_layout: str, report: Report) -> list[Layout]:
    """The layout to check the checkpoint in; every confident candidate when detection cannot choose."""
    unserved = kimi_k3.refusal(raw.config or {}, raw.tensors)
    if unserved is not None:  # no check below has words for its maths: the one finding names each feature
        report.findings.append(from_error(unserved, where=CONFIG_NAME))
        return []
    if from_layout != "auto":
        report.detected_by = "given with --from"
        try:  # no layout's checks fit a target model: one finding says what it is
            refuse_target_model(raw.checkpoint())
        except FormatError as exc:
            report.findings.append(from_error(exc, where=CONFIG_NAME))
            return []
        return [get_layout(from_layout)]
    if drafter_kind(raw.config or {})[0] in BLOCK_KINDS:  # none of the EAGLE-3 checks below applies
        report.findings += _block_diffusion(raw, report)
        return []
    ckpt = raw.checkpoint()
    try:
        detection = detect(ckpt)
    except FormatError as exc:
        if exc.code != "E-LAYOUT-AMBIGUOUS":
            report.findings.append(from_error(exc, where=CONFIG_NAME))
            return []
        readings = [d for d in (layout.detect(ckpt) for layout in layouts().values()) if d is not None]
        found = [d for d in readings if d.confident] or readings  # as detect() weighs them
        report.candidates = [d.layout for d in found]
        report.detected_by = "; ".join(f"{d.layout}: {d.reason}" for d in found)
        # an error, as convert's refusal of the same file: the layouts' engines read it as different drafters, so
        # whichever was meant, one of them serves it wrong (one file, one verdict; issue 34)
        report.findings.append(finding(
            "E-LAYOUT-AMBIGUOUS", f"the config reads as more than one layout ({report.detected_by}); engines "
            "disagree on what it means, so it is checked as each, and convert refuses it without --from",
            "say which layout wrote it with --from "
            f"({' or '.join(d.layout for d in found)}); fix the findings below so the file says one thing",
            where=CONFIG_NAME))
        return [get_layout(d.layout) for d in found]
    report.detected_by = detection.reason
    report.candidates = [detection.layout]
    return [get_layout(detection.layout)]


def _block_diffusion(raw: RawCheckpoint, report: Report) -> list[Finding]:
    """A DFlash or DSpark drafter: its layout's reader (fields, ids, tensor table against fc), then each engine's
    verdict (engines/block_diffusion.py). The validator's EAGLE-3 checks do not apply."""
    ckpt = raw.checkpoint()
    try:
        detection = detect(ckpt)
        drafter = ckpt.read_as(get_layout(detection.layout), ConvertOptions(target=sidecar_target(raw.sidecar)))
    except Eagle3Error as exc:
        return [from_error(exc, where=CONFIG_NAME)]
    report.layout, report.detected_by, report.candidates = detection.layout, detection.reason, [detection.layout]
    cfg = drafter.config
    engines = report.engines or list(LAYOUT_ENGINES[detection.layout])
    report.engines += [e for e in engines if e not in report.engines]
    found = [finding("I-KIND-BLOCK-DIFFUSION", f"a {KIND_LABELS[cfg.kind]} drafter: its fields, target layers and "
                     "tensor table are checked, and each engine's reading; the EAGLE-3 checks and the shapes of "
                     "DSpark's heads are not", where=CONFIG_NAME)]
    if detection.layout == "dflash":  # (the speculators schema is EAGLE-3's: the reader checks this kind's fields)
        found += [finding("E-SCHEMA", f"config.json {v.path}: {v.message} (dflash schema)", f"fix {v.path} in "
                          "config.json", where=v.path) for v in schemas.violations("dflash", raw.config)]
    serves = serve_verdicts(raw.config, raw.tensors, cfg, target_context(cfg), [r for e in engines for r in
                                                                              runners_of(e)], report.releases)
    only = (vllm_runner_only(raw.config, cfg.kind) or (None,))[0]
    for runner, verdict in serves.items():
        if engine_of(runner) == "vllm" and only not in (None, runner):
            if only in serves and serves[only].verdict in SERVING:  # said once, as a limit of the engine
                found.append(finding("W-ENGINE-CAVEAT", f"{LABELS[runner]}: {verdict.why}", "serve it with vLLM's "
                                     "V2 runner (VLLM_USE_V2_MODEL_RUNNER=1)", CONFIG_NAME, "vllm"))
            continue  # (else the V2 runner's own finding says what it needs)
        known_releases = releases_of(engine_of(runner))
        if verdict.judged_by and not any(f.code == "W-ENGINE-RELEASE-UNKNOWN" and f.engine == engine_of(runner)
                                         for f in found):  # a release newer than the one read (once for vLLM)
            found.append(finding("W-ENGINE-RELEASE-UNKNOWN", known_releases.stand_in_why(verdict.release or ""),
                                 f"check the verdict on {known_releases.label} {verdict.release} itself",
                                 where=CONFIG_NAME, engine=engine_of(runner)))
        if verdict.verdict == UNKNOWN:  # as validate/engine.py says it of any other kind
            read = verdict.judged_by or known_releases.knows(verdict.release or "")  # else: its readers were not
            found.append(finding("W-ENGINE-UNKNOWN" if read else "W-ENGINE-RELEASE-UNKNOWN", f"{LABELS[runner]}: "
                                 f"{verdict.why}", "judge the file on the engine itself, or serve it with an engine "
                                 "whose reading is known", where=CONFIG_NAME, engine=engine_of(runner)))
        elif verdict.verdict in (REFUSES, WRONG):
            code = "E-ENGINE-REFUSES" if verdict.verdict == REFUSES else "E-ENGINE-WRONG"
            home = "speculators" if runner == "speculators" else "dflash"
            dest = f"{Path(report.source).name or 'drafter'}-{home}"
            found.append(finding(code, f"{LABELS[runner]}: {verdict.why}", "write the file this engine reads: "
                                 f"`eagle3-convert --to {home} {report.source} {dest}`", where=CONFIG_NAME,
                                 engine=engine_of(runner)))
    return found


def _explicit_from(raw: RawCheckpoint, given: str, target: TargetIdentity | None) -> list[Finding]:
    """convert's judgement of an explicit --from (converters.registry.judge_explicit_from), as a finding."""
    ckpt = raw.checkpoint()
    options = ConvertOptions(target=target or sidecar_target(raw.sidecar))
    drafter, error = None, None
    try:
        drafter = ckpt.read_as(get_layout(given), options)
    except (Eagle3Error, ValueError) as exc:  # ValueError: pydantic's, a field the canonical model refuses
        error = exc
    problem = judge_explicit_from(ckpt, given, options, drafter=drafter, error=error)
    return [from_error(problem, where=CONFIG_NAME)] if problem is not None else []


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple] = set()
    out = []
    for f in findings:
        key = (f.code, f.where, f.engine, f.message)
        if key not in seen:
            seen.add(key)
            out.append(f)
    order = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(out, key=lambda f: order[f.severity])


def run_checks(ctx: Context, deep: bool = False) -> None:
    """Every check, in order: the config first (later checks read `ctx.cfg`), the schema last (`deep`: the target
    recorded for these weights is compared too, where it names a local copy)."""
    ctx.cfg = read_config(ctx)
    check_rope(ctx)
    read_capture_ids(ctx)
    if ctx.cfg is not None:
        if ctx.raw.complete:  # with a weight file unreadable, absent tensors prove nothing
            check_tensors(ctx)
            check_vocab(ctx)
        check_capture(ctx)
        for name in ctx.engines:
            if name in engine_profiles():  # llama.cpp is judged by its engine module alone
                check_engine(ctx, engine_profiles()[name])
        check_engine_verdicts(ctx)
        check_target(ctx)
        check_target_facts(ctx, deep)
    check_schema(ctx)


def reader_cross_check(ctx: Context, known: Sequence[provenance.Known] = ()) -> None:
    """The layout reader as a last word: a refusal no check explained is reported under its own code (a capture
    conflict's way out names only the readings no training record contradicts)."""
    try:
        ctx.raw.checkpoint().read_as(ctx.layout, ConvertOptions(target=ctx.target))
    except Eagle3Error as exc:
        explained = ctx.codes() & (READER_CODES_EXPLAINED.get(exc.code, set()) | {exc.code})
        if not explained:
            found = from_error(exc)
            if isinstance(exc, CaptureConflict):  # validate takes no --capture-layers: name the whole conversion
                found = replace(found, hint=exc.hint_with(
                    lambda flags: f"`{ctx.command(ctx.layout.name, *flags)}`",
                    lambda ids: any(provenance.capture_contradiction(ids, k, ctx.depth) for k in known)))
            ctx.out.append(found)
