"""What every command shares: error reporting, JSON output, progress bars."""

from __future__ import annotations

import functools
import json
import os
import sys
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import click

from .. import hub_client
from ..errors import Eagle3Error, UsageError
from ..names import ENGINE_SPELLINGS, LAYOUT_SUMMARIES
from ..registry.paths import registry_exists

LAYOUT_HELP = "\n".join(f"{name:<12} {text}" for name, text in LAYOUT_SUMMARIES.items())


# The version of every --json document (docs/json.md; the JSON Schemas in eagle3_convert/schemas/output/).
# Raised when a field is removed or changes meaning; adding a field does not raise it.
SCHEMA_VERSION = 1


class _JsonState:
    """Whether the running command answers in JSON, and whether its one document is out yet."""

    active = False
    emitted = False
    command: str | None = None


_json = _JsonState()


def begin_command(command: str | None, as_json: bool) -> None:
    _json.active, _json.emitted, _json.command = as_json, False, command


def json_answered() -> bool:
    """The running command has printed its one --json document."""
    return _json.active and _json.emitted


def error_dict(message: str, hint: str | None, code: str, exit_code: int) -> dict[str, Any]:
    return {"code": code, "message": " ".join(message.splitlines()), "hint": hint, "exit_code": exit_code}


def error_line(message: str, hint: str | None, code: str) -> str:
    line = f"error: {message} [{code}]"
    if hint:
        line += f" — hint: {hint}"
    return " ".join(line.splitlines())  # one line even when a path or exception text has newlines


def fail(message: str, hint: str | None, code: str, exit_code: int, **extra: Any) -> None:
    """The one line on stderr every failing command ends with; under --json, also the one document on stdout
    (unless the command has printed its document already, which then says ok: false itself)."""
    if _json.active and not _json.emitted:
        emit_json({"ok": False, "error": error_dict(message, hint, code, exit_code), **extra})
    click.echo(error_line(message, hint, code), err=True)
    sys.exit(exit_code)


def run_guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Bad input becomes one line on stderr and a non-zero exit; never a traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        begin_command(_command_name(), bool(kwargs.get("as_json")))
        try:
            return _answering_interrupts(fn, args, kwargs)
        except Eagle3Error as exc:
            fail(exc.message, exc.hint, exc.code, exc.exit_code, **getattr(exc, "json_extra", {}))
        except BrokenPipeError:  # output piped into `head`: stop quietly, as cat does
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(141)
        except KeyboardInterrupt:
            click.echo(f"interrupted: {_interrupt_message()}", err=True)
            sys.exit(130)
        except OSError as exc:
            fail(f"{exc.strerror or exc}{f': {exc.filename}' if exc.filename else ''}",
                 "check the path, free space and permissions", "E-OS", 1)
        except Exception as exc:  # a bug in this tool, not bad input
            if isinstance(exc.__cause__ or exc.__context__, KeyboardInterrupt):
                # Ctrl-C while a class was being built (an import): Python wraps it in a RuntimeError
                click.echo(f"interrupted: {_interrupt_message()}", err=True)
                sys.exit(130)
            if os.environ.get("EAGLE3_CONVERT_DEBUG"):
                raise
            fail(f"internal error: {type(exc).__name__}: {str(exc)[:200]}",
                 "please report it with EAGLE3_CONVERT_DEBUG=1 output", "E-INTERNAL", 3)

    return wrapper


def _answering_interrupts(fn: Callable[..., Any], args: Any, kwargs: Any) -> Any:
    """Under --json an interrupt still leaves one document on stdout (the line on stderr is run_guarded's)."""
    try:
        return fn(*args, **kwargs)
    except KeyboardInterrupt:
        if _json.active and not _json.emitted:
            emit_json({"ok": False, "error": error_dict(f"interrupted: {_interrupt_message()}",
                                                        "run the command again", "E-INTERRUPTED", 130)})
        raise


def _interrupt_message() -> str:
    """True in every state: the writer's swap either completed or rolled back."""
    from ..atomic import written_destinations

    done = written_destinations()
    if done:
        return (f"{done[-1]} was written completely before the interrupt; the registry may not record it "
                f"(`eagle3-convert registry add {done[-1]}`)")
    return "nothing was written to the destination"


def registry_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`--registry PATH|URL`, the same on every command that reads or records drafters."""
    return click.option("--registry", "registry_path", metavar="PATH|URL",
                        help="Registry: an SQLite file, or postgresql://user@host/db (default: "
                             "$EAGLE3_CONVERT_REGISTRY, else $XDG_DATA_HOME/eagle3-convert/registry.db).")(fn)


def registry_known(path: Any, registry_path: str | None, *, uri: str | None = None) -> list[Any]:
    """The registry's record of the drafter in `path`, as provenance.Known ([] when there is no registry or no
    record): validate and inspect check config.json against it. Where there is no registry nothing is opened."""
    if not registry_exists(registry_path):
        return []
    from ..provenance import from_record
    from ..records import known_record

    record = known_record(path, registry_path, uri=uri)
    return [from_record(record)] if record is not None else []


def hub_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`--endpoint URL` and `--token T`, the same on every command that reads or writes the Hub."""
    fn = click.option("--token", metavar="TOKEN", help="Hub token (default: $HF_TOKEN, else the `hf auth login` "
                      "store); never printed or stored.")(fn)
    return click.option("--endpoint", metavar="URL", help="Hub endpoint (default: $HF_ENDPOINT, else "
                        "https://huggingface.co).")(fn)


