"""read -> check -> write: the conversion pipeline and its Python API."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from . import sidecar
from .converters.base import ConvertOptions, Detection, WritePlan, json_bytes, load_checkpoint, write_directory
from .converters.registry import detect, get_layout
from .drafter import Drafter, TargetIdentity
from .fingerprint import drafter_id, tensor_digests
from .hub import resolve_source
from .targets import load_target


@dataclass
class Source:
    """A drafter read from a directory or Hub repo, with how its layout was decided."""

    drafter: Drafter
    detection: Detection
    path: Path
    uri: str  # the local path, or hf://org/name@commit
    commit: str | None = None


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


def resolve_verifier(spec: str | None, target: TargetIdentity | None) -> TargetIdentity | None:
    """`--verifier`: its architectures come from its config.json when it is reachable locally."""
    if spec is None:
        return None
    local = Path(spec)
    if local.is_dir() and (local / "config.json").is_file() or local.is_file():
        return load_target(spec, name_or_path=spec)
    archs = target.architectures if target else []
    return TargetIdentity(name_or_path=spec, architectures=archs)


def make_options(verifier: str | None = None, target: str | None = None, repair_d2t_absolute: bool = False
                 ) -> ConvertOptions:
    target_identity = load_target(target) if target else None
    return ConvertOptions(verifier=resolve_verifier(verifier, target_identity), target=target_identity,
                          repair_d2t_absolute=repair_d2t_absolute)


def read_source(src: str, from_layout: str = "auto", options: ConvertOptions | None = None,
                revision: str | None = None, endpoint: str | None = None, token: str | None = None) -> Source:
    options = options or ConvertOptions()
    path, commit = resolve_source(src, revision, endpoint=endpoint, token=token)
    ckpt = load_checkpoint(path)
    if from_layout == "auto":
        detection = detect(ckpt)
    else:
        layout = get_layout(from_layout)
        detection = Detection(layout.name, True, "given with --from")
    drafter = get_layout(detection.layout).read(ckpt, options)
    uri = f"hf://{src}@{commit}" if commit else str(path.resolve())
    return Source(drafter, detection, path, uri, commit)


def merge_target(identity: TargetIdentity | None, config: TargetIdentity | None) -> TargetIdentity | None:
    """Who the target is (name, revision) completed with what its config says (depth, width, family)."""
    if config is None:
        return identity
    if identity is None:
        return config
    merged = identity.model_dump()
    for key, value in config.model_dump().items():
        if merged.get(key) in (None, []) and value not in (None, []):
            merged[key] = value
    return TargetIdentity.model_validate(merged)


def sidecar_facts(drafter: Drafter, options: ConvertOptions, source: Source | None) -> dict:
    cfg = drafter.config
    target = merge_target(options.verifier or cfg.target, options.target)
    facts = {
        "target": target.model_dump() if target else None,
        "capture_boundaries": cfg.capture_boundaries,
        "num_aux_hidden_states": cfg.num_aux_hidden_states,
        "draft_vocab_size": cfg.draft_vocab_size,
        "vocab_size": cfg.vocab_size,
        "flags": {f: getattr(cfg, f) for f in ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output")},
        "layout_extra": cfg.layout_extra,
    }
    if source is not None:
        facts["converted_from"] = {"layout": source.detection.layout, "uri": source.uri}
    return facts


def convert(src: str, dest: str | Path, to: str, from_layout: str = "auto", *,
            options: ConvertOptions | None = None, revision: str | None = None, force: bool = False,
            max_shard_bytes: int | None = None, endpoint: str | None = None, token: str | None = None,
            progress: Callable[[int], Callable[[int], None]] | None = None,
            on_source: Callable[[Source], None] | None = None) -> ConvertResult:
    """Convert the drafter at `src` (directory or Hub repo id) into layout `to` at `dest`."""
    options = options or ConvertOptions()
    layout = get_layout(to)
    source = read_source(src, from_layout, options, revision, endpoint, token)
    if on_source:
        on_source(source)
    plan = layout.plan(source.drafter, options)
    on_progress = progress(total_bytes(plan)) if progress else None
    facts = sidecar_facts(source.drafter, options, source)
    if plan.derived_keys:
        facts["derived_config_keys"] = plan.derived_keys
    # Hash the source while the kernel copies it: the id costs no extra wall time on 2+ cores.
    with ThreadPoolExecutor(max_workers=1) as pool:
        digests = pool.submit(tensor_digests, source.drafter)

        def sidecar_files() -> dict[str, bytes]:
            facts["drafter_id"] = drafter_id(source.drafter, digests.result())
            return {sidecar.SIDECAR_NAME: sidecar.build(layout=layout.name, config_bytes=json_bytes(plan.config),
                                                        facts=facts)}

        files = write_directory(Path(dest), plan.config, plan.tensors, sidecar_files,
                                src=source.path if not source.commit else None, force=force,
                                max_shard_bytes=max_shard_bytes, on_progress=on_progress)
    return ConvertResult(source, Path(dest), layout.name, files, plan, source.drafter.notes + plan.notes,
                         facts["drafter_id"], facts)


def total_bytes(plan: WritePlan) -> int:
    return sum(t.nbytes for t in plan.tensors.values())
