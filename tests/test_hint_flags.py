"""A hint names only flags of the command it is printed for (issue 21): a flag inside a quoted command
(`eagle3-convert registry add SRC --capture-layers ...`) must exist on THAT command; any other flag the hint
names must exist on the command that printed it. The hints are collected by running the real CLI
(validate, inspect, registry add and convert to every layout) over the validate corpus (one broken thing
per case) and the hazard samples; the commands' flags are read from the click commands themselves."""

from __future__ import annotations

import ast
import json
import re
import shlex
import shutil
from pathlib import Path

import click
import pytest
from conftest import DATA, EXAMPLE, REPO, run_cli
from test_validate import CASES

from eagle3_convert.cli import main
from eagle3_convert.names import LAYOUTS

QUOTED_COMMAND = re.compile(r"`(eagle3-convert [^`]*)`")
BARE_COMMAND = re.compile(r"eagle3-convert(?: [^\s;,()`]+)*")  # unquoted: up to the first ; , ( or end
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
HAZARDS = ["h2-d2t-absolute", "h4-missing-lm_head", "h6-truncated", "h8-sglang-ids-toplevel-only",
           "specforge-sglang", "speculators-trained", "speculators-fullvocab-qwen3"]


def command_for(words: list[str]) -> tuple[str, click.Command]:
    """The click command a command line (without the program name) runs, and its name."""
    if words and words[0] in main.commands:
        command = main.commands[words[0]]
        if isinstance(command, click.Group) and len(words) > 1 and words[1] in command.commands:
            return f"{words[0]} {words[1]}", command.commands[words[1]]
        return words[0], command
    return "convert", main.commands["convert"]  # implied: `eagle3-convert --to L SRC DST`


def flags_of(command: click.Command) -> set[str]:
    return {opt for param in command.params if isinstance(param, click.Option)
            for opt in (*param.opts, *param.secondary_opts) if opt.startswith("--")} | {"--help"}


def wrong_flags(hint: str, printed_by: str) -> list[str]:
    """'flag (on command)' for each flag the hint names that its command does not take."""
    wrong, rest = [], hint
    for pattern in (QUOTED_COMMAND, BARE_COMMAND):
        for line in pattern.findall(rest):
            name, command = command_for(shlex.split(line)[1:])
            wrong += [f"{flag} (on {name})" for flag in FLAG.findall(line) if flag not in flags_of(command)]
        rest = pattern.sub("", rest)
    _, printer = command_for(printed_by.split())
    return wrong + [f"{flag} (on {printed_by})" for flag in FLAG.findall(rest) if flag not in flags_of(printer)]


def printed_hints(argv: list[str]) -> list[str]:
    """Every hint one `--json` run of the real CLI prints: its findings' and its error's."""
    out = json.loads(run_cli(*argv, "--json").stdout)
    hints = [f.get("hint") for f in out.get("findings") or []] + [(out.get("error") or {}).get("hint")]
    return [h for h in hints if h]


def check_every_hint(path: Path, tmp_path: Path) -> int:
    runs = [("validate", ["validate", *(a for e in ("speculators", "vllm", "sglang", "trtllm", "llamacpp")
                                         for a in ("--engine", e)), path]),
            ("inspect", ["inspect", path]),
            ("registry add", ["registry", "add", path, "--registry", tmp_path / "registry.db"])]
    runs += [("convert", ["--to", layout, "--no-record", path, tmp_path / f"out-{layout}"])
             for layout in LAYOUTS if layout != "gguf"]  # gguf: needs the target's GGUF, its hints below
    seen = 0
    for printed_by, argv in runs:
        for hint in printed_hints([str(a) for a in argv]):
            seen += 1
            assert wrong_flags(hint, printed_by) == [], f"{printed_by} {path.name} printed: {hint}"
    return seen


@pytest.mark.parametrize("code", sorted(CASES))
def test_validate_corpus_hints_name_flags_of_their_command(code: str, tmp_path: Path):
    case = CASES[code]
    path = case.base(tmp_path)
    case.change(path)
    check_every_hint(path, tmp_path)


@pytest.mark.parametrize("name", HAZARDS)
def test_hazard_hints_name_flags_of_their_command(name: str, tmp_path: Path):
    path = tmp_path / name
    shutil.copytree(DATA / name / "checkpoint", path)
    assert check_every_hint(path, tmp_path) > 0


def test_capture_conflict_hint_names_flags_of_validate_and_inspect(tmp_path: Path):
    """Issue 21: E-CAPTURE-CONFLICT offered `--capture-layers` to validate, which has no such flag."""
    path = tmp_path / "sg"
    assert run_cli("--to", "sglang", "--no-record", EXAMPLE, path).exit_code == 0
    config = json.loads((path / "config.json").read_text())
    config["eagle_aux_hidden_state_layer_ids"] = [0, 1, 2]  # names other layers than eagle_config's list
    (path / "config.json").write_text(json.dumps(config))
    hints = printed_hints(["validate", str(path)])
    assert any("--capture-layers" in h for h in hints)  # the way out is still named, on a command that takes it
    assert check_every_hint(path, tmp_path) >= 3


def test_the_check_catches_a_flag_of_another_command():
    assert wrong_flags("add `--capture-layers 1,2,3 --convention boundary`", "validate") == [
        "--capture-layers (on validate)", "--convention (on validate)"]
    assert wrong_flags("`eagle3-convert registry add SRC --capture-layers 1,2 --deep`", "validate") == [
        "--deep (on registry add)"]
    assert wrong_flags("`eagle3-convert --to vllm SRC DST --capture-layers 1,2 --convention boundary`",
                       "validate") == []
    assert wrong_flags("repair it: eagle3-convert --repair-d2t-absolute --to vllm SRC DST (d2t := d2t - 1); "
                       "or validate --deep", "inspect") == ["--deep (on inspect)"]


def _source_texts(path: Path) -> list[str]:
    """Every string literal of a module, an f-string's fields read as X."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.JoinedStr):
            out.append("".join(v.value if isinstance(v, ast.Constant) else "X" for v in node.values))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append(node.value)
    return out


def test_every_quoted_command_in_the_source_names_flags_of_that_command():
    """The hints no corpus above reaches (Hub, registry, publish, sync): each `eagle3-convert ...` they quote."""
    commands = [cmd for path in sorted((REPO / "eagle3_convert").rglob("*.py")) for text in _source_texts(path)
                for cmd in QUOTED_COMMAND.findall(text)]
    assert len(commands) > 20
    wrong = {cmd: found for cmd in commands if (found := wrong_flags(f"`{cmd}`", "convert"))}
    assert wrong == {}
