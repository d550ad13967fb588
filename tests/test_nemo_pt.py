"""NeMo Automodel's `.pt` training output (issue 35): `draft_model.pt` beside `eagle_meta.pt` (legacy
`eagle3_meta.pt`), whose `selected_token_ids` are the draft vocabulary in the order the recipe selected them
(special tokens, then by frequency: not sorted), with no d2t/t2d in the weights (before NVIDIA-NeMo/Automodel #2447).

The files are written by torch.save, as the recipe writes them (`recipes/llm/train_eagle3.py` `_save_checkpoint`:
`torch.save(draft_model.state_dict(), "draft_model.pt")`, `torch.save({"selected_token_ids", "selected_token_mask",
"global_step"[, "epoch"]}, meta)`); the tool reads them without running their pickles.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import struct
from pathlib import Path

import pytest

from builders import DrafterSpec, RawTensor, canonical_tensors, write_safetensors
from conftest import nothing_written, run_cli
from eagle3_convert.safetensors_io import read_tensor_bytes, read_tensor_table

torch = pytest.importorskip("torch")

SPEC = DrafterSpec(capture_boundaries=None, vocab_size=96, draft_vocab_size=32)
SPECIAL = [1, 2, 0]  # bos, eos, pad first, as build_eagle3_token_mapping puts them
DTYPES = {"BF16": torch.bfloat16, "F32": torch.float32}


def selected_ids(spec: DrafterSpec) -> list[int]:
    """The recipe's order: the special tokens, then the rest as frequency ranked them (here: a fixed shuffle)."""
    rest = [t for t in range(spec.vocab_size) if t not in SPECIAL]
    random.Random(7).shuffle(rest)
    return (SPECIAL + rest)[:spec.vd]


def nemo_pt_drafter(dest: Path, spec: DrafterSpec = SPEC, meta: str | None = "eagle_meta.pt",
                    ids: list[int] | None = None, weights_dir: str = "") -> Path:
    """A NeMo Automodel EAGLE-3 checkpoint folder as the recipe saves it; `weights_dir="model"` puts the weights in
    the consolidated `model/` folder below the meta file (the layout #2374 serves)."""
    ids = selected_ids(spec) if ids is None else ids
    state = {}
    for name, t in canonical_tensors(spec).items():
        value = torch.frombuffer(bytearray(t.data), dtype=DTYPES[t.dtype]).reshape(t.shape).clone()
        state[name if name.startswith("lm_head.") else f"model.{name}"] = value
    config = {"architectures": ["LlamaEagle3DraftModel"], "model_type": "llama", "hidden_size": spec.hidden_size,
              "intermediate_size": spec.intermediate_size, "num_attention_heads": spec.num_attention_heads,
              "num_key_value_heads": spec.num_key_value_heads, "head_dim": spec.head_dim,
              "num_hidden_layers": spec.target_layers, "vocab_size": spec.vocab_size, "rms_norm_eps": 1e-5,
              "rope_theta": 500000.0, "max_position_embeddings": 4096, "tie_word_embeddings": False,
              "draft_vocab_size": spec.vd, "target_hidden_size": spec.ht, "torch_dtype": "bfloat16"}
    weights = dest / weights_dir
    weights.mkdir(parents=True)
    (weights / "config.json").write_text(json.dumps(config, indent=2))
    if weights_dir:  # the consolidated folder holds safetensors
        write_safetensors(weights / "model.safetensors", {
            n: RawTensor({torch.bfloat16: "BF16", torch.float32: "F32"}[v.dtype], tuple(v.shape),
                         v.contiguous().view(torch.uint8).numpy().tobytes()) for n, v in state.items()})
    else:
        torch.save(state, weights / "draft_model.pt")
    if meta is not None:
        mask = torch.zeros(spec.vocab_size, dtype=torch.bool)
        mask[torch.tensor(ids)] = True
        torch.save({"global_step": 120, "epoch": 1, "selected_token_ids": torch.tensor(ids, dtype=torch.long),
                    "selected_token_mask": mask}, dest / meta)
    return weights


def head_rows(spec: DrafterSpec) -> list[bytes]:
    data = canonical_tensors(spec)["lm_head.weight"].data
    row = len(data) // spec.vd
    return [data[i * row:(i + 1) * row] for i in range(spec.vd)]


def written(out: Path) -> dict[str, bytes]:
    tensors, _ = read_tensor_table(out)
    return {name: read_tensor_bytes(src) for name, src in tensors.items()}


def error_code(stderr: str) -> str:
    assert "Traceback" not in stderr
    match = re.match(r"^error: .+ \[(E-[A-Z0-9-]+)\] — hint: .+$", stderr.strip().splitlines()[-1])
    assert match, stderr
    return match.group(1)


