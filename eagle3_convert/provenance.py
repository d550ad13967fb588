"""What we know about a drafter's weights besides its config.json, and where config.json contradicts it.

Two places hold facts about the weights: the sidecar eagle3-convert.json beside them (written by this
tool, travelling with the files to a colleague or the Hub) and the registry's record of their drafter id.
Both say which target and capture layers the drafter was trained on, and its vocabulary, widths and
norm flags. validate, inspect and convert compare config.json with each of them, always: with or without
--target, whether or not config.json is the one the sidecar was written with (an edited config is the
case worth catching). A contradiction is an error naming both sources; never a silent "OK".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timezone
from pathlib import Path
from typing import Any

from . import sidecar
from .capture_ids import default_boundaries
from .drafter import MATH_FLAGS, DrafterConfig, TargetIdentity

SIDECAR_LABEL = "eagle3-convert.json"


@dataclass(frozen=True)
class Known:
    """One source's facts about these weights: the sidecar beside them, or a registry record."""

    label: str  # names the source in messages
    capture_boundaries: list[int] | None  # None: the engine default
    target: TargetIdentity | None = None
    vocab_size: int | None = None
    draft_vocab_size: int | None = None
    hidden_size: int | None = None
    flags: dict[str, bool] = field(default_factory=dict)
    drafter_id: str | None = None
    in_registry: bool = False
    # False for a record `registry sync` made from a Hub repo read without its weights (a Hub fingerprint): only its
    # capture layers are held against config.json; its other disagreements are sync's to report (E-SYNC-CONFLICT)
    of_the_weights: bool = True

    @property
    def depth(self) -> int | None:
        return self.target.num_hidden_layers if self.target else None

    def boundaries(self, depth: int | None) -> list[int] | None:
        """The boundaries the training captured, the engine default spelled out on the target this source records
        (the one the drafter was trained on), else on one of `depth` layers; None where no depth is known."""
        if self.capture_boundaries is not None:
            return list(self.capture_boundaries)
        depth = self.depth or depth
        return default_boundaries(depth) if depth else None


def _int(value: Any) -> int | None:
    return value if type(value) is int and value > 0 else None


def _boundaries(value: Any) -> list[int] | None:
    if isinstance(value, list) and value and all(type(b) is int and b >= 0 for b in value):
        return list(value)
    return None


def from_sidecar(data: dict[str, Any] | None, trusted: bool) -> Known | None:
    """The sidecar's facts (`trusted`: written with this very config.json); None when it holds none we can use."""
    if not isinstance(data, dict) or not isinstance(data.get("drafter_id"), str):
        return None
    boundaries = data.get("capture_boundaries")
    if boundaries is not None and _boundaries(boundaries) is None:
        return None  # not a record we can read: nothing to compare
    target = None
    if isinstance(data.get("target"), dict):
        try:
            target = TargetIdentity.model_validate(data["target"])
        except ValueError:
            target = None
    flags = data.get("flags") if isinstance(data.get("flags"), dict) else {}
    label = SIDECAR_LABEL if trusted else f"{SIDECAR_LABEL} (written with another config.json)"
    return Known(label, boundaries, target, _int(data.get("vocab_size")), _int(data.get("draft_vocab_size")),
                 _int(data.get("hidden_size")), {k: v for k, v in flags.items() if isinstance(v, bool)},
                 data["drafter_id"])


def sidecar_known(root: Path, trusted: dict[str, Any] | None) -> Known | None:
    """The sidecar's facts about the weights in `root`, whether or not config.json is the one it was written with
    (`trusted`: the sidecar as the reader already found it written with this config.json)."""
    return from_sidecar(trusted, True) if trusted is not None else from_sidecar(*sidecar.read(root))


def from_record(record: Any) -> Known:
    """A registry DrafterRecord's facts (duck-typed: the registry is not imported here)."""
    target = None
    if record.target is not None:
        target = TargetIdentity.model_validate(record.target.model_dump())
    when = record.updated_at.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M")
    return Known(f"the registry's record of drafter {record.drafter_id[:12]} (recorded {when} UTC)",
                 record.capture_boundaries, target,
                 record.vocab_size, record.draft_vocab_size, record.hidden_size, dict(record.flags),
                 record.drafter_id, in_registry=True, of_the_weights=record.id_kind != "hub-fingerprint")


def verifier_named(config: dict[str, Any] | None) -> str | None:
    """The target name a config states itself (speculators' verifier)."""
    spec = (config or {}).get("speculators_config")
    verifier = spec.get("verifier") if isinstance(spec, dict) else None
    name = verifier.get("name_or_path") if isinstance(verifier, dict) else None
    return name if isinstance(name, str) and name else None


