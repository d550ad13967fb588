"""Every hint that names a conversion is a way out: the conversion is planned (nothing is written) before
the hint is shown, and a command that would be refused is replaced by a plain statement of why.

A hint names a command as `eagle3-convert ... --to LAYOUT SRC DST` in backticks; SRC is the source
as the user gave it, which `checked` maps back to the directory that was read.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from .errors import Eagle3Error

COMMAND = re.compile(r"`(eagle3-convert [^`]*--to [^`]+)`")
_VALUE_FLAGS = {"--from", "--to", "--target", "--verifier", "--capture-layers", "--convention", "--revision"}


def conversion_problem(command: str, source_label: str, root: Path) -> Eagle3Error | None:
    """What `command` (a convert command line) would be refused with, or None when it would succeed."""
    from .convert import make_options, plan_conversion, read_source, state_capture

    args, flags = [], {}
    words = shlex.split(command)[1:]
    i = 0
    while i < len(words):
        word = words[i]
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
    src = str(root) if args[0] == source_label else args[0]
    try:
        options = make_options(flags.get("--verifier"), flags.get("--target"), bool(flags.get("--repair-d2t-absolute")))
        if "--capture-layers" in flags:
            state_capture(options, [int(x) for x in str(flags["--capture-layers"]).split(",")],
                          flags.get("--convention"))
        source = read_source(src, str(flags.get("--from", "auto")), options)
        plan_conversion(source, str(flags["--to"]), options)
    except Eagle3Error as exc:
        return exc
    return None


def checked(hint: str | None, source_label: str, root: Path,
            planned: dict[str, Eagle3Error | None] | None = None) -> str | None:
    """`hint`, with each conversion it names proven to succeed, or replaced by why none can. `planned`
    carries the answers across the hints of one report: a command several findings name is planned once."""
    if not hint:
        return hint
    planned = {} if planned is None else planned
    for command in COMMAND.findall(hint):
        if command not in planned:
            planned[command] = conversion_problem(command, source_label, root)
        problem = planned[command]
        if problem is not None:
            to = shlex.split(command)[shlex.split(command).index("--to") + 1]
            return (f"no conversion fixes this: writing the {to} layout is refused ({problem.message} "
                    f"[{problem.code}])")
    return hint