def _command_name() -> str | None:
    """`convert`, `registry list`: the command path without the program name."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return None
    return " ".join(ctx.command_path.split()[1:]) or None


def emit_json(data: dict[str, Any]) -> None:
    """The command's one JSON document: `schema_version`, `command` and `ok` first, then `data`."""
    doc = {"schema_version": SCHEMA_VERSION, "command": _json.command or _command_name(), "ok": True, **data}
    _json.emitted = True
    click.echo(json.dumps(doc, indent=2, default=str))


class Progress:
    """A byte progress bar on stderr, only for a terminal and only when not --quiet."""

    def __init__(self, total: int, label: str, quiet: bool):
        self._bar = None
        if not quiet and sys.stderr.isatty() and total > 64 * 1024 * 1024:
            from tqdm import tqdm

            self._bar = tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=label,
                             file=sys.stderr, leave=False)

    def update(self, n: int) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def warn_unrecorded(action: str, error: Any, where: str) -> None:
    """The work is done and its sidecar keeps the facts: a registry failure is a warning, not an error."""
    click.echo(f"warning: {action}, but not recorded in the registry: {error.message} [{error.code}] — hint: "
               f"record it later with `eagle3-convert registry add {where}`", err=True)


def warn_twin(conflict: dict[str, Any]) -> None:
    """A Hub-fingerprint record of the same drafter that was not merged into its record: they disagree."""
    click.echo(f"warning: the registry also holds this drafter as {conflict['drafter_id'][:12]}, synced from "
               f"{conflict['uri']}, and did not merge the two: {conflict['message']} [{conflict['code']}] — hint: "
               "check which is true; `eagle3-convert registry add SRC --capture-layers ... --convention ...` states "
               f"the training truth, `eagle3-convert registry remove {conflict['drafter_id'][:12]}` forgets the "
               "synced record", err=True)


@contextmanager
def hub_progress_bars(wanted: bool) -> Iterator[None]:
    """huggingface_hub draws its own download/upload bars: only on a terminal, never with --quiet or --json."""
    if wanted and sys.stderr.isatty():
        yield
        return
    with hub_client.no_progress_bars():
        yield


def parse_ids(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(part) for part in text.replace(" ", "").split(",")]
    except ValueError:
        raise UsageError(f"--capture-layers {text!r} is not a comma-separated list of integers",
                         "write them like 2,16,29 (SGLang's -1 for the embedding output is allowed)") from None


class EngineSpelling(click.ParamType):
    """`--engine sglang` (its newest release we know), `--engine sglang==0.5.10` (that release), or a fleet in one
    value, `--engine sglang==0.5.11,vllm==0.24.0` (as $EAGLE3_ENGINES spells it): a tuple, which chosen_engines
    flattens."""

    name = "engine"

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "[" + "|".join(ENGINE_SPELLINGS) + "][==RELEASE]"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from ..engines.releases import EngineChoice, parse_choice, parse_fleet

        if isinstance(value, (EngineChoice, tuple)):
            return value
        try:
            if "," in value:
                return parse_fleet(value, ENGINE_SPELLINGS, _known_releases)
            return parse_choice(value, ENGINE_SPELLINGS, _known_releases)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def _known_releases(engine: str) -> tuple[str, ...]:
    """The release spellings we know for `engine` (only asked of a release that is no version number)."""
    from ..engines import releases_of  # the engine modules, which a command naming an engine loads anyway

    return releases_of(engine).known


ENGINE_HELP = ("ENGINE or ENGINE==RELEASE (repeatable: a fleet): the engine's newest release we know, or the one "
               "named (one this tool does not model: by the nearest known one's rules, said so). Without --engine, "
               "$EAGLE3_ENGINES (the same spellings, comma-separated) names the fleet.")


def engine_option(what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """`--engine`, the same spelling on every command that judges engines; `what` says what it selects there."""
    return click.option("--engine", "engines", type=EngineSpelling(), multiple=True, help=f"{what} {ENGINE_HELP}")


def chosen_engines(given: tuple[Any, ...]) -> tuple[Any, ...]:
    """The --engine choices (a value naming several, flattened), else the fleet in $EAGLE3_ENGINES (E-USAGE naming a
    bad entry there)."""
    if given:
        return tuple(c for value in given for c in (value if isinstance(value, tuple) else (value,)))
    from ..engines.releases import fleet_from_env

    try:
        return fleet_from_env(ENGINE_SPELLINGS, _known_releases)
    except ValueError as exc:
        raise UsageError(str(exc), "write it like EAGLE3_ENGINES='sglang==0.5.10,sglang,vllm==0.24.0'") from None
