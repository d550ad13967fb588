"""`search --target NAME`: the drafters trained for a target, and how each engine serves each copy."""

from __future__ import annotations

import click

from ..names import ENGINE_SPELLINGS, LABELS
from . import main
from .common import emit_json, hub_options, registry_option, run_guarded


@main.command("search")
@click.option("--target", required=True, metavar="NAME", help="The target model as recorded (a Hub repo id: case does not matter).")
@click.option("--engine", type=click.Choice(ENGINE_SPELLINGS),
              help="Only this engine's verdicts (vllm: both of its runners; vllm-v1 or vllm-v2: one).")
@click.option("--hub", is_flag=True, help="Also search the Hub (repos whose card names the target as base_model).")
@hub_options
@registry_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@run_guarded
def search_cmd(target: str, engine: str | None, hub: bool, endpoint: str | None, token: str | None,
               registry_path: str | None, as_json: bool) -> None:
    """The drafters trained for TARGET, from the registry (and the Hub with --hub), with the layers each
    engine captures from each copy and whether it serves it as trained. Reads no weights."""
    from ..hub_index import search

    found = search(target, registry_path, engine=engine, hub=hub, endpoint=endpoint, token=token)
    if as_json:
        emit_json(found)
        return
    if not found["drafters"]:
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
            click.echo(f"  {copy['layout'] or '?'}  {copy['uri']}")
            if copy["serves"] is None:
                click.echo(f"    not judged: {copy['why']}")
                continue
            for name, v in copy["serves"].items():
                captures = "-" if v["captures"] is None else v["captures"]
                click.echo(f"    {LABELS[name]:<28} {v['verdict']:<15} captures {captures}: {v['why']}")
