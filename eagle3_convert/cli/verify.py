"""`verify`: the acceptance a drafter gets with its target, measured with the target itself."""

from __future__ import annotations

import sys
from typing import Any

import click

from ..errors import Eagle3Error
from . import main
from .common import emit_json, hub_options, registry_known, registry_option, run_guarded


@main.command("verify")
@click.argument("drafter")
@click.option("--target-model", "target", required=True, metavar="DIR_OR_REPO",
              help="The target model: a transformers model directory (config, weights, tokenizer) or a Hub repo id.")
@click.option("--prompts", "prompts_file", metavar="FILE",
              help="Prompts: one a line, JSON Lines ({\"prompt\": ...}) or a JSON list (default: 8 built-in ones).")
@click.option("-k", "k", type=click.IntRange(1, 32), default=3, show_default=True,
              help="Tokens drafted a round (SGLang's --speculative-num-steps, vLLM's num_speculative_tokens).")
@click.option("--device", type=click.Choice(("auto", "cpu", "cuda")), default="auto", show_default=True,
              help="Where the target and the drafter run (auto: CUDA when torch sees one).")
@click.option("--max-new-tokens", type=click.IntRange(1, 100000), default=64, show_default=True,
              help="Tokens the target generates for each prompt.")
@click.option("--threads", type=click.IntRange(1, 1024), metavar="N",
              help="CPU threads torch may use. Default: 1 for a target under 200 M block weights a token (too "
                   "little work a token to share out); above, one a core other jobs leave idle (the cores less the "
                   "1-minute load average, at least 1): each parallel step waits for its slowest thread.")
@click.option("--scan-layers", is_flag=True,
              help="Also measure the capture layers one off each way and the engine default, ranked: recovers lost "
                   "ids and confirms recorded ones.")
@click.option("--scan-rope", is_flag=True,
              help="Also measure the drafter at each RoPE base it may have been trained at (its config's, each base "
                   "the config spells, the target's, 10000), ranked: finds a base a trainer or converter lost.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable result.")
@click.option("--plot", "plot_file", metavar="FILE", help="Also draw the acceptance chart (by draft position; with "
              "--scan-layers, the layers ranked beside it) into FILE, a .png or .svg: the chart `registry site` shows.")
@click.option("--revision", help="Hub revision when DRAFTER is a repo id.")
@hub_options
@registry_option
@click.option("--no-record", is_flag=True, help="Do not record the measurement in the registry.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
@run_guarded
def verify_cmd(drafter: str, target: str, prompts_file: str | None, k: int, device: str, max_new_tokens: int,
               threads: int | None, scan_layers: bool, as_json: bool, revision: str | None, endpoint: str | None,
               token: str | None, registry_path: str | None, no_record: bool, quiet: bool,
               plot_file: str | None = None, scan_rope: bool = False) -> None:
    """Measure the acceptance DRAFTER (any layout, a GGUF, or a Hub repo id) gets with its target.

    The target decodes the prompts greedily in transformers as a serving engine decodes speculatively: each round
    the drafter drafts k tokens from the target's hidden states at its capture layers (this tool's reference maths,
    as SGLang and vLLM draft), and the target checks them in one forward.
    Reports the mean accepted length (tokens per target forward, the bonus token counted: 1 = nothing accepted,
    k+1 = everything) and the acceptance at each draft position, and records them in the registry.
    """
    plot = None
    if plot_file is not None:  # a bad name or a missing renderer is said before minutes of measuring
        from ..charts import check_plot_path

        plot = check_plot_path(plot_file)
    from ..verify_inputs import check_inputs, default_threads, read_prompts

    # everything given is checked before torch and transformers load (seconds): a mistake is told at once
    inputs = check_inputs(drafter, target, read_prompts(prompts_file) if prompts_file else None, k=k, device=device,
                          endpoint=endpoint, token=token, revision=revision)
    import torch

    threads = threads or default_threads(inputs)
    if threads:
        torch.set_num_threads(threads)
    from ..verify import acceptance, run
    from ..verify import scan_layers as scan

    bar = _bar(len(inputs.prompts) * max_new_tokens, quiet or not sys.stderr.isatty())
    try:
        measured = run(inputs, max_new_tokens, bar.update if bar else None)
    finally:
        if bar is not None:
            bar.close()
    result = acceptance(measured, k)
    ranked = None
    if scan_layers:
        known = registry_known(measured.source.path, registry_path)  # reads a registry only where one exists
        recorded = known[0].boundaries(measured.target.num_layers) if known else None
        ranked = scan(measured, k, recorded=recorded)
    doc = _document(drafter, result, ranked)
    doc["rope_scan"] = None
    if scan_rope:
        from ..verify import scan_rope as rope_scan

        doc["rope_scan"] = [{"rope_theta": c.theta, "labels": c.labels, "mean_accepted_length":
                             c.result.mean_accepted_length, "per_position": c.result.per_position}
                            for c in rope_scan(measured, k)]
    doc["recorded"] = None if no_record else _record(drafter, {**result.acceptance_fields(), "scan": doc["scan"]},
                                                     revision, registry_path, endpoint, token)
    if plot is not None:
        from ..charts import one_run, save

        save(one_run(doc), plot)
        doc["plot"] = str(plot)
    if as_json:
        emit_json(doc)
    else:
        _print(drafter, doc)


def _record(drafter: str, fields: dict[str, Any], revision: str | None, registry_path: str | None,
            endpoint: str | None, token: str | None) -> dict[str, Any] | None:
    """The measurement (its Acceptance fields, the --scan-layers ranking with them) into the registry, with the
    drafter (as `registry add` records it); a warning if it fails."""
    from ..records import record_acceptance

    try:
        recorded = record_acceptance(drafter, fields, revision=revision, registry=registry_path, endpoint=endpoint,
                                     token=token)
    except Eagle3Error as exc:  # the figures are printed all the same: a registry failure is a warning
        click.echo(f"warning: measured, but not recorded in the registry: {exc.message} [{exc.code}] — hint: "
                   f"{exc.hint or 'fix the registry'}, then run verify again (or pass --no-record)", err=True)
        return None
    return {"drafter_id": recorded.record.drafter_id}


def _bar(total: int, quiet: bool) -> Any:
    if quiet:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit="tok", desc="target generating", file=sys.stderr, leave=False)


