"""`inspect`: what is on disk, as stored, and what the tool makes of it, even when the file is broken."""

from __future__ import annotations

import json
from typing import Any

import click

from ..errors import Eagle3Error
from . import main
from .common import emit_json, error_dict, fail, hub_options, hub_progress_bars, registry_known, registry_option, run_guarded
from .convert import _layout_choice, capture_rows, trtllm_lines, trtllm_serve
from .validate import echo_findings

HUMAN_TENSOR_ROWS = 500  # a hostile header can name millions of tensors; --json lists every one


@main.command("inspect")
@click.argument("src")
@click.option("--from", "from_layout", type=_layout_choice(True), default="auto", show_default=True,
              help="Read SRC as this layout instead of detecting it (for a file detection cannot place).")
@click.option("--target", metavar="CONFIG_OR_DIR", help="Target config, to show ids for its depth and family.")
@click.option("--revision", help="Hub revision when SRC is a repo id.")
@hub_options
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (docs/json.md).")
@registry_option
@run_guarded
def inspect_cmd(src: str, from_layout: str, target: str | None, revision: str | None, endpoint: str | None,
                token: str | None, as_json: bool, registry_path: str | None = None) -> None:
    """What SRC holds on disk (config as stored, tensors by stored name), how it reads, and every finding.

    Shows a broken checkpoint too (truncated weights, bad JSON, unknown layout), as far as it can be
    read. Exit status 1 when a finding is an error (as `validate`), else 0.
    """
    from ..validate import Finding, load_target_facts, read_raw, validate_checkpoint
    from ..convert import make_options, read_source
    from ..sources import resolve_source

    facts = load_target_facts(target, endpoint=endpoint, token=token) if target else None
    with hub_progress_bars(not as_json):
        path, commit = resolve_source(src, revision, endpoint=endpoint, token=token)
    label = f"{src}@{commit}" if commit else src
    raw, read_findings = read_raw(path)  # read once: validate and the reader below take what it read
    known = registry_known(path, registry_path, uri=f"hf://{src}@{commit}" if commit else None)
    report = validate_checkpoint(path, from_layout=from_layout, target=facts, source_label=label,
                                 read=(raw, list(read_findings)), known=known)
    findings = list(report.findings)
    drafter_view, refusal = None, None
    try:
        options = make_options(endpoint=endpoint, token=token)
        options.target = facts
        options.known = list(known)
        source = read_source(str(path), from_layout, options, load=raw.load)
        drafter_view = _drafter_view(source, options)
        drafter_view["trtllm_serve"] = _trtllm_view(src, raw, source.drafter.config, drafter_view["capture"],
                                                    options)
    except Eagle3Error as exc:  # what the reader refuses is a finding here, never the end of the output
        refusal = exc
        if not any(f.code == exc.code and f.severity == "error" for f in findings):
            findings.insert(0, Finding(exc.code, "error", exc.message, exc.hint))
    verdict = None
    if refusal is not None:  # the reader's own words first: they say why nothing could be converted
        # with validate's hint when it has one: worded (and planned) for a command that is not convert
        found = next((f for f in findings if f.code == refusal.code and f.severity == "error"), None)
        verdict = (refusal.message, found.hint if found else refusal.hint, refusal.code, 1)
    elif report.failed():
        worst = next(f for f in findings if f.severity == "error")
        verdict = (worst.message, worst.hint or "see the findings above", worst.code, 1)
    data = {
        "source": f"hf://{src}@{commit}" if commit else str(path.resolve()), "given": src,
        "layout": report.layout, "checked_as": report.candidates, "detected_by": report.detected_by,
        "files": raw.files, "config": raw.config,
        "tensors": [_stored_tensor(name, t, name not in raw.cut) for name, t in sorted(raw.tensors.items())],
        "drafter": drafter_view,
        "counts": {s: sum(1 for f in findings if f.severity == s) for s in ("error", "warning", "info")},
        "findings": [f.to_dict() for f in findings],
    }
    if verdict is not None:
        data.update(ok=False, error=error_dict(*verdict))
    if as_json:
        emit_json(data)
    else:
        _print(label, data)
    if verdict is not None:
        fail(*verdict)


def _stored_tensor(name: str, t: Any, complete: bool) -> dict[str, Any]:
    file = getattr(t, "file", None)
    return {"name": name, "dtype": t.dtype, "shape": list(t.shape), "bytes": t.nbytes,
            "file": file.name if file is not None else None, "complete": complete}


def _drafter_view(source: Any, options: Any) -> dict[str, Any]:
    """The canonical reading: what convert would carry to another layout."""
    from ..quantization import module_schemes

    drafter = source.drafter
    cfg = drafter.config
    vocab = None
    if drafter.vocab is not None:
        vocab = {"draft_vocab_size": drafter.vocab.draft_vocab_size, "vocab_size": drafter.vocab.vocab_size,
                 "first_target_ids": list(drafter.vocab.target_ids[:8])}
    return {
        "layout": source.detection.layout, "config": cfg.semantic_dict(),
        "target": cfg.target.model_dump() if cfg.target else None, "capture": capture_rows(drafter, options.target),
        "vocab_map": vocab, "tensors": sorted(drafter.tensors), "notes": list(drafter.notes),
        "quantization": None if cfg.quantization is None else {
            "scheme": cfg.quantization.model_dump(), "modules": module_schemes(drafter.tensors, cfg.quantization)},
    }


