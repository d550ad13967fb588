"""validate's findings: every code with its severity and meaning, and the `Finding` a check yields."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from ..engines import release_label
from ..errors import Eagle3Error, RefusalError

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")

# Every code validate reports: its fixed severity and what it means. The letter says the
# severity (E/W/I); the file-integrity, config and vocab codes are the ones the readers raise.
CODES: dict[str, tuple[Severity, str]] = {
    # files
    "E-SRC-MISSING": ("error", "config.json or the weight files are missing"),
    "E-SRC-EMPTY": ("error", "the weight files hold no tensors"),
    "E-CONFIG-JSON": ("error", "config.json is not a JSON object"),
    "E-FILE-HEADER": ("error", "a safetensors header is malformed"),
    "E-FILE-DTYPE": ("error", "a safetensors header names an unknown dtype"),
    "E-FILE-OFFSETS": ("error", "tensor byte ranges overlap, are reversed, or disagree with the shape"),
    "E-FILE-TRUNCATED": ("error", "a weight file ends before the data its header promises"),
    "E-FILE-INDEX": ("error", "the shard index and the shards disagree"),
    "E-FILE-MISSING": ("error", "the shard index names a file that is not there"),
    "E-FILE-PATH": ("error", "a weight file lies outside the checkpoint directory"),
    # layout and config
    "E-LAYOUT-UNKNOWN": ("error", "config.json is no known EAGLE-3 drafter layout"),
    "E-SRC-IS-TARGET": ("error", "SRC is a target model (a plain transformers model with no fc), not a drafter"),
    "E-LAYOUT-AMBIGUOUS": ("error", "the config reads as more than one layout, whose engines read it differently: "
                                    "convert refuses it without --from; checked as each"),
    "E-SCHEMA": ("error", "config.json breaks its layout's JSON Schema"),
    "E-CONFIG-FIELD": ("error", "a config field the drafter needs is missing or invalid"),
    "E-FROM-MISMATCH": ("error", "--from names a layout that reads the file otherwise than the one it is in"),
    "E-CONFIG-KEY-TYPO": ("error", "a config key is a near miss of a key the reader reads (which it takes as absent)"),
    "E-CONFIG-KEY-PLACE": ("error", "a key the reader reads sits one level off (top level vs a nested object)"),
    "W-CONFIG-KEY-UNKNOWN": ("warning", "a config key the layout's producers never write (carried verbatim)"),
    "W-CONFIG-KEY-FOREIGN": ("warning", "a key other layouts' engines read and this layout's do not (not carried)"),
    "I-KIND-BLOCK-DIFFUSION": ("info", "a block-diffusion drafter (DFlash, DSpark): checked by its reader and each "
                                       "engine's reading, not by the EAGLE-3 checks (DSpark's head shapes unchecked)"),
    "E-CONFIG-FAMILY": ("error", "the drafter's model_type is no EAGLE-3 drafter family"),
    "E-CONFIG-ARCH": ("error", "the engine builds no drafter class from this config"),
    "E-DRAFT-UNSERVED": ("error", "a drafter whose maths no engine's drafter class serves (Kimi K3's NoPE MLA, "
                                  "output gate, SiTU MLP): named feature by feature, in every layout"),
    "E-ENGINE-REFUSES": ("error", "the engine refuses this file loudly (a field its drafter kind needs is missing, "
                                  "or the release named with --engine cannot load it)"),
    "E-ENGINE-WRONG": ("error", "the engine loads this file and serves something other than the trained drafter"),
    "E-CONFIG-DRAFT-VOCAB": ("error", "draft_vocab_size is missing, or the engine's reading of it misfits lm_head"),
    "E-CONFIG-TARGET-HIDDEN-NULL": ("error", "target_hidden_size is null, and SGLang checks presence only"),
    "W-CONFIG-DEFAULTS-DIFFER": ("warning", "an absent key the engines default differently"),
    "W-CONFIG-CONTEXT": ("warning", "max_position_embeddings below the target's context length"),
    "I-ROPE-EXPORT-YARN": ("info", "a ModelOpt export carries the YaRN rope scaling its exporter injects"),
    "W-ROPE-SPELLINGS": ("warning", "rope_theta and the rope object's theta disagree: engines of one transformers "
                                    "major read one, of another the other"),
    "W-ROPE-TARGET": ("warning", "the drafter's RoPE (base or scaling, as the engines read it) is not the target's"),
    "W-ENGINE-CAVEAT": ("warning", "the engine serves the file as trained only within a limit, or with a serve-time "
                                   "flag"),
    "E-ENGINE-UNSUPPORTED": ("error", "the engine loads this drafter but has no option for one of its features: it "
                                      "serves other maths or drops weights (one it refuses: E-ENGINE-REFUSES)"),
    "I-ENGINE-RELEASES": ("info", "the releases of the engine we know read this file differently (--engine "
                                  "ENGINE==RELEASE judges one)"),
    "I-ENGINE-READING": ("info", "how an engine judged by its module alone (llama.cpp, mlx-vlm, LMDeploy) serves this "
                                 "file: the layers it captures"),
    "W-ENGINE-UNKNOWN": ("warning", "the engine's sources we read do not decide how it serves this file: no verdict"),
    "W-ENGINE-RELEASE-UNKNOWN": ("warning", "--engine names a release this tool does not model: judged by the "
                                            "rules of the known release nearest below it (the oldest, for an older "
                                            "one)"),
    # tensors
    "E-KEY-MISSING": ("error", "a tensor the config requires is absent"),
    "E-KEY-DROPPED": ("error", "the engine's name rules drop a tensor silently"),
    "E-KEY-REFUSED": ("error", "the engine's loader fails on a stored tensor name"),
    "E-KEY-UNAPPLIED": ("error", "the engine loads a tensor into a norm it never applies, and applies one left at "
                                 "its initial value"),
    "E-KEY-UNKNOWN": ("error", "a tensor that is no part of an EAGLE-3 drafter"),
    "E-KEY-UNUSED": ("error", "a drafter tensor the config does not use (a flag off, a layer too many)"),
    "E-KEY-DUPLICATE": ("error", "two stored names hold the same weight"),
    "W-KEY-UNTRAINED-TWIN": ("warning", "a layer's two pre-attention norm names differ and one holds RMSNorm's "
                                        "initial ones: the other is the trained one, which convert keeps"),
    "E-SHAPE": ("error", "a tensor's shape disagrees with the config"),
    "E-SHAPE-FC": ("error", "fc.weight's width is no multiple of the target hidden size"),
    "E-TARGET-HIDDEN-SIZE": ("error", "config.json's target_hidden_size is not the width of the states fc.weight fuses"),
    "E-DTYPE": ("error", "a weight tensor is not a float tensor"),
    # vocabulary map
    "E-VOCAB-MISSING": ("error", "Vd != V and neither d2t nor t2d is present"),
    "E-VOCAB-SHAPE": ("error", "d2t or t2d has the wrong length"),
    "E-VOCAB-DTYPE": ("error", "d2t is not an integer tensor or t2d not a bool mask"),
    "E-VOCAB-T2D": ("error", "t2d does not mark exactly Vd target ids"),
    "E-VOCAB-ABSOLUTE": ("error", "d2t holds absolute target ids instead of offsets"),
    "E-VOCAB-MISMATCH": ("error", "nonzero(t2d) != arange(Vd) + d2t"),
    "E-VOCAB-RANGE": ("error", "arange(Vd) + d2t leaves [0, V)"),
    "E-VOCAB-ORDER": ("error", "arange(Vd) + d2t is not strictly increasing"),
    "W-VOCAB-DEFAULT": ("warning", "d2t is a trainer's default buffer (all zero, or arange(Vd)) with Vd < V: every "
                                   "engine serves the map it implies, silently"),
    "E-VOCAB-NO-T2D": ("error", "the engine needs t2d and only d2t is present"),
    "E-VOCAB-NO-D2T": ("error", "the engine needs d2t and only t2d is present"),
    # capture layers
    "E-CAPTURE-FIELD": ("error", "a capture-id list is not a list of integers"),
    "E-CAPTURE-COUNT": ("error", "the number of captured states disagrees with fc.weight"),
    "E-CAPTURE-RANGE": ("error", "a capture boundary outside [0, L] of the target"),
    "E-CAPTURE-UNREACHABLE": ("error", "the engine cannot capture a boundary on this target family"),
    "E-CAPTURE-UNEXPRESSIBLE": ("error", "no id list makes the engine capture these boundaries"),
    "E-CAPTURE-MISMATCH": ("error", "the engine captures other layers than the drafter was trained on"),
    "E-CAPTURE-EMBEDDING": ("error", "a training tap on the embedding (boundary 0) the engine does not capture"),
    "E-CAPTURE-FC-BYPASSED": ("error", "the engine passes one hidden state and skips fc"),
    "E-CAPTURE-RECORD": ("error", "the config's capture layers disagree with the sidecar's or the registry's record"),
    "E-RECORD-CONFLICT": ("error", "the config (or --target) contradicts what the sidecar or the registry records"),
    "W-TARGET-UNTOLD": ("warning", "the target is named otherwise than the record names it, and no fact tells "
                        "whether the two names are one model"),
    "W-CAPTURE-IDS-IGNORED": ("warning", "capture ids sit where the engine does not read them"),
    "W-CAPTURE-CONVENTION": ("warning", "one id list that two engines read as different layers"),
    "I-CAPTURE-DEFAULT": ("info", "no capture ids: the engine captures its default layers"),
    "I-CAPTURE-RUNTIME": ("info", "the engine takes the capture layers from a runtime argument"),
    # target
    "E-TARGET-HIDDEN": ("error", "the target's hidden size is not the width fc expects"),
    "E-TARGET-VOCAB": ("error", "the target's vocab size is not the drafter's V"),
    "W-TARGET-FAMILY": ("warning", "the target is not the model family the drafter names"),
    "W-EMBED-NOT-TARGET": ("warning", "the stored embed_tokens is not the target's table: vLLM drafts with it, SGLang "
                                      "and TensorRT-LLM with the target's (--target with weights, or --deep)"),
    "I-EMBED-TARGET-COPY": ("info", "the stored embed_tokens is the target's table value for value: a copy every "
                                    "engine drafts alike, that --drop-embed identical leaves out"),
    # --deep
    "E-DEEP-NONFINITE": ("error", "a tensor holds NaN or Inf"),
    "E-DEEP-ZERO": ("error", "a weight tensor is all zeros"),
    "W-DEEP-INIT-NORMS": ("warning", "every norm weight is exactly 1.0 (untrained)"),
}
# A reader refusal that a warning above already explains (the reader cannot choose; validate can say why).
READER_CODES_EXPLAINED = {"E-CONFIG-DEFAULTS-DIFFER": {"W-CONFIG-DEFAULTS-DIFFER"},
                          "E-CAPTURE-AMBIGUOUS": {"W-CAPTURE-IDS-IGNORED", "W-CAPTURE-CONVENTION"}}


@dataclass(frozen=True)
class Finding:
    code: str
    severity: Severity
    message: str
    hint: str | None = None
    where: str | None = None  # the tensor, file or JSON path the message names
    engine: str | None = None  # set when the finding is about one engine's reading

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def finding(code: str, message: str, hint: str | None = None, where: str | None = None,
            engine: str | None = None) -> Finding:
    return Finding(code, CODES[code][0], message, hint, where, engine)


def from_error(exc: Eagle3Error, where: str | None = None, engine: str | None = None) -> Finding:
    """A reader's refusal as a finding under the same code (a conversion limit is only a warning)."""
    severity: Severity = CODES[exc.code][0] if exc.code in CODES else (
        "warning" if isinstance(exc, RefusalError) else "error")
    return Finding(exc.code, severity, exc.message, exc.hint, where, engine)


