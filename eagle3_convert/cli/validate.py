"""`validate`: name every silent EAGLE-3 failure before a GPU is spent."""

from __future__ import annotations

from typing import Any

import click

from ..names import LAYOUTS, engine_of
from . import main
from .common import (
    Progress,
    chosen_engines,
    emit_json,
    engine_option,
    error_dict,
    fail,
    hub_options,
    hub_progress_bars,
    registry_known,
    registry_option,
    run_guarded,
)

HEADINGS = {"error": "errors", "warning": "warnings", "info": "info"}


@main.command("validate")
@click.argument("src")
@engine_option("Replay this engine's loading rules (vllm-v1 and vllm-v2 name vLLM, whose rules cover both "
               "runners). Default: the engines that serve the layout, at their newest release.")
@click.option("--target", metavar="CONFIG_OR_DIR_OR_REPO",
              help="The target model's config: depth, width, vocab, family and context are checked against it.")
@click.option("--deep", is_flag=True,
              help="Read every byte: NaN/Inf, tensors left at initial values, per-tensor sha256 manifest.")
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable report.")
@click.option("--revision", help="Hub revision when SRC is a repo id.")
@hub_options
@click.option("--from", "from_layout", type=click.Choice(("auto",) + LAYOUTS), default="auto",
              show_default=True, help="Check SRC as this layout instead of detecting it.")
@registry_option
@click.option("--quiet", "-q", is_flag=True, help="No progress bar on --deep.")
@run_guarded
def validate_cmd(src: str, engines: tuple[Any, ...], target: str | None, deep: bool, strict: bool, as_json: bool,
                 revision: str | None, endpoint: str | None, token: str | None, from_layout: str,
                 registry_path: str | None, quiet: bool) -> None:
    """Check the drafter in SRC (directory or Hub repo id) for every fault engines load silently.

    Each finding has a stable code, a severity, a message naming the tensor or config field, and
    a hint. Exit status 1 when there is an error (or, with --strict, a warning), else 0. Reads
    tensor headers only (and d2t/t2d) unless --deep.
    """
    from ..validate import load_target_facts, validate_checkpoint
    from ..sources import resolve_source

    facts = load_target_facts(target, endpoint=endpoint, token=token) if target else None
    with hub_progress_bars(not (quiet or as_json)):
        path, commit = resolve_source(src, revision, endpoint=endpoint, token=token)
    label = f"{src}@{commit}" if commit else src
    # The registry's record of these weights, when it knows them: config.json is checked against it (and against
    # the sidecar beside it). No registry, no lookup: asking whether there is one opens no store.
    known = registry_known(path, registry_path, uri=f"hf://{src}@{commit}" if commit else None)
    bars: list[Progress] = []

    def progress(total: int):
        bars.append(Progress(total, "reading every byte", quiet or as_json))
        return bars[-1].update

    from ..engines import judged_releases

    choices = chosen_engines(engines)
    names = tuple(dict.fromkeys(engine_of(choice.spelling) for choice in choices))  # vllm-v1 -> vllm
    try:
        report = validate_checkpoint(path, engines=names or None, target=facts, deep=deep, from_layout=from_layout,
                                     source_label=label, known=known, progress=progress,
                                     releases=judged_releases(choices))
    finally:
        for bar in bars:
            bar.close()
    verdict = None
    if report.failed(strict):
        worst = next(f for f in report.findings if f.severity == "error" or (strict and f.severity == "warning"))
        verdict = (f"validation failed ({_counts(report)}); first: {worst.message}",
                   worst.hint or "see the findings above", worst.code, 1)
    if as_json:
        emit_json({**report.to_dict(strict), **({"error": error_dict(*verdict)} if verdict else {})})
    else:
        _print_report(report, strict)
    if verdict:
        # The report is on stdout; stderr gets the one-line verdict every failing command ends with.
        fail(*verdict)


def _print_report(report, strict: bool) -> None:
    layout = report.layout or (" or ".join(report.candidates) if report.candidates else "unknown layout")
    how = f" ({report.detected_by})" if report.detected_by and report.layout else ""
    click.echo(f"{report.source}: {layout}{how}")
    if report.engines:
        click.echo(f"checked for: {', '.join(report.release_labels())}")
    echo_findings([f.to_dict() for f in report.findings], gap="\n")
    if report.manifest is not None:
        click.echo(f"\nsha256 manifest ({len(report.manifest)} tensors)")
        for name, entry in report.manifest.items():
            click.echo(f"  {entry['sha256']}  {name}")
    verdict = "FAIL" if report.failed(strict) else "OK"
    click.echo(f"\n{verdict}: {_counts(report)}" + (" (--strict: warnings fail)" if strict and report.count("warning")
                                                     else ""))


def echo_findings(findings: list[dict[str, Any]], gap: str = "") -> None:
    """The findings (as --json has them) by severity, worst first, each with its hint; `gap` before each heading."""
    for severity, heading in HEADINGS.items():
        group = [f for f in findings if f["severity"] == severity]
        if group:
            click.echo(f"{gap}{heading} ({len(group)})")
        for f in group:
            click.echo(f"  {f['code']}{f' [' + f['engine'] + ']' if f['engine'] else ''}: {f['message']}")
            if f["hint"]:
                click.echo(f"      hint: {f['hint']}")


def _counts(report) -> str:
    return ", ".join(f"{report.count(s)} {HEADINGS[s] if report.count(s) != 1 else s}" for s in HEADINGS)