def _trtllm_view(src: str, raw: Any, cfg: Any, capture: dict[str, Any], options: Any) -> dict[str, Any]:
    """TensorRT-LLM's serve snippet for SRC, or for the `--to modelopt` copy when it does not load SRC as it is."""
    from ..engines import REFUSES, WRONG, serve_verdicts, target_context

    ctx = target_context(cfg, options.target)
    verdict = serve_verdicts(raw.config or {}, list(raw.tensors), cfg, ctx, engines=("trtllm",))["trtllm"]
    if verdict.verdict in (REFUSES, WRONG):
        return trtllm_serve(capture, "DST", verdict, f"`eagle3-convert convert --to modelopt {src} DST` writes the "
                                                     "layout it loads, or says why it cannot")
    return trtllm_serve(capture, src, verdict)


def _print(label: str, data: dict[str, Any]) -> None:
    from ..drafter import MATH_FLAGS

    click.echo(label)
    layout = data["layout"] or (" or ".join(data["checked_as"]) if data["checked_as"] else "unknown")
    click.echo(f"  layout       {layout}" + (f" ({data['detected_by']})" if data["detected_by"] else ""))
    click.echo(f"  files        {', '.join(data['files']) or 'none readable'}")
    if data["config"] is None:
        click.echo("  config.json  unreadable (see the findings)")
    else:
        gguf = data["config"].get("_gguf")  # a GGUF has no config.json: its keys (the tokenizer's left out)
        click.echo(f"  metadata     {gguf['file']}'s keys as stored ({len(data['config']) - 1} keys; "
                   f"{gguf['tokenizer_size']} tokenizer tokens not shown)" if isinstance(gguf, dict) else
                   f"  config.json  as stored ({len(data['config'])} keys)")
        for key, value in data["config"].items():
            if key == "_gguf":  # our note of the file, not one of its keys
                continue
            text = json.dumps(value, default=str)
            click.echo(f"    {key}: {text if len(text) <= 160 else text[:157] + '...'}")
    view = data["drafter"]
    if view is not None:
        cfg = view["config"]
        if cfg.get("kind", "eagle3") != "eagle3":  # (an EAGLE-3 drafter's config names no kind)
            click.echo(f"  kind         {cfg['kind']}, mask token {cfg.get('mask_token_id')}")
        click.echo(f"  family       {cfg.get('family')}, {cfg.get('num_layers')} layer(s), hidden "
                   f"{cfg.get('hidden_size')}, heads {cfg.get('num_attention_heads')}/"
                   f"{cfg.get('num_key_value_heads')}, intermediate {cfg.get('intermediate_size')}")
        click.echo(f"  vocab        target V={cfg.get('vocab_size')}, draft Vd={cfg.get('draft_vocab_size')}"
                   + (" (d2t/t2d map)" if view["vocab_map"] is not None else " (no map: Vd == V)"))
        final = cfg.get("capture") == "final"  # fed the target's final state (converters/final_state.py)
        click.echo("  fuses        nothing: fed the target's final post-norm hidden state (no fc)" if final else
                   f"  fuses        k={cfg.get('num_aux_hidden_states')} states of width {cfg.get('target_hidden_size')}")
        flags = [f for f in MATH_FLAGS if cfg.get(f)]
        click.echo(f"  flags        {', '.join(flags) or 'none'}")
        if view["quantization"]:
            scheme = view["quantization"]["scheme"]
            click.echo(f"  quantized    {scheme['algo']} ({scheme['method']}), per module:")
            for module, how in view["quantization"]["modules"].items():
                click.echo(f"    {module:<36} {how}")
        if view["target"]:
            click.echo(f"  target       {view['target'].get('name_or_path')} "
                       f"{view['target'].get('architectures') or ''}")
        capture = view["capture"]
        if final:
            click.echo("  capture      no layers (eagle_config.use_aux_hidden_state false)")
        else:
            click.echo(f"  capture      boundaries {capture['boundaries']} "
                       f"(target layers: {capture['target_layers'] or '?'})")
        for engine, ids in capture["per_engine"].items() if not final else ():
            click.echo(f"    {engine:<12} {ids}")
        for line in trtllm_lines(view["trtllm_serve"]):
            click.echo(f"  {line}")
    else:
        click.echo("  drafter      not readable as a drafter (see the findings)")
    tensors = data["tensors"]
    click.echo(f"  tensors      {len(tensors)}, as stored")
    for t in tensors[:HUMAN_TENSOR_ROWS]:
        click.echo(f"    {t['name']:<48} {t['dtype']:<5} {t['shape']}" + ("" if t["complete"] else "  (truncated)"))
    if len(tensors) > HUMAN_TENSOR_ROWS:
        click.echo(f"    ... and {len(tensors) - HUMAN_TENSOR_ROWS} more (--json lists every one)")
    echo_findings(data["findings"])
    for note in (view or {}).get("notes", []):
        click.echo(f"note: {note}")
