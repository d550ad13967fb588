"""`convert`, the default command (`inspect` lives in inspect.py)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import click

from ..capture_ids import IDS_KEY, capture_context, convention_table
from ..errors import Eagle3Error, UsageError
from ..names import CAPTURE_CONVENTIONS, LABELS, LAYOUTS
from ..vocab_map import REPAIR_COMMAND
from ..registry.errors import RegistryError
from ..registry.paths import registry_exists
from . import main
from .common import (
    Progress,
    chosen_engines,
    emit_json,
    engine_option,
    hub_options,
    hub_progress_bars,
    human_bytes,
    parse_ids,
    registry_option,
    run_guarded,
    warn_twin,
    warn_unrecorded,
)


class LayoutChoice(click.Choice):
    """The built-in layouts in --help; a layout a plugin registers (entry points) is accepted too."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and value not in self.choices:
            from ..converters.registry import get_layout

            try:
                return get_layout(value).name
            except UsageError as exc:
                if exc.code == "E-LAYOUT-PLUGIN":
                    self.fail(f"{exc.message} [{exc.code}] — hint: {exc.hint}", param, ctx)
        return super().convert(value, param, ctx)


def _layout_choice(with_auto: bool) -> click.Choice:
    return LayoutChoice((("auto",) if with_auto else ()) + LAYOUTS)


def parse_size(text: str | None) -> int | None:
    if not text:
        return None
    # Like transformers' max_shard_size: 5GB is 5 * 10**9 bytes, 5GiB is 5 * 2**30.
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(i?)B?\s*", text, re.IGNORECASE)
    if not m or float(m.group(1)) <= 0:
        raise click.BadParameter(f"{text!r} is not a size like 5GB or 500MiB")
    power = " KMGT".index(m.group(2).upper() or " ")
    return int(float(m.group(1)) * (1024 if m.group(3) else 1000) ** power)


def capture_rows(drafter: Any, target: Any) -> dict[str, Any]:
    cfg = drafter.config
    family, depth = capture_context(cfg.family, target, cfg.target)  # as convert spells the ids
    return {"boundaries": cfg.capture_boundaries if cfg.capture_boundaries is not None else "engine default",
            "target_layers": depth, "target_family": family,
            "per_engine": convention_table(cfg.capture_boundaries, depth, family)}


def trtllm_serve(capture: dict[str, Any], model_dir: str, verdict: Any = None,
                 instead: str | None = None) -> dict[str, Any]:
    """TensorRT-LLM's `speculative_config` for this drafter (engines/trtllm.py), from capture_rows' facts;
    `verdict` is TensorRT-LLM's on the files at `model_dir`, `instead` what to do when it is no serve."""
    from ..engines import REFUSES, UNKNOWN, WRONG
    from ..engines.trtllm import serve_snippet

    boundaries = capture["boundaries"] if isinstance(capture["boundaries"], list) else None
    out = serve_snippet(boundaries, capture["target_layers"], model_dir)
    out["note"] = None
    if verdict is not None and verdict.verdict in (REFUSES, WRONG):
        out["note"] = (f"TensorRT-LLM (from source, not loaded) {SERVE_WORDS[verdict.verdict]} as it is: "
                       f"{verdict.why}" + (f"; {instead}" if instead else ""))
    elif verdict is not None and verdict.verdict == UNKNOWN:  # the YAML is no claim that it serves the file
        out["note"] = f"TensorRT-LLM (from source, not loaded): {SERVE_WORDS[UNKNOWN]}: {verdict.why}"
    return out


def llama_server(result: Any, target_gguf: str) -> dict[str, Any]:
    """The GGUF `--to gguf` wrote (`eagle3-<name>-<TYPE>.gguf` in DST) and the llama-server command that
    drafts with it for the `--target-gguf` it was written against."""
    from ..engines.llamacpp import serve_argv

    gguf = str(result.dest / next(name for name in result.files if name.endswith(".gguf")))
    argv = serve_argv(target_gguf, gguf)
    return {"gguf": gguf, "argv": argv, "command": shlex.join(argv)}


def holds_ids(config: dict[str, Any]) -> bool:
    """Whether a config as stored (or planned) names capture ids anywhere an engine reads them."""
    from ..engines import gguf_metadata

    meta = gguf_metadata(config)
    if meta is not None:
        arch = meta.get("general.architecture")
        return isinstance(meta.get(f"{arch}.target_layers"), list)  # eagle3.* or dflash.* (top level: #25116)
    nested = config.get("eagle_config") if isinstance(config.get("eagle_config"), dict) else {}
    dflash = config.get("dflash_config") if isinstance(config.get("dflash_config"), dict) else {}
    return any(isinstance(c.get(key), list) and c.get(key) for c, key in (
        (config, IDS_KEY), (nested, IDS_KEY), (config, "aux_hidden_state_layer_ids"),  # DFlash/DSpark's own
        (dflash, "target_layer_ids")))


