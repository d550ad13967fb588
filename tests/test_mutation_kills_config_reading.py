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
from test_mutation_kills_validate import CONFIG_CODES, MLA, judged

READER_BIAS = "config.json sets bias: true (an fc bias); no other layout can hold it"
BIAS_FINDING = (
    "E-BIAS-UNSUPPORTED", "warning", f"{READER_BIAS}; SGLang builds a bias on fc and on each layer's o_proj (none on "
    "q/k/v), which the drafter validate checks has no place for: no tensor of this file is checked",
    "serve this drafter with SGLang as it is", "$.bias", None)
SCHEMA_DTYPE = ("E-SCHEMA", "error", "config.json $.torch_dtype: 5 is not of type 'string', 'null' ({} schema)",
                "fix $.torch_dtype in config.json", "$.torch_dtype", None)


def bias(n: int) -> RawTensor:
    return RawTensor("BF16", (n,), b"\x80\x3f" * n)


def schema_dtype(layout: str) -> tuple:
    return (*SCHEMA_DTYPE[:2], SCHEMA_DTYPE[2].format(layout), *SCHEMA_DTYPE[3:])


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


# ------------------------------------------------------------------ values the drafter model refuses

def test_a_head_of_no_rows_is_named_as_a_tensor_and_hides_no_schema_finding(tmp_path: Path):
    """No draft_vocab_size and an lm_head of 0 rows: the draft vocabulary used to be read as 0 from the head, which the
    drafter model refused as "config.json: draft_vocab_size   Input should be greater than 0 [type=...]" with the
    hint to fix a field config.json does not have, at "$", which dropped every schema finding of the flat config."""
    got = judged(tmp_path, "vllm", {"draft_vocab_size": None}, edit=lambda c: (c.pop("draft_vocab_size", None),
                                                                               c.update(torch_dtype=5)),
                 tensors=lambda t: t.update({"lm_head.weight": RawTensor("BF16", (0, 32), b"")}),
                 codes=("SHAPE", "SCHEMA", "CONFIG-FIELD"))
    assert got == [
        ("E-SHAPE", "error", "tensor lm_head.weight has shape [0, 32], the config implies [96, 32]", "config.json "
         "and the weights disagree: fix the config field the shape depends on, or re-export the weights",
         "lm_head.weight", None),
        schema_dtype("vllm")]


@pytest.mark.parametrize("layout", ["vllm", "speculators"])
def test_a_head_of_no_rows_is_not_offered_as_the_draft_vocabulary(tmp_path: Path, layout: str):
    """vLLM and the speculators library size a head for the full vocabulary where draft_vocab_size is absent: with a
    head of rows that is E-CONFIG-DRAFT-VOCAB, hinting those rows; a head of no rows has none to offer (the hint said
    "set draft_vocab_size to 0", which no reader takes): E-SHAPE alone names it, with its re-export hint."""
    got = judged(tmp_path, layout, {"draft_vocab_size": None}, edit=lambda c: c.pop("draft_vocab_size", None),
                 tensors=lambda t: t.update({"lm_head.weight": RawTensor("BF16", (0, 32), b"")}),
                 engines=["vllm", "speculators"], codes=("DRAFT-VOCAB", "SHAPE"))
    assert got == [
        ("E-SHAPE", "error", "tensor lm_head.weight has shape [0, 32], the config implies [96, 32]", "config.json "
         "and the weights disagree: fix the config field the shape depends on, or re-export the weights",
         "lm_head.weight", None)]


def _huge_eps(layout: str):
    def edit(config: dict[str, Any]) -> None:
        dec = config["transformer_layer_config"] if layout == "speculators" else config
        dec["rms_norm_eps"] = 10 ** 400  # a JSON number past any float: every type check passes it, the model not
        config["torch_dtype"] = 5
    return edit


EPS_MESSAGE = ("config.json: rms_norm_eps: Input should be a valid number (got "
               f"{str(10 ** 400)[:60]!r})")


@pytest.mark.parametrize("layout, where", [("vllm", "$.rms_norm_eps"),
                                           ("speculators", "$.transformer_layer_config.rms_norm_eps")])
def test_a_value_only_the_drafter_model_refuses_is_said_as_convert_says_it(tmp_path: Path, layout: str, where: str):
    """The drafter model's own refusal, after decoder_fields passed the value: convert's words, at the field's path
    (it used to be pydantic's three lines joined, at "$" or the decoder's path, which hid the file's schema
    findings)."""
    got = judged(tmp_path, layout, edit=_huge_eps(layout), codes=CONFIG_CODES)
    assert got == [("E-CONFIG-FIELD", "error", EPS_MESSAGE, "fix that field in config.json", where, None),
                   schema_dtype(layout)]
    src = build_drafter(tmp_path / "src", layout)
    config = json.loads((src / "config.json").read_text())
    _huge_eps(layout)(config)
    (src / "config.json").write_text(json.dumps(config))
    converted = run_cli("--no-record", "--to", "sglang", src, tmp_path / "out")
    assert converted.exit_code == 1
    assert converted.stderr.strip().splitlines()[-1] == (
        f"error: {EPS_MESSAGE} [E-CONFIG-FIELD] — hint: fix that field in config.json")


