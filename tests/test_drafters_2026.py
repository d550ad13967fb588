"""Silent failures of the drafters published in 2026 (issue 22), each shown through the real CLI on files written
by tests/builders.py (independently of our writers), then edited as the producer writes them.

- `tie_word_embeddings: true` beside a stored, trained lm_head: SGLang ties lm_head to embed_tokens and never
  loads the head (engines/sglang.py); written false, and SGLang's verdict on a file with the flag on says so.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from builders import DrafterSpec, build_drafter
from conftest import run_cli, tensor_hashes

ERROR_LINE = re.compile(r"^error: .+ \[(E-[A-Z0-9-]+)\] — hint: .+$")


def edit_config(path: Path, **changes) -> dict:
    config = json.loads((path / "config.json").read_text())
    config.update(changes)
    (path / "config.json").write_text(json.dumps(config, indent=2))
    return config


def serve_line(stdout: str, label: str) -> str:
    lines = [line for line in stdout.splitlines() if line.strip().startswith(label)]
    assert len(lines) == 1, stdout
    return lines[0]


# ------------------------------------------------------------------ tie_word_embeddings with a stored head

@pytest.mark.parametrize("layout", ["speculators", "sglang", "vllm"])
def test_tied_flag_beside_a_trained_head_is_written_false_for_sglang(tmp_path: Path, layout: str):
    """Before: the flag was carried into SGLang's config and its verdict said "serves as trained", while SGLang
    would have served embed_tokens as the head. After: written false (the stored head is the trained one)."""
    src = build_drafter(tmp_path / "src", layout, DrafterSpec())
    config = edit_config(src, tie_word_embeddings=True)
    if layout == "speculators":  # speculators keeps a decoder copy too; a producer that ties writes both
        config["transformer_layer_config"]["tie_word_embeddings"] = True
        (src / "config.json").write_text(json.dumps(config))

    result = run_cli("--no-record", "--to", "sglang", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    written = json.loads((tmp_path / "out" / "config.json").read_text())
    assert written["tie_word_embeddings"] is False
    assert "tie_word_embeddings is true but lm_head.weight" in result.stdout + result.stderr
    assert "serves as trained" in serve_line(result.stdout, "SGLang")
    stored_head = "lm_head.weight"
    assert tensor_hashes(tmp_path / "out")[stored_head] == tensor_hashes(src)[stored_head]


def test_sglang_verdict_on_a_tied_file_with_a_head_is_wrong(tmp_path: Path):
    """The SGLang-layout source itself (flag on, head stored): SGLang never loads its head, and says nothing."""
    src = build_drafter(tmp_path / "src", "sglang", DrafterSpec())
    edit_config(src, tie_word_embeddings=True)
    result = run_cli("validate", "--engine", "sglang", "--json", src)
    assert result.exit_code == 1
    findings = json.loads(result.stdout)["findings"]
    wrong = [f for f in findings if f["code"] == "E-ENGINE-WRONG"]
    assert len(wrong) == 1 and "never loads the trained lm_head.weight" in wrong[0]["message"], findings

    edit_config(src, tie_word_embeddings=False)  # the control: the same file untied is served as trained
    result = run_cli("validate", "--engine", "sglang", "--json", src)
    assert result.exit_code == 0, result.stdout
