"""Engine releases: which releases of an engine read each fact which way, and the release a user names.

Each engine module states its `RELEASES`: the releases we know (read in their released code, or between two
releases read, with no change of the facts in between), and each `Change` with the first release that reads
the fact the new way and the source (PR or file) that made the change. A rule function asks
`RELEASES.reads(CHANGE, release)`. Releases are compared as versions (`packaging`); llama.cpp's builds
(`b11434`) are compared by their number.

How each boundary was found: the engines' wheels from the package index (`pip download --no-deps`), the
changed file read in the releases on each side (each Change's source names them).

The user names releases as `ENGINE`, `ENGINE==RELEASE`, or a fleet: repeated `--engine`, or
$EAGLE3_ENGINES (the same spellings, separated by commas or spaces) when no --engine is given. A release named that
the tables do not hold (the one shipped yesterday) is judged by the rules of the known release nearest below it, the
oldest for an older one, and says so (`stand_in`, `stand_in_why`); a spelling that is no release number is refused.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable

FLEET_ENV = "EAGLE3_ENGINES"  # the fleet's releases, when a command is given no --engine


@dataclass(frozen=True)
class Change:
    """One fact an engine reads differently from release `since` on."""

    fact: str  # the kind of fact: "capture ids", "tensor names", "flags", "architectures", "default layers"
    before: str  # how releases before `since` read it
    after: str  # how `since` and later read it
    since: str | None  # the first release that reads it the new way; None: in no release we know
    source: str  # the PR (or file) that made the change, and where the boundary was read


@lru_cache(maxsize=4096)  # a release string parsed once: verdicts across every release compare them thousands of times
def _key(release: str) -> Any:
    from packaging.version import Version

    build = re.fullmatch(r"b(\d+)", release)
    try:
        return Version(build.group(1)) if build else Version(release)
    except ValueError:  # InvalidVersion, or a number past Python's digit limit
        raise ValueError(f"{release!r} is not a release number") from None


def _span_of(known: tuple[str, ...]) -> str:
    """'0.5.9 to 0.5.23', or the one release known."""
    return f"{known[0]} to {known[-1]}" if len(known) > 1 else known[0]


def _key_or_none(release: str) -> Any:
    try:
        return _key(release)
    except ValueError:
        return None


@dataclass(frozen=True)
class Releases:
    """An engine's known releases (oldest first) and the changes between them."""

    engine: str  # as --engine names it
    label: str  # "SGLang"
    known: tuple[str, ...]  # every release whose reading we know, oldest first
    changes: tuple[Change, ...] = ()
    note: str = ""  # what "known" rests on, when it is not a released package (TensorRT-LLM's sources)

    @property
    def newest(self) -> str:
        return self.known[-1]

    def knows(self, release: str) -> bool:
        """`release` is known, as spelled or as the same version (a known spelling that is no version, TensorRT-LLM's
        source snapshot, matches only itself)."""
        if release in self.known:
            return True
        key = _key_or_none(release)
        return key is not None and any(_key_or_none(k) == key for k in self.known)

    def canonical(self, release: str | None) -> str:
        """The known spelling of `release` (0.5.10 for 0.5.10.0); the newest for None."""
        if release is None or release in self.known:
            return release or self.newest
        key = _key(release)
        return next(k for k in self.known if _key(k) == key)

    def reads(self, change: Change, release: str | None) -> bool:
        """Whether `release` (None: the newest) reads `change`'s fact the new way."""
        if change.since is None:
            return False
        return _key(release or self.newest) >= _key(change.since)

    def eras(self) -> list[tuple[str, str]]:
        """The known releases cut where a change lands: (first, last) of each run that reads alike, newest first."""
        cuts = {_key(c.since) for c in self.changes if c.since is not None}
        if not cuts:
            return [(self.known[0], self.newest)]
        runs: list[list[str]] = []
        for release in self.known:
            if not runs or _key(release) in cuts:
                runs.append([])
            runs[-1].append(release)
        return [(run[0], run[-1]) for run in reversed(runs)]

    def span(self, first: str, last: str) -> str:
        """'0.5.12–0.5.23', '≥ 0.5.13' (up to the newest), or one release."""
        if first == last:
            return first
        if last == self.newest:
            return f"≥ {first}"
        return f"{first}–{last}"

    def between(self, first: str, last: str) -> list[str]:
        """The known releases from `first` to `last` (both known spellings)."""
        return list(self.known[self.known.index(first):self.known.index(last) + 1])

    def modelled(self) -> str:
        """'0.5.9 to 0.5.23': the releases this tool models (and what that rests on, where it is no release)."""
        return _span_of(self.known) + (f"; {self.note}" if self.note else "")

    def stand_in(self, release: str | None) -> str:
        """The known release whose rules judge `release` (None: the newest): itself when known; else the newest
        known one before it (a fact changes only at a release we read), the oldest for one older than them all,
        and the one known for a release that cannot be ordered against it (TensorRT-LLM's snapshot)."""
        if release is None or self.knows(release):
            return self.canonical(release)
        key = _key(release)
        ordered = [k for k in self.known if _key_or_none(k) is not None]
        if not ordered:
            return self.newest
        return ([k for k in ordered if _key(k) < key] or ordered[:1])[-1]

    def stand_in_why(self, release: str) -> str:
        """One line: which known release's rules judge `release`, one this tool does not model."""
        by = self.stand_in(release)
        ordered = [k for k in self.known if _key_or_none(k) is not None]
        if not ordered:
            where = f"not a release this tool models ({self.note or self.modelled()})"
        elif _key(release) < _key(ordered[0]):
            where = f"older than the oldest release this tool models ({by})"
        elif by == ordered[-1]:
            where = f"newer than the newest release this tool models ({by})"
        else:
            after = ordered[ordered.index(by) + 1]
            where = f"not a release this tool models (it falls between {by} and {after})"
        return f"{self.label} {release} is {where}: judged by {by}'s rules"


