"""A child fine-tuned with a regenerated vocab map (sgl-project/SpecForge #534, issue 35): `registry add CHILD
--parent PARENT` records the lineage, and the record and every recorded conversion of the child warn when its d2t
differs from its parent's (W-VOCAB-REGENERATED), until `verify` has measured it (the hint's step).

The parent is verify-tiny's trained drafter (tests/data/verify-tiny/drafter, speculators layout); the child is what
SpecForge's fine-tune wrote before #534: the same weights (a few steps change little) with a map regenerated from
the new data, every lm_head row carried over now read as another token.
"""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from builders import RawTensor, write_safetensors
from conftest import DATA, run_cli
from eagle3_convert.safetensors_io import read_tensor_bytes, read_tensor_table

TINY = DATA / "verify-tiny"
VOCAB, VD = 49, 32


def child_of(parent: Path, dest: Path, ids: list[int] | None) -> Path:
    """`parent`'s weights under the map `ids` (sorted target ids; None: the parent's own map)."""
    shutil.copytree(parent, dest)
    table, _ = read_tensor_table(dest)
    tensors = {n: RawTensor(t.dtype, t.shape, read_tensor_bytes(t)) for n, t in table.items()}
    if ids is not None:
        tensors["d2t"] = RawTensor("I64", (VD,), b"".join(struct.pack("<q", t - i) for i, t in enumerate(ids)))
        tensors["t2d"] = RawTensor("BOOL", (VOCAB,), bytes(int(t in ids) for t in range(VOCAB)))
    tensors["fc.weight"] = RawTensor(tensors["fc.weight"].dtype, tensors["fc.weight"].shape,
                                     bytes(reversed(tensors["fc.weight"].data)))  # fine-tuned: other weights
    write_safetensors(dest / "model.safetensors", tensors)
    return dest


@pytest.fixture
def family(tmp_path: Path) -> tuple[Path, Path, Path]:
    parent = tmp_path / "parent"
    shutil.copytree(TINY / "drafter", parent)
    child = child_of(parent, tmp_path / "child", list(range(VOCAB - VD, VOCAB)))  # the last 32 ids: regenerated
    return parent, child, tmp_path / "registry.db"


def test_record_and_conversion_of_a_child_with_a_regenerated_map_warn(family, tmp_path: Path, registry_url):
    """On both registry backends: the finetune edge is stored and read back like any other."""
    parent, child, _ = family
    registry = registry_url
    added = run_cli("registry", "add", "--registry", registry, "--parent", parent, "--json", child)
    assert added.exit_code == 0, added.stderr
    doc = json.loads(added.stdout)
    warned = [n for n in doc["notes"] if "[W-VOCAB-REGENERATED]" in n]
    assert len(warned) == 1 and "28 of 32 draft ids map to other target ids" in warned[0]
    edges = [e for e in doc["record"]["lineage"] if e["kind"] == "finetune"]
    assert len(edges) == 1 and edges[0]["source"]["uri"] == str(parent.resolve())
    parent_id = json.loads(run_cli("registry", "add", "--registry", registry, "--json", parent).stdout)["drafter_id"]
    assert edges[0]["derived_from"] == parent_id
    shown = run_cli("registry", "show", "--registry", registry, doc["drafter_id"][:12]).stdout
    assert "(fine-tuned from it)" in shown
    converted = run_cli("--registry", registry, "--to", "sglang", child, tmp_path / "out")
    assert converted.exit_code == 0, converted.stderr
    assert "[W-VOCAB-REGENERATED]" in converted.stdout + converted.stderr


def test_a_child_that_kept_its_parent_s_map_is_not_warned(tmp_path: Path):
    parent = tmp_path / "parent"
    shutil.copytree(TINY / "drafter", parent)
    child = child_of(parent, tmp_path / "child", None)
    added = run_cli("registry", "add", "--registry", tmp_path / "r.db", "--parent", parent, child)
    assert added.exit_code == 0, added.stderr
    assert "W-VOCAB-REGENERATED" not in added.stdout
    assert "W-VOCAB-REGENERATED" not in run_cli("--registry", tmp_path / "r.db", "--to", "vllm", child,
                                                 tmp_path / "out").stdout


def test_the_hint_measuring_the_child_ends_the_warning(family, tmp_path: Path):
    """The hint's command, as printed (with the target filled in), records a measured acceptance: the next record
    and conversion of the child say nothing of its map."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    parent, child, registry = family
    added = run_cli("registry", "add", "--registry", registry, "--parent", parent, child)
    hint = next(line for line in added.stdout.splitlines() if "[W-VOCAB-REGENERATED]" in line)
    assert f"`eagle3-convert verify {child} --target-model TARGET`" in hint
    measured = run_cli("verify", str(child), "--target-model", str(TINY / "target"), "--prompts",
                       str(TINY / "prompts.txt"), "--device", "cpu", "--max-new-tokens", "8", "-q",
                       "--registry", str(registry))
    assert measured.exit_code == 0, measured.stderr
    again = run_cli("registry", "add", "--registry", registry, "--parent", parent, child)
    assert again.exit_code == 0 and "W-VOCAB-REGENERATED" not in again.stdout
    converted = run_cli("--registry", registry, "--to", "sglang", child, tmp_path / "out")
    assert converted.exit_code == 0 and "W-VOCAB-REGENERATED" not in converted.stdout + converted.stderr


def test_a_parent_that_is_the_child_is_refused(family):
    parent, _, registry = family
    result = run_cli("registry", "add", "--registry", registry, "--parent", parent, parent)
    assert result.exit_code != 0 and "--parent holds the same weights as SRC" in result.stderr
