"""`validate` on a GGUF drafter: our reader's checks, then llama.cpp's reading of the file."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from ..converters.gguf import LAYOUT as GGUF
from ..converters.gguf_file import RECORD_KEY
from ..converters.layout import ConvertOptions
from ..target_identity import TargetIdentity
from ..drafter import Drafter
from ..engines import block_diffusion
from ..engines.common import AS_TRAINED, id_list
from ..engines.llamacpp import read_gguf
from ..errors import Eagle3Error
from .deep import deep_scan
from .findings import Finding, Report, from_error
from .raw import RawCheckpoint


def validate_gguf(raw: RawCheckpoint, engines: Sequence[str] | None, label: str, deep: bool = False,
                  progress: Callable[[int], Callable[[int], None]] | None = None,
                  target: TargetIdentity | None = None) -> Report:
    """`validate` on a GGUF drafter: our reader's checks (names, shapes, d2t, keys), then llama.cpp's reading
    of the file (engines/llamacpp.read_gguf): the capture boundaries it takes, or its refusal."""
    findings: list[Finding] = []
    report = Report(label, "gguf", "general.architecture eagle3 (a GGUF)", ["llamacpp"], findings, candidates=["gguf"])
    for engine in engines or ():
        if engine != "llamacpp":
            findings.append(Finding("E-ENGINE-REFUSES", "error", f"{engine} does not load GGUF drafters",
                                    "check a GGUF with --engine llamacpp, or convert it (--to vllm)", engine=engine))
    ckpt = raw.checkpoint()
    drafter = None
    try:
        drafter = ckpt.read_as(GGUF, ConvertOptions())
    except Eagle3Error as exc:
        findings.append(from_error(exc, where=raw.files[0] if raw.files else None))
    meta = {k: v for k, v in ckpt.config.items() if not k.startswith("_")}
    if meta.get("general.architecture") == "dflash":
        report.detected_by = "general.architecture dflash (a GGUF)"
        findings += _dflash(meta, drafter)
        return report
    reading = read_gguf(meta, list(ckpt.tensors), meta.get(RECORD_KEY))
    if reading.refusal:
        findings.append(Finding("E-ENGINE-REFUSES", "error", f"llama.cpp refuses it: {reading.refusal}",
                                "rewrite it with `eagle3-convert --to gguf` from the source drafter", engine="llamacpp"))
    else:
        for why in reading.silent:
            findings.append(Finding("W-ENGINE-SILENT", "warning", why, "rewrite it with `eagle3-convert --to gguf`",
                                    engine="llamacpp"))
        for caveat in reading.caveats:
            findings.append(Finding("W-ENGINE-CAVEAT", "warning", caveat, "serve the source drafter with vLLM, which "
                                    "applies the window its layer_types trains", engine="llamacpp"))
        findings.append(Finding("I-CAPTURE-GGUF", "info", f"llama.cpp captures boundaries {reading.captures} "
                                "(eagle3.target_layers, the input of each block)", None, "eagle3.target_layers",
                                "llamacpp"))
    if target is not None and drafter is not None:
        depth = target.num_hidden_layers
        if depth is not None and reading.captures and max(reading.captures) > depth:
            findings.append(Finding("E-CAPTURE-UNREACHABLE", "error", f"eagle3.target_layers {reading.captures} "
                                    f"reach past the target's {depth} layers: llama.cpp aborts", None,
                                    "eagle3.target_layers", "llamacpp"))
    if deep:
        total = sum(t.nbytes for t in raw.tensors.values())
        report.manifest, more = deep_scan(raw.tensors, set(), on_bytes=progress(total) if progress else None)
        findings.extend(more)
    return report


def _dflash(meta: dict, drafter: Drafter | None) -> list[Finding]:
    """A DFlash GGUF: llama.cpp's dflash loader's reading of it (engines/block_diffusion.py `_llamacpp`)."""
    if drafter is None:  # our reader's error is the finding; the loader's own refusal is still said
        if id_list(meta.get("dflash.target_layers")):
            return []
        return [Finding("E-ENGINE-REFUSES", "error", "llama.cpp refuses it: \"DFlash model requires 'target_layers' "
                        "in GGUF metadata\" (llama.cpp #25116)", "rewrite it with `eagle3-convert --to gguf` from "
                        "the source drafter", engine="llamacpp")]
    verdict, ids, why = block_diffusion.judge("llamacpp", meta, drafter.config)
    if verdict == AS_TRAINED:
        return [Finding("I-CAPTURE-GGUF", "info", f"llama.cpp captures boundaries {ids} (dflash.target_layers, the "
                        "input of each target layer)", None, "dflash.target_layers", "llamacpp")]
    return [Finding("E-ENGINE-REFUSES", "error", f"llama.cpp: {why}", "rewrite it with `eagle3-convert --to gguf` "
                    "from the source drafter", engine="llamacpp")]