@pytest.mark.parametrize("meta", ["eagle_meta.pt", "eagle3_meta.pt"])
def test_pt_output_converts_with_the_map_its_meta_selected(tmp_path: Path, meta: str):
    """Before: E-SRC-MISSING (no weights found). After: d2t/t2d rebuilt from selected_token_ids, and each head row
    still predicts the token it was trained on (its row moved with its id into ascending order)."""
    src = nemo_pt_drafter(tmp_path / "run", meta=meta)
    result = run_cli("--no-record", "--to", "vllm", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    assert f"rebuilt d2t/t2d from {meta}'s selected_token_ids" in result.stdout + result.stderr
    out = written(tmp_path / "out")
    ids = selected_ids(SPEC)
    d2t = struct.unpack(f"<{SPEC.vd}q", out["d2t"])
    targets = [i + d for i, d in enumerate(d2t)]
    assert targets == sorted(ids)
    assert [i for i, b in enumerate(out["t2d"]) if b] == sorted(ids)
    rows, row = head_rows(SPEC), len(out["lm_head.weight"]) // SPEC.vd
    for j, target in enumerate(targets):  # the row the engine reads for target t is the row trained for t
        assert out["lm_head.weight"][j * row:(j + 1) * row] == rows[ids.index(target)]
    assert out["fc.weight"] == canonical_tensors(SPEC)["fc.weight"].data
    assert run_cli("validate", tmp_path / "out").exit_code == 0


def test_pt_output_without_its_meta_is_refused_until_the_meta_is_beside_it(tmp_path: Path):
    """Without the meta there is no map: every engine would serve draft i as target i (#2447). The hint's step
    (copy the meta beside the weights) turns the refusal into a conversion."""
    src = nemo_pt_drafter(tmp_path / "run", meta=None)
    result = run_cli("--no-record", "--to", "vllm", src, tmp_path / "out")
    assert result.exit_code == 1 and error_code(result.stderr) == "E-VOCAB-MISSING"
    assert "copy eagle_meta.pt" in result.stderr and nothing_written(tmp_path, "out")
    findings = json.loads(run_cli("validate", "--json", src).stdout)["findings"]
    assert "E-VOCAB-MISSING" in [f["code"] for f in findings if f["severity"] == "error"]
    nemo_pt_drafter(tmp_path / "other", meta="eagle_meta.pt")
    shutil.copy(tmp_path / "other" / "eagle_meta.pt", src / "eagle_meta.pt")
    assert run_cli("--no-record", "--to", "vllm", src, tmp_path / "out").exit_code == 0


def test_validate_reads_the_pt_output_as_the_safetensors_one(tmp_path: Path):
    """As saved, no engine loads it (vLLM resolves no LlamaEagle3DraftModel): that and nothing about its map."""
    src = nemo_pt_drafter(tmp_path / "run")
    findings = json.loads(run_cli("validate", "--json", src).stdout)["findings"]
    assert [(f["code"], f["engine"]) for f in findings if f["severity"] == "error"] == [("E-CONFIG-ARCH", "vllm")]
    assert not [f for f in findings if f["code"].startswith(("E-VOCAB", "W-VOCAB"))]


def test_consolidated_model_folder_finds_the_meta_one_level_up(tmp_path: Path):
    """The later recipe: model/ (safetensors, still no d2t before #2447) below the step folder holding
    eagle_meta.pt (#2374's serve_sglang looks there too)."""
    weights = nemo_pt_drafter(tmp_path / "epoch_0_step_10", weights_dir="model")
    result = run_cli("--no-record", "--to", "sglang", weights, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    assert "rebuilt d2t/t2d from ../eagle_meta.pt's selected_token_ids" in result.stdout + result.stderr
    d2t = struct.unpack(f"<{SPEC.vd}q", written(tmp_path / "out")["d2t"])
    assert [i + d for i, d in enumerate(d2t)] == sorted(selected_ids(SPEC))


@pytest.mark.parametrize("ids, code", [
    (list(range(31)) + [30], "E-VOCAB-ORDER"),  # a repeated id
    (list(range(31)) + [96], "E-VOCAB-RANGE"),  # outside the target vocabulary
    (list(range(31)), "E-VOCAB-SHAPE"),  # not draft_vocab_size ids
])
def test_a_damaged_meta_is_refused_in_one_line(tmp_path: Path, ids: list[int], code: str):
    src = tmp_path / "run"
    nemo_pt_drafter(src, meta=None)
    torch.save({"global_step": 1, "selected_token_ids": torch.tensor(ids, dtype=torch.long)}, src / "eagle_meta.pt")
    result = run_cli("--no-record", "--to", "vllm", src, tmp_path / "out")
    assert result.exit_code == 1 and error_code(result.stderr) == code
    assert nothing_written(tmp_path, "out")


def test_a_mask_that_disagrees_with_the_ids_is_refused(tmp_path: Path):
    src = nemo_pt_drafter(tmp_path / "run")
    meta = torch.load(src / "eagle_meta.pt", weights_only=True)
    meta["selected_token_mask"][meta["selected_token_ids"][0]] = False
    meta["selected_token_mask"][95 if not meta["selected_token_mask"][95] else 94] = True
    torch.save(meta, src / "eagle_meta.pt")
    result = run_cli("--no-record", "--to", "vllm", src, tmp_path / "out")
    assert result.exit_code == 1 and error_code(result.stderr) == "E-VOCAB-MISMATCH"


def test_a_meta_that_runs_code_is_refused_unread(tmp_path: Path):
    """The meta's pickle is read like a .bin: a pickle that calls anything but a tensor rebuild is refused."""
    src = nemo_pt_drafter(tmp_path / "run")

    class Boom:
        def __reduce__(self):
            return (print, ("ran",))

    torch.save({"selected_token_ids": torch.tensor(selected_ids(SPEC)), "hook": Boom()}, src / "eagle_meta.pt")
    result = run_cli("--no-record", "--to", "vllm", src, tmp_path / "out")
    assert result.exit_code == 1 and error_code(result.stderr) == "E-BIN-UNSAFE"
    assert "ran" not in result.stdout
