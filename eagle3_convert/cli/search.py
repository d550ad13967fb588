"""`search --target NAME`: the drafters trained for a target, and how each engine serves each copy."""

from __future__ import annotations

import click

from typing import Any

from ..names import LABELS
from . import main
from .common import chosen_engines, emit_json, engine_option, hub_options, registry_option, run_guarded


@main.command("search")
@click.option("--target", required=True, metavar="NAME", help="The target model as recorded (a Hub repo id: case does not matter).")
@engine_option("Only this engine's verdicts (vllm: both of its runners; vllm-v1 or vllm-v2: one).")
@click.option("--hub", is_flag=True, help="Also search the Hub (repos whose card names the target as base_model).")
@hub_options
@registry_option
@click.option("--verbose", "-v", is_flag=True, help="One line per engine and copy: the layers it captures and why.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@run_guarded
def search_cmd(target: str, engines: tuple[Any, ...], hub: bool, endpoint: str | None, token: str | None,
               registry_path: str | None, verbose: bool, as_json: bool) -> None:
    """The drafters trained for TARGET, from the registry (and the Hub with --hub), with the layers each
    engine captures from each copy and whether it serves it as trained. Reads no weights.

    One line per copy, its engines grouped by verdict; --verbose (or --json) for each engine's reading."""
    from ..engines import judged_releases
    from ..hub_index import search
    from ..registry.recording import conflict_message

    choices = chosen_engines(engines)
    found = search(target, registry_path, engines=[c.spelling for c in choices], hub=hub, endpoint=endpoint,
                   token=token, releases=judged_releases(choices))
    if as_json:
        emit_json(found)
        return
    from ..engines import releases_of

    for line in dict.fromkeys(releases_of(c.spelling).stand_in_why(c.release) for c in choices
                              if c.release and not releases_of(c.spelling).knows(c.release)):
        click.echo(line)  # what every verdict below for that release rests on
    if found["no_registry"]:
        click.echo(found["no_registry"])
    if not found["drafters"] and (hub or not found["no_registry"]):
        click.echo(f"no drafters found for {target}" + ("" if hub else " in the registry (--hub also asks the Hub)"))
        if found["similar_targets"]:
            click.echo(f"recorded targets with a similar name: {', '.join(found['similar_targets'])}")
    for item in found["drafters"]:
        where = "+".join(w for w, on in (("registry", item["in_registry"]), ("hub", item["on_hub"])) if on)
        bounds = item["capture_boundaries"]
        if item["drafter_id"] is None:
            click.echo(f"unreadable  ({where})")
        else:
            click.echo(f"drafter {item['drafter_id'][:12]}  boundaries {'engine default' if bounds is None else bounds}"
                       f"  ({where})")
        for copy in item["copies"]:
            if copy.get("conflicts"):  # judged against the record all the same: the training truth is its
                click.echo(f"  {copy['layout'] or '?'}  {copy['uri']}  disagrees with the record: "
                           f"{conflict_message(copy['conflicts'])} [E-SYNC-CONFLICT]")
            if copy["serves"] is None:
                click.echo(f"  {copy['layout'] or '?'}  {copy['uri']}  not judged: {copy['why']}")
                continue
            if not verbose:
                click.echo(f"  {copy['layout'] or '?'}  {copy['uri']}  {by_verdict(copy['serves'])}")
                continue
            click.echo(f"  {copy['layout'] or '?'}  {copy['uri']}")
            for name, v in copy["serves"].items():
                click.echo(f"    {LABELS[name] + ' ' + (v.get('release') or ''):<36} {v['verdict']:<15} {reading(v)}")
                if v.get("releases"):
                    from ..engines import describe_spans

                    click.echo(f"      across releases: {describe_spans(v['releases'])}")


def by_verdict(serves: dict[str, dict]) -> str:
    """'as-trained: sglang vllm-v1; refuses: speculators': the engines (as --engine names them) per verdict,
    best first."""
    from ..engines import AS_TRAINED, DEFAULT_LAYERS, REFUSES, RUNTIME_LAYERS, UNKNOWN, WRONG

    order = (AS_TRAINED, DEFAULT_LAYERS, RUNTIME_LAYERS, WRONG, REFUSES, UNKNOWN)
    groups = {verdict: [name for name, v in serves.items() if v["verdict"] == verdict] for verdict in order}
    disagree = [name for name, v in serves.items() if v.get("releases")]
    return "; ".join(f"{verdict.upper() if verdict == WRONG else verdict}: {' '.join(names)}"
                     for verdict, names in groups.items() if names) + (
        f" (releases disagree: {' '.join(disagree)}; --verbose says how)" if disagree else "")


def reading(v: dict) -> str:
    """What an engine captures and why, naming the layers once."""
    if v["captures"] is None or str(v["captures"]) in v["why"]:
        return v["why"]
    return f"captures {v['captures']}: {v['why']}"
