"""`validate`: name every silent EAGLE-3 failure before a GPU is spent.

A check yields `Finding`s: a stable code, a severity, a one-line message naming the tensor
or config field, and a hint (usually the exact eagle3-convert command). Checks run on the
RAW checkpoint (config dict, tensors by stored name, headers only), so a broken file still
yields every finding instead of the first exception. Engine profiles replay how each
serving engine reads a checkpoint: the tensor names it loads, where it reads capture ids
and in which convention, and which config fields it defaults its own way (docs/formats.md §2,
§4, §5). `--deep` reads every byte once, hashing and scanning each chunk in one pass.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from importlib import import_module
from pathlib import Path
from typing import Any, Literal

from . import schemas, sidecar
from .converters.base import (CONFIG_NAME, DEEPSEEK_VOCABS, KNOWN_CANONICAL, VOCAB_TENSORS, Checkpoint, ConvertOptions, Layout, Rename,
                              decoder_fields, read_json_file, to_canonical, to_stored)
from .converters.config_keys import key_issues
from .converters.layer_ids import (BOUNDARY_ENGINES, default_boundaries, engine_boundaries, ids_for_engine,
                                   target_family)
from .converters.registry import detect, get_layout
from .converters.vocab import read_vocab_map
from .drafter import (FAMILY_BY_MODEL_TYPE, MLA_KEYS, DrafterConfig, TargetIdentity, expected_shapes, layer_index,
                      optional_shapes)
from .errors import Eagle3Error, FormatError, RefusalError
from .safetensors_io import (FLOAT_DTYPES, INDEX_NAME, SINGLE_NAME, TensorRef,
                             TensorSource, checked_member, iter_tensor_chunks, read_header, read_index,
                             tensor_sha256)

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")

# Every code this module reports: its fixed severity and what it means. The letter says the
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
    "W-LAYOUT-AMBIGUOUS": ("warning", "the config reads as more than one layout, and is checked as each"),
    "E-SCHEMA": ("error", "config.json breaks its layout's JSON Schema"),
    "E-CONFIG-FIELD": ("error", "a config field the drafter needs is missing or invalid"),
    "E-FROM-MISMATCH": ("error", "--from names a layout that reads the file otherwise than the one it is in"),
    "E-CONFIG-KEY-TYPO": ("error", "a config key is a near miss of a key the reader reads (which it takes as absent)"),
    "E-CONFIG-KEY-PLACE": ("error", "a key the reader reads sits one level off (top level vs a nested object)"),
    "W-CONFIG-KEY-UNKNOWN": ("warning", "a config key the layout's producers never write (carried verbatim)"),
    "W-CONFIG-KEY-FOREIGN": ("warning", "a key other layouts' engines read and this layout's do not (not carried)"),
    "E-CONFIG-FAMILY": ("error", "the drafter's model_type is no EAGLE-3 drafter family"),
    "E-CONFIG-ARCH": ("error", "the engine builds no drafter class from this config"),
    "E-ENGINE-WRONG": ("error", "the engine loads this file and serves something other than the trained drafter"),
    "E-CONFIG-DRAFT-VOCAB": ("error", "draft_vocab_size is missing, or the engine's reading of it misfits lm_head"),
    "E-CONFIG-TARGET-HIDDEN-NULL": ("error", "target_hidden_size is null, and SGLang checks presence only"),
    "W-CONFIG-DEFAULTS-DIFFER": ("warning", "an absent key the engines default differently"),
    "W-CONFIG-CONTEXT": ("warning", "max_position_embeddings below the target's context length"),
    "E-ENGINE-UNSUPPORTED": ("error", "the engine has no class or option for this drafter"),
    # tensors
    "E-KEY-MISSING": ("error", "a tensor the config requires is absent"),
    "E-KEY-DROPPED": ("error", "the engine's name rules drop a tensor silently"),
    "E-KEY-UNKNOWN": ("error", "a tensor that is no part of an EAGLE-3 drafter"),
    "E-KEY-UNUSED": ("error", "a drafter tensor the config does not use (a flag off, a layer too many)"),
    "E-KEY-DUPLICATE": ("error", "two stored names hold the same weight"),
    "E-SHAPE": ("error", "a tensor's shape disagrees with the config"),
    "E-SHAPE-FC": ("error", "fc.weight's width is no multiple of the target hidden size"),
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
    "E-CAPTURE-RECORD": ("error", "the config's capture layers disagree with the training record"),
    "W-CAPTURE-IDS-IGNORED": ("warning", "capture ids sit where the engine does not read them"),
    "W-CAPTURE-CONVENTION": ("warning", "one id list that two engines read as different layers"),
    "I-CAPTURE-DEFAULT": ("info", "no capture ids: the engine captures its default layers"),
    "I-CAPTURE-RUNTIME": ("info", "the engine takes the capture layers from a runtime argument"),
    # target
    "E-TARGET-HIDDEN": ("error", "the target's hidden size is not the width fc expects"),
    "E-TARGET-VOCAB": ("error", "the target's vocab size is not the drafter's V"),
    "W-TARGET-FAMILY": ("warning", "the target is not the model family the drafter names"),
    # --deep
    "E-DEEP-NONFINITE": ("error", "a tensor holds NaN or Inf"),
    "E-DEEP-ZERO": ("error", "a weight tensor is all zeros"),
    "W-DEEP-INIT-NORMS": ("warning", "every norm weight is exactly 1.0 (untrained)"),
}
# A reader refusal that a warning above already explains (the reader cannot choose; validate can say why).
_READER_CODES_EXPLAINED = {"E-CONFIG-DEFAULTS-DIFFER": {"W-CONFIG-DEFAULTS-DIFFER"},
                           "E-CAPTURE-AMBIGUOUS": {"W-CAPTURE-IDS-IGNORED", "W-CAPTURE-CONVENTION"}}

FLAGS = ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output")
MLA_MODEL_TYPES = {t for t, family in FAMILY_BY_MODEL_TYPE.items() if family == "deepseek_mla"}
IDS_KEY = "eagle_aux_hidden_state_layer_ids"
MAX_CAPTURE_IDS = 64  # a drafter fuses a handful of captured states; a longer list is not a capture list
LOCATIONS = {"top": f"$.{IDS_KEY}", "nested": f"$.eagle_config.{IDS_KEY}"}


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


# ------------------------------------------------------------------ engine profiles

@dataclass(frozen=True)
class EngineProfile:
    """How one serving engine reads a drafter checkpoint (docs/formats.md §5)."""

    name: str  # also its capture-id convention in converters.layer_ids
    label: str
    layout: str  # the layout eagle3-convert writes for it
    ids_from: str | None  # "top" or "nested" config location; None = a runtime argument
    key_rules: tuple[Rename, ...]  # stored name -> the parameter it loads into
    mla_key_rules: tuple[Rename, ...] | None  # its MLA drafter class, when it loads other names
    classes: Mapping[str, str] | None  # architecture -> drafter family it builds; None: speculators format only
    reads_speculators_format: bool
    families: frozenset[str]
    flags: frozenset[str]
    mla_flags: frozenset[str]
    bias: bool  # loads attention/MLP biases (MLA classes never do)
    mla_max_layers: int | None
    needs_t2d: bool
    needs_d2t: bool
    fc_skipped_when_width_matches: bool  # applies fc only when the incoming width differs from H
    eagle3_alias: bool = False  # builds Eagle3XForCausalLM for a plain XForCausalLM architecture

    def rules_for(self, family: str) -> tuple[Rename, ...]:
        return self.mla_key_rules if family == "deepseek_mla" and self.mla_key_rules is not None else self.key_rules

    def served_family(self, architectures: Sequence[Any]) -> str | None:
        for arch in architectures:
            if not isinstance(arch, str) or self.classes is None:
                continue
            family = self.classes.get(arch) or (self.classes.get(f"Eagle3{arch}") if self.eagle3_alias else None)
            if family:
                return family
        return None

    def unsupported(self, cfg: DrafterConfig) -> list[str]:
        """Why this engine cannot serve `cfg` as trained (its maths or weights would change)."""
        mla = cfg.family == "deepseek_mla"
        out = []
        if cfg.family not in self.families:
            out.append(f"{self.label} has no {cfg.family} EAGLE-3 drafter class")
            return out
        if mla and self.mla_max_layers and cfg.num_layers > self.mla_max_layers:
            out.append(f"{self.label}'s MLA drafter class builds {self.mla_max_layers} layer, the drafter has "
                       f"{cfg.num_layers}")
        allowed = self.mla_flags if mla else self.flags
        out += [f"{flag} is true and {self.label} has no such option" for flag in FLAGS
                if getattr(cfg, flag) and flag not in allowed]
        if self.name == "speculators" and cfg.norm_before_fc and cfg.fc_norm:
            out.append("norm_before_fc and fc_norm are both true; speculators allows only one")
        if (cfg.attention_bias or cfg.mlp_bias) and (mla or not self.bias):
            out.append(f"the drafter has bias tensors and {self.label} builds none")
        return out

    def builds(self, cfg: DrafterConfig, canonical: str) -> bool:
        """Whether the model this engine constructs has a parameter for `canonical`."""
        if canonical.endswith(".bias") and (cfg.family == "deepseek_mla" or not self.bias):
            return False
        mla = cfg.family == "deepseek_mla"
        if mla and self.mla_max_layers and (layer_index(canonical) or 0) >= self.mla_max_layers:
            return False
        allowed = self.mla_flags if mla else self.flags
        if canonical == "input_norm.weight" and "norm_before_fc" not in allowed:
            return False
        if canonical.startswith("fc_norm.") and "fc_norm" not in allowed:
            return False
        return True


_UNPREFIXED_MIDLAYER = (Rename("layers.0.", "midlayer.", single_layer_only=True),)
_profiles: dict[str, EngineProfile] = {}


def engine_profiles() -> dict[str, EngineProfile]:
    """speculators (the library), vLLM, SGLang, TensorRT-LLM; key rules shared with their layouts."""
    if not _profiles:
        from .converters import sglang, speculators, vllm
        from .engines import sglang as sglang_rules
        from .engines import speculators as speculators_rules
        from .engines import trtllm as trtllm_rules
        from .engines import vllm as vllm_rules

        _profiles.update({
            "speculators": EngineProfile(
                name="speculators", label="the speculators library", layout="speculators",
                ids_from=speculators_rules.IDS_FROM, key_rules=speculators.RENAMES, mla_key_rules=None, classes=None,
                reads_speculators_format=True, families=speculators_rules.FAMILIES,
                flags=speculators_rules.FLAGS_READ, mla_flags=speculators_rules.MLA_FLAGS_READ,
                bias=speculators_rules.BUILDS_BIAS, mla_max_layers=None, needs_t2d=speculators_rules.NEEDS_T2D,
                needs_d2t=True, fc_skipped_when_width_matches=False),
            "vllm": EngineProfile(
                name="vllm", label="vLLM", layout="vllm", ids_from=vllm_rules.IDS_FROM["vllm-v2"][0],
                key_rules=vllm.RENAMES, mla_key_rules=None, classes=vllm_rules.CLASSES, reads_speculators_format=True,
                families=vllm_rules.FAMILIES, flags=vllm_rules.FLAGS_READ, mla_flags=vllm_rules.MLA_FLAGS_READ,
                bias=vllm_rules.BUILDS_BIAS, mla_max_layers=None, needs_t2d=vllm_rules.NEEDS_T2D, needs_d2t=True,
                fc_skipped_when_width_matches=False, eagle3_alias=True),
            "sglang": EngineProfile(
                name="sglang", label="SGLang", layout="sglang", ids_from=sglang_rules.IDS_FROM,
                key_rules=sglang.RENAMES, mla_key_rules=_UNPREFIXED_MIDLAYER, classes=sglang_rules.CLASSES,
                reads_speculators_format=False, families=sglang_rules.FAMILIES,
                flags=frozenset(sglang_rules.FLAGS_READ["llama"]),
                mla_flags=frozenset(sglang_rules.FLAGS_READ["deepseek_mla"]), bias=sglang_rules.BUILDS_BIAS,
                mla_max_layers=sglang_rules.MLA_MAX_LAYERS, needs_t2d=sglang_rules.NEEDS_T2D, needs_d2t=True,
                fc_skipped_when_width_matches=sglang_rules.FC_SKIPPED_WHEN_WIDTH_MATCHES),
            "trtllm": EngineProfile(
                name="trtllm", label="TensorRT-LLM", layout="modelopt", ids_from=trtllm_rules.IDS_FROM,
                key_rules=_UNPREFIXED_MIDLAYER, mla_key_rules=None, classes=trtllm_rules.CLASSES,
                reads_speculators_format=False, families=trtllm_rules.FAMILIES, flags=trtllm_rules.FLAGS_READ,
                mla_flags=trtllm_rules.FLAGS_READ, bias=trtllm_rules.BUILDS_BIAS, mla_max_layers=None,
                needs_t2d=trtllm_rules.NEEDS_T2D, needs_d2t=True, fc_skipped_when_width_matches=False),
        })
    return _profiles


ENGINES = ("speculators", "vllm", "sglang", "trtllm", "llamacpp")
# validate's engine names -> the readers of eagle3_convert.engines (vLLM's two runners read ids differently)
ENGINE_READERS = {"speculators": ("speculators",), "vllm": ("vllm-v1", "vllm-v2"), "sglang": ("sglang",),
                  "trtllm": ("trtllm",), "llamacpp": ("llamacpp",)}
# The layout whose file each engine reads right, for hints (llama.cpp's converter reads vLLM's top-level ids).
ENGINE_LAYOUT = {"speculators": "speculators", "vllm": "vllm", "sglang": "sglang", "trtllm": "modelopt",
                 "llamacpp": "vllm"}
# Who serves each layout when --engine is not given.
LAYOUT_ENGINES: dict[str, tuple[str, ...]] = {
    "speculators": ("speculators", "vllm"), "vllm": ("vllm",), "sglang": ("sglang",),
    "eagle": ("sglang", "vllm"), "modelopt": ("trtllm",),  # ModelOpt's ids are TensorRT-LLM's; vLLM: --engine
    "gguf": ("llamacpp",),
}


# ---------------------------------------------------------------- the raw checkpoint

@dataclass
class RawCheckpoint:
    """A checkpoint directory as far as it could be read: what is broken is reported, not raised."""

    path: Path
    config: dict[str, Any] | None
    tensors: dict[str, TensorSource]
    files: list[str]
    cut: set[str] = field(default_factory=set)  # tensors whose bytes the file does not fully hold
    sidecar: dict[str, Any] | None = None
    complete: bool = True  # every weight file's tensor table was read (else "missing" would be a guess)

    def checkpoint(self) -> Checkpoint:
        return Checkpoint(self.path, self.config or {}, dict(self.tensors), list(self.files), self.sidecar)


_HINT_REDOWNLOAD = "the file is damaged: download or copy the checkpoint again"


def read_raw(root: Path) -> tuple[RawCheckpoint, list[Finding]]:
    """config.json and every readable tensor header of `root`, with a finding per problem met."""
    root = Path(root)
    from .converters.gguf import gguf_file

    if gguf_file(root) is not None:  # a GGUF drafter (llama.cpp): its keys stand for config.json
        from .converters.gguf import load_gguf_checkpoint

        ckpt = load_gguf_checkpoint(root)
        return RawCheckpoint(ckpt.path, ckpt.config, ckpt.tensors, ckpt.weight_files, set(), ckpt.sidecar), []
    if not root.is_dir():
        raise FormatError(f"{root}: not a directory", "pass the directory that holds config.json and the weights",
                          code="E-SRC-MISSING")
    out: list[Finding] = []
    config = None
    config_path = root / CONFIG_NAME
    if not config_path.is_file():
        out.append(finding("E-SRC-MISSING", f"{root}: no config.json (or it is not a regular file)",
                           "a drafter directory needs config.json beside its weights", where=CONFIG_NAME))
    else:
        try:
            config = read_json_file(config_path, f"{root}/config.json")
        except FormatError as exc:
            out.append(from_error(exc, where=CONFIG_NAME))
    before = len(out)
    tensors, files, cut = _read_weights(root, out)
    complete = not any(f.severity == "error" and f.code != "E-FILE-TRUNCATED" for f in out[before:])
    if not tensors and complete:
        out.append(finding("E-SRC-EMPTY", f"{root}: the weight files hold no tensors",
                           "download the complete checkpoint"))
    side = sidecar.read(root, config_path) if config is not None else None
    return RawCheckpoint(root, config, tensors, files, cut, side, complete and bool(tensors)), out


def _read_weights(root: Path, out: list[Finding]) -> tuple[dict[str, TensorSource], list[str], set[str]]:
    tensors: dict[str, TensorSource] = {}
    cut: set[str] = set()
    if (root / INDEX_NAME).is_file():
        try:
            weight_map = read_index(root)
        except FormatError as exc:
            out.append(from_error(exc, where=INDEX_NAME))
            return tensors, [], cut
        shards = sorted(set(weight_map.values()))
        read_ok = set()
        for shard in shards:
            try:
                path = checked_member(root, shard, INDEX_NAME)
            except FormatError as exc:
                out.append(from_error(exc, where=INDEX_NAME))
                continue
            if not path.is_file():
                out.append(finding("E-FILE-MISSING", f"{INDEX_NAME} names shard {shard!r}, which is missing",
                                   "download the complete checkpoint (every shard)", where=shard))
                continue
            read_ok.add(shard)
            for name, ref in _read_file(path, out, cut).items():
                if weight_map.get(name) != shard or name in tensors:
                    out.append(finding("E-FILE-INDEX", f"{shard}: tensor {name!r} is not listed for this shard "
                                       f"in {INDEX_NAME}", "the index and shards disagree: re-download or rebuild "
                                       "the index", where=name))
                tensors.setdefault(name, ref)
        missing = sorted(n for n, shard in weight_map.items() if shard in read_ok and n not in tensors)
        if missing:
            out.append(finding("E-FILE-INDEX", f"{INDEX_NAME} lists {len(missing)} tensor(s) their shard does not "
                               f"hold, e.g. {missing[0]!r}", "the index and shards disagree: re-download the "
                               "checkpoint", where=INDEX_NAME))
        return tensors, shards, cut
    single = root / SINGLE_NAME
    paths = [single] if single.exists() or single.is_symlink() else sorted(root.glob("*.safetensors"))
    if paths:
        for path in paths:
            try:
                checked_member(root, path.name, "checkpoint directory")
            except FormatError as exc:
                out.append(from_error(exc, where=path.name))
                continue
            for name, ref in _read_file(path, out, cut).items():
                if name in tensors:
                    out.append(finding("E-FILE-INDEX", f"tensor {name!r} appears in two files without an index",
                                       f"add a {INDEX_NAME} or remove the stray file", where=name))
                    continue
                tensors[name] = ref
        return tensors, [p.name for p in paths], cut
    bins = sorted(p.name for p in root.glob("pytorch_model*.bin"))
    if bins:
        from .bin_reader import read_bin_tensors  # torch, only for pickled checkpoints

        try:
            bin_tensors, files = read_bin_tensors(root, bins)
        except Eagle3Error as exc:
            out.append(from_error(exc, where=bins[0]))
            return tensors, bins, cut
        return dict(bin_tensors), files, cut
    out.append(finding("E-SRC-MISSING", f"{root}: no weights (model.safetensors, shards, or "
                       "pytorch_model.bin)", "download the complete checkpoint", where=SINGLE_NAME))
    return tensors, [], cut


def _read_file(path: Path, out: list[Finding], cut: set[str]) -> dict[str, TensorSource]:
    try:
        return dict(read_header(path).tensors)
    except FormatError as exc:
        partial = _truncated_tensors(path) if exc.code == "E-FILE-TRUNCATED" else None
        if partial is None:
            out.append(from_error(exc, where=path.name))
            return {}
        refs, short, promised, held = partial
        first = min(short, key=lambda n: refs[n].start)
        out.append(finding(
            "E-FILE-TRUNCATED", f"{path} is truncated: its header promises {promised} data bytes, only {held} "
            f"are present; {len(short)} tensor(s) from {first!r} on are incomplete", _HINT_REDOWNLOAD,
            where=path.name))
        cut.update(short)
        return dict(refs)


def _truncated_tensors(path: Path) -> tuple[dict[str, TensorRef], list[str], int, int] | None:
    """For a file cut inside its data: every tensor (by header) and which are short; None if anything else is off."""
    try:
        header = read_header(path, allow_truncated=True)
    except FormatError:
        return None
    if not header.cut:
        return None
    refs = header.tensors
    return (refs, list(header.cut), max(ref.end for ref in refs.values()) - header.data_start,
            header.file_size - header.data_start)


# -------------------------------------------------------------------- the target

@dataclass(frozen=True)
class TargetFacts:
    """The target (verifier) a drafter is validated against: depth, width, vocab, family, context."""

    identity: TargetIdentity
    context_length: int | None = None


def load_target_facts(spec: str, revision: str | None = None, *, endpoint: str | None = None,
                      token: str | None = None) -> TargetFacts:
    """`--target`: a config.json, its directory, or a Hub repo id (its config only)."""
    from .targets import context_length, read_target_config, refuse_drafter_as_target, target_from_config

    config, commit = read_target_config(spec, revision, endpoint=endpoint, token=token)
    refuse_drafter_as_target(spec, config)
    return TargetFacts(target_from_config(config, spec, commit or revision), context_length(config))


# ----------------------------------------------------------------------- reports

@dataclass
class Report:
    source: str
    layout: str | None
    detected_by: str | None
    engines: list[str]
    findings: list[Finding]
    manifest: dict[str, dict[str, Any]] | None = None  # --deep: per-tensor sha256, by stored name
    candidates: list[str] = field(default_factory=list)  # every layout it was checked as

    def count(self, severity: Severity) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    def codes(self, *severities: Severity) -> set[str]:
        return {f.code for f in self.findings if not severities or f.severity in severities}

    def failed(self, strict: bool = False) -> bool:
        return bool(self.count("error") or (strict and self.count("warning")))

    def to_dict(self, strict: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "source": self.source, "layout": self.layout, "checked_as": self.candidates,
            "detected_by": self.detected_by, "engines": self.engines,
            "ok": not self.failed(strict), "counts": {s: self.count(s) for s in SEVERITIES},
            "findings": [f.to_dict() for f in self.findings],
        }
        if self.manifest is not None:
            data["manifest"] = self.manifest
        return data


def validate_checkpoint(path: str | os.PathLike, *, engines: Sequence[str] | None = None,
                        target: TargetFacts | None = None, deep: bool = False, from_layout: str = "auto",
                        expected_boundaries: Sequence[int] | None = None, record_label: str = "the training record",
                        source_label: str | None = None,
                        progress: Callable[[int], Callable[[int], None]] | None = None) -> Report:
    """Every finding about the drafter checkpoint in directory `path`.

    `engines`: which engines to replay (default: those that serve the detected layout).
    `expected_boundaries`: the capture boundaries a training record (the registry) holds for
    this drafter; a config that disagrees is an error.
    """
    root = Path(path)
    label = source_label or str(root)
    raw, findings = read_raw(root)
    if "_gguf" in (raw.config or {}):
        from .converters.gguf import validate_gguf

        return validate_gguf(raw, engines, label, deep, progress, target)
    report = Report(label, None, None, list(engines or ()), findings)
    candidates = _layouts(raw, from_layout, report) if raw.config is not None else []
    if from_layout != "auto" and raw.config is not None:
        findings.extend(_explicit_from(raw, from_layout, target))
    if len(candidates) == 1:
        report.layout = candidates[0].name
    for layout in candidates:
        chosen = list(engines or LAYOUT_ENGINES.get(layout.name, ("vllm",)))
        report.engines += [e for e in chosen if e not in report.engines]
        run = _Run(raw, layout, chosen, target, label, findings, name_layout=len(candidates) > 1)
        run.all()
        if expected_boundaries is not None:
            run.extend(check_capture_record(run.intended, list(expected_boundaries), record_label,
                                            LOCATIONS[run.home]))
        if not any(f.severity == "error" for f in findings):
            run.reader_cross_check()
    if deep:
        total = sum(t.nbytes for n, t in raw.tensors.items() if n not in raw.cut)
        report.manifest, deep_findings = deep_scan(raw.tensors, raw.cut,
                                                   on_bytes=progress(total) if progress else None)
        findings.extend(deep_findings)
    from .hints import checked

    report.findings = [replace(f, hint=checked(f.hint, label, root)) for f in _dedupe(findings)]
    return report


def _layouts(raw: RawCheckpoint, from_layout: str, report: Report) -> list[Layout]:
    """The layout to check the checkpoint in; every confident candidate when detection cannot choose."""
    from .converters.registry import layouts

    if from_layout != "auto":
        report.detected_by = "given with --from"
        return [get_layout(from_layout)]
    ckpt = raw.checkpoint()
    try:
        detection = detect(ckpt)
    except FormatError as exc:
        if exc.code != "E-LAYOUT-AMBIGUOUS":
            report.findings.append(from_error(exc, where=CONFIG_NAME))
            return []
        found = [d for d in (layout.detect(ckpt) for layout in layouts().values()) if d is not None and d.confident]
        report.candidates = [d.layout for d in found]
        report.detected_by = "; ".join(f"{d.layout}: {d.reason}" for d in found)
        report.findings.append(finding(
            "W-LAYOUT-AMBIGUOUS", f"the config reads as more than one layout ({report.detected_by}); engines "
            "disagree on what it means, so it is checked as each", "when converting, say which layout wrote it with "
            f"--from ({' or '.join(d.layout for d in found)}); fix the findings below so the file says one thing",
            where=CONFIG_NAME))
        return [get_layout(d.layout) for d in found]
    report.detected_by = detection.reason
    report.candidates = [detection.layout]
    return [get_layout(detection.layout)]


def _explicit_from(raw: RawCheckpoint, given: str, target: TargetFacts | None) -> list[Finding]:
    """convert's judgement of an explicit --from (convert.judge_explicit_from), as a finding."""
    from .convert import judge_explicit_from

    ckpt = raw.checkpoint()
    options = ConvertOptions(target=target.identity if target else _sidecar_target(raw.sidecar))
    drafter, error = None, None
    try:
        drafter = get_layout(given).read(ckpt, options)
    except (Eagle3Error, ValueError) as exc:  # ValueError: pydantic's, a field the canonical model refuses
        error = exc
    problem = judge_explicit_from(ckpt, given, options, drafter=drafter, error=error)
    return [from_error(problem, where=CONFIG_NAME)] if problem is not None else []


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple] = set()
    out = []
    for f in findings:
        key = (f.code, f.where, f.engine, f.message)
        if key not in seen:
            seen.add(key)
            out.append(f)
    order = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(out, key=lambda f: order[f.severity])