def capture_line(boundaries: Any, source: str, dest: str, spelled: Any, source_held: bool, dest_holds: bool) -> str:
    """One line: the boundaries and each config's spelling of them on disk. A layout is named once; a config
    that holds no ids is not said to spell them (where ids came from instead, a note says)."""
    parts = []
    if source_held and source != dest:
        parts.append(f"as read from {source}: {spelled(source)}")
    if dest_holds:
        parts.append(f"as written for {dest}: {spelled(dest)}")
    elif boundaries != "engine default":
        parts.append(f"the {dest} config holds none: its engines capture their defaults, the trained layers")
    return f"capture layers: boundaries {boundaries}" + "".join(f"; {part}" for part in parts)


def trtllm_lines(serve: dict[str, Any]) -> list[str]:
    head = "TensorRT-LLM (from source, not loaded) takes the capture layers at serve time; its YAML:"
    return [f"note: {serve['note']}"] * bool(serve["note"]) + [head, *serve["yaml"].splitlines()]


SERVE_WORDS = {"as-trained": "serves as trained", "default-layers": "serves with its default layers (the trained "
                "ones)", "runtime-layers": "serves when told the layers", "refuses": "refuses it loudly",
               "wrong": "serves it WRONG", "unknown": "no verdict"}


def serve_lines(serves: dict[str, Any]) -> list[str]:
    """One line per engine and the release judged: where the output can be served, and why not elsewhere; a second
    line where the releases we know disagree."""
    lines = []
    for engine, v in serves.items():
        lines.append(f"  {LABELS[engine] + ' ' + v.release:<40} {SERVE_WORDS[v.verdict]}: {v.why}")
        if v.across:
            lines.append(f"      across releases: {v.disagreement()}")
    return lines


def _open_registry(registry_path: str | None) -> Any:
    """The registry the conversion is recorded in, opened before any byte is written: an unusable registry
    should not cost a conversion."""
    from ..registry.store import open_registry

    try:
        return open_registry(registry_path)
    except RegistryError as exc:
        raise RegistryError(exc.message, f"{exc.hint}; or convert with --no-registry") from exc


def _registry_lookup(options: Any, store: Any, registry_path: str | None) -> Any:
    """What convert asks the registry once SRC is read: its record of these weights (found by them, wherever SRC
    lies), into `options.known` (config.json is checked against it, and the capture layers a config lost are
    restored from it); returning, for the sidecar's from_registry, the layers it states (never a default derived
    from what another conversion recorded). None where there is no registry: nothing to ask, nothing imported."""
    if store is None and not registry_exists(registry_path):
        return None
    from ..provenance import from_record
    from ..records import RegistryFact, known_record

    def look(source: Any) -> dict[str, Any] | None:
        try:
            record = known_record(source.path, store if store is not None else registry_path,
                                  uri=source.uri if source.commit else None, drafter=source.drafter)
        except RegistryError as exc:
            raise RegistryError(exc.message, f"{exc.hint}; or convert with --no-registry") from exc
        if record is None or record.id_kind == "hub-fingerprint":
            return None  # sync's reading of a Hub copy, not a training record: recording says where they disagree
        options.known.append(from_record(record))
        if record.capture_boundaries is None or options.capture_stated:
            return None
        return RegistryFact.of(record).as_dict()

    return look


@main.command("convert")
@click.option("--from", "from_layout", type=_layout_choice(True), default="auto", show_default=True,
              help="Source layout; auto detects it and says how.")
@click.option("--to", "to_layout", type=_layout_choice(False), required=True, help="Destination layout.")
@click.argument("src")
@click.argument("dst", type=click.Path(file_okay=False))
@click.option("--verifier", metavar="NAME_OR_PATH",
              help="Target model the drafter proposes for (needed by --to speculators when SRC does not say).")
@click.option("--target", metavar="CONFIG_OR_DIR", help="Target config: depth and family for capture-id quirks.")
@click.option("--revision", help="Hub revision when SRC is a repo id.")
@hub_options
@click.option("--force", is_flag=True, help="Replace a non-empty DST.")
@click.option("--max-shard-size", metavar="SIZE", callback=lambda ctx, param, value: parse_size(value), help="Split the weights into shards of at most SIZE (e.g. 5GB).")
@click.option("--repair-d2t-absolute", is_flag=True,
              help="Rewrite a d2t stored as absolute target ids into offsets (only when validate says so).")
@click.option("--trained-with", metavar="TEXT", help="Free-form provenance (trainer, data, run) for the sidecar "
              "and the registry.")
@click.option("--capture-layers", metavar="IDS", help="Capture-layer ids the training used (e.g. 1,15,28), for a "
              "source whose config lost them; with --convention. Default: the ids the registry's record of SRC "
              "states (printed, and kept in the sidecar's from_registry).")
