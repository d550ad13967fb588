"""Bugs a reviewer planted one at a time that the suite once let through (issue 26), each caught here through
the real CLI on real files written by tests/builders.py (independently of our writers), or on the real registry.

- d2t/t2d: a permuted d2t holds the same SET of target ids as t2d, in the wrong order; every engine would map
  draft token i to another token's target id. Comparing sets instead of the ordered lists misses it.
- validate's E-KEY-DUPLICATE on twin norms: a later layer's `hidden_norm` (SGLang reads it) and `input_layernorm`
  (vLLM reads it) holding different weights of the same shape serve two different drafters.
- convert's E-KEY-DUPLICATE: two stored names of one canonical tensor holding different bytes; without the
  refusal the last one read wins silently.
- registry upsert: merging a record's `flags` / `ids_as_written`, the NEW value of a key already recorded wins.
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import pytest

from builders import DrafterSpec, RawTensor, config_for, draft_vocab, stored_tensors, write_safetensors
from conftest import nothing_written, run_cli
from eagle3_convert.registry.store import open_registry

ERROR_LINE = re.compile(r"^error: .+ \[(E-[A-Z0-9-]+)\] — hint: .+$")


def write_checkpoint(dest: Path, layout: str, spec: DrafterSpec, tensors: dict[str, RawTensor]) -> Path:
    """config.json as `layout` writes it for `spec`, and exactly `tensors` in model.safetensors."""
    dest.mkdir(parents=True)
    (dest / "config.json").write_text(json.dumps(config_for(layout, spec), indent=2))
    write_safetensors(dest / "model.safetensors", tensors)
    return dest


def error_code(stderr: str) -> str:
    """The code of the one-line error that ends stderr (and no traceback)."""
    assert "Traceback" not in stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and stderr.splitlines()[-1] == errors[0], stderr
    match = ERROR_LINE.match(errors[0])
    assert match, errors[0]
    return match.group(1)


def validate_codes(path: Path) -> tuple[int, list[dict]]:
    result = run_cli("validate", path, "--json")
    return result.exit_code, json.loads(result.stdout)["findings"]


# ------------------------------------------------------------------ d2t/t2d: order, not just membership

def permuted_d2t(spec: DrafterSpec, i: int, j: int) -> RawTensor:
    """d2t offsets for the draft vocab with draft ids i and j pointing at each other's target id."""
    ids = draft_vocab(spec)
    assert ids is not None
    ids[i], ids[j] = ids[j], ids[i]
    return RawTensor("I64", (len(ids),), b"".join(struct.pack("<q", t - k) for k, t in enumerate(ids)))


@pytest.mark.parametrize("layout", ["speculators", "sglang", "vllm", "eagle"])
@pytest.mark.parametrize("swap", [(0, 1), (3, 30)], ids=["adjacent", "far"])
def test_a_permuted_d2t_is_reported_and_refused(tmp_path: Path, layout: str, swap: tuple[int, int]):
    spec = DrafterSpec(num_layers=1)
    tensors = stored_tensors(layout, spec)
    assert "t2d" in tensors  # the check compares d2t with t2d: both must be there
    tensors["d2t"] = permuted_d2t(spec, *swap)
    src = write_checkpoint(tmp_path / "src", layout, spec, tensors)

    exit_code, findings = validate_codes(src)
    assert exit_code == 1
    assert "E-VOCAB-MISMATCH" in {f["code"] for f in findings}, findings

    result = run_cli("--to", "speculators" if layout != "speculators" else "vllm", src, tmp_path / "out")
    assert result.exit_code == 1
    assert error_code(result.stderr) == "E-VOCAB-MISMATCH"
    assert nothing_written(tmp_path, "out")


def test_the_unpermuted_d2t_of_the_same_file_passes(tmp_path: Path):
    """The control: the builder's own d2t/t2d pair is consistent, so the failures above come from the swap."""
    spec = DrafterSpec(num_layers=1)
    src = write_checkpoint(tmp_path / "src", "speculators", spec, stored_tensors("speculators", spec))
    exit_code, findings = validate_codes(src)
    assert exit_code == 0 and not [f for f in findings if f["code"].startswith("E-VOCAB")], findings


# ------------------------------------------------------------------ validate: twin norms that diverged

