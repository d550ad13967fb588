"""The command line: the only place that parses arguments or prints.

`eagle3-convert [--from L] --to L SRC DST` converts (the `convert` command is implied when
the first positional argument is not a command name); `inspect`, `validate`, `registry`,
`publish` are subcommands. Heavy modules are imported inside commands so `--help` stays fast.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from ..entry_points import pydantic_plugins_off_when_none_declared
from .common import LAYOUT_HELP, begin_command, fail, json_answered, run_guarded  # noqa: F401  (run_guarded: re-exported)


class _ConvertByDefault(click.Group):
    """`eagle3-convert --to sglang SRC DST` means `eagle3-convert convert --to sglang SRC DST`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and not any(a in ("--help", "-h", "--version") for a in args[:1]):
            first = _first_positional(args, self.commands.get("convert"))
            converting = any(a.startswith("--to") or a.startswith("--from") for a in args)
            if first is not None and first not in self.commands:
                # A near miss of a command name (`inspec`) that is no path is a typo: click says
                # "No such command ... Did you mean"; anything else is a SRC, so this is a conversion.
                if converting or os.path.lexists(first) or not _near_command(first, self.commands):
                    args = ["convert", *args]
            elif first is None and converting:
                args = ["convert", *args]
        return super().parse_args(ctx, args)

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        """click's usage errors as every other error: one line with a code and a hint on stderr, and under
        --json the one JSON document on stdout."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        argv = list(sys.argv[1:] if args is None else args)
        try:
            return super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.Exit as exc:  # --help, --version; standalone_mode=False returns the code instead
            sys.exit(exc.exit_code)
        except click.exceptions.NoArgsIsHelpError as exc:  # bare `eagle3-convert registry`: the help it asks for
            exc.show()
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            hint = "see `eagle3-convert --help`"
            if isinstance(exc, click.UsageError) and exc.ctx is not None:
                hint = f"see `{exc.ctx.command_path} --help`"
            begin_command(_usage_command(exc), "--json" in argv)
            fail(" ".join(exc.format_message().split()), hint, "E-USAGE", exc.exit_code)
        except click.Abort:
            from ..atomic import written_destinations  # click also turns a Ctrl-C just after the command into this

            if not json_answered():  # after a command's document, no second one
                begin_command(None, "--json" in argv)
            done = written_destinations()
            if done:
                fail(f"interrupted after {done[-1]} was written completely", "nothing to redo; the registry may not "
                     f"record it (`eagle3-convert registry add {done[-1]}`)", "E-INTERRUPTED", 1)
            fail("interrupted before the command started: nothing was written", "run the command again",
                 "E-INTERRUPTED", 1)


def _near_command(word: str, commands: dict[str, click.Command]) -> bool:
    import difflib

    return bool(difflib.get_close_matches(word, list(commands), n=1, cutoff=0.6))


def _usage_command(exc: click.ClickException) -> str | None:
    ctx = getattr(exc, "ctx", None)
    return " ".join(ctx.command_path.split()[1:]) or None if ctx is not None else None


def _first_positional(args: list[str], convert: click.Command | None) -> str | None:
    takes_value: set[str] = set()
    if convert is not None:
        for param in convert.params:
            if isinstance(param, click.Option) and not param.is_flag and not param.count:
                takes_value.update(param.opts)
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg == "--":
            return None
        if arg.startswith("-"):
            skip = arg in takes_value
            continue
        return arg
    return None


# The four ways a command is told of the target, one line each: which to pass, and why they are not one option.
TARGET_HELP = "\n".join((
    "--verifier NAME      the target's name, written into the drafter (speculators config, model card)",
    "--target CONFIG      the target's config.json (file, dir, repo id): depth and family decide the capture ids",
    "--target-model DIR   verify only: the target's weights, run in transformers to measure acceptance",
    "--target-gguf FILE   --to gguf only: the target's GGUF, whose tokenizer llama.cpp reads from the drafter",
))


@click.group(cls=_ConvertByDefault, context_settings={"help_option_names": ["-h", "--help"]},
             epilog="Layouts (for --from/--to):\n\n\b\n" + LAYOUT_HELP + "\n\nThe target, four ways (a name, its "
             "config, its weights, its GGUF: each command reads only what it needs):\n\n\b\n" + TARGET_HELP)
@click.version_option(package_name="eagle3-convert", prog_name="eagle3-convert")
def main() -> None:
    """Convert, validate, record and publish EAGLE-3 speculative-decoding drafters.

    \b
      eagle3-convert --to sglang SRC DST      convert (SRC: directory or Hub repo id)
      eagle3-convert inspect SRC              layout, shapes, capture layers per engine
    """
    # huggingface_hub otherwise fetches metadata from huggingface.co even when --endpoint names
    # another Hub (read at its import, which comes later): a private mirror means private.
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    # pydantic looks its plugins up in every installed package's metadata; where none declares one, it need not
    pydantic_plugins_off_when_none_declared()


from . import convert as _convert  # noqa: E402,F401  (registers commands)
from . import inspect as _inspect  # noqa: E402,F401
from . import registry as _registry  # noqa: E402,F401
from . import validate as _validate  # noqa: E402,F401
from . import publish as _publish  # noqa: E402,F401
from . import search as _search  # noqa: E402,F401
from . import verify as _verify  # noqa: E402,F401