# How a finding quotes and tests config values.

@dataclass
class Report:
    source: str
    layout: str | None
    detected_by: str | None
    engines: list[str]
    findings: list[Finding]
    releases: dict[str, list[str | None]] = field(default_factory=dict)  # engine -> releases named (None: newest)
    manifest: dict[str, dict[str, Any]] | None = None  # --deep: per-tensor sha256, by stored name
    candidates: list[str] = field(default_factory=list)  # every layout it was checked as

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    def codes(self, *severities: Severity) -> set[str]:
        return {f.code for f in self.findings if not severities or f.severity in severities}

    def release_labels(self) -> list[str]:
        """'SGLang 0.5.23', 'vLLM 0.24.0, 0.33.0': each engine checked, with the releases judged."""
        return [release_label(e, self.releases.get(e)) for e in self.engines]

    def failed(self, strict: bool = False) -> bool:
        return bool(self.count("error") or (strict and self.count("warning")))

    def to_dict(self, strict: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "source": self.source, "layout": self.layout, "checked_as": self.candidates,
            "detected_by": self.detected_by, "engines": self.engines, "releases": self.release_labels(),
            "ok": not self.failed(strict), "counts": {s: self.count(s) for s in SEVERITIES},
            "findings": [f.to_dict() for f in self.findings],
        }
        if self.manifest is not None:
            data["manifest"] = self.manifest
        return data
