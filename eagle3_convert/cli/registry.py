"""`registry add | list | show | lineage | remove`: what each drafter was trained on and where it lives."""

from __future__ import annotations

from typing import Any

import click

from ..errors import UsageError
from ..names import CAPTURE_CONVENTIONS
from ..registry.errors import NoRegistry
from . import main
from .common import (
    chosen_engines,
    emit_json,
    engine_option,
    fail,
    hub_options,
    hub_progress_bars,
    parse_ids,
    registry_option,
    run_guarded,
)
from .convert import _layout_choice

SHORT_ID = 12
TIME = "%Y-%m-%d %H:%M:%S"  # times are stored in UTC


def _boundaries(boundaries: list[int] | None) -> str:
    return "engine default" if boundaries is None else str(boundaries)


def _target(record: Any) -> str:
    target = record.target
    if target is None or not target.name_or_path:
        return "?"
    return target.name_or_path + (f"@{target.revision}" if target.revision else "")


def _edge(edge: Any) -> str:
    how = {"cast": " (cast)", "finetune": " (fine-tuned from it)"}.get(edge.kind, "")
    return (f"{edge.source.uri} ({edge.source.layout}) -> {edge.dest.uri} ({edge.dest.layout}){how}  "
            f"by {edge.tool}, {edge.created_at:{TIME}} UTC")


def print_record(record: Any) -> None:
    target = record.target
    click.echo(f"drafter    {record.drafter_id}")
    if target is None:
        click.echo("target     unknown")
    else:
        shape = ", ".join(f"{label} {value}" for label, value in (
            ("layers", target.num_hidden_layers), ("hidden", target.hidden_size), ("vocab", target.vocab_size))
            if value is not None)
        archs = f" {target.architectures}" if target.architectures else ""
        click.echo(f"target     {_target(record)}{archs}{f' ({shape})' if shape else ''}")
        if target.aliases:
            click.echo(f"  also     {', '.join(target.aliases)}")
        if target.config_sha256:
            click.echo(f"  config   sha256 {target.config_sha256[:16]} (its config.json, save-time keys aside)")
    click.echo(f"capture    boundaries {_boundaries(record.capture_boundaries)}")
    for layout, ids in sorted(record.ids_as_written.items()):
        click.echo(f"  {layout:<12} {ids}")
    click.echo(f"vocab      draft Vd={record.draft_vocab_size or '?'}, target V={record.vocab_size or '?'}; "
               f"hidden H={record.hidden_size or '?'}")
    click.echo(f"flags      {', '.join(f for f, on in sorted(record.flags.items()) if on) or 'none'}")
    click.echo(f"trained    {record.trained_with or 'unknown'}")
    click.echo(f"recorded   {record.created_at:{TIME}} UTC, updated {record.updated_at:{TIME}} UTC")
    click.echo(f"locations  {len(record.locations)}")
    for location in record.locations:
        click.echo(f"  {location.layout:<12} {location.uri}")
    click.echo(f"lineage    {len(record.lineage)} edge(s)")
    for edge in record.lineage:
        click.echo(f"  {_edge(edge)}")
    click.echo(f"history    {len(record.changes)} change(s)")
    for change in record.changes:
        click.echo(f"  {change.changed_at:{TIME}} UTC  {change.field}: {_short(change.old)} -> {_short(change.new)}  "
                   f"({change.reason}; {change.tool})")


def _short(value: Any) -> str:
    """A recorded value in a history line: a target by its names, anything else as stored."""
    if isinstance(value, dict) and "name_or_path" in value:
        return " = ".join(n for n in [value.get("name_or_path"), *(value.get("aliases") or [])] if n) or "(unnamed)"
    return "engine default" if value is None else str(value)


@main.group("registry")
def registry_group() -> None:
    """Which target, revision and capture layers each drafter was trained on, and what it came from.

    `convert` records every conversion here (opt out with --no-record).
    """


@registry_group.command("add")
@click.argument("src")
@click.option("--target", metavar="CONFIG_OR_DIR_OR_REPO",
              help="The target model trained on: its config.json, its directory, or its Hub repo id.")
@click.option("--verifier", metavar="NAME", help="The name the target is served by (its Hub repo id): with "
              "--target, one target with both names; alone, a name of the recorded target.")
@click.option("--capture-layers", metavar="IDS",
              help="Capture-layer ids the training used, e.g. 2,16,29 (with --convention).")
