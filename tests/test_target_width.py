"""A wrong target_hidden_size is diagnosed as itself (issue 21): E-TARGET-HIDDEN-SIZE names the width the
weights fuse (and the target's, with --target), and its hint, applied, makes validate pass. It used to be
reported as E-CAPTURE-COUNT ("the capture id list and the fc width must agree")."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import DATA, EXAMPLE, run_cli

TARGET = DATA / "targets" / "llama-tiny"  # hidden_size 64, what the example drafter was trained for


@pytest.fixture
def wide(tmp_path: Path) -> Path:
    """The example (fc.weight [64, 192]: 3 states of width 64) with target_hidden_size 96."""
    path = tmp_path / "drafter"
    shutil.copytree(EXAMPLE, path)
    config = json.loads((path / "config.json").read_text())
    config["target_hidden_size"] = 96
    (path / "config.json").write_text(json.dumps(config, indent=2))
    return path


def error_line(stderr: str) -> str:
    (line,) = [line for line in stderr.splitlines() if line.startswith("error:")]
    return line


def test_validate_names_the_width_the_weights_fuse(wide: Path):
    result = run_cli("validate", "--json", wide)
    codes = [f["code"] for f in json.loads(result.stdout)["findings"] if f["severity"] == "error"]
    assert result.exit_code == 1 and codes == ["E-TARGET-HIDDEN-SIZE"]
    line = error_line(result.stderr)
    assert "target_hidden_size is 96" in line and "3 captured states of width 64" in line
    assert "set target_hidden_size in config.json to 64" in line


def test_with_target_the_message_names_the_targets_width(wide: Path):
    result = run_cli("validate", wide, "--target", TARGET)
    assert result.exit_code == 1
    assert "E-TARGET-HIDDEN-SIZE" in result.stdout and "E-CAPTURE-COUNT" not in result.stdout
    assert "the target's hidden_size is 64" in error_line(result.stderr)


def test_convert_refuses_with_the_same_code(wide: Path, tmp_path: Path):
    result = run_cli("--to", "sglang", "--no-record", wide, tmp_path / "out")
    assert result.exit_code == 1 and not (tmp_path / "out").exists()
    line = error_line(result.stderr)
    assert "[E-TARGET-HIDDEN-SIZE]" in line and "to 64" in line


@pytest.mark.parametrize("fix", ["set", "remove"])
def test_the_hint_works(wide: Path, fix: str):
    config = json.loads((wide / "config.json").read_text())
    if fix == "set":
        config["target_hidden_size"] = 64
    else:
        del config["target_hidden_size"]
    (wide / "config.json").write_text(json.dumps(config, indent=2))
    result = run_cli("validate", wide, "--target", TARGET)
    assert result.exit_code == 0, result.stdout + result.stderr


def test_a_wrong_number_of_ids_is_still_a_count_error(tmp_path: Path):
    """Two ids over fc's three states of width 64: the ids are wrong, not the width."""
    path = tmp_path / "drafter"
    shutil.copytree(EXAMPLE, path)
    config = json.loads((path / "config.json").read_text())
    config["eagle_aux_hidden_state_layer_ids"] = [2, 4]
    (path / "config.json").write_text(json.dumps(config, indent=2))
    result = run_cli("validate", path)
    assert result.exit_code == 1 and "[E-CAPTURE-COUNT]" in error_line(result.stderr)