@dataclass(frozen=True)
class Contradiction:
    """config.json says `config` of `what`, `known` (a source) says `recorded`."""

    what: str
    config: Any
    recorded: Any
    known: Known
    where: str | None = None  # the config field (JSON path), for findings
    other: Known | None = None  # set when `config` is what another record says, not config.json

    @property
    def message(self) -> str:
        if self.other is not None:
            return f"{self.other.label} says {self.what} {self.config}, {self.known.label} says {self.recorded}"
        return f"config.json's {self.what} is {self.config}, {self.known.label} says {self.recorded}"


def capture_contradiction(config_boundaries: list[int] | None, known: Known, depth: int | None
                          ) -> tuple[list[int], list[int]] | None:
    """(the config's boundaries, the record's) when they name other layers; None when they agree or one of them
    cannot be spelled out (an engine default on a target of unknown depth). `config_boundaries` None: the
    config names none, so its engines capture their default."""
    depth = depth or known.depth
    mine = list(config_boundaries) if config_boundaries is not None else (
        default_boundaries(depth) if depth else None)
    theirs = known.boundaries(depth)
    if mine is None or theirs is None or sorted(set(mine)) == sorted(set(theirs)):
        return None
    return mine, theirs


def fact_contradictions(cfg: DrafterConfig, target: TargetIdentity | None, verifier: str | None,
                        known: Known) -> list[Contradiction]:
    """Every fact but the capture layers on which config.json (`cfg`; the target it is checked against, if one
    is given; `verifier`, the target name the config itself states) contradicts `known`."""
    out: list[Contradiction] = []
    if not known.of_the_weights:
        return out
    theirs = known.target
    if theirs is not None:
        if verifier and theirs.name_or_path and verifier.lower() != theirs.name_or_path.lower():
            out.append(Contradiction("target", repr(verifier), repr(theirs.name_or_path), known,
                                     "$.speculators_config.verifier.name_or_path"))
        if target is not None:
            for key, what in (("num_hidden_layers", "target depth"), ("hidden_size", "target hidden size"),
                              ("vocab_size", "target vocabulary")):
                given, recorded = getattr(target, key), getattr(theirs, key)
                if given is not None and recorded is not None and given != recorded:
                    out.append(Contradiction(f"{what} (--target)", given, recorded, known))
    for key in ("vocab_size", "draft_vocab_size", "hidden_size"):
        recorded = getattr(known, key)
        if recorded is not None and getattr(cfg, key) is not None and getattr(cfg, key) != recorded:
            out.append(Contradiction(key, getattr(cfg, key), recorded, known))
    for flag in MATH_FLAGS:
        if flag in known.flags and known.flags[flag] != getattr(cfg, flag):
            out.append(Contradiction(flag, getattr(cfg, flag), known.flags[flag], known))
    return out


def record_contradictions(sidecar: Known, record: Known) -> list[Contradiction]:
    """Where the sidecar and the registry's record of the same weights name other targets (config.json may hold
    no target to contradict either). Their capture layers are each compared with config.json's instead."""
    out: list[Contradiction] = []
    if sidecar.target is None or record.target is None or not record.of_the_weights:
        return out
    for key, what in (("name_or_path", "target"), ("num_hidden_layers", "target depth"),
                      ("hidden_size", "target hidden size"), ("vocab_size", "target vocabulary")):
        mine, theirs = getattr(sidecar.target, key), getattr(record.target, key)
        if mine and theirs and (mine.lower() != theirs.lower() if key == "name_or_path" else mine != theirs):
            out.append(Contradiction(what, mine, theirs, record, other=sidecar))
    return out


def way_out(found: Contradiction, src: str) -> str:
    """What to do about a contradiction other than the capture layers (those have convert's flags)."""
    if found.other is not None:
        return (f"check which target the drafter was trained on: if the record is wrong, `eagle3-convert registry add "
                f"{src} --target TARGET` records the right one; if the sidecar is wrong, move {SIDECAR_LABEL} aside")
    if found.what.endswith("(--target)"):
        name = found.known.target.name_or_path if found.known.target else None
        return f"check --target is the model the drafter was trained for{f' ({name})' if name else ''}"
    if found.known.in_registry:
        return (f"fix config.json's {found.what} to {found.recorded} if the record is right; if config.json is "
                f"right, the record is not: `eagle3-convert registry remove {(found.known.drafter_id or '')[:12]}` "
                "forgets it")
    return (f"fix config.json's {found.what} to {found.recorded} if the sidecar is right; if config.json is right, "
            f"{SIDECAR_LABEL} in {src} describes other weights: move it aside")