def check_capture_record(intended: list[int] | None, recorded: list[int], label: str,
                         where: str | None = None) -> list[Finding]:
    """The registry hook: a config whose capture layers are not those the drafter was trained on."""
    if intended is None or sorted(set(intended)) == sorted(set(recorded)):
        return []
    if 0 in recorded and 0 not in intended:
        return [finding("E-CAPTURE-EMBEDDING", f"{label} says the drafter was trained with the embedding output "
                        f"(boundary 0) among its taps {recorded}, but the config captures boundaries {intended}",
                        "rewrite the ids from the record: block-output engines (SGLang) capture the embedding with "
                        "id -1", where=where)]
    return [finding("E-CAPTURE-RECORD", f"the config captures boundaries {intended}, {label} says the drafter was "
                    f"trained on {recorded}", "convert again from the trained checkpoint, or fix the ids to the "
                    "record", where=where)]


# ----------------------------------------------------------------- one validation

class _Absent:
    def __repr__(self) -> str:
        return "absent"


ABSENT: Any = _Absent()


class _Run:
    """The checks of one checkpoint read in one layout, replayed for the chosen engines."""

    def __init__(self, raw: RawCheckpoint, layout: Layout, engines: Sequence[str], target: TargetFacts | None,
                 source_label: str, findings: list[Finding], name_layout: bool = False):
        self.raw, self.layout, self.engines, self.out = raw, layout, list(engines), findings
        self.name_layout = name_layout  # detection could not choose: commands must say --from
        self.config: dict[str, Any] = raw.config or {}
        self.src = source_label
        self.target_facts = target
        self.target = target.identity if target else _sidecar_target(raw.sidecar)
        self.speculators_format = "speculators_model_type" in self.config or layout.name == "speculators"
        eagle = self.config.get("eagle_config")
        self.eagle: dict[str, Any] = eagle if isinstance(eagle, dict) else {}
        self.cfg: DrafterConfig | None = None
        # the layout's own name table (a third-party layout without one stores canonical names)
        self.layout_rules = getattr(import_module(type(layout).__module__), "RENAMES", ())
        self.intents: dict[str, str | None] = {}  # stored name -> canonical name the layout means by it
        self.ids: dict[str, list[int] | None] = {}  # "top"/"nested" -> capture ids as written
        self.intended: list[int] | None = None  # the boundaries the config means (None: unknown or default)

    # --- plumbing
    def add(self, code: str, message: str, hint: str | None = None, where: str | None = None,
            engine: str | None = None) -> None:
        self.out.append(finding(code, message, hint, where, engine))

    def extend(self, findings: list[Finding]) -> None:
        self.out.extend(findings)

    def command(self, to: str, *flags: str) -> str:
        """The exact conversion that fixes a finding (the source read as this layout)."""
        dest = f"{Path(self.src).name or 'drafter'}-{to}"
        if self.name_layout and "--from" not in flags:
            flags = ("--from", self.layout.name, *flags)
        return " ".join(["eagle3-convert", *flags, "--to", to, self.src, dest])

    def command_inspect(self) -> str:
        return " ".join(["eagle3-convert", "inspect", *(("--from", self.layout.name) if self.name_layout else ()),
                         self.src])

    @property
    def depth(self) -> int | None:
        return self.target.num_hidden_layers if self.target else None

    @property
    def family(self) -> str:
        model_type = self.target.model_type if self.target else None
        if model_type is None and self.cfg is not None and self.cfg.family == "deepseek_mla":
            model_type = "deepseek_v3"  # an MLA drafter serves a DeepSeek / Kimi target
        if model_type is None:  # what the config betrays, as the layouts' readers infer it (converters.base)
            own, vocab = self.config.get("model_type"), self.config.get("vocab_size")
            model_type = own if target_family(own) == "deepseek" else DEEPSEEK_VOCABS.get(vocab)
        return target_family(model_type)

    def all(self) -> None:
        self.cfg = self.read_config()
        self.read_capture_ids()
        if self.cfg is not None:
            if self.raw.complete:  # with a weight file unreadable, absent tensors prove nothing
                self.check_tensors()
                self.check_vocab()
            self.check_capture()
            for name in self.engines:
                if name in engine_profiles():  # llama.cpp is judged by its engine module alone
                    self.check_engine(engine_profiles()[name])
            self.check_engine_verdicts()
            self.check_target()
        self.check_schema()

    # --- config
    def check_keys(self) -> None:
        """The layout's key table (converters/config_keys): the same judgement its reader makes first."""
        for issue in key_issues(self.layout.name, self.config):
            if issue.code == "E-CAPTURE-FIELD":
                continue  # read_capture_ids reports the list itself
            self.add(issue.code, issue.message, issue.hint, where=issue.where)

    def read_config(self) -> DrafterConfig | None:
        self.check_keys()
        raw = self.config
        where = "$"
        dec: Any = raw
        if self.speculators_format:
            dec, where = raw.get("transformer_layer_config"), "$.transformer_layer_config"
            if not isinstance(dec, dict):
                self.add("E-CONFIG-FIELD", "the speculators config has no transformer_layer_config object",
                         "a speculators EAGLE-3 config nests the drafter's decoder config there", where=where)
                return None
        try:
            fields = decoder_fields(dec, "config.json" if where == "$" else "transformer_layer_config",
                                    self.raw.tensors if where == "$" else ())
        except FormatError as exc:
            key_path = _decoder_key_path(dec, where, exc.code)
            if not any(f.where == key_path or f.code in ("E-CONFIG-KEY-TYPO", "E-CONFIG-KEY-PLACE")
                       for f in self.out):  # the key table already named the cause
                self.out.append(from_error(exc, where=key_path))
            return None
        layers = fields["num_layers"]
        self.intents = {name: self._intent(name, layers) for name in self.raw.tensors if name not in VOCAB_TENSORS}
        head = self._tensor("lm_head.weight")
        vd = raw.get("draft_vocab_size")
        if not _positive(vd):
            vd = head.shape[0] if head is not None and len(head.shape) == 2 else fields["vocab_size"]
        ht = raw.get("target_hidden_size")
        fields.update(
            draft_vocab_size=vd,
            target_hidden_size=ht if _positive(ht) else None,
            norm_before_residual=raw.get("norm_before_residual") is True,
            norm_before_fc=raw.get("norm_before_fc", self.eagle.get("norm_before_fc")) is True,
            fc_norm=raw.get("fc_norm", raw.get("use_aux_norm")) is True,
            norm_output=raw.get("norm_output") is True,
        )
        if raw.get("bias") is True:
            fields["attention_bias"] = True
        fields["num_aux_hidden_states"] = self._num_aux(fields)
        try:
            return DrafterConfig(**fields)
        except ValueError as exc:
            first = str(exc).splitlines()
            self.add("E-CONFIG-FIELD", f"config.json: {' '.join(first[1:3]) if len(first) > 2 else first[0]}",
                     "fix the field in config.json", where=where)
            return None

    def _intent(self, stored: str, layers: int) -> str | None:
        """The canonical tensor this layout means by `stored` (None: no drafter tensor at all)."""
        name = to_canonical(stored, self.layout_rules, layers)
        if not KNOWN_CANONICAL.match(name) and stored.startswith("model."):
            name = to_canonical(stored[len("model."):], self.layout_rules, layers)  # the prefix HF classes add
        return name if KNOWN_CANONICAL.match(name) else None

    def _tensor(self, canonical: str) -> TensorSource | None:
        for stored, intent in self.intents.items():
            if intent == canonical:
                return self.raw.tensors[stored]
        return None

    def _num_aux(self, fields: dict[str, Any]) -> int:
        """k, the number of captured states: from fc's width when it is readable."""
        ht = fields["target_hidden_size"] or fields["hidden_size"]
        lists = [x for x in (_int_list(self.config.get(IDS_KEY)), _int_list(self.eagle.get(IDS_KEY))) if x]
        declared = self.config.get("num_aux_hidden_states")
        fallback = declared if _positive(declared) else (len(lists[0]) if lists else 3)
        fc = self._tensor("fc.weight")
        if fc is None or len(fc.shape) != 2:
            return fallback
        if fc.shape[1] % ht or not fc.shape[1]:
            self.add("E-SHAPE-FC", f"fc.weight has {fc.shape[1]} input columns, not a multiple of the target hidden "
                     f"size Ht={ht}", "set target_hidden_size in config.json to the target's hidden size",
                     where="fc.weight")
            return fallback
        k = fc.shape[1] // ht
        if _positive(declared) and declared != k:
            self.add("E-CAPTURE-COUNT", f"num_aux_hidden_states is {declared} but fc.weight fuses {k} states of width "
                     f"{ht}", f"set num_aux_hidden_states to {k}", where="$.num_aux_hidden_states")
        return k

    def check_schema(self) -> None:
        named = {f.where for f in self.out if f.where}
        for v in schemas.violations(self.layout.name, self.config) or []:
            # a specific finding already explains this field (or the value that holds it)
            if not any(v.path == n or v.path.startswith((n + "[", n + ".")) for n in named):
                self.add("E-SCHEMA", f"config.json {v.path}: {v.message} ({self.layout.name} schema)",
                         f"fix {v.path} in config.json", where=v.path)

    # --- tensors
    def layers_plausible(self) -> bool:
        """Every layer needs several tensors; a config claiming more layers than tensors is not enumerated."""
        return self.cfg.num_layers <= len(self.raw.tensors)

    def check_tensors(self) -> None:
        cfg = self.cfg
        if not self.layers_plausible():
            self.add("E-KEY-MISSING", f"config.json says {cfg.num_layers} decoder layers but the checkpoint holds "
                     f"{len(self.raw.tensors)} tensors", "the checkpoint is incomplete or num_hidden_layers is wrong",
                     where="$.num_hidden_layers")
            return
        expected, optional = expected_shapes(cfg), optional_shapes(cfg)
        seen: dict[str, str] = {}
        fc_bad = any(f.code == "E-SHAPE-FC" for f in self.out)
        for stored, intent in sorted(self.intents.items()):
            src = self.raw.tensors[stored]
            label = stored if intent in (None, stored) else f"{stored} ({intent})"
            if intent is None:
                self.add("E-KEY-UNKNOWN", f"tensor {stored!r} is no part of an EAGLE-3 drafter in the "
                         f"{self.layout.name} layout: every engine drops it silently",
                         f"rename it to its drafter name or remove it (`{self.command_inspect()}` lists the names)",
                         where=stored)
                continue
            twin = _later_norm_twin(stored, self.raw.tensors)
            if twin is not None:  # one norm of a layer >= 1 under vLLM's and SGLang's names, as we write it
                if stored.endswith("hidden_norm.weight") and tensor_sha256(src) != tensor_sha256(self.raw.tensors[twin]):
                    self.add("E-KEY-DUPLICATE", f"tensors {twin!r} and {stored!r} hold different weights: vLLM "
                             "reads the first, SGLang the second, and they would serve different drafters",
                             "keep the trained weight under both names, or one of them", where=stored)
                if intent in seen or intent not in expected:
                    continue
            if intent in seen:
                self.add("E-KEY-DUPLICATE", f"tensors {seen[intent]!r} and {stored!r} both hold {intent}",
                         "the checkpoint stores one weight twice under two prefixes: keep one", where=stored)
                continue
            seen[intent] = stored
            want = expected.get(intent) or optional.get(intent)
            if want is None:
                self.add("E-KEY-UNUSED", f"tensor {label} is not used by this drafter's config "
                         f"({_unused_reason(cfg, intent)}): engines drop it silently",
                         "set the config flag it belongs to, or remove the tensor", where=stored)
                continue
            if src.dtype not in FLOAT_DTYPES:
                self.add("E-DTYPE", f"tensor {label} has dtype {src.dtype}; drafter weights are float tensors",
                         "re-export the weights in bf16/fp16/fp32", where=stored)
            if tuple(src.shape) != want and not (intent == "fc.weight" and fc_bad):
                self.add("E-SHAPE", f"tensor {label} has shape {list(src.shape)}, the config implies {list(want)}",
                         "config.json and the weights disagree: fix the config field the shape depends on, or "
                         "re-export the weights", where=stored)
        for name in sorted(set(expected) - set(seen)):
            extra = ""
            if name == "lm_head.weight" and cfg.draft_vocab_size < cfg.vocab_size:
                extra = (f"; the target's [{cfg.vocab_size}, {cfg.hidden_size}] head cannot stand in for it "
                         "(it does not fit the d2t path)")
            self.add("E-KEY-MISSING", f"required tensor {name} {list(expected[name])} is missing{extra}",
                     "the checkpoint is incomplete: engines load it silently with random weights; re-export it "
                     "from the training run", where=name)

    # --- vocabulary map
    def check_vocab(self) -> None:
        cfg = self.cfg
        d2t, t2d = self.raw.tensors.get("d2t"), self.raw.tensors.get("t2d")
        if {"d2t", "t2d"} & self.raw.cut:
            return  # reported as truncation
        try:
            read_vocab_map(d2t, t2d, cfg.vocab_size, cfg.draft_vocab_size)
        except FormatError as exc:
            about_t2d = exc.code == "E-VOCAB-T2D" or exc.message.startswith("t2d") or d2t is None
            found = from_error(exc, where="t2d" if about_t2d else "d2t")
            if exc.code == "E-VOCAB-ABSOLUTE":
                found = Finding(found.code, found.severity, found.message,
                                "only if you confirm it, repair it: "
                                + self.command(self.layout.name, "--repair-d2t-absolute") +
                                " (d2t := d2t - arange(Vd))", "d2t")
            self.out.append(found)

    # --- capture layers
    def read_capture_ids(self) -> None:
        for location, value in (("top", self.config.get(IDS_KEY, ABSENT)), ("nested", self.eagle.get(IDS_KEY, ABSENT))):
            if value is ABSENT or value is None or value == []:
                self.ids[location] = None
            elif _int_list(value) is None or len(value) > MAX_CAPTURE_IDS:
                self.add("E-CAPTURE-FIELD", f"{LOCATIONS[location][2:]} is {_show(value)}: not a short list of "
                         "integers", "write the capture ids as a list of integers", where=LOCATIONS[location])
                self.ids[location] = None
            else:
                self.ids[location] = list(value)

    @property
    def home(self) -> str:
        """Where this layout keeps its ids (and so in which convention they are written)."""
        return "top" if self.layout.engine in BOUNDARY_ENGINES else "nested"

    def meaning(self, convention: str, ids: list[int]) -> list[int] | None:
        try:
            return engine_boundaries(convention, ids, self.family, self.depth)
        except ValueError:  # a third-party layout with a convention of its own
            return None

    def check_capture(self) -> None:
        cfg, home = self.cfg, self.home
        other = "nested" if home == "top" else "top"
        written, elsewhere = self.ids[home], self.ids[other]
        if written is not None:
            self.intended = self.meaning(self.layout.engine, written)
            lowest = 0 if self.layout.engine in BOUNDARY_ENGINES else -1
            if any(x < lowest for x in written):
                self.add("E-CAPTURE-RANGE", f"{LOCATIONS[home][2:]} {written}: an id below {lowest} names no layer "
                         f"in the {self.layout.name} convention", "fix the capture ids", where=LOCATIONS[home])
            if len(written) != cfg.num_aux_hidden_states:
                self.add("E-CAPTURE-COUNT", f"{LOCATIONS[home][2:]} lists {len(written)} capture ids {written} but "
                         f"fc.weight fuses {cfg.num_aux_hidden_states} states",
                         "the capture id list and the fc width must agree", where=LOCATIONS[home])
        elif elsewhere is None and self.depth:
            self.intended = default_boundaries(self.depth)
        if self.intended and self.depth:
            outside = [b for b in self.intended if not 0 <= b <= self.depth]
            if outside:
                self.add("E-CAPTURE-RANGE", f"capture boundaries {self.intended} include {outside}, outside "
                         f"[0, {self.depth}] of the {self.depth}-layer target",
                         "check --target is the model the drafter was trained for, and the ids' convention",
                         where=LOCATIONS[home])
        if elsewhere is not None and elsewhere != written:
            self._convention_warning(other, elsewhere)

    def _convention_warning(self, location: str, ids: list[int]) -> None:
        """A list outside where this layout keeps ids: engines that read it there may mean other layers."""
        ours = self.meaning(self.layout.engine, ids)
        readers = ("vllm",) if location == "top" else ("sglang",)  # flat configs: SGLang nests, vLLM reads top
        readings = {e: self.meaning(e, ids) for e in readers}
        if self.intended is not None and all(b is not None and sorted(set(b)) == sorted(set(self.intended))
                                             for b in readings.values()):
            return  # the same layers, spelled for the engine that reads them there (as eagle3-convert writes)
        differ = {e: b for e, b in readings.items() if b != ours}
        if not differ:
            return
        who = " and ".join(engine_profiles()[e].label for e in differ)
        theirs = next(iter(differ.values()))
        self.add("W-CAPTURE-CONVENTION", f"{LOCATIONS[location][2:]} {ids} is read by {who} as boundaries {theirs}, "
                 f"while in the {self.layout.name} layout's convention it means boundaries {ours}",
                 f"keep one list where the serving engine reads it: move it to {LOCATIONS[self.home][2:]} if it "
                 f"is in the {self.layout.name} convention, or, if the ids are "
                 f"{'boundaries' if location == 'top' else 'block outputs'}, convert with "
                 f"`{self.command(self.layout.name, '--from', 'vllm' if location == 'top' else 'sglang')}`",
                 where=LOCATIONS[location])

    def _engine_capture(self, p: EngineProfile) -> None:
        cfg = self.cfg
        truth = self.intended
        misplaced = self.ids["nested" if self.home == "top" else "top"] if self.ids[self.home] is None else None
        if truth is None and misplaced:
            truth = self.meaning(self.layout.engine, misplaced)  # the layout's reading of a misplaced list
        # The layout's reader refuses a list outside its place unless --capture-layers says how it counts.
        settle = ("--capture-layers", ",".join(map(str, misplaced)), "--convention", self.layout.engine) \
            if misplaced else ()
        convert = f"`{self.command(p.layout, *settle)}`"
        default = default_boundaries(self.depth) if self.depth else None
        if p.ids_from is None:
            wanted = truth or default
            if wanted is None:
                self.add("I-CAPTURE-RUNTIME", f"{p.label} takes the capture layers from its runtime argument, not "
                         "config.json; pass --target to learn which ids to give it", engine=p.name)
                return
            try:
                ids = ids_for_engine(p.name, wanted, self.family, self.depth)
            except RefusalError as exc:
                self.out.append(from_error(exc, where=LOCATIONS[self.home], engine=p.name))
                return
            self.add("I-CAPTURE-RUNTIME", f"{p.label} takes the capture layers from its runtime argument, not "
                     f"config.json: pass ids {ids} (block outputs) to capture boundaries {wanted}", engine=p.name)
            return
        read = self.ids[p.ids_from]
        if read is None:
            captured = default
            shown = f"{default}" if default else "{2, L//2, L-3}"
            placed = [loc for loc, ids in self.ids.items() if ids is not None]
            if placed:
                loc = placed[0]
                coincide = f", which here equals the {self.layout.name} reading {truth}" if (
                    truth and sorted(truth) == sorted(default or [])) else ""
                # Converting helps only when the layout's own reader understands where the ids are.
                fix = f"{convert} writes them there"
                if p.name == "vllm" and loc == "nested":
                    coincide += (f" (its V1 runner instead falls back to that list, read as boundaries "
                                 f"{self.meaning('vllm', self.ids[loc])})")
                self.add("W-CAPTURE-IDS-IGNORED", f"{p.label} reads capture ids only from "
                         f"{LOCATIONS[p.ids_from][2:]}: it ignores {LOCATIONS[loc][2:]} {self.ids[loc]} and captures "
                         f"its default boundaries {shown}{coincide}",
                         f"write the ids where {p.label} reads them: {fix}",
                         engine=p.name, where=LOCATIONS[loc])
            else:
                self.add("I-CAPTURE-DEFAULT", f"config.json names no capture ids: {p.label} captures its default "
                         f"boundaries {shown}", engine=p.name)
            if cfg.num_aux_hidden_states != 3:
                self.add("E-CAPTURE-COUNT", f"{p.label} captures its 3 default states but fc.weight fuses "
                         f"{cfg.num_aux_hidden_states}", f"write the capture ids the drafter was trained with where "
                         f"{p.label} reads them", engine=p.name, where="fc.weight")
        else:
            captured = self.meaning(p.name, read)
            lowest = 0 if p.name in BOUNDARY_ENGINES else -1
            if captured is None and any(x < lowest for x in read):
                self.add("E-CAPTURE-RANGE", f"{p.label} reads {LOCATIONS[p.ids_from][2:]} {read}: an id below "
                         f"{lowest} names no layer in its convention", "fix the capture ids", engine=p.name,
                         where=LOCATIONS[p.ids_from])
                return
            if captured is None:
                self.add("E-CAPTURE-UNREACHABLE", f"{p.label} reads {LOCATIONS[p.ids_from][2:]} {read} and captures "
                         f"nothing for some of them on a {self.family}-family target (-1 names no layer there)",
                         "retrain on capturable layers, or serve the drafter with vLLM", engine=p.name,
                         where=LOCATIONS[p.ids_from])
                return
        if truth is None or any(b < 0 or (self.depth and b > self.depth) for b in truth):
            return  # unknown, or outside the target: E-CAPTURE-RANGE says so once
        try:
            ids_for_engine(p.name, truth, self.family, self.depth)
        except RefusalError as exc:
            self.out.append(from_error(exc, where=LOCATIONS[self.home], engine=p.name))
            return
        if captured is None or sorted(set(captured)) == sorted(set(truth)):
            return
        where = LOCATIONS[p.ids_from] if read is not None else LOCATIONS[self.home]
        how = (f"reads {LOCATIONS[p.ids_from][2:]} {read} as boundaries {captured}" if read is not None
               else f"captures its default boundaries {captured}")
        if 0 in truth and 0 not in captured:
            self.add("E-CAPTURE-EMBEDDING", f"the drafter was trained with the embedding output (boundary 0) among "
                     f"its taps {truth}, but {p.label} {how}: the embedding tap is replaced by a block output",
                     f"{convert} writes ids {p.label} reads as {truth}"
                     + (" (SGLang captures the embedding with id -1)" if p.name == "sglang" else ""),
                     engine=p.name, where=where)
        else:
            self.add("E-CAPTURE-MISMATCH", f"{p.label} {how}, but the drafter was trained on boundaries {truth}",
                     f"{convert} writes ids {p.label} reads as {truth}", engine=p.name, where=where)

    def _fc_bypass(self, p: EngineProfile) -> None:
        cfg = self.cfg
        k, ht, h = cfg.num_aux_hidden_states, cfg.resolved_target_hidden_size, cfg.hidden_size
        if p.name in ("sglang", "vllm") and self.eagle.get("use_aux_hidden_state", True) is False:
            self.add("E-CAPTURE-FC-BYPASSED", f"eagle_config.use_aux_hidden_state is false: {p.label} passes the "
                     f"target's last hidden state alone and never applies fc.weight [{h}, {k * ht}]",
                     "set eagle_config.use_aux_hidden_state to true (an EAGLE-3 drafter fuses captured states)",
                     engine=p.name, where="$.eagle_config.use_aux_hidden_state")
        elif p.fc_skipped_when_width_matches and k * ht == h:
            self.add("E-CAPTURE-FC-BYPASSED", f"fc.weight fuses k={k} states of width Ht={ht} and k*Ht == H={h}: "
                     f"{p.label} applies fc only when the incoming width differs from H, so the trained fc is "
                     "silently skipped", "serve this drafter with vLLM: "
                     f"`{self.command('vllm')}`", engine=p.name, where="fc.weight")

    # --- one engine
    def check_engine(self, p: EngineProfile) -> None:
        cfg, raw = self.cfg, self.config
        unsupported = p.unsupported(cfg)
        for reason in unsupported:
            self.add("E-ENGINE-UNSUPPORTED", f"{reason}: it would serve different maths or drop weights",
                     f"no file makes {p.label} serve this drafter as trained; serve it with vLLM, which supports "
                     f"every variant: `{self.command('vllm')}`", engine=p.name)
        if unsupported or not self._engine_reads_config(p):
            return  # the real blocker is said; how this file is spelled for the engine is moot
        if cfg.family in p.families and self.raw.complete and self.layers_plausible():
            self._engine_keys(p)
        if self.raw.complete:
            self._engine_vocab(p)
        head = self._tensor("lm_head.weight")
        rows = head.shape[0] if head is not None and len(head.shape) == 2 else None
        vd = raw.get("draft_vocab_size", ABSENT)
        if p.name == "sglang" and vd is ABSENT:
            self.add("E-CONFIG-DRAFT-VOCAB", "config.json has no draft_vocab_size: SGLang fails to construct the "
                     "drafter", f"set draft_vocab_size to {rows or 'the lm_head rows'}", engine=p.name,
                     where="$.draft_vocab_size")
        elif not _positive(vd) and rows is not None and rows != cfg.vocab_size:
            self.add("E-CONFIG-DRAFT-VOCAB", f"draft_vocab_size is {_show(vd)}: {p.label} then sizes the draft head "
                     f"for the full vocab V={cfg.vocab_size}, but lm_head.weight has {rows} rows",
                     f"set draft_vocab_size to {rows}", engine=p.name, where="$.draft_vocab_size")
        if p.name == "sglang" and "target_hidden_size" in raw and raw["target_hidden_size"] is None:
            self.add("E-CONFIG-TARGET-HIDDEN-NULL", "target_hidden_size is null: SGLang checks only that the key "
                     "exists and sizes fc from None", "remove the key when Ht == H, or set it to the target's hidden "
                     "size", engine=p.name, where="$.target_hidden_size")
        self._engine_capture(p)
        self._fc_bypass(p)

    def check_engine_verdicts(self) -> None:
        """The engine modules' verdict on this file, as a last word: an engine that would serve it wrong is
        never left unsaid, even where no finding above names the cause."""
        from .engines import LABELS, WRONG, TargetContext, serve_verdicts

        readers = [r for name in self.engines for r in ENGINE_READERS.get(name, ())]
        cfg = self.cfg.model_copy(update={"capture_boundaries": self.intended})
        serves = serve_verdicts(self.config, self.raw.tensors, cfg, TargetContext(self.family, self.depth), readers)
        said = {f.engine for f in self.out if f.severity in ("error", "warning")}
        if "W-CONFIG-DEFAULTS-DIFFER" in self.codes():
            said.add("vllm")  # the absent norm_before_residual: the warning says vLLM reads it otherwise
        for reader, verdict in serves.items():
            engine = reader.split("-")[0]
            if verdict.verdict == WRONG and engine not in said:
                self.add("E-ENGINE-WRONG", f"{LABELS[reader]}: {verdict.why}; it would serve this file wrong",
                         f"write the file the engine reads right: `{self.command(ENGINE_LAYOUT[engine])}`",
                         engine=engine)
                said.add(engine)

    def _engine_reads_config(self, p: EngineProfile) -> bool:
        cfg = self.cfg
        archs = self.config.get("architectures") if isinstance(self.config.get("architectures"), list) else []
        if self.speculators_format:
            problem = None if p.reads_speculators_format else (
                f"{p.label} does not read speculators-format configs (speculators_model_type)")
        elif p.classes is None:
            problem = f"{p.label} reads only speculators-format configs; this is a flat {self.layout.name} config"
        else:
            served = p.served_family(archs)
            problem = None if served == cfg.family else (
                f"architectures {_show(archs)} name no {p.label} EAGLE-3 drafter class" if served is None else
                f"architectures {_show(archs)} make {p.label} build its {served} drafter class, but the config "
                f"describes a {cfg.family} drafter")
        if problem:
            own_class = next((a for a, fam in (p.classes or {}).items() if fam == cfg.family), None)
            fix = (f"set architectures to [{own_class!r}], the class {p.label} builds for a {cfg.family} drafter"
                   if own_class and not self.speculators_format and p.classes is not None
                   else f"write the config {p.label} reads: `{self.command(p.layout)}`")
            self.add("E-CONFIG-ARCH", problem, fix, engine=p.name, where="$.architectures")
            return False
        if self.speculators_format and "norm_before_residual" not in self.config and p.name in ("speculators", "vllm"):
            self.add("W-CONFIG-DEFAULTS-DIFFER", "norm_before_residual is absent: vLLM serves a speculators config "
                     "without it as true, the speculators library reads it as false (and convert refuses it)",
                     "write norm_before_residual into config.json, true or false as the drafter was trained (the "
                     "speculators trainer writes true): no conversion can choose it for you",
                     where="$.norm_before_residual")
        return True

    def _engine_keys(self, p: EngineProfile) -> None:
        cfg = self.cfg
        expected = {**expected_shapes(cfg), **optional_shapes(cfg)}
        rules = p.rules_for(cfg.family)
        for stored, intent in sorted(self.intents.items()):
            if intent is None or intent not in expected or not p.builds(cfg, intent):
                continue  # unknown, unused or unsupported: reported once, not per engine
            loaded = to_canonical(stored, rules, cfg.num_layers)
            if loaded != intent:
                why = (f"it adds `model.` itself, so {stored!r} matches no parameter" if stored.startswith("model.")
                       else f"it has no parameter named {loaded!r}")
                self.add("E-KEY-DROPPED", f"{p.label} drops tensor {stored!r} ({intent}) silently: {why}; the weight "
                         "keeps its random initialisation",
                         f"rename it to the name {p.label} loads"
                         + f" ({to_stored(intent, rules, cfg.num_layers)!r})",
                         engine=p.name, where=stored)

    def _engine_vocab(self, p: EngineProfile) -> None:
        cfg = self.cfg
        if cfg.draft_vocab_size == cfg.vocab_size:
            return
        has_d2t, has_t2d = "d2t" in self.raw.tensors, "t2d" in self.raw.tensors
        if p.needs_t2d and has_d2t and not has_t2d:
            self.add("E-VOCAB-NO-T2D", f"{p.label} needs t2d (the target-vocab mask) and the checkpoint has only d2t",
                     f"`{self.command(p.layout)}` rebuilds t2d from d2t", engine=p.name, where="t2d")
        if p.needs_d2t and has_t2d and not has_d2t:
            self.add("E-VOCAB-NO-D2T", f"{p.label} maps draft tokens with d2t and the checkpoint has only t2d: every "
                     "draft token would map to the wrong target token", f"`{self.command(p.layout)}` rebuilds d2t "
                     "from t2d", engine=p.name, where="d2t")

    # --- the target
    def check_target(self) -> None:
        cfg, target = self.cfg, self.target
        if target is None:
            return
        name = target.name_or_path or "the target"
        ht = cfg.resolved_target_hidden_size
        if target.hidden_size is not None and target.hidden_size != ht:
            self.add("E-TARGET-HIDDEN", f"{name} has hidden_size {target.hidden_size}, but the drafter fuses states "
                     f"of width Ht={ht} (fc.weight [H, k*Ht])", "check that the target is the model the drafter was "
                     "trained for; a drafter narrower than its target needs target_hidden_size", where="fc.weight")
        if target.vocab_size is not None and target.vocab_size != cfg.vocab_size:
            self.add("E-TARGET-VOCAB", f"{name} has vocab_size {target.vocab_size}, the drafter's target vocab is "
                     f"V={cfg.vocab_size}", "check that the target is the model the drafter was trained for",
                     where="$.vocab_size")
        if cfg.family == "deepseek_mla" and target.model_type and target_family(target.model_type) != "deepseek":
            self.add("W-TARGET-FAMILY", f"an MLA drafter (for DeepSeek-V3 / Kimi-K2.5 targets) checked against "
                     f"{name}, a {target.model_type} model", "check --target")
        recorded = self._verifier_architectures()
        if recorded and target.architectures and not set(recorded) & set(target.architectures):
            self.add("W-TARGET-FAMILY", f"config.json names a verifier of architecture {_show(recorded)}, {name} is "
                     f"{target.architectures}", "check --target is the model the drafter was trained for",
                     where="$.speculators_config.verifier.architectures")
        context = self.target_facts.context_length if self.target_facts else None
        mine = cfg.max_position_embeddings
        if context and (mine is None or mine < context):
            self.add("W-CONFIG-CONTEXT", f"max_position_embeddings is {mine if mine is not None else 'absent'}, below "
                     f"the target's context of {context} tokens: SGLang refuses to start (unless "
                     "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1) and drafts degrade past it",
                     f"set max_position_embeddings to {context} (rope scaling as trained)",
                     where="$.transformer_layer_config.max_position_embeddings" if self.speculators_format
                     else "$.max_position_embeddings")

    def _verifier_architectures(self) -> list[str]:
        spec_cfg = self.config.get("speculators_config")
        verifier = spec_cfg.get("verifier") if isinstance(spec_cfg, dict) else None
        archs = verifier.get("architectures") if isinstance(verifier, dict) else None
        return [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []

    # --- the layout's own reader
    def reader_cross_check(self) -> None:
        """The layout reader as a last word: a refusal no check explained is reported under its own code."""
        try:
            self.layout.read(self.raw.checkpoint(), ConvertOptions(target=self.target))
        except Eagle3Error as exc:
            explained = self.codes() & (_READER_CODES_EXPLAINED.get(exc.code, set()) | {exc.code})
            if not explained:
                self.out.append(from_error(exc))

    def codes(self) -> set[str]:
        return {f.code for f in self.out}


def _sidecar_target(side: dict[str, Any] | None) -> TargetIdentity | None:
    """What this tool recorded beside config.json about the target (trusted only with that exact config)."""
    target = (side or {}).get("target")
    if not isinstance(target, dict):
        return None
    try:
        return TargetIdentity.model_validate(target)
    except ValueError:
        return None


def _decoder_key_path(dec: Mapping[str, Any], prefix: str, code: str) -> str:
    """The JSON path of the decoder key `decoder_fields` refused (so the schema does not repeat it)."""
    if code == "E-CONFIG-FAMILY":
        return f"{prefix}.model_type"
    keys = ["hidden_size", "intermediate_size", "num_attention_heads", "vocab_size"]
    if "num_hidden_layers" in dec:
        keys.append("num_hidden_layers")
    if "model_type" in dec and not isinstance(dec["model_type"], str):
        return f"{prefix}.model_type"
    if dec.get("model_type") in MLA_MODEL_TYPES:
        keys += MLA_KEYS
    return next((f"{prefix}.{key}" for key in keys if not _positive(dec.get(key))), prefix)


def _later_norm_twin(stored: str, tensors: Mapping[str, Any]) -> str | None:
    """For `layers.{i>=1}.hidden_norm.weight`, its `input_layernorm` twin when the file holds both: the
    pre-attention norm of that layer written for SGLang and for vLLM (converters.base.with_both_later_norms)."""
    m = re.match(r"^((?:model\.)?layers\.[1-9]\d*\.)(hidden_norm|input_layernorm)\.weight$", stored)
    if not m:
        return None
    twin = f"{m.group(1)}{'input_layernorm' if m.group(2) == 'hidden_norm' else 'hidden_norm'}.weight"
    return twin if twin in tensors else None


def _show(value: Any, limit: int = 80) -> str:
    """A config value as a message quotes it: never a whole hostile blob."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _int_list(value: Any) -> list[int] | None:
    if isinstance(value, list) and value and all(isinstance(x, int) and not isinstance(x, bool) for x in value):
        return list(value)
    return None


def _unused_reason(cfg: DrafterConfig, canonical: str) -> str:
    index = layer_index(canonical)
    if index is not None and index >= cfg.num_layers:
        return f"num_hidden_layers is {cfg.num_layers}"
    if canonical == "input_norm.weight":
        return "norm_before_fc is off"
    if canonical.startswith("fc_norm."):
        return "fc_norm is off" if not cfg.fc_norm else f"only {cfg.num_aux_hidden_states} fc_norm weights exist"
    if canonical.endswith(".bias"):
        return "attention_bias / mlp_bias is off"
    if canonical.endswith(("q_norm.weight", "k_norm.weight")):
        return f"a {cfg.family} drafter has no q_norm/k_norm"
    return f"a {cfg.family} drafter has no such tensor"


# ------------------------------------------------------------------------ --deep

# dtype -> (unsigned view, mask of the magnitude bits, smallest NaN/Inf magnitude, bit pattern of 1.0)
_FLOAT_BITS: dict[str, tuple[str, int, int, int | None]] = {
    "BF16": ("<u2", 0x7FFF, 0x7F80, 0x3F80),
    "F16": ("<u2", 0x7FFF, 0x7C00, 0x3C00),
    "F32": ("<u4", 0x7FFF_FFFF, 0x7F80_0000, 0x3F80_0000),
    "F64": ("<u8", 0x7FFF_FFFF_FFFF_FFFF, 0x7FF0_0000_0000_0000, 0x3FF0_0000_0000_0000),
    "F8_E4M3": ("u1", 0x7F, 0x7F, 0x38),  # e4m3fn: no Inf, NaN = S.1111.111
    "F8_E5M2": ("u1", 0x7F, 0x7C, 0x3C),
    "F8_E8M0": ("u1", 0xFF, 0xFF, None),  # a scale format: NaN = 0xFF, no zero, no sign
}
_NORM_SUFFIXES = ("norm.weight", "layernorm.weight")


@dataclass
class TensorScan:
    sha256: str
    nonfinite: bool = False
    all_zero: bool = False
    all_ones: bool = False


DEEP_CHUNK = 4 * 1024 * 1024


def scan_tensor(src: TensorSource, check_ones: bool, on_bytes: Callable[[int], None] | None = None) -> TensorScan:
    """One pass over a tensor's bytes: sha256 and, for floats, NaN/Inf, all-zero and all-ones."""
    import numpy as np

    digest = hashlib.sha256()
    bits = _FLOAT_BITS.get(src.dtype)
    if bits is None:
        for part in iter_tensor_chunks(src, DEEP_CHUNK):
            digest.update(part)
            if on_bytes:
                on_bytes(len(part))
        return TensorScan(digest.hexdigest())
    view, magnitude, nonfinite_at, one = bits
    udt = np.dtype(view)
    mag, limit = udt.type(magnitude), udt.type(nonfinite_at)
    one_bits = udt.type(one) if one is not None and check_ones else None
    scan = TensorScan("", all_zero=src.dtype != "F8_E8M0" and src.nbytes > 0, all_ones=one_bits is not None)
    carry = b""
    scratch = None
    for part in iter_tensor_chunks(src, DEEP_CHUNK):
        digest.update(part)  # releases the GIL: hashing overlaps the numpy work of other threads
        if on_bytes:
            on_bytes(len(part))
        if carry:
            part = memoryview(carry + bytes(part))
        usable = len(part) - len(part) % udt.itemsize
        carry = bytes(part[usable:])
        if not usable:
            continue
        values = np.frombuffer(part[:usable], dtype=udt)
        if scratch is None or len(scratch) < len(values):
            scratch = np.empty(len(values), dtype=udt)
        masked = np.bitwise_and(values, mag, out=scratch[:len(values)])
        top = masked.max()
        scan.nonfinite = scan.nonfinite or bool(top >= limit)
        scan.all_zero = scan.all_zero and not top
        if scan.all_ones:
            scan.all_ones = bool((values == one_bits).all())
    scan.sha256 = digest.hexdigest()
    return scan


def deep_scan(tensors: Mapping[str, TensorSource], skip: set[str] = frozenset(), workers: int | None = None,
              on_bytes: Callable[[int], None] | None = None) -> tuple[dict[str, dict[str, Any]], list[Finding]]:
    """Read every byte once (tensors in parallel, bounded chunks): the sha256 manifest and value findings."""
    names = sorted((n for n in tensors if n not in skip), key=lambda n: -tensors[n].nbytes)
    is_norm = {n: n.endswith(_NORM_SUFFIXES) for n in names}  # the same suffixes in every layout
    # Each worker holds ~2 chunks; 4 workers keep --deep under 100 MiB on any machine and saturate sha256.
    workers = workers or min(4, os.cpu_count() or 1)

    def one(name: str) -> tuple[str, TensorScan | Eagle3Error]:
        try:
            return name, scan_tensor(tensors[name], is_norm[name], on_bytes)
        except Eagle3Error as exc:  # the file changed or was cut while being read
            return name, exc

    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = dict(pool.map(one, names))
    manifest: dict[str, dict[str, Any]] = {}
    out: list[Finding] = []
    for name in sorted(results):
        result, src = results[name], tensors[name]
        if isinstance(result, Eagle3Error):
            out.append(from_error(result, where=name))
            continue
        manifest[name] = {"file": src.file.name if isinstance(src, TensorRef) else None, "dtype": src.dtype,
                          "shape": list(src.shape), "sha256": result.sha256}
        if result.nonfinite:
            out.append(finding("E-DEEP-NONFINITE", f"tensor {name!r} holds NaN or Inf values",
                               "the run diverged or the file is corrupt: re-export the drafter from a good step",
                               where=name))
        if result.all_zero and not name.endswith(".bias"):
            out.append(finding("E-DEEP-ZERO", f"tensor {name!r} is all zeros: left at an initial value or never "
                               "loaded before saving", "re-export the drafter from its training run", where=name))
    norms = [n for n in names if is_norm[n] and isinstance(results.get(n), TensorScan)]
    if norms and all(results[n].all_ones for n in norms):
        out.append(finding("W-DEEP-INIT-NORMS", f"every norm weight ({len(norms)} tensors) is exactly 1.0: the "
                           "drafter looks untrained (norms at their initial value)",
                           "check that the checkpoint was saved after training, not at initialisation"))
    return manifest, out
