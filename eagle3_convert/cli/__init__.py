"""The command line: the only place that parses arguments or prints.

`eagle3-convert [--from L] --to L SRC DST` converts (the `convert` command is implied when
the first positional argument is not a command name); `inspect`, `validate`, `registry`,
`publish` are subcommands. Heavy modules are imported inside commands so `--help` stays fast.
"""

from __future__ import annotations

import os

import click

from .common import LAYOUT_HELP, run_guarded  # noqa: F401  (re-exported for subcommand modules)


class _ConvertByDefault(click.Group):
    """`eagle3-convert --to sglang SRC DST` means `eagle3-convert convert --to sglang SRC DST`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and not any(a in ("--help", "-h", "--version") for a in args[:1]):
            first = _first_positional(args, self.commands.get("convert"))
            if first is not None and first not in self.commands:
                args = ["convert", *args]
            elif first is None and any(a.startswith("--to") or a.startswith("--from") for a in args):
                args = ["convert", *args]
        return super().parse_args(ctx, args)


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


@click.group(cls=_ConvertByDefault, context_settings={"help_option_names": ["-h", "--help"]},
             epilog="Layouts (for --from/--to):\n\n\b\n" + LAYOUT_HELP)
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


from . import convert as _convert  # noqa: E402,F401  (registers commands)
from . import registry as _registry  # noqa: E402,F401
from . import validate as _validate  # noqa: E402,F401
from . import publish as _publish  # noqa: E402,F401
