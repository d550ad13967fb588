"""`--force` replaces only the files a checkpoint writer writes, and names each one it replaced; any other
file in DST (training state, logs, notes, a README.md) makes it refuse, leaving DST as it was (issue 21)."""

from __future__ import annotations

import fnmatch
import json
import shutil
from pathlib import Path

import pytest
from conftest import EXAMPLE, run_cli, tree_digest

from eagle3_convert.atomic import CHECKPOINT_FILES

# One name for each pattern of CHECKPOINT_FILES, as the writers spell them.
WRITER_FILES = [
    "config.json", "generation_config.json", "eagle3-convert.json", "hf_quant_config.json", "config.py",
    "model.safetensors", "model-00002-of-00002.safetensors", "model.safetensors.index.json",
    "pytorch_model.bin", "pytorch_model-00001-of-00002.bin", "pytorch_model.bin.index.json",
    "eagle3-tiny-drafter-BF16.gguf", "configuration_eagle3.py", "modeling_eagle3.py",
    "tokenizer.json", "tokenizer_config.json", "tokenizer.model", "special_tokens_map.json", "added_tokens.json",
    "vocab.json", "merges.txt", "chat_template.jinja",
]
# What a training run or a user leaves beside a checkpoint: no conversion writes these.
USER_FILES = ["optimizer.pt", "training_args.json", "trainer_state.json", "scheduler.pt", "rng_state.pth",
              "run.log", "notes.txt", "README.md", "LICENSE", "adapter_model.safetensors", "train.py"]


def test_every_writer_pattern_is_tried_and_no_user_file_matches_one():
    assert {p for p in CHECKPOINT_FILES if not any(fnmatch.fnmatchcase(n, p) for n in WRITER_FILES)} == set()
    assert [n for n in USER_FILES if any(fnmatch.fnmatchcase(n, p) for p in CHECKPOINT_FILES)] == []


@pytest.fixture
def converted(tmp_path: Path) -> Path:
    """DST holding an earlier conversion: config.json, model.safetensors, eagle3-convert.json."""
    dst = tmp_path / "dst"
    assert run_cli("--to", "sglang", "--no-record", EXAMPLE, dst).exit_code == 0
    return dst


@pytest.mark.parametrize("name", WRITER_FILES)
def test_force_replaces_a_writer_file_and_names_it(converted: Path, name: str):
    (converted / name).write_bytes(b"stale")
    before = sorted(p.name for p in converted.iterdir())
    result = run_cli("--to", "sglang", "--force", "--no-record", EXAMPLE, converted)
    assert result.exit_code == 0, result.stderr
    line = next(line for line in result.stdout.splitlines() if line.startswith("--force replaced: "))
    assert line.removeprefix("--force replaced: ").split(", ") == before
    if name in ("config.json", "model.safetensors", "eagle3-convert.json"):  # written again, anew
        assert (converted / name).read_bytes() != b"stale"
    else:
        assert not (converted / name).exists()


def test_force_lists_what_it_replaced_under_json(converted: Path):
    (converted / "tokenizer.json").write_text("{}")
    result = run_cli("--to", "vllm", "--force", "--no-record", "--json", EXAMPLE, converted)
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["replaced"] == ["config.json", "eagle3-convert.json", "model.safetensors", "tokenizer.json"]
    assert sorted(p.name for p in converted.iterdir()) == sorted(summary["files"])


def test_a_new_destination_replaces_nothing(tmp_path: Path):
    summary = json.loads(run_cli("--to", "vllm", "--no-record", "--json", EXAMPLE, tmp_path / "new").stdout)
    assert summary["replaced"] == []
    empty = tmp_path / "empty"
    empty.mkdir()
    forced = run_cli("--to", "vllm", "--no-record", "--force", EXAMPLE, empty)
    assert forced.exit_code == 0 and "--force replaced" not in forced.stdout


@pytest.mark.parametrize("name", USER_FILES + ["checkpoint-500/"])
def test_force_refuses_a_file_no_writer_writes_and_leaves_dst_untouched(converted: Path, name: str):
    if name.endswith("/"):
        (converted / name).mkdir()
        (converted / name / "optimizer.pt").write_bytes(b"state")
    else:
        (converted / name).write_bytes(b"the user's")
    before = tree_digest(converted)
    result = run_cli("--to", "sglang", "--force", "--no-record", EXAMPLE, converted)
    assert result.exit_code == 1 and "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "E-DEST-NOT-CHECKPOINT" in errors[0] and name in errors[0], result.stderr
    named = errors[0].split(" [E-DEST-NOT-CHECKPOINT]")[0].rsplit("writes: ", 1)[1]
    assert named == name  # only the file it would not replace is named
    assert tree_digest(converted) == before and sorted(p.name for p in converted.parent.iterdir()) == ["dst"]
    # The hint works: with that file moved out, --force replaces the checkpoint.
    assert "move it out of" in result.stderr
    shutil.move(str(converted / name.rstrip("/")), str(converted.parent / "moved"))
    assert run_cli("--to", "sglang", "--force", "--no-record", EXAMPLE, converted).exit_code == 0


def test_without_force_the_refusal_names_what_force_would_replace(converted: Path):
    result = run_cli("--to", "sglang", "--no-record", EXAMPLE, converted)
    assert result.exit_code == 1
    assert "holds config.json, eagle3-convert.json, model.safetensors" in result.stderr
    assert "pass --force" in result.stderr
    (converted / "run.log").write_text("epoch 1")
    refused = run_cli("--to", "sglang", "--no-record", EXAMPLE, converted)
    assert refused.exit_code == 1 and "run.log" in refused.stderr and "--force would refuse too" in refused.stderr
