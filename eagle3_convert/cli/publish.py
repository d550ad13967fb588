"""`publish`: a validated drafter, its model card and its sidecar to the Hub in one commit."""

from __future__ import annotations

from typing import Any

import click

from ..names import LAYOUTS
from ..registry.errors import RegistryError
from ..registry.paths import default_registry
from . import main
from .common import (emit_json, hub_options, hub_progress_bars, human_bytes, registry_option, run_guarded,
                     warn_twin, warn_unrecorded)
from .convert import _layout_choice
from .validate import _counts, _print_report


@main.command("publish")
@click.argument("src")
@click.argument("repo_id")
@click.option("--layout", type=_layout_choice(False), help="Convert to this layout on the way (default: publish "
              "SRC's own layout as it is).")
@click.option("--from", "from_layout", type=click.Choice(("auto",) + LAYOUTS), default="auto",
              show_default=True, help="Read SRC as this layout instead of detecting it.")
@click.option("--verifier", metavar="NAME_OR_PATH", help="Target model the drafter proposes for, when SRC does not "
              "say (the card's base_model; needed by --layout speculators).")
@click.option("--target", metavar="CONFIG_OR_DIR", help="Target config: depth and family for capture-id quirks.")
@click.option("--target-gguf", metavar="PATH", help="--layout gguf: the target's own GGUF (tokenizer, depth, width).")
@click.option("--outtype", type=click.Choice(("auto", "bf16", "f16", "f32")), default="auto", show_default=True,
              help="--layout gguf: dtype of the 2-D weights.")
@click.option("--revision", "branch", metavar="BRANCH", help="Commit to this branch (created from main when "
              "missing; default: main).")
@click.option("--create-pr", is_flag=True, help="Open a pull request instead of committing to the branch.")
@click.option("--private", is_flag=True, help="Create the repo private (an existing repo keeps its visibility).")
@click.option("--message", "-m", metavar="TEXT", help="Commit message.")
@click.option("--license", "license_id", metavar="ID", help="License for the model card (e.g. apache-2.0; default: "
              "what a README.md beside SRC declares).")
@click.option("--dry-run", is_flag=True, help="Validate and print the file plan and the model card; send nothing.")
@hub_options
@registry_option
@click.option("--no-record", is_flag=True, help="Do not record the published copy in the registry.")
@click.option("--no-registry", is_flag=True, help="Leave the registry out: the card and sidecar say only what SRC "
              "and the flags say, and nothing is recorded.")
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bars.")
@run_guarded
def publish_cmd(src: str, repo_id: str, layout: str | None, from_layout: str, verifier: str | None,
                target: str | None, branch: str | None, create_pr: bool, private: bool, message: str | None,
                license_id: str | None, dry_run: bool, endpoint: str | None, token: str | None,
                registry_path: str | None, no_record: bool, no_registry: bool, as_json: bool, quiet: bool,
                target_gguf: str | None = None, outtype: str = "auto") -> None:
    """Validate the drafter in SRC and publish it to the Hub repo REPO_ID.

    Refuses when validation finds an error. Uploads config.json, the weights, eagle3-convert.json
    and a generated README.md (model card: target, capture layers per engine, serve commands) in
    ONE commit, creating the repo if missing, and prints the commit URL. The token comes from
    --token, HF_TOKEN or `hf auth login`, and is never printed or stored. The published copy
    (repo id and commit) is recorded in the registry unless --no-record.
    """
    from ..publish import PublishRefused, prepared_publish, upload
    from ..records import record_publication
    from ..registry.store import open_registry

    store = None
    if not (dry_run or no_record or no_registry):
        try:  # before anything is sent: an unusable registry should not cost an upload
            store = open_registry(registry_path)
        except RegistryError as exc:
            raise RegistryError(exc.message, f"{exc.hint}; or publish with --no-registry") from exc
    try:
        # a Hub SRC is downloaded, the files uploaded: huggingface_hub's bars only on a terminal
        with hub_progress_bars(not (quiet or as_json)), \
                prepared_publish(src, repo_id, layout=layout, from_layout=from_layout, verifier=verifier,
                                 target=target, branch=branch, create_pr=create_pr, message=message,
                                 license=license_id,
                                 registry=None if no_registry else _consulted(store, registry_path, no_record),
                                 endpoint=endpoint, token=token, target_gguf=target_gguf, outtype=outtype) as plan:
            if dry_run:
                _report(plan, None, None, as_json)
                return
            published = upload(plan, private=private, endpoint=endpoint, token=token)
            recorded, record_error = None, None
            if store is not None:
                try:
                    recorded = record_publication(plan, published, store)
                except RegistryError as exc:  # the commit exists: warn, exit 0
                    record_error = exc
    except PublishRefused as exc:
        if as_json:  # the refusal's one document carries the findings
            exc.json_extra = {"validation": exc.report.to_dict()}
        else:
            _print_report(exc.report, strict=False)
        raise
    finally:
        if store is not None:
            store.close()
    if record_error is not None:
        warn_unrecorded("published", record_error, repo_id)
    conflicts = recorded.conflicts if recorded else []
    for conflict in conflicts:  # the commit is made and recorded; the user must still hear of the disagreement
        warn_twin(conflict)
    _report(plan, published, str(store.path) if recorded else None, as_json, conflicts)


