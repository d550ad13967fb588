"""What we know about a drafter's weights besides its config.json, and where config.json contradicts it.

Two places hold facts about the weights: the sidecar eagle3-convert.json beside them (written by this
tool, travelling with the files to a colleague or the Hub) and the registry's record of their drafter id.
Both say which target and capture layers the drafter was trained on, and its vocabulary, widths and
norm flags. validate, inspect and convert compare config.json with each of them, always: with or without
--target, whether or not config.json is the one the sidecar was written with (an edited config is the
case worth catching). A contradiction is an error naming both sources; never a silent "OK".
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import timezone
from pathlib import Path
from shlex import quote
from typing import Any

from . import sidecar
from .capture_ids import default_boundaries
from .drafter import MATH_FLAGS, DrafterConfig
from .target_identity import TargetIdentity, compare

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


def with_names_learned(known: list[Known]) -> list[Known]:
    """`known` with each source's target knowing every name the others know it by, where they are one target: the
    registry learns names (`registry add --verifier`), and a sidecar written before holds the old ones."""
    out = []
    for k in known:
        target = k.target
        for other in known:
            if target is not None and other is not k and other.target is not None and compare(target, other.target).same:
                target = target.named_also(*other.target.names)
        out.append(replace(k, target=target))
    return out


def verifier_named(config: dict[str, Any] | None) -> TargetIdentity | None:
    """The target a config names itself (speculators' verifier), by name and architectures."""
    spec = (config or {}).get("speculators_config")
    verifier = spec.get("verifier") if isinstance(spec, dict) else None
    name = verifier.get("name_or_path") if isinstance(verifier, dict) else None
    if not isinstance(name, str) or not name:
        return None
    archs = verifier.get("architectures")
    return TargetIdentity(name_or_path=name, architectures=[a for a in archs if isinstance(a, str)]
                          if isinstance(archs, list) else [])


@dataclass(frozen=True)
class Contradiction:
    """config.json says `config` of `what`, `known` (a source) says `recorded`. `severity` "warning": two names of
    a target that no fact tells apart or together (target_identity.compare's "untold")."""

    what: str
    config: Any
    recorded: Any
    known: Known
    where: str | None = None  # the config field (JSON path), for findings
    other: Known | None = None  # set when `config` is what another record says, not config.json
    severity: str = "error"
    given: str = "config.json"  # whose value `config` is: config.json, --target, --verifier
    of_target: bool = False  # `what` is a fact of the target (its name, depth, ...), not of the drafter

    @property
    def message(self) -> str:
        if self.other is not None:
            text = f"{self.other.label} says {self.what} {self.config}, {self.known.label} says {self.recorded}"
        else:
            text = f"{self.given}'s {self.what} is {self.config}, {self.known.label} says {self.recorded}"
        if self.severity == "warning":
            text += ": no fact of either tells whether they are one model"
        return text


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


def _target_contradictions(mine: TargetIdentity | None, known: Known, given: str, where: str | None = None,
                           other: Known | None = None) -> list[Contradiction]:
    """Where the target `mine` (named by `given`) and the record's are two models (an error per fact that differs)
    or two names nothing tells apart (one warning): target_identity.compare's rule."""
    found = compare(mine, known.target)
    if found.verdict == "differ":  # --target is a target: its depth, not its "target depth"
        return [Contradiction(what if given == "--target" else f"target {what}", a, b, known, where, other,
                              given=given, of_target=True) for what, a, b in found.differences]
    if found.verdict == "untold":
        return [Contradiction("target", repr(mine.name_or_path), repr(known.target.name_or_path), known, where,
                              other, "warning", given, of_target=True)]
    return []


def fact_contradictions(cfg: DrafterConfig, named: TargetIdentity | None, given: TargetIdentity | None,
                        known: Known, named_by: str = "config.json") -> list[Contradiction]:
    """Every fact but the capture layers on which config.json (`cfg`), the target the command names (`named`,
    by `named_by`: config.json's verifier, or --verifier) or the config passed for it (`given`, --target)
    contradict `known`."""
    out: list[Contradiction] = []
    if not known.of_the_weights:
        return out
    if known.target is not None:
        out += _target_contradictions(named, known, named_by, _WHERE.get(named_by))
        if given is not None and not (named is not None and named.shares_identity(given)):  # --verifier with it
            out += _target_contradictions(given, known, "--target")
    for key in ("vocab_size", "draft_vocab_size", "hidden_size"):
        recorded = getattr(known, key)
        if recorded is not None and getattr(cfg, key) is not None and getattr(cfg, key) != recorded:
            out.append(Contradiction(key, getattr(cfg, key), recorded, known))
    for flag in MATH_FLAGS:
        if flag in known.flags and known.flags[flag] != getattr(cfg, flag):
            out.append(Contradiction(flag, getattr(cfg, flag), known.flags[flag], known))
    return out


_WHERE = {"config.json": "$.speculators_config.verifier.name_or_path"}


def record_contradictions(sidecar: Known, record: Known) -> list[Contradiction]:
    """Where the sidecar and the registry's record of the same weights name other targets (config.json may hold
    no target to contradict either). Their capture layers are each compared with config.json's instead."""
    if sidecar.target is None or record.target is None or not record.of_the_weights:
        return []
    return _target_contradictions(sidecar.target, record, sidecar.label, other=sidecar)


def way_out(found: Contradiction, src: str) -> str:
    """What to do about a contradiction other than the capture layers (those have convert's flags): a way that
    keeps the record; changing the record is the user's explicit word, never the first move. `src`: SRC as a
    command takes it, quoted for the shell."""
    record = found.known
    shown = f"`eagle3-convert registry show {record.drafter_id[:12]}` shows the record and its history; " if (
        record.in_registry and record.drafter_id) else ""
    if found.severity == "warning":
        name, recorded = found.config.strip("'"), found.recorded.strip("'")
        if found.given == "--target":  # a config of the target: its names and digest join the recorded name
            return (f"{shown}if {name} is {recorded}, `eagle3-convert registry add {src} --verifier "
                    f"{quote(recorded)} --target {quote(name)}` records them as one target")
        return (f"{shown}if {name} names the model the drafter was trained on, `eagle3-convert registry add "
                f"{src} --verifier {quote(name)}` records it as a name of that target")
    if found.of_target:
        named = record.target.name_or_path if record.target else None
        given = found.other.label if found.other is not None else found.given
        return (f"{shown}check that {given} names the model the drafter was trained on"
                f"{f' ({named})' if named else ''}")
    return f"{shown}fix config.json's {found.what} to {found.recorded}, as {record.label} says"