@click.option("--convention", type=click.Choice(CAPTURE_CONVENTIONS),
              help="How --capture-layers counts: boundary, or the engine/trainer whose config they come from.")
@click.option("--correct-record", is_flag=True, help="--capture-layers corrects the training record (the "
              "registry's, the sidecar's) they contradict; without it such ids are refused. The record keeps the "
              "change in its history.")
@registry_option
@click.option("--no-record", is_flag=True, help="Do not record the conversion in the registry.")
@click.option("--no-registry", is_flag=True, help="Leave the registry out: take no fact from it (the output "
              "depends only on SRC and the flags) and record nothing.")
@click.option("--target-gguf", metavar="PATH", help="--to gguf: the target's own GGUF (llama.cpp reads the "
              "drafter's tokenizer, depth and width from it).")
@click.option("--outtype", type=click.Choice(("auto", "bf16", "f16", "f32")), default="auto", show_default=True,
              help="--to gguf: dtype of the 2-D weights (auto keeps the source's; norms are F32, d2t I64).")
@click.option("--drop-embed", type=click.Choice(("identical", "frozen")), help="Leave out the stored embed_tokens, "
              "so that every engine drafts with the target's: identical, when it is the target's table value for "
              "value (needs --target DIR with weights); frozen, stating the drafter was trained on the target's "
              "frozen embedding (whatever table the file holds).")
@click.option("--rope-theta", metavar="THETA", help="The RoPE base the drafter was trained at (or `target`: the "
              "target's rope, scaling included, from --target DIR), written in every spelling.")
@engine_option("Judge the per-engine lines for this release (engines not named: their newest).")
@click.option("--json", "as_json", is_flag=True, help="Print a machine-readable summary.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar and no per-engine verdict table (an engine that "
              "would serve the output wrong is still said).")
@run_guarded
def convert_cmd(from_layout: str, to_layout: str, src: str, dst: str, verifier: str | None, target: str | None,
                revision: str | None, endpoint: str | None, token: str | None, force: bool,
                max_shard_size: int | None, repair_d2t_absolute: bool, trained_with: str | None,
                capture_layers: str | None, convention: str | None, registry_path: str | None, no_record: bool,
                no_registry: bool, as_json: bool, quiet: bool, correct_record: bool = False,
                target_gguf: str | None = None,
                outtype: str = "auto", engines: tuple[Any, ...] = (), drop_embed: str | None = None,
                rope_theta: str | None = None) -> None:
    """Convert the drafter in SRC (directory or Hub repo id) to another layout in DST.

    Lossless: tensors are copied byte for byte (only d2t/t2d may be rebuilt); capture-layer
    ids are translated between engine conventions; a drafter the destination cannot express
    is refused. DST appears complete or not at all. The conversion is recorded in the registry
    (drafter id, both copies, lineage) unless --no-record.
    """
    from ..convert import make_options, state_capture

    options = make_options(verifier, target, repair_d2t_absolute, endpoint=endpoint, token=token)
    state_capture(options, parse_ids(capture_layers), convention)
    if correct_record and capture_layers is None:
        raise UsageError("--correct-record corrects the record's capture layers with --capture-layers",
                         "pass --capture-layers IDS --convention C with it")
    options.target_gguf, options.outtype, options.correct_record = target_gguf, outtype, correct_record
    options.drop_embed, options.rope_theta = drop_embed, rope_theta
    from ..engines import judged_releases

    options.releases = judged_releases(chosen_engines(engines))
    store = None if no_record or no_registry else _open_registry(registry_path)
    try:
        result, recorded = _convert_and_record(
            src, dst, to_layout, from_layout, options, store, silent=quiet or as_json, revision=revision,
            endpoint=endpoint, token=token, force=force, max_shard_bytes=max_shard_size, trained_with=trained_with,
            registry_lookup=None if no_registry else _registry_lookup(options, store, registry_path))
    except Eagle3Error as exc:
        if exc.hint and REPAIR_COMMAND in exc.hint:  # the reader cannot know the command: this one, repaired
            exc.hint = exc.hint.replace(REPAIR_COMMAND, typed_command("--repair-d2t-absolute"))
        raise
    summary = conversion_summary(result, recorded, store, options.target, target_gguf)
    if as_json:
        emit_json(summary)
    else:
        print_summary(summary, result, quiet)