def _consulted(store: Any, registry_path: str | None, no_record: bool) -> Any:
    """The registry validation and the card ask for the drafter's record (as convert does, also with
    --no-record, which only leaves the upload unrecorded; --no-registry leaves it out altogether)."""
    if store is not None:
        return store
    return registry_path or default_registry()  # --dry-run, --no-record: read if it exists, never create it


def _report(plan: Any, published: Any, recorded_in: str | None, as_json: bool,
            conflicts: list[dict[str, Any]] = ()) -> None:
    from ..publish import CARD_NAME

    report = plan.report
    summary = {
        "source": plan.source.uri, "repo_id": plan.repo_id, "revision": plan.branch, "create_pr": plan.create_pr,
        "layout": plan.layout, "converted_from": plan.source.detection.layout if plan.converted else None,
        "drafter_id": plan.drafter_id, "message": plan.message,
        "files": [{"path": f.path_in_repo, "size": f.size, "sha256": f.sha256} for f in plan.files],
        "validation": report.to_dict(), "notes": plan.notes, "dry_run": published is None,
    }
    if published is None:
        summary["card"] = plan.card
    else:
        summary.update({"commit": published.commit, "commit_url": published.commit_url,
                        "pr_url": published.pr_url, "pr_revision": published.pr_revision,
                        "recorded_in": recorded_in, "registry_conflicts": list(conflicts)})
    if as_json:
        emit_json(summary)
        return
    where = f"a pull request against {plan.branch or 'main'}" if plan.create_pr else f"branch {plan.branch or 'main'}"
    how = f"converted from {plan.source.detection.layout}" if plan.converted else "as it is"
    verb = "would publish" if published is None else "published"
    click.echo(f"{verb} drafter {plan.drafter_id[:12]} ({plan.layout}, {how}) to {plan.repo_id}, {where}: "
               f"{len(plan.files)} files, {human_bytes(plan.total_bytes)} in one commit")
    click.echo(f"validated: {_counts(report)} ({', '.join(report.engines)})")
    for f in report.findings:
        click.echo(f"  {f.code}{f' [{f.engine}]' if f.engine else ''}: {f.message}")
    if published is None:
        width = max(len(f.path_in_repo) for f in plan.files)
        for f in plan.files:
            click.echo(f"  {f.path_in_repo:<{width}}  {f.size:>12} B  sha256 {f.sha256}")
        click.echo(f"commit message: {plan.message}")
        click.echo(f"\n--- {CARD_NAME} ---")
        click.echo(plan.card, nl=False)
        click.echo("--- end ---")
    else:
        click.echo(f"commit: {published.commit_url}")
        if published.pr_url:
            click.echo(f"pull request: {published.pr_url} ({published.pr_revision})")
        if recorded_in:
            click.echo(f"recorded hf://{plan.repo_id}@{published.commit} in {recorded_in}")
    for note in plan.notes:
        click.echo(f"note: {note}")