@click.option("--convention", type=click.Choice(CAPTURE_CONVENTIONS),
              help="How --capture-layers counts: boundary (FORMATS §4) or the engine/trainer whose config they "
                   "come from.")
@click.option("--trained-with", metavar="TEXT", help="Free-form provenance: trainer, data, run.")
@click.option("--parent", metavar="DIR_OR_REPO", help="The drafter SRC was fine-tuned from: recorded too, with the "
              "lineage; a vocab map that differs from it is warned of (W-VOCAB-REGENERATED).")
@click.option("--from", "from_layout", type=_layout_choice(True), default="auto", show_default=True,
              help="SRC's layout; auto detects it.")
@click.option("--revision", help="Hub revision when SRC is a repo id.")
@hub_options
@registry_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@run_guarded
def add_cmd(src: str, target: str | None, verifier: str | None, capture_layers: str | None, convention: str | None,
            trained_with: str | None, parent: str | None, from_layout: str, revision: str | None,
            endpoint: str | None, token: str | None, registry_path: str | None, as_json: bool) -> None:
    """Record the drafter in SRC (directory or Hub repo id).

    Reads every tensor byte to compute the drafter id. The facts of an eagle3-convert.json
    beside SRC (target, provenance, lineage) are imported; --target, --capture-layers and
    --trained-with state the training truth and replace what the registry held.
    """
    from ..records import add_checkpoint

    with hub_progress_bars(not as_json):  # a Hub SRC is downloaded: its bars only on a terminal
        added = add_checkpoint(src, target=target, verifier=verifier, capture_layers=parse_ids(capture_layers),
                               convention=convention,
                               trained_with=trained_with, revision=revision, from_layout=from_layout,
                               registry=registry_path, endpoint=endpoint, token=token, parent=parent)
    doc = {"drafter_id": added.record.drafter_id, "location": added.location.model_dump(mode="json"),
           "notes": added.notes, "record": added.record.model_dump(mode="json"), "conflicts": added.conflicts}
    if not as_json:
        click.echo(f"recorded {added.location.uri} ({added.location.layout})")
        print_record(added.record)
        for note in added.notes:
            click.echo(f"note: {note}")
    if added.conflicts:  # recorded, but one drafter now has two records that disagree: as sync, exit 1
        first = added.conflicts[0]
        fail(f"recorded, but the registry's record synced from {first['uri']} (hub fingerprint "
             f"{first['drafter_id'][:12]}) is this drafter and disagrees: {first['message']}; both records kept",
             "check which is true; --capture-layers/--convention or --target state the training truth, "
             f"`eagle3-convert registry remove {first['drafter_id'][:12]}` forgets the synced record",
             "E-SYNC-CONFLICT", 1, **doc)
    if as_json:
        emit_json(doc)


@registry_group.command("list")
@click.option("--target", metavar="NAME_OR_PATH", help="Only drafters trained on this target: a name the record "
              "knows it by (Hub repo id, path), or a local copy of it (its directory: any name or its config).")
@registry_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@run_guarded
def list_cmd(target: str | None, registry_path: str | None, as_json: bool) -> None:
    """Every recorded drafter, oldest first. Where there is no registry it says so and creates none."""
    from ..records import list_records

    try:
        records, no_registry = list_records(target, registry_path), None
    except NoRegistry as exc:  # nothing recorded there: an answer, not a failure
        records, no_registry = [], exc.message
    if as_json:
        emit_json({"records": [record.model_dump(mode="json") for record in records], "no_registry": no_registry})
        return
    if no_registry:
        click.echo(no_registry)
        return
    if not records:
        click.echo("no drafters recorded" + (f" for target {target}" if target else ""))
        return
    click.echo(f"{'ID':<{SHORT_ID}}  {'TARGET':<40}  {'CAPTURE':<16}  LAYOUTS")
    for record in records:
        layouts = ", ".join(sorted({location.layout for location in record.locations})) or "-"
        click.echo(f"{record.drafter_id[:SHORT_ID]}  {_target(record):<40}  "
                   f"{_boundaries(record.capture_boundaries):<16}  {layouts}")


