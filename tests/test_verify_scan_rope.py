"""`verify --scan-rope` (issue 35) through the real CLI: the drafter measured at each RoPE base it may have been
trained at, ranked. The target is verify's tiny Llama (base 10000, a zero head: its greedy text is token 0
forever); the drafter's config spells its base twice (`rope_theta` 500000, `rope_parameters.rope_theta` 10000),
and with its seed-5 weights it drafts token 0 more often at 500000: the scan must rank that base first, and its
figure must be the one a plain verify gets from the drafter restated at that base (`convert --rope-theta`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from builders import DrafterSpec, build_drafter  # noqa: E402
from conftest import run_cli  # noqa: E402
from verify_fixtures import well_scaled, write_tiny_target  # noqa: E402

from eagle3_convert.schemas import output_violations  # noqa: E402

FAST = ("--device", "cpu", "--max-new-tokens", "24", "-q", "--no-record", "-k", "3")
TWO_BASES = {"rope_theta": 500000.0, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}


def verify(*args) -> dict:
    result = run_cli("verify", *map(str, args), "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert output_violations(doc) == [], output_violations(doc)
    return doc


def test_the_scan_ranks_the_bases_and_each_figure_is_a_drafter_restated_at_it(tmp_path: Path):
    target = write_tiny_target(tmp_path / "target", zero_head=True)
    src = well_scaled(build_drafter(tmp_path / "drafter", "speculators", DrafterSpec(
        vocab_ids=tuple(range(0, 96, 3)), extra=TWO_BASES)), seed=5)
    doc = verify(src, "--target-model", target, *FAST, "--scan-rope")
    ranked = [(c["rope_theta"], c["labels"]) for c in doc["rope_scan"]]
    assert ranked == [(500000.0, ["rope_theta"]),
                      (10000.0, ["config, as the engines read it", "rope_parameters.rope_theta", "the target's",
                                 "10000 (SpecForge before #270)"])]
    best, read = doc["rope_scan"]
    assert best["mean_accepted_length"] > read["mean_accepted_length"]
    # the drafter as read drafts at the base the engines read (transformers 5: rope_parameters' theta)
    assert doc["mean_accepted_length"] == read["mean_accepted_length"]
    converted = run_cli("--rope-theta", "500000", "--to", "speculators", src, tmp_path / "at-500000", "--no-record")
    assert converted.exit_code == 0, converted.stderr
    restated = verify(tmp_path / "at-500000", "--target-model", target, *FAST, "--scan-rope")
    assert restated["mean_accepted_length"] == best["mean_accepted_length"]
    assert restated["rope_scan"][0]["labels"][0] == "config, as the engines read it"
    # the text names the better base and the conversion that writes it; without the flag there is no scan
    text = run_cli("verify", src, "--target-model", target, *FAST, "--scan-rope").stdout
    assert "RoPE bases ranked by acceptance at k=3" in text
    assert "best: 500000 (rope_theta), not the 10000 the engines read" in text and "--rope-theta 500000" in text
    assert verify(src, "--target-model", target, *FAST)["rope_scan"] is None
