"""How validate reads config.json into the drafter it checks (eagle3_convert/validate/config.py), word for word, beside
what convert's readers say of the same file (issue 26: the survivors of validate/config.py, tools/MUTATION-RESULTS.md,
session 8). Builder-written checkpoints (tests/builders.py) with one change each, through validate_checkpoint and the
real CLI.

SGLang's `bias: true`, as SGLang 0.5.23 builds it (0.5.11 alike): a bias on fc (models/llama_eagle3.py:166,
`bias=getattr(config, "bias", False)`) and on each layer's o_proj (models/llama.py:339, `attention_bias =
getattr(config, "attention_bias", False) or getattr(config, "bias", False)`), none on q/k/v (llama_eagle3.py:72
rebuilds qkv_proj with `bias=False`). validate used to read it as the four attention biases, asking for q/k/v biases
SGLang never builds and calling its fc bias no part of a drafter; the SGLang reader refuses it (no other layout holds
an fc bias), and validate now says the reader's refusal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from builders import RawTensor, build_drafter
from conftest import run_cli
from test_mutation_kills_validate import judged

READER_BIAS = "config.json sets bias: true (an fc bias); no other layout can hold it"
BIAS_FINDING = (
    "E-BIAS-UNSUPPORTED", "warning", f"{READER_BIAS}; SGLang builds a bias on fc and on each layer's o_proj (none on "
    "q/k/v), which the drafter validate checks has no place for: no tensor of this file is checked",
    "serve this drafter with SGLang as it is", "$.bias", None)


def bias(n: int) -> RawTensor:
    return RawTensor("BF16", (n,), b"\x80\x3f" * n)


# ------------------------------------------------------------------ SGLang's bias: true

BIAS_TENSORS = {
    "no bias tensor": {},
    "the biases SGLang builds (fc, o_proj)": {"fc.bias": 32, "midlayer.self_attn.o_proj.bias": 32},
    "the four attention biases": {"midlayer.self_attn.q_proj.bias": 32, "midlayer.self_attn.k_proj.bias": 16,
                                  "midlayer.self_attn.v_proj.bias": 16, "midlayer.self_attn.o_proj.bias": 32},
}


@pytest.mark.parametrize("tensors", sorted(BIAS_TENSORS))
def test_sglang_bias_true_is_the_sglang_readers_refusal_in_validate(tmp_path: Path, tensors: str):
    """Every finding validate gives: the reader's refusal alone, whatever bias tensors are stored (it used to ask for
    q/k/v/o biases, E-KEY-MISSING, and call fc.bias E-KEY-UNKNOWN, as if `bias` were attention_bias)."""
    got = judged(tmp_path, "sglang", edit=lambda c: c.update(bias=True),
                 tensors=lambda t: t.update({name: bias(n) for name, n in BIAS_TENSORS[tensors].items()}))
    assert got == [BIAS_FINDING]


def test_sglang_bias_true_validate_and_convert_say_the_same_refusal(tmp_path: Path):
    src = build_drafter(tmp_path / "drafter", "sglang")
    (src / "config.json").write_text(json.dumps({**json.loads((src / "config.json").read_text()), "bias": True}))
    validated = run_cli("validate", "--json", src)
    assert validated.exit_code == 0, validated.stdout  # a conversion limit: a warning
    assert [(f["code"], f["message"], f["where"]) for f in json.loads(validated.stdout)["findings"]] == [
        (BIAS_FINDING[0], BIAS_FINDING[2], "$.bias")]
    converted = run_cli("--no-record", "--to", "vllm", src, tmp_path / "out")
    assert converted.exit_code == 1 and not (tmp_path / "out").exists()
    assert converted.stderr.strip().splitlines()[-1] == (
        f"error: {READER_BIAS} [E-BIAS-UNSUPPORTED] — hint: serve this drafter with SGLang as it is")


def test_sglang_bias_false_reads_as_no_bias(tmp_path: Path):
    assert judged(tmp_path, "sglang", edit=lambda c: c.update(bias=False)) == []


def test_sglang_bias_of_another_type_is_refused_by_the_key_table_alone(tmp_path: Path):
    """As the reader refuses it (refuse_key_errors, before any bias is read): not also as an fc bias."""
    got = judged(tmp_path, "sglang", edit=lambda c: c.update(bias="yes"), codes=("CONFIG", "BIAS", "KEY"))
    assert got == [
        ("E-CONFIG-FIELD", "error", "bias is 'yes' (JSON string); the sglang reader expects true or false and would "
         "coerce it", "write bias as true or false in config.json", "$.bias", None)]
