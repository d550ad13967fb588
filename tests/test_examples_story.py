"""examples/ tells the story (issue 21): the tiny drafter, the tiny target it was trained for, and a copy whose
capture ids are off by one, and an SGLang copy whose layer is stored as `layers.0.*`. The "Try the mistakes" commands
(docs/validate.md) run here as written (SRC paths in examples/, build/ in a temporary directory, a registry of their
own), and each output line the page shows must be printed (tests/test_docs_site.py runs every page's examples); validate catches the broken copy on its own, with or without --target and a registry."""

from __future__ import annotations

import json
import shlex
import shutil
from pathlib import Path

import pytest
from safetensors import safe_open
from conftest import EXAMPLE, REPO, run_cli

EXAMPLES = REPO / "examples"
TARGET = EXAMPLES / "tiny-llama-target"
OFF_BY_ONE = EXAMPLES / "broken-ids-off-by-one"
LAYERS0 = EXAMPLES / "broken-sglang-layers0"


def readme_steps() -> list[tuple[str, list[str]]]:
    """(command, the output lines the page shows under it) of the "Try the mistakes" block (docs/validate.md)."""
    page = (REPO / "docs" / "validate.md").read_text()
    section = page.split("## Try the mistakes", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    steps: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("#"):
            steps[-1][1].append(line[1:].strip())
        else:
            steps.append((line, []))
    return steps


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EAGLE3_CONVERT_REGISTRY", str(tmp_path / "registry.db"))
    (tmp_path / "examples").symlink_to(EXAMPLES)
    monkeypatch.chdir(tmp_path)  # the page's relative paths: examples/..., build/...
    return tmp_path


def test_the_mistakes_commands_print_what_the_page_shows(workdir: Path):
    steps = readme_steps()
    assert len(steps) == 7 and sum(len(shown) for _, shown in steps) == 7
    for command, shown in steps:
        words = shlex.split(command)
        if words[0] == "cp":
            shutil.copyfile(words[1], words[2])
            continue
        assert words[0] == "eagle3-convert"
        result = run_cli(*words[1:])
        printed = [line.strip() for line in result.stdout.splitlines()]
        assert all(line in printed for line in shown), f"`{command}` printed:\n{result.stdout}{result.stderr}"
        assert result.exit_code == (1 if any(line.startswith("FAIL") for line in shown) else 0), result.stderr


def test_the_target_is_what_the_drafter_was_trained_for():
    target = json.loads((TARGET / "config.json").read_text())
    sidecar = json.loads((OFF_BY_ONE / "eagle3-convert.json").read_text())
    assert (target["num_hidden_layers"], target["hidden_size"], target["vocab_size"]) == (8, 64, 512)
    recorded = sidecar["target"]
    assert (recorded["num_hidden_layers"], recorded["hidden_size"], recorded["vocab_size"]) == (8, 64, 512)


def test_the_broken_copy_is_the_drafter_with_its_ids_one_lower():
    config = json.loads((OFF_BY_ONE / "config.json").read_text())
    sidecar = json.loads((OFF_BY_ONE / "eagle3-convert.json").read_text())
    assert sidecar["capture_boundaries"] == [2, 4, 5]
    assert config["eagle_aux_hidden_state_layer_ids"] == [i - 1 for i in sidecar["capture_boundaries"]]
    assert (OFF_BY_ONE / "model.safetensors").read_bytes() == (EXAMPLE / "model.safetensors").read_bytes()
    # its sidecar names no path of the machine that made it
    assert all(end["uri"].startswith("local:") for edge in sidecar["lineage"] for end in (edge["source"], edge["dest"]))


def test_the_sglang_copy_is_the_drafter_with_its_layer_renamed(tmp_path: Path):
    """Only the stored names differ from what the SGLang writer writes: `midlayer.` became `layers.0.`."""
    with safe_open(LAYERS0 / "model.safetensors", "np") as broken:
        names = set(broken.keys())
    assert {n for n in names if n.startswith("layers.0.")} and not {n for n in names if "midlayer" in n}
    result = run_cli("--to", "sglang", "--no-record", str(EXAMPLE), str(tmp_path / "written"))
    assert result.exit_code == 0, result.stderr
    with safe_open(tmp_path / "written" / "model.safetensors", "np") as written:
        assert {n.replace("midlayer.", "layers.0.", 1) for n in written.keys()} == names


def test_examples_stay_tiny():
    sizes = {p.relative_to(EXAMPLES): p.stat().st_size for p in EXAMPLES.rglob("*") if p.is_file()}
    assert sum(sizes.values()) < 500_000, sizes  # three copies of the 134 KB drafter, and their configs


@pytest.mark.parametrize("registry", ["absent", "recorded"])
@pytest.mark.parametrize("with_target", [False, True], ids=["no-target", "target"])
def test_validate_catches_the_broken_copy_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, registry: str,
                                                with_target: bool):
    """The copy's sidecar says [2, 4, 5]: with no registry, or one that recorded the intact drafter, with or
    without --target, validate fails on E-CAPTURE-RECORD naming both sources (issue 21: it said OK)."""
    monkeypatch.setenv("EAGLE3_CONVERT_REGISTRY", str(tmp_path / "registry.db"))
    if registry == "recorded":
        assert run_cli("registry", "add", EXAMPLE, "--target", TARGET).exit_code == 0
    result = run_cli("validate", OFF_BY_ONE, *(["--target", TARGET] if with_target else []), "--json")
    assert result.exit_code == 1, result.stdout
    found = [f for f in json.loads(result.stdout)["findings"] if f["code"] == "E-CAPTURE-RECORD"]
    assert any("eagle3-convert.json" in f["message"] and "[1, 3, 4]" in f["message"] and "[2, 4, 5]" in f["message"]
               for f in found), found
    assert (registry == "recorded") == any("registry's record" in f["message"] for f in found)
    assert not (tmp_path / "registry.db").exists() or registry == "recorded"  # a lookup creates nothing