# ------------------------------------------------------------------ decoder refusals, named where they are

def test_an_mla_drafter_told_by_its_class_is_refused_at_its_missing_width(tmp_path: Path):
    """model_type llama, an MLA class and MLA tensors: the reader builds an MLA drafter and refuses the missing
    kv_lora_rank; validate used to look for the refused key only under an MLA model_type, found none, named "$",
    and so dropped every schema finding."""
    got = judged(tmp_path, "vllm", spec=MLA, edit=lambda c: (c.update(model_type="llama", torch_dtype=5),
                                                           c.pop("kv_lora_rank")), codes=CONFIG_CODES)
    assert got == [("E-CONFIG-FIELD", "error", "config.json: kv_lora_rank is None; expected a positive integer",
                    "fix kv_lora_rank in config.json", "$.kv_lora_rank", None), schema_dtype("vllm")]


def test_a_decoder_refusal_is_said_once_at_the_key_refused(tmp_path: Path):
    """num_hidden_layers 0 and hidden_size 0: the decoder stops at num_hidden_layers (the key table said it); validate
    used to look for the refused key in another order, said the layer refusal a second time under $.hidden_size,
    and so hid the schema's word on hidden_size."""
    got = judged(tmp_path, "vllm", edit=lambda c: c.update(hidden_size=0, num_hidden_layers=0, torch_dtype=5),
                 codes=CONFIG_CODES)
    assert got == [
        ("E-CONFIG-FIELD", "error", "num_hidden_layers is 0 (JSON number); the vllm reader expects a positive integer "
         "and would coerce it", "write num_hidden_layers as a positive integer in config.json",
         "$.num_hidden_layers", None),
        ("E-SCHEMA", "error", "config.json $.hidden_size: 0 is less than the minimum of 1 (vllm schema)",
         "fix $.hidden_size in config.json", "$.hidden_size", None),
        schema_dtype("vllm")]


def test_a_speculators_decoder_is_read_without_the_tensors_as_its_reader_reads_it(tmp_path: Path):
    """The speculators reader reads the nested decoder without the tensors: an MLA class named there makes an MLA
    drafter of these q/k/v weights, whose missing latent widths it refuses. validate says the same refusal (given the
    tensors, the class would yield to them and validate would read a Llama drafter the reader refuses)."""
    def mla_class(config: dict[str, Any]) -> None:
        config["transformer_layer_config"]["architectures"] = ["Eagle3DeepseekV2ForCausalLM"]
    got = judged(tmp_path, "speculators", codes=CONFIG_CODES, edit=mla_class)
    refusal = "transformer_layer_config: q_lora_rank is None; expected a positive integer"
    assert got == [("E-CONFIG-FIELD", "error", refusal, "fix q_lora_rank in config.json",
                    "$.transformer_layer_config.q_lora_rank", None)]
    src = build_drafter(tmp_path / "src", "speculators")
    config = json.loads((src / "config.json").read_text())
    mla_class(config)
    (src / "config.json").write_text(json.dumps(config))
    converted = run_cli("--no-record", "--to", "sglang", src, tmp_path / "out")
    assert converted.exit_code == 1
    assert converted.stderr.strip().splitlines()[-1] == (
        f"error: {refusal} [E-CONFIG-FIELD] — hint: fix q_lora_rank in config.json")


# ------------------------------------------------------------------ the rope note and the schema

YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}


@pytest.mark.parametrize("layout", ["vllm", "sglang", "speculators"])
def test_a_yarn_rope_is_modelopts_export_only_in_a_modelopt_file(tmp_path: Path, layout: str):
    """I-ROPE-EXPORT-YARN speaks of ModelOpt's exporter: another layout's YaRN was the training's own."""
    def yarn(config: dict[str, Any]) -> None:
        (config["transformer_layer_config"] if layout == "speculators" else config)["rope_scaling"] = YARN
    assert judged(tmp_path, layout, edit=yarn, codes=("ROPE", "SCHEMA", "CONFIG")) == []


def test_a_schema_finding_inside_a_list_the_key_table_named_is_not_said_again(tmp_path: Path):
    got = judged(tmp_path, "vllm", edit=lambda c: c.update(architectures=["Eagle3LlamaForCausalLM", 5]),
                 codes=CONFIG_CODES)
    assert got == [("E-CONFIG-FIELD", "error", "architectures is ['Eagle3LlamaForCausalLM', 5] (JSON array); the vllm "
                    "reader expects a list of strings and would coerce it", "write architectures as a list of strings "
                    "in config.json", "$.architectures", None)]
