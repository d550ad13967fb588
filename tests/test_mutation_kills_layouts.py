"""The layouts' key tables and their E-KEY-* refusals, word for word (issue 26: mutation survivors of
eagle3_convert/converters/layout.py). Builder-written checkpoints (tests/builders.py), the real CLI."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from builders import DrafterSpec, build_drafter, stored_tensors, write_target
from conftest import run_cli, tensor_hashes
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


# Each layout's key table, both ways: the tensors convert writes are, name for name and byte for byte, those the
# independent builder (tests/builders.py) stores for that layout; and reading any layout's file gives back the
# builder's speculators (canonical) tensors. One layer (SGLang and EAGLE say midlayer.*) and three (every layer
# under layers.*, the later layers' norm under both engines' names).
ROUND_TRIPS = [(layers, layout) for layers in (1, 3) for layout in ("speculators", "sglang", "vllm", "eagle",
                                                                    "modelopt") if not (layout == "eagle" and layers > 1)]


@pytest.mark.parametrize("layers, layout", ROUND_TRIPS, ids=[f"{n}-layer {lay}" for n, lay in ROUND_TRIPS])
def test_convert_stores_each_tensor_under_the_builders_name(tmp_path: Path, layers: int, layout: str):
    spec = DrafterSpec(num_layers=layers)
    src = build_drafter(tmp_path / "src", "speculators", spec)
    target = write_target(tmp_path / "target", spec)
    result = run_cli("--to", layout, "--target", target, "--verifier", "org/target", "--no-record", src,
                     tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    assert tensor_hashes(tmp_path / "out") == raw_hashes(stored_tensors(layout, spec))


@pytest.mark.parametrize("layers, layout", ROUND_TRIPS, ids=[f"{n}-layer {lay}" for n, lay in ROUND_TRIPS])
def test_reading_each_layout_gives_the_canonical_tensors(tmp_path: Path, layers: int, layout: str):
    spec = DrafterSpec(num_layers=layers)
    src = build_drafter(tmp_path / "src", layout, spec)
    target = write_target(tmp_path / "target", spec)
    result = run_cli("--from", layout, "--to", "speculators", "--target", target, "--verifier", "org/target",
                     "--no-record", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    assert tensor_hashes(tmp_path / "out") == raw_hashes(stored_tensors("speculators", spec))


def raw_hashes(tensors: dict) -> dict[str, str]:
    return {name: hashlib.sha256(t.data).hexdigest() for name, t in tensors.items()}