@pytest.mark.parametrize("layout", ["sglang", "vllm"])
@pytest.mark.parametrize("layer", [1, 2])
def test_diverged_twin_norms_are_reported(tmp_path: Path, layout: str, layer: int):
    spec = DrafterSpec(num_layers=3)
    tensors = stored_tensors(layout, spec)
    hidden, input_ = f"layers.{layer}.hidden_norm.weight", f"layers.{layer}.input_layernorm.weight"
    assert tensors[hidden] == tensors[input_]  # the builder writes one weight under both names
    # Same shape and dtype, other bytes: only a comparison of contents tells them apart.
    diverged = bytes(b ^ 0x01 for b in tensors[input_].data)
    tensors[input_] = RawTensor(tensors[input_].dtype, tensors[input_].shape, diverged)
    src = write_checkpoint(tmp_path / "src", layout, spec, tensors)

    exit_code, findings = validate_codes(src)
    assert exit_code == 1
    duplicates = [f for f in findings if f["code"] == "E-KEY-DUPLICATE"]
    assert len(duplicates) == 1, findings
    assert hidden in duplicates[0]["message"] and input_ in duplicates[0]["message"]


def test_equal_twin_norms_pass(tmp_path: Path):
    spec = DrafterSpec(num_layers=3)
    src = write_checkpoint(tmp_path / "src", "sglang", spec, stored_tensors("sglang", spec))
    exit_code, findings = validate_codes(src)
    assert exit_code == 0 and "E-KEY-DUPLICATE" not in {f["code"] for f in findings}, findings


# ------------------------------------------------------------------ convert: one weight under two names

# (layout, the name the builder writes, a second spelling the layout reads as the same canonical tensor)
# (the layout converted to is another one: the refusal must come from reading, whatever is written)
ALIASES = [
    ("sglang", "midlayer.mlp.up_proj.weight", "layers.0.mlp.up_proj.weight", "vllm"),
    ("sglang", "midlayer.self_attn.q_proj.weight", "model.layers.0.self_attn.q_proj.weight", "speculators"),
    ("vllm", "layers.0.mlp.down_proj.weight", "midlayer.mlp.down_proj.weight", "sglang"),
]


@pytest.mark.parametrize("layout, stored, alias, to", ALIASES, ids=[f"{a[0]}-{a[2]}" for a in ALIASES])
def test_convert_refuses_one_weight_under_two_names(tmp_path: Path, layout: str, stored: str, alias: str, to: str):
    spec = DrafterSpec(num_layers=1)
    tensors = stored_tensors(layout, spec)
    assert stored in tensors and alias not in tensors
    original = tensors[stored]
    tensors[alias] = RawTensor(original.dtype, original.shape, bytes(b ^ 0xFF for b in original.data))
    src = write_checkpoint(tmp_path / "src", layout, spec, tensors)

    # --from: a mix of two spellings may also make the layout ambiguous, which is another refusal
    result = run_cli("--from", layout, "--to", to, src, tmp_path / "out")
    assert result.exit_code == 1, result.stdout
    assert error_code(result.stderr) == "E-KEY-DUPLICATE"
    assert nothing_written(tmp_path, "out")


# ------------------------------------------------------------------ registry: the newer value of a key wins

def did(name: str) -> str:
    import hashlib

    return hashlib.sha256(name.encode()).hexdigest()


def test_upsert_merges_overlapping_keys_with_the_new_value(registry_url):
    """upsert_drafter merges `flags` and `ids_as_written` key by key (registry/writes.py MERGED_DICTS): keys only
    the record has stay, new keys are added, and a key both have takes the value given now. (Callers that must
    not overwrite, such as merging a Hub twin, pass only the keys the record lacks: recording.py `_gaps`.)"""
    drafter_id = did("overlap")
    with open_registry(registry_url) as store:
        store.upsert_drafter(drafter_id, ids_as_written={"sglang": [1, 3, 4], "vllm": [2, 4, 5]},
                             flags={"norm_before_fc": False, "fc_norm": False})
        merged = store.upsert_drafter(drafter_id, ids_as_written={"sglang": [1, 15, 28], "eagle": [2, 16, 29]},
                                      flags={"fc_norm": True})
        again = store.get(drafter_id)
    for record in (merged, again):  # what upsert returns and what a fresh read of the database says
        assert record.ids_as_written == {"sglang": [1, 15, 28], "vllm": [2, 4, 5], "eagle": [2, 16, 29]}
        assert record.flags == {"norm_before_fc": False, "fc_norm": True}
    with open_registry(registry_url) as reopened:  # committed, not only seen inside the writer's connection
        assert reopened.get(drafter_id) == again