@registry_group.command("show")
@click.argument("drafter_id", metavar="ID")
@registry_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@run_guarded
def show_cmd(drafter_id: str, registry_path: str | None, as_json: bool) -> None:
    """Everything recorded about one drafter (ID: the id or a unique prefix of 4+ characters)."""
    from ..records import acceptance_of, show

    record = show(drafter_id, registry_path)
    measured = acceptance_of(record.drafter_id, registry_path)
    if as_json:
        emit_json({"record": record.model_dump(mode="json"),
                   "acceptance": [m.model_dump(mode="json") for m in measured]})
        return
    print_record(record)
    click.echo(f"acceptance {len(measured)} measurement(s) by verify (mean accepted length, the bonus token counted)")
    for m in measured:
        target = m.target_name_or_path + (f"@{m.target_revision}" if m.target_revision else "")
        rates = " ".join(f"{rate:.2f}" for rate in m.per_position)
        click.echo(f"  {m.mean_accepted_length:.3f} at k={m.k} (by position {rates}) with {target}, boundaries "
                   f"{m.capture_boundaries}, {m.prompts} prompts {m.prompts_sha256[:12]}, {m.device}, "
                   f"{m.measured_at:{TIME}} UTC")


@registry_group.command("lineage")
@click.argument("drafter_id", metavar="ID")
@registry_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@run_guarded
def lineage_cmd(drafter_id: str, registry_path: str | None, as_json: bool) -> None:
    """The conversions that produced each recorded copy of a drafter, oldest first."""
    from ..records import lineage

    edges = lineage(drafter_id, registry_path)
    if as_json:
        emit_json({"lineage": [edge.model_dump(mode="json") for edge in edges]})
        return
    if not edges:
        click.echo("no conversions recorded")
    for edge in edges:
        click.echo(_edge(edge))


@registry_group.command("remove")
@click.argument("drafter_id", metavar="ID")
@registry_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@run_guarded
def remove_cmd(drafter_id: str, registry_path: str | None, as_json: bool) -> None:
    """Forget a drafter, its locations and lineage (the checkpoints themselves are not touched)."""
    from ..records import remove

    removed = remove(drafter_id, registry_path)
    if as_json:
        emit_json({"removed": removed})
        return
    click.echo(f"removed {removed}")


@registry_group.command("sync")
@click.argument("sources", nargs=-1, required=True, metavar="ORG_OR_REPO...")
@click.option("--verify", is_flag=True,
              help="Also read the safetensors headers (HTTP Range) of repos we published, and check their sidecar "
                   "against config.json with the layout readers.")
@hub_options
@registry_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@run_guarded
def sync_cmd(sources: tuple[str, ...], verify: bool, endpoint: str | None, token: str | None,
             registry_path: str | None, as_json: bool) -> None:
    """Record the drafters on the Hub: every model of an org or user, or the repos named (org/name).

    Reads card, config.json, eagle3-convert.json, and the safetensors headers with the d2t/t2d vocabulary map
    (or a GGUF's header and small tensors; HTTP Range), never the weight matrices. A fact the registry holds is never overwritten: where the Hub disagrees (capture boundaries, target) the repo is
    reported as a conflict, nothing of it is recorded, and the exit status is 1. Broken repos are listed with
    their finding code and do not fail the sync.
    """
    from ..hub_index import sync

    report = sync(list(sources), registry_path, endpoint=endpoint, token=token, verify=verify)
    doc = report.as_dict()
    conflicts = report.count("conflict")
    if not as_json:
        for entry in report.entries:
            where = entry.uri or entry.repo_id
            if entry.status == "conflict":  # which record, and why this copy is that drafter
                click.echo(f"{entry.status:<12} {where}: {entry.message} (the record of drafter "
                           f"{entry.drafter_id[:SHORT_ID]}) [{entry.code}]")
                for note in entry.notes:
                    click.echo(f"{'':<12} note: {note}")
            elif entry.status == "broken":
                click.echo(f"{entry.status:<12} {where}: {entry.message} [{entry.code}]")
            else:
                click.echo(f"{entry.status:<12} {where} ({entry.layout}) drafter {entry.drafter_id[:SHORT_ID]} "
                           f"target {entry.target or '?'} boundaries {_boundaries(entry.capture_boundaries)}")
        click.echo(", ".join(f"{n} {status}" for status, n in doc["counts"].items()))
    if conflicts:
        fail(f"{conflicts} repo(s) disagree with the registry's records, which were kept",
             "check the repos listed as conflict; `eagle3-convert registry add SRC --capture-layers ... "
             "--convention ...` states the training truth", "E-SYNC-CONFLICT", 1, **doc)
    if as_json:
        emit_json(doc)


