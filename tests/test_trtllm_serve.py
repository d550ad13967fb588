"""TensorRT-LLM's serve snippet (issue 14, Deliver 4): capture ids are a TensorRT-LLM runtime argument, so
`convert --to modelopt`, `inspect` and the modelopt model card print the `speculative_config` YAML it needs,
with `eagle3_layers_to_capture` in its block-output convention, or say why the layers are unknown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from huggingface_hub import ModelCard

from conftest import DATA, run_cli, without_nested_ids
from eagle3_convert.schemas import output_violations
from hub_server import isolated_hub

TARGET = DATA / "targets" / "llama-tiny"  # 8 layers
YAML_BLOCK = "speculative_config:\n"


def _yaml_after(text: str) -> dict:
    """The `speculative_config:` block printed in `text`, parsed as YAML (indentation stripped alike)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "speculative_config:")
    indent = len(lines[start]) - len(lines[start].lstrip())
    block = [lines[start][indent:]]
    for line in lines[start + 1:]:
        if not line.startswith(" " * (indent + 2)):
            break
        block.append(line[indent:])
    return yaml.safe_load("\n".join(block))["speculative_config"]


def test_convert_to_modelopt_prints_the_speculative_config(sample, tmp_path: Path):
    src = sample("specforge-sglang")  # boundaries [2, 4, 5]: block outputs [1, 3, 4]
    dst = tmp_path / "modelopt"
    done = run_cli("--to", "modelopt", "--target", TARGET, "--no-registry", src, dst)
    assert done.exit_code == 0, done.stderr
    assert "TensorRT-LLM (from source, not loaded)" in done.stdout
    assert _yaml_after(done.stdout) == {"decoding_type": "Eagle3", "max_draft_len": 3,
                                        "speculative_model_dir": str(dst), "eagle3_layers_to_capture": [1, 3, 4]}

    as_json = run_cli("--to", "modelopt", "--target", TARGET, "--no-registry", "--json", src, tmp_path / "j")
    doc = json.loads(as_json.stdout)
    assert output_violations(doc) == []
    serve = doc["trtllm_serve"]
    assert serve["speculative_config"]["eagle3_layers_to_capture"] == [1, 3, 4]
    assert serve["layers_unknown"] is None and serve["note"] is None
    assert yaml.safe_load(serve["yaml"])["speculative_config"] == serve["speculative_config"]

    other = json.loads(run_cli("--to", "vllm", "--no-registry", "--json", src, tmp_path / "vllm").stdout)
    assert other["trtllm_serve"] is None and output_violations(other) == []


def test_the_ids_are_sorted_block_outputs(sample, tmp_path: Path):
    """Whatever order the file lists them in, TensorRT-LLM gets sorted b - 1 (it sorts; fc follows)."""
    src = without_nested_ids(sample("specforge-sglang"))
    done = run_cli("--to", "modelopt", "--target", TARGET, "--no-registry", "--json", "--capture-layers", "6,1,3",
                   "--convention", "boundary", src, tmp_path / "m")
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["trtllm_serve"]["speculative_config"]["eagle3_layers_to_capture"] == [0, 2, 5]


def test_unknown_layers_are_said_not_guessed(sample, tmp_path: Path):
    src = without_nested_ids(sample("specforge-sglang"))
    shown = run_cli("inspect", src)
    assert shown.exit_code == 0, shown.stderr
    spec = _yaml_after(shown.stdout)
    assert "eagle3_layers_to_capture" not in spec and spec["speculative_model_dir"] == str(src)
    assert "eagle3_layers_to_capture not given" in shown.stdout and "target's depth L is unknown" in shown.stdout
    doc = json.loads(run_cli("inspect", "--json", src).stdout)
    assert output_violations(doc) == []
    assert "target's depth L is unknown" in doc["drafter"]["trtllm_serve"]["layers_unknown"]

    # With the target's depth the defaults are the trained layers: TensorRT-LLM's own {1, L//2-1, L-4}.
    deep = json.loads(run_cli("inspect", "--json", "--target", TARGET, src).stdout)["drafter"]["trtllm_serve"]
    assert deep["speculative_config"]["eagle3_layers_to_capture"] == [1, 3, 4] and deep["layers_unknown"] is None


def test_inspect_points_at_a_modelopt_copy_when_trtllm_would_not_load_the_file(sample):
    src = sample("speculators-trained")  # speculators configs have no model_type: TensorRT-LLM refuses them
    doc = json.loads(run_cli("inspect", "--json", src).stdout)
    serve = doc["drafter"]["trtllm_serve"]
    assert serve["speculative_config"]["speculative_model_dir"] == "DST"
    assert "refuses" in serve["note"] and f"convert --to modelopt {src} DST" in serve["note"]
    assert serve["speculative_config"]["eagle3_layers_to_capture"] == [1, 3, 4]  # boundaries [2, 4, 5]


def test_the_modelopt_card_carries_the_snippet(sample, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    src = sample("specforge-sglang")
    with isolated_hub(monkeypatch, tmp_path / "hf-home") as hub:
        done = run_cli("publish", src, "test-user/trt-drafter", "--layout", "modelopt", "--target", TARGET,
                       "--endpoint", hub.url, "--token", "hf_card_test_token", "--registry", tmp_path / "r.db",
                       "--dry-run", "--json")
    assert done.exit_code == 0, done.stderr
    card = ModelCard(json.loads(done.stdout)["card"]).text
    assert "### TensorRT-LLM (from source, not loaded)" in card
    block = card.split("```yaml\n", 1)[1].split("```", 1)[0]
    assert yaml.safe_load(block)["speculative_config"] == {
        "decoding_type": "Eagle3", "max_draft_len": 3, "speculative_model_dir": "test-user/trt-drafter",
        "eagle3_layers_to_capture": [1, 3, 4]}
