"""Every hint works, where validate was told how to read the file: with `--from` (detection could not choose) or
`--target` (the depth the engine default is spelled on), a conversion a hint names must read the source the same
way, so that it runs when pasted. Each drafter is builder-written (tests/builders.py), records and sidecars are the
ones the real CLI writes (into the test's own SQLite registry: tests/conftest.py), and each command a hint names is
run through the real CLI; the commands run are asserted, so a hint that stops naming one fails here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from builders import DrafterSpec, build_drafter, write_target
from conftest import edit_config, run_cli
from test_hints import hint_commands, run_hint, without_paths

IDS = "eagle_aux_hidden_state_layer_ids"
ENGINES = [a for engine in ("speculators", "vllm", "sglang", "trtllm") for a in ("--engine", engine)]


def validate_hints(path: Path, *args: str | Path) -> list[str]:
    """The hints of one `validate --json` run of the real CLI."""
    out = json.loads(run_cli("validate", "--json", *args, path).stdout)
    return [f["hint"] for f in out["findings"] if f["hint"]]


def run_hint_commands(hints: list[str], path: Path, tmp_path: Path, *placeholders: Path) -> tuple[str, ...]:
    """Run each command the hints name, as a user pastes it; each must succeed. The commands, without SRC and DST
    (and without `placeholders`, paths such as a --target, written here as their names)."""
    commands = hint_commands(hints)
    for i, command in enumerate(commands):
        code, err = run_hint(command, path, str(path), tmp_path / f"hint{i}")
        assert code == 0, f"the hint command `{command}` fails: {err}"
    shown = [without_paths(c, str(path)) for c in commands]
    for placeholder in placeholders:
        shown = [c.replace(str(placeholder), placeholder.name) for c in shown]
    return tuple(shown)


def ambiguous(tmp_path: Path, name: str = "drafter") -> Path:
    """A SpecForge SGLang export (midlayer.* names) whose ids sit only at the top level, where vLLM reads them: it
    reads as both layouts, so convert (like validate) must be told which with --from."""
    path = build_drafter(tmp_path / name, "sglang", DrafterSpec())
    edit_config(path, lambda c: c.__setitem__(IDS, c["eagle_config"].pop(IDS)))
    refused = run_cli("--to", "sglang", "--no-record", path, tmp_path / "auto")
    assert refused.exit_code == 1 and "[E-LAYOUT-AMBIGUOUS]" in refused.stderr
    return path


# The file read as each layout: the commands its hints name (the speculators conversion each E-CONFIG-ARCH hint
# would name is refused for reasons of its own, E-CAPTURE-AMBIGUOUS and E-VERIFIER-MISSING, so those hints say why).
FROM_HINT_COMMANDS = {
    "sglang": ("--from sglang --capture-layers 1,3,4 --convention sglang --to sglang",  # W-CAPTURE-IDS-IGNORED
               "--from sglang --capture-layers 1,3,4 --convention sglang --to vllm",  # E-CAPTURE-MISMATCH
               "--from vllm --to sglang"),  # W-CAPTURE-CONVENTION: the other reading, as such
    "vllm": ("--from vllm --engine sglang --to sglang",  # E-ENGINE-WRONG: SGLang's reading, for SGLang
             "--from vllm --to sglang"),  # W-CAPTURE-IDS-IGNORED
}


@pytest.mark.parametrize("given", sorted(FROM_HINT_COMMANDS))
def test_hints_of_validate_from_say_from_too(given: str, tmp_path: Path):
    """The bug: validate --from sglang on a file of two readings named `eagle3-convert --to sglang SRC DST`, which
    convert refuses (E-LAYOUT-AMBIGUOUS), so the hint said no conversion fixes it."""
    path = ambiguous(tmp_path)
    hints = validate_hints(path, "--from", given, *ENGINES)
    assert run_hint_commands(hints, path, tmp_path) == FROM_HINT_COMMANDS[given]
    assert not [h for h in hints if "[E-LAYOUT-AMBIGUOUS]" in h], hints


def test_hints_of_validate_from_and_target_carry_both(tmp_path: Path):
    """--target sets the depth and family convert translates ids for: a hint's conversion reads the file with it
    (its path quoted for the shell: this one holds a space)."""
    path = ambiguous(tmp_path)
    target = write_target(tmp_path / "target 8", DrafterSpec())
    hints = validate_hints(path, "--from", "vllm", "--target", target, *ENGINES)
    assert [h for h in hints if f"--target '{target}' --to sglang" in h], hints
    assert run_hint_commands(hints, path, tmp_path, target) == ("--from vllm --target target 8 --to sglang",)


def test_the_record_of_the_engine_default_is_restored_on_the_target_given(tmp_path: Path):
    """The bug: a drafter trained on the engine default, converted without --target (its sidecar and its registry
    record hold neither ids nor a depth), its config then naming other ids. validate --target (8 layers) spells the
    default as [2, 4, 5] and names `--capture-layers 2,4,5 --convention boundary` as the recorded layers; convert,
    given no depth, could not spell the record and refused the command (E-CAPTURE-RECORD), so the hint said no
    conversion fixes it. The command names the target: the default resolves, and the way out runs (the one that
    keeps the record: stating config.json's ids against it is refused, issue 33)."""
    source = build_drafter(tmp_path / "built", "vllm", DrafterSpec(capture_boundaries=None))
    drafter = tmp_path / "drafter"
    assert run_cli("--to", "vllm", source, drafter).exit_code == 0
    assert json.loads((drafter / "eagle3-convert.json").read_text())["capture_boundaries"] is None
    edit_config(drafter, lambda c: c.__setitem__(IDS, [1, 3, 6]))
    target = write_target(tmp_path / "target-8", DrafterSpec())
    hints = validate_hints(drafter, "--target", target)
    assert len([h for h in hints if "--capture-layers 2,4,5" in h]) == 2  # the registry's record and the sidecar
    assert run_hint_commands(hints, drafter, tmp_path, target) == (
        "--target target-8 --capture-layers 2,4,5 --convention boundary --to vllm",)  # the recorded default
    written = json.loads((tmp_path / "hint0" / "drafter-vllm" / "config.json").read_text())
    assert written[IDS] == [2, 4, 5]


def test_a_source_path_holding_a_space_is_quoted_in_every_hint(tmp_path: Path):
    """A drafter in "my drafter": its hints' commands (conversions and the inspect hint alike) quote the source and
    the destination for the shell, so pasted they read the one file (unquoted, the shell split it in two)."""
    path = ambiguous(tmp_path, "my drafter")
    hints = validate_hints(path, "--from", "sglang", *ENGINES)
    assert all(f"'{path}'" in c for c in hint_commands(hints)), hints
    assert run_hint_commands(hints, path, tmp_path) == FROM_HINT_COMMANDS["sglang"]