@registry_group.command("site")
@click.argument("out_dir", required=False, type=click.Path(file_okay=False))
@engine_option("A column of the index per engine runner and release (default: every runner's newest release).")
@click.option("--hub", is_flag=True, help="Also judge the Hub copies (config.json and headers by HTTP Range; without "
              "it they are listed, not judged).")
@click.option("--force", is_flag=True, help="Replace OUT_DIR holding a site this command wrote before.")
@click.option("--no-cache", is_flag=True, help="Read and judge every copy afresh (default: a local copy whose files, "
              "record and releases are as a previous build saw them reuses its verdicts; $EAGLE3_SITE_CACHE).")
@click.option("--serve", is_flag=True, help="Then serve it on 127.0.0.1 for a quick look (without OUT_DIR: a "
              "temporary directory, removed afterwards); stops on Ctrl-C or after --serve-for.")
@click.option("--port", type=click.IntRange(0, 65535), default=8037, show_default=True,
              help="--serve's port (0: any free one).")
@click.option("--serve-for", type=click.IntRange(1, 86400), default=3600, show_default=True, metavar="SECONDS",
              help="--serve stops after this long.")
@hub_options
@registry_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@run_guarded
def site_cmd(out_dir: str | None, engines: tuple[Any, ...], hub: bool, force: bool, no_cache: bool, serve: bool,
             port: int,
             serve_for: int, endpoint: str | None, token: str | None, registry_path: str | None,
             as_json: bool) -> None:
    """Write the registry as a static site in OUT_DIR: an index of the drafters with each engine release's verdict,
    a page per drafter (record, history, copies, lineage, verdicts across releases, serve commands, acceptance
    charts) and a page per target. Publish the directory anywhere; nothing of ours runs to read it.

    The directory is written whole or not at all. The pages read without JavaScript; it sorts, filters and draws
    the charts (Vega, shipped in the site: no network)."""
    import tempfile
    import time
    from pathlib import Path

    from ..engines import releases_of
    from ..records import opened
    from ..site import gather
    from ..site_pages import bind, render, serve as serve_site, write

    if out_dir is None and not serve:
        raise UsageError("registry site needs OUT_DIR (or --serve for a quick look)",
                         "eagle3-convert registry site ./registry-site")
    choices = chosen_engines(engines)
    begun = time.monotonic()
    scratch = tempfile.TemporaryDirectory(prefix="eagle3-site-") if out_dir is None else None
    dest = Path(scratch.name) / "site" if scratch is not None else Path(out_dir)
    server = None
    try:
        server = bind(dest, port) if serve else None
        with opened(registry_path, create=False) as store:
            hub_reader = None
            if hub:
                from ..hub_index import reader

                hub_reader = reader(endpoint, token)
            facts = gather(store, choices, hub_reader, cache=not no_cache)
        files = render(facts)
        write(dest, files, force)
        seconds = time.monotonic() - begun
        doc = {"out_dir": str(dest), "drafters": len(facts.drafters), "targets": len(facts.targets()),
               "files": len(files), "columns": [c.key for c in facts.columns], "seconds": round(seconds, 3),
               "copies_judged": facts.cache.judged, "copies_unchanged": facts.cache.hits}
        if as_json and not serve:
            emit_json(doc)
        else:
            for line in dict.fromkeys(releases_of(c.engine).stand_in_why(c.release) for c in facts.columns
                                      if c.judged_by):
                click.echo(line)
            if facts.cache.problem:
                click.echo(facts.cache.problem)
            click.echo(f"wrote {dest}: {doc['drafters']} drafter(s), {doc['targets']} target(s), {doc['files']} "
                       f"files in {seconds:.1f} s ({facts.cache.judged} copies judged, {facts.cache.hits} unchanged "
                       f"since a previous build); open {dest / 'index.html'}")
        if server is not None:
            try:
                serve_site(server, serve_for, lambda url: click.echo(f"serving {url} (Ctrl-C stops)"))
            except KeyboardInterrupt:  # the way a quick look ends: no error
                click.echo("stopped")
    finally:
        if server is not None:
            server.server_close()
        if scratch is not None:
            scratch.cleanup()
