"""The project's errors: each carries a stable code, a one-line message and a hint.

The CLI turns any `Eagle3Error` into one line on stderr and a non-zero exit; anything
else escaping is a bug in this tool, not bad input.
"""

from __future__ import annotations

from typing import Callable


class Eagle3Error(Exception):
    """Base class: bad input, a refused conversion, an unusable destination."""

    code = "E-GENERIC"
    exit_code = 1

    def __init__(self, message: str, hint: str | None = None, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        if code:
            self.code = code

    def __str__(self) -> str:
        return self.message


class FormatError(Eagle3Error):
    """A file that is not what it claims to be (corrupt, truncated, hostile)."""

    code = "E-FORMAT"


class CaptureConflict(FormatError):
    """Two id lists in one config name different layers: the user must say which the drafter was trained on.
    `readings` holds each (reader, boundaries); `hint_with` words the way out with the printing command's own
    flags (convert takes --capture-layers; validate and inspect name the whole convert command)."""

    def __init__(self, message: str, readings: list[tuple[str, list[int]]]):
        self.readings = readings
        super().__init__(message, self.hint_with(lambda flags: f"add `{' '.join(flags)}`"), code="E-CAPTURE-CONFLICT")

    def hint_with(self, command: Callable[[tuple[str, ...]], str],
                  refused: Callable[[list[int]], bool] = lambda ids: False) -> str:
        """The way out, naming each reading but those `refused` (a training record contradicts them: stating them
        is refused), unless that leaves none."""
        readings = [(reader, ids) for reader, ids in self.readings if not refused(ids)] or self.readings
        ways = " or ".join(f"{command(('--capture-layers', ','.join(map(str, ids)), '--convention', 'boundary'))} "
                           f"(the {reader} reading)" for reader, ids in readings)
        return (f"say which the drafter was trained on: {ways}; a file written for vLLM (boundaries in both "
                "places) reads right with --from vllm")


class RefusalError(Eagle3Error):
    """The destination layout cannot express this drafter without changing the model."""

    code = "E-REFUSED"


class DestinationError(Eagle3Error):
    """The output cannot be written where asked (exists, no space, no permission)."""

    code = "E-DEST"


class UsageError(Eagle3Error):
    """Arguments that do not make sense together."""

    code = "E-USAGE"
    exit_code = 2