def _document(drafter: str, result: Any, ranked: list[Any] | None) -> dict[str, Any]:
    doc = {"drafter": drafter, **result.to_dict()}
    doc["capture"] = {"boundaries": doc.pop("capture_boundaries"), "from": doc.pop("capture_from")}
    doc["scan"] = None if ranked is None else [
        {"boundaries": c.boundaries, "labels": c.labels, "mean_accepted_length": c.result.mean_accepted_length,
         "per_position": c.result.per_position} for c in ranked]
    return doc


def _print(drafter: str, doc: dict[str, Any]) -> None:
    revision = f"@{doc['target_revision'][:12]}" if doc["target_revision"] else ""
    click.echo(f"{drafter} with {doc['target']}{revision} on {doc['device']}: {doc['prompts']} prompts (sha256 "
               f"{doc['prompts_sha256'][:12]}), up to {doc['max_new_tokens']} new tokens each")
    click.echo(f"capture boundaries {doc['capture']['boundaries']} ({doc['capture']['from']})")
    click.echo(f"mean accepted length at k={doc['k']}: {doc['mean_accepted_length']:.3f} tokens per target forward "
               "(the bonus token counted: 1 = no draft accepted)")
    click.echo("acceptance by draft position: " + "  ".join(f"{j}: {rate:.3f}"
                                                           for j, rate in enumerate(doc["per_position"], 1)))
    click.echo(f"{doc['rounds']} draft rounds over {doc['tokens']} target tokens in {doc['seconds']:.1f} s "
               f"({doc['tokens_per_second']:.1f} tokens/s)")
    if doc["scan"] is not None:
        _print_scan(doc)
    if doc.get("rope_scan") is not None:
        _print_rope_scan(doc)
    if doc["recorded"] is not None:
        click.echo(f"recorded in the registry with drafter {doc['recorded']['drafter_id'][:12]}")


def _print_scan(doc: dict[str, Any]) -> None:
    click.echo(f"\ncapture layers ranked by acceptance at k={doc['k']}:")
    for c in doc["scan"]:
        rates = " ".join(f"{rate:.2f}" for rate in c["per_position"])
        click.echo(f"  {str(c['boundaries']):<16} {c['mean_accepted_length']:.3f}   {rates:<24} "
                   f"{', '.join(c['labels'])}")
    best, mine = doc["scan"][0], doc["capture"]["boundaries"]
    if best["mean_accepted_length"] <= 1.0:
        click.echo("no capture layers get a draft accepted: the drafter does not fit this target (its weights, "
                   "tokenizer or d2t), whatever layers it captures")
    elif best["boundaries"] == mine or best["mean_accepted_length"] == next(
            c["mean_accepted_length"] for c in doc["scan"] if c["boundaries"] == mine):
        click.echo(f"best: {mine} ({doc['capture']['from']}), as the drafter is read: its capture layers are confirmed")
    else:
        ids = ",".join(map(str, best["boundaries"]))
        click.echo(f"best: {best['boundaries']} ({', '.join(best['labels'])}), not the {mine} the drafter is read "
                   f"with: it was likely trained on them; `eagle3-convert --capture-layers {ids} --convention boundary "
                   "...` writes them")
    if best["mean_accepted_length"] > 1.0:
        _print_record_verdict(doc["scan"], best)


def _print_record_verdict(scan: list[dict[str, Any]], best: dict[str, Any]) -> None:
    """Whether the registry's record of the capture layers is the best measured (a tie counts)."""
    recorded = next((c for c in scan if "recorded" in c["labels"]), None)
    if recorded is None:
        return
    if recorded["mean_accepted_length"] == best["mean_accepted_length"]:
        click.echo(f"the registry's record {recorded['boundaries']} ranks first: confirmed by measurement")
    else:
        click.echo(f"the registry's record {recorded['boundaries']} is not confirmed: it gets "
                   f"{recorded['mean_accepted_length']:.3f}, {best['boundaries']} gets "
                   f"{best['mean_accepted_length']:.3f}")


def _print_rope_scan(doc: dict[str, Any]) -> None:
    click.echo(f"\nRoPE bases ranked by acceptance at k={doc['k']}:")
    for c in doc["rope_scan"]:
        rates = " ".join(f"{rate:.2f}" for rate in c["per_position"])
        click.echo(f"  {c['rope_theta']:<12g} {c['mean_accepted_length']:.3f}   {rates:<24} {', '.join(c['labels'])}")
    best = doc["rope_scan"][0]
    read = next(c for c in doc["rope_scan"] if "config, as the engines read it" in c["labels"])
    if best["mean_accepted_length"] > read["mean_accepted_length"]:
        click.echo(f"best: {best['rope_theta']:g} ({', '.join(best['labels'])}), not the {read['rope_theta']:g} the "
                   f"engines read from its config: it was likely trained at it; `eagle3-convert --rope-theta "
                   f"{best['rope_theta']:g} ...` writes it")
    else:
        click.echo(f"best: {read['rope_theta']:g}, the base the engines read from its config: confirmed")
