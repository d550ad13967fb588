"""Engines tier, issue 35: vLLM 0.33.0's and SGLang 0.5.23's own code read our DFlash2 files as our verdicts say.

Only their config readers run: DFlash2's model needs vLLM's V2 GPU runner (its V1 runner refuses the candidate head,
config/vllm.py) and SGLang's CUDA worker, neither of which runs on a CPU. So this checks the facts the verdicts in
engines/block_diffusion.py rest on: vLLM maps speculators' dflash2 to method dflash and DFlash2DraftModel with the
four sizes in dflash_config and the ids one lower; SGLang reads the flat file's sizes, ids and block_size.
"""

from __future__ import annotations

import json
from pathlib import Path

import peer_venv
import pytest
from conftest import DATA, run_cli
from test_engines import ENGINES, ENGINES_VENV, SITE

pytestmark = pytest.mark.engines
SIZES = {"conv_kernel_size": 2, "conv_group_size": 16, "selector_rank": 8, "selector_top_k": 4}


def test_the_engines_own_config_readers_read_our_dflash2_files(tmp_path: Path):
    flat, back = tmp_path / "flat", tmp_path / "speculators"
    for src, layout, dest in ((DATA / "dflash2-speculators", "dflash", flat), (flat, "speculators", back)):
        done = run_cli("--no-record", "--quiet", "--to", layout, src, dest)
        assert done.exit_code == 0, done.stderr
    report = peer_venv.run_probe(ENGINES_VENV.ensure(), ENGINES / "probe_dflash2_config.py", back, flat, cwd=tmp_path,
                                 timeout_s=600, env={"PYTHONPATH": str(SITE)})
    vllm, sglang = report["vllm"], report["sglang"]
    assert vllm["architectures"] == ["DFlash2DraftModel"]  # registry.py: DFlash2Qwen3ForCausalLM
    assert vllm["speculative_config"] == {"method": "dflash", "num_speculative_tokens": 7}  # block_size 8 = 1 + 7
    assert vllm["aux_layer_ids"] == [2, 18, 34]
    assert vllm["dflash_config"] == {**SIZES, "mask_token_id": 509, "target_layer_ids": [1, 17, 33],
                                     "sample_from_anchor": False, "causal": False}  # full layers: bidirectional
    assert sglang == {**SIZES, "block_size": 8, "target_layer_ids": [1, 17, 33], "mask_token_id": 509}
    assert json.loads((flat / "config.json").read_text())["architectures"] == ["DFlash2DraftModel"]
