"""The layouts' key tables and their E-KEY-* refusals, word for word (issue 26: mutation survivors of
eagle3_convert/converters/layout.py). Builder-written checkpoints (tests/builders.py), the real CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import DrafterSpec, stored_tensors
from conftest import run_cli
from test_caught_bugs import write_checkpoint

# layout, the later-layer norm it reads, the one it leaves unread, its engine, the layout whose names these are
LATER_NORM_READERS = [("sglang", "hidden_norm", "input_layernorm", "SGLang", "vllm"),
                      ("vllm", "input_layernorm", "hidden_norm", "vLLM", "sglang")]


@pytest.mark.parametrize("layout, used, unused, engine, other", LATER_NORM_READERS,
                         ids=[row[0] for row in LATER_NORM_READERS])
def test_a_later_layer_with_only_the_norm_its_engine_never_reads_is_refused(tmp_path: Path, layout, used, unused,
                                                                            engine, other):
    """A 3-layer file whose layers 1 and 2 carry only the norm this layout's engine leaves unread: the engine would
    run them with a random norm. The refusal names the first such tensor and the layout the names belong to."""
    spec = DrafterSpec(num_layers=3)
    tensors = stored_tensors(layout, spec)
    for i in (1, 2):
        del tensors[f"layers.{i}.{used}.weight"]
    src = write_checkpoint(tmp_path / "src", layout, spec, tensors)
    result = run_cli("--from", layout, "--to", "speculators", "--no-record", src, tmp_path / "out")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == (
        f"error: layers.1.{unused}.weight has no {used} beside it: {engine} normalises layers >= 1 with {used} and "
        f"would leave it random [E-KEY-MISSING] — hint: the names look like {other}'s: convert with --from {other}"
    ), result.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("layout, used, unused, engine, other", LATER_NORM_READERS,
                         ids=[row[0] for row in LATER_NORM_READERS])
def test_one_later_layer_missing_its_read_norm_is_enough_to_refuse(tmp_path: Path, layout, used, unused, engine,
                                                                   other):
    """Layer 1 complete, layer 2 with only the unread norm: refused, naming layer 2."""
    spec = DrafterSpec(num_layers=3)
    tensors = stored_tensors(layout, spec)
    del tensors[f"layers.2.{used}.weight"]
    src = write_checkpoint(tmp_path / "src", layout, spec, tensors)
    result = run_cli("--from", layout, "--to", "speculators", "--no-record", src, tmp_path / "out")
    assert result.exit_code == 1
    assert f"error: layers.2.{unused}.weight has no {used} beside it" in result.stderr.splitlines()[-1]