def typed_command(*extra: str) -> str:
    """This convert command as typed, `extra` flags first (what a hint tells the user to run instead); the token
    is never repeated."""
    ctx = click.get_current_context()
    options, args = [], []
    for param in ctx.command.params:
        value = ctx.params.get(param.name)
        if param.name == "token" or ctx.get_parameter_source(param.name) is not click.core.ParameterSource.COMMANDLINE:
            continue
        if isinstance(param, click.Argument):
            args.append(str(value))
        elif getattr(param, "is_flag", False):
            options += [param.opts[0]] * bool(value)
        else:  # an --engine choice is spelled back as typed; any other value as itself
            for one in value if getattr(param, "multiple", False) else (value,):
                release = getattr(one, "release", None)
                options += [param.opts[0], f"{one.spelling}=={release}" if release else getattr(one, "spelling", str(one))]
    return shlex.join(["eagle3-convert", *extra, *options, *args])


def _convert_and_record(src: str, dst: str, to_layout: str, from_layout: str, options: Any, store: Any, *,
                        silent: bool, **convert_args: Any) -> tuple[Any, Any]:
    """Convert SRC into DST (progress bars unless `silent`), then record it in `store` if one is open. A registry
    that fails then is a warning, not an error: DST is complete and its sidecar holds the facts."""
    from ..convert import convert

    bars: list[Progress] = []

    def progress(total: int):
        bars.append(Progress(total, f"writing {to_layout}", silent))
        return bars[-1].update

    def announce(source: Any) -> None:
        if not silent and from_layout == "auto":
            click.echo(f"detected {source.detection.layout}: {source.detection.reason}", err=True)

    recorded, record_error = None, None
    try:
        with hub_progress_bars(not silent):
            result = convert(src, dst, to_layout, from_layout, options=options, progress=progress,
                             on_source=announce, **convert_args)
        if store is not None:
            from ..records import record_conversion

            try:
                recorded = record_conversion(result, store)
            except RegistryError as exc:
                record_error = exc
    finally:
        for bar in bars:
            bar.close()
        if store is not None:
            store.close()
    if record_error is not None:
        warn_unrecorded("converted", record_error, dst)
    for conflict in recorded.conflicts if recorded else []:  # DST is written and recorded; the user still hears of it
        warn_twin(conflict)
    return result, recorded


def conversion_summary(result: Any, recorded: Any, store: Any, target: Any, target_gguf: str | None) -> dict[str, Any]:
    """What convert says of a conversion: the --json document, which the text output reads too."""
    capture = capture_rows(result.source.drafter, target)
    return {
        "source": result.source.uri, "from": result.source.detection.layout, "to": result.layout,
        "dest": str(result.dest), "files": result.files, "replaced": result.replaced,
        "tensors": len(result.plan.tensors), "bytes": sum(t.nbytes for t in result.plan.tensors.values()),
        "capture": capture, "notes": result.notes + (recorded.notes if recorded else []),
        "drafter_id": result.drafter_id, "recorded_in": str(store.path) if recorded else None,
        "serves": {engine: v.to_dict() for engine, v in result.serves.items()},
        "from_registry": result.facts.get("from_registry"),
        "registry_conflicts": recorded.conflicts if recorded else [],
        "trtllm_serve": (trtllm_serve(capture, str(result.dest), result.serves.get("trtllm"))
                         if result.layout == "modelopt" else None),
        "llama_server": llama_server(result, target_gguf) if result.layout == "gguf" else None,
    }


def print_summary(summary: dict[str, Any], result: Any, quiet: bool = False) -> None:
    """The text output: what was written, the capture layers, each engine's verdict (under --quiet only a wrong one),
    how to serve it, notes."""
    written = summary["llama_server"]["gguf"] if summary["llama_server"] else summary["dest"]
    click.echo(f"wrote {written} ({result.layout}): {summary['tensors']} tensors, {human_bytes(summary['bytes'])}")
    if result.replaced:
        click.echo(f"--force replaced: {', '.join(result.replaced)}")
    capture = summary["capture"]
    per_engine = capture["per_engine"]

    def spelled(layout: str) -> Any:  # a layout named after no engine (gguf) spells its engine's convention
        from ..converters.registry import get_layout

        return per_engine.get(layout) or per_engine.get(get_layout(layout).engine, "?")

    click.echo(capture_line(capture["boundaries"], result.source.detection.layout, result.layout, spelled,
                            holds_ids(result.source.stored_config or {}), holds_ids(result.plan.config)))
    from ..engines import WRONG

    shown = {e: v for e, v in result.serves.items() if v.verdict == WRONG} if quiet else result.serves
    for line in serve_lines(shown):
        click.echo(line)
    if summary["trtllm_serve"]:
        for line in trtllm_lines(summary["trtllm_serve"]):
            click.echo(line)
    if summary["llama_server"]:
        click.echo(f"serve it with the target's GGUF: {summary['llama_server']['command']}")
    if summary["recorded_in"]:
        click.echo(f"recorded drafter {result.drafter_id[:12]} in {summary['recorded_in']}")
    for note in summary["notes"]:
        click.echo(f"note: {note}")
