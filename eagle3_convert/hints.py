"""Every hint that names a conversion is a way out: the conversion is planned (nothing is written) before
the hint is shown, and a command that would be refused is replaced by a plain statement of why.

A hint names a command as `eagle3-convert ... --to LAYOUT SRC DST` in backticks; SRC is the source
as the user gave it, which `checked` maps back to the directory that was read. A command written for an
engine names it (`--engine E` or `--engine E==RELEASE`): it is a way out only where that engine, at that
release, serves what the conversion would write. A hint of alternatives ("A; or B") keeps those that work.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .converters.checkpoint import Checkpoint, load_checkpoint
from .engines import REFUSES, WRONG, judged_releases, releases_of
from .engines.releases import parse_choice
from .errors import Eagle3Error, RefusalError
from .names import ENGINE_SPELLINGS, LABELS, runners_of

COMMAND = re.compile(r"`(eagle3-convert [^`]*--to [^`]+)`")
_VALUE_FLAGS = {"--from", "--to", "--target", "--verifier", "--capture-layers", "--convention", "--revision",
                "--drop-embed", "--rope-theta"}


@dataclass
class Planned:
    """The plans of one report's hints: a command several findings name is planned once, and the source
    is loaded once for all of them (`read`: how, by default from disk; validate passes on what it read)."""

    answers: dict[str, Eagle3Error | None] = field(default_factory=dict)
    source: Checkpoint | None = None
    known: list = field(default_factory=list)  # the registry's record of the source (provenance.Known), as convert reads it
    read: Callable[[Path], Checkpoint] = load_checkpoint

    def load(self, root: Path) -> Checkpoint:
        if self.source is None:
            self.source = self.read(root)
        return self.source


def conversion_problem(command: str, source_label: str, root: Path, planned: Planned | None = None
                       ) -> Eagle3Error | None:
    """What `command` (a convert command line) would be refused with, or None when it would succeed."""
    from .convert import make_options, plan_conversion, read_source, state_capture  # (validate imports no convert)

    args, flags, engines = [], {}, []
    words = shlex.split(command)[1:]
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--engine" and i + 1 < len(words):
            engines.append(parse_choice(words[i + 1], ENGINE_SPELLINGS, lambda e: releases_of(e).known))
            i += 2
            continue
        if word in _VALUE_FLAGS and i + 1 < len(words):
            flags[word], i = words[i + 1], i + 2
            continue
        if word.startswith("--"):
            flags[word] = True
        else:
            args.append(word)
        i += 1
    if "--to" not in flags or not args:
        return None
    own = args[0] == source_label  # the source the report is about (else a path the hint names)
    src = str(root) if own else args[0]
    try:
        options = make_options(flags.get("--verifier"), flags.get("--target"), bool(flags.get("--repair-d2t-absolute")))
        options.releases = judged_releases(engines)
        options.drop_embed, options.rope_theta = flags.get("--drop-embed"), flags.get("--rope-theta")
        if own and planned is not None:
            options.known = list(planned.known)
        if "--capture-layers" in flags:
            state_capture(options, [int(x) for x in str(flags["--capture-layers"]).split(",")],
                          flags.get("--convention"))
        load = (planned or Planned()).load if own else load_checkpoint
        source = read_source(src, str(flags.get("--from", "auto")), options, load=load)
        _plan, serves = plan_conversion(source, str(flags["--to"]), options)
    except Eagle3Error as exc:
        return exc
    return next(filter(None, (_not_served(serves, choice.spelling) for choice in engines)), None)


class NotServed(RefusalError):
    """The conversion is written, but the engine the command names would still refuse it or serve it wrong."""


def _not_served(serves: dict, spelling: str) -> Eagle3Error | None:
    """Why the engine a command names (at each release named) would refuse the planned output or serve it wrong;
    None when it serves it (or no verdict is known for that release)."""
    for reader in runners_of(spelling):
        verdict = serves.get(reader)
        for release, judged in (verdict.judged or ((verdict.release, verdict),)) if verdict else ():
            if judged.verdict in (REFUSES, WRONG):
                refused = judged.verdict == REFUSES
                return NotServed(f"{LABELS[reader]} {release} would still {'refuse it' if refused else 'serve it wrong'}"
                                    f": {judged.why}", code="E-ENGINE-REFUSES" if refused else "E-ENGINE-WRONG")
    return None


def checked(hint: str | None, source_label: str, root: Path, planned: Planned | None = None) -> str | None:
    """`hint`, with each conversion it names proven to succeed, or replaced by why none can. `planned`
    carries the answers (and the loaded source) across the hints of one report."""
    if not hint:
        return hint
    planned = Planned() if planned is None else planned
    kept, refused = [], None
    for alternative in hint.split(ALTERNATIVES):
        problems = [(command, _answer(command, source_label, root, planned)) for command in COMMAND.findall(alternative)]
        failed = next(((command, problem) for command, problem in problems if problem is not None), None)
        if failed is None:
            kept.append(alternative)
        elif refused is None:
            refused = failed
    if kept:
        return ALTERNATIVES.join(kept)
    command, problem = refused
    words = shlex.split(command)
    to = words[words.index("--to") + 1]
    if isinstance(problem, NotServed):
        return f"no conversion fixes this: written in the {to} layout, {problem.message} [{problem.code}]"
    return f"no conversion fixes this: writing the {to} layout is refused ({problem.message} [{problem.code}])"


ALTERNATIVES = "; or "  # how a hint offers several ways out


def _answer(command: str, source_label: str, root: Path, planned: Planned) -> Eagle3Error | None:
    if command not in planned.answers:
        planned.answers[command] = conversion_problem(command, source_label, root, planned)
    return planned.answers[command]
