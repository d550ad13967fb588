"""Mutation survivors of the engine modules and of validate (issue 26, session 6), killed: each test says what a
mutant of eagle3_convert/capture_ids.py, engines/ or validate/ changed and nobody noticed, through the real CLI on
files the independent builders write (tests/builders.py), or through the engine modules' own entry points
(`engines.read_all`, `engines.serve_verdicts`) as validate and convert call them."""

from __future__ import annotations

import json
from pathlib import Path

from builders import DrafterSpec, build_drafter
from conftest import run_cli

IDS = "eagle_aux_hidden_state_layer_ids"
MLA = {"family": "deepseek_mla", "target_model_type": "deepseek_v3"}


# ------------------------------------------------------------------ capture_ids.capture_context: the MLA default

def test_an_mla_drafter_without_a_target_is_spelled_for_a_deepseek_target(tmp_path: Path):
    """No --target, no target in the config: an MLA drafter serves a DeepSeek/Kimi target, whose SGLang reads
    ids raw unless the first is 1 (docs/formats.md §4.2). The embedding tap (boundary 0) is then id 0 for
    SGLang, not -1 (which captures nothing on that family); inspect shows what convert writes."""
    src = build_drafter(tmp_path / "vllm", "vllm", DrafterSpec(capture_boundaries=(0, 3, 5), **MLA))
    shown = run_cli("inspect", src, "--json")
    assert shown.exit_code == 0, shown.stderr
    assert json.loads(shown.stdout)["drafter"]["capture"] == {
        "boundaries": [0, 3, 5], "target_layers": None, "target_family": "deepseek",
        "per_engine": {"speculators": [0, 3, 5], "vllm": [0, 3, 5], "eagle": [0, 3, 5], "sglang": [0, 3, 5],
                       "specforge": [-1, 2, 4], "modelopt": [-1, 2, 4], "trtllm": [-1, 2, 4]}}
    done = run_cli("--to", "sglang", src, tmp_path / "sglang")
    assert done.exit_code == 0, done.stderr
    assert json.loads((tmp_path / "sglang" / "config.json").read_text())["eagle_config"][IDS] == [0, 3, 5]


def test_an_mla_sglang_file_without_a_target_is_read_as_a_deepseek_targets_sglang_reads_it(tmp_path: Path):
    """SGLang ids [2, 4, 5] on a DeepSeek target: the first id is not 1, so raw, boundaries [2, 4, 5] (any other
    family: +1, [3, 5, 6]). vLLM's ids are the boundaries."""
    src = build_drafter(tmp_path / "sglang", "sglang", DrafterSpec(capture_boundaries=(3, 5, 6), **MLA))
    assert json.loads((src / "config.json").read_text())["eagle_config"][IDS] == [2, 4, 5]
    done = run_cli("--to", "vllm", src, tmp_path / "vllm")
    assert done.exit_code == 0, done.stderr
    assert json.loads((tmp_path / "vllm" / "config.json").read_text())[IDS] == [2, 4, 5]