@dataclass(frozen=True)
class EngineChoice:
    """One --engine spelling: the engine or runner, and the release named (None: the newest we know)."""

    spelling: str  # vllm, vllm-v1, sglang, ...
    release: str | None = None


def parse_choice(text: str, spellings: tuple[str, ...],
                 known_of: Callable[[str], tuple[str, ...]] = lambda _engine: ()) -> EngineChoice:
    """`sglang`, `sglang==0.5.10`, `vllm-v1==0.24.0`, `trtllm==2026-sources` (`known_of`: an engine's known
    release spellings, which hold one that is no version: TensorRT-LLM's source snapshot); ValueError otherwise."""
    name, sep, release = text.strip().partition("==")
    name, release = name.strip(), release.strip()
    if name not in spellings:
        raise ValueError(f"{name!r} is not an engine (one of {', '.join(spellings)}, optionally ==RELEASE)")
    if sep and not release:
        raise ValueError(f"{text!r} names no release after ==")
    if release and release not in known_of(name):  # one not modelled is judged by the nearest's rules (stand_in)
        try:
            _key(release)
        except ValueError:  # no release number at all: refused, naming what is modelled
            known = known_of(name)
            raise ValueError(f"{release!r} is not a release number" + (
                f" (the release{'s' if len(known) > 1 else ''} modelled: {_span_of(known)})" if known else "")
            ) from None
    return EngineChoice(name, release or None)


def parse_fleet(text: str, spellings: tuple[str, ...],
                known_of: Callable[[str], tuple[str, ...]] = lambda _engine: ()) -> tuple[EngineChoice, ...]:
    """`sglang==0.5.10, sglang==0.5.23 vllm==0.24.0`: a fleet, separated by commas or spaces (one --engine value or
    $EAGLE3_ENGINES); ValueError naming the bad entry."""
    return tuple(parse_choice(item, spellings, known_of) for item in re.split(r"[,\s]+", text.strip()) if item)


def fleet_from_env(spellings: tuple[str, ...],
                   known_of: Callable[[str], tuple[str, ...]] = lambda _engine: ()) -> tuple[EngineChoice, ...]:
    """$EAGLE3_ENGINES: `sglang==0.5.10, sglang==0.5.23 vllm==0.24.0`; ValueError naming the bad entry."""
    try:
        return parse_fleet(os.environ.get(FLEET_ENV, ""), spellings, known_of)
    except ValueError as exc:
        raise ValueError(f"${FLEET_ENV}: {exc}") from None
