"""Issue 35: what the target's own files say against the drafter's, through the real CLI.

- embed_tokens: a stored table that is not the target's (TorchSpec #38 exported a random one; vLLM drafts with it,
  SGLang with the target's: engines/embedding.py) is warned with `--target DIR` holding weights, or with `--deep`
  when the recorded target names a local copy; an identical copy is said, and `--drop-embed` leaves it out only for
  layouts whose engines then take the target's.
- RoPE: `rope_theta` against the rope object's theta (transformers 5 reads the object's), and the drafter's rope
  against the target's (`--target DIR`); `--rope-theta` states the trained base in every spelling.

The target is a directory built here: a config.json and a model.safetensors holding `model.embed_tokens.weight`.
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from builders import DrafterSpec, RawTensor, build_drafter, write_safetensors
from conftest import run_cli

from eagle3_convert.safetensors_io import read_tensor_table

V, H = 96, 32


def findings(stdout: str) -> dict[str, dict]:
    return {f["code"]: f for f in json.loads(stdout)["findings"]}


def drafter_with_embed(dest: Path, layout: str = "sglang", **extra) -> Path:
    return build_drafter(dest, layout, DrafterSpec(embed_tokens=True, extra=extra))


def stored_embedding(drafter: Path) -> bytes:
    tensors, _ = read_tensor_table(drafter)
    ref = tensors["embed_tokens.weight"]
    with open(ref.file, "rb") as f:
        f.seek(ref.start)
        return f.read(ref.nbytes)


def write_target_dir(dest: Path, embedding: bytes, **config) -> Path:
    dest.mkdir(parents=True)
    (dest / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 8, "hidden_size": H,
        "vocab_size": V, "max_position_embeddings": 2048, **config}))
    write_safetensors(dest / "model.safetensors", {"model.embed_tokens.weight": RawTensor("BF16", (V, H), embedding),
                                                   "model.norm.weight": RawTensor("BF16", (H,), b"\x80\x3f" * H)})
    return dest


def one_row_changed(data: bytes, row: int) -> bytes:
    out = bytearray(data)
    start = row * H * 2
    out[start:start + 2] = b"\x00\x40" if out[start:start + 2] != b"\x00\x40" else b"\x80\x40"  # 2.0 or 4.0
    return bytes(out)


def validate(*args) -> tuple[int, dict[str, dict]]:
    result = run_cli("validate", *map(str, args), "--json")
    return result.exit_code, findings(result.stdout)


# ------------------------------------------------------------------ embed_tokens

def test_a_table_that_is_not_the_target_s_is_warned_with_each_engine_s_reading(tmp_path: Path):
    src = drafter_with_embed(tmp_path / "drafter")
    target = write_target_dir(tmp_path / "target", one_row_changed(stored_embedding(src), row=70))
    code, found = validate(src, "--target", target, "--engine", "vllm", "--engine", "sglang")
    warned = found["W-EMBED-NOT-TARGET"]
    assert warned["severity"] == "warning" and warned["where"] == "embed_tokens.weight"
    assert "1 of 96 rows" in warned["message"]
    # vLLM keeps a table that is not torch.equal to the target's; SGLang always takes the target's
    assert "vLLM (V1 runner) 0.24.0-0.33.0, vLLM (V2 runner) 0.24.0-0.33.0 draft with the stored table, " \
           "SGLang 0.5.11-0.5.23 with the target's" in warned["message"]
    assert "vllm #50158" in warned["message"]  # some rows only: tensor-parallel ranks disagree
    assert "--drop-embed frozen --to sglang" in warned["hint"]
    assert "I-EMBED-TARGET-COPY" not in found
    # a config-only target says nothing of the table: nothing was compared
    (tmp_path / "config-only").mkdir()
    (tmp_path / "config-only" / "config.json").write_text((target / "config.json").read_text())
    assert "W-EMBED-NOT-TARGET" not in validate(src, "--target", tmp_path / "config-only")[1]


def test_every_row_different_names_no_rank_split(tmp_path: Path):
    src = drafter_with_embed(tmp_path / "drafter")
    target = write_target_dir(tmp_path / "target", bytes(b ^ 0x01 for b in stored_embedding(src)))
    warned = validate(src, "--target", target)[1]["W-EMBED-NOT-TARGET"]
    assert "96 of 96 rows" in warned["message"] and "#50158" not in warned["message"]


def test_the_frozen_way_out_leaves_the_table_out_and_the_warning_goes(tmp_path: Path):
    src = drafter_with_embed(tmp_path / "drafter")
    target = write_target_dir(tmp_path / "target", one_row_changed(stored_embedding(src), row=3))
    out = run_cli("--target", target, "--drop-embed", "frozen", "--to", "sglang", src, tmp_path / "out",
                  "--no-record")
    assert out.exit_code == 0, out.stderr
    assert "embed_tokens.weight" not in read_tensor_table(tmp_path / "out")[0]
    assert "embed_tokens.weight left out: a new drafter" in out.stdout + out.stderr
    sidecar = json.loads((tmp_path / "out" / "eagle3-convert.json").read_text())
    assert sidecar["derived_from"] and sidecar["derived_from"] != sidecar["drafter_id"]
    code, found = validate(tmp_path / "out", "--target", target)
    assert code == 0 and "W-EMBED-NOT-TARGET" not in found


def test_an_identical_copy_is_said_and_dropped_only_when_identical(tmp_path: Path):
    src = drafter_with_embed(tmp_path / "drafter")
    same = write_target_dir(tmp_path / "same", stored_embedding(src))
    code, found = validate(src, "--target", same)
    assert code == 0 and "W-EMBED-NOT-TARGET" not in found
    said = found["I-EMBED-TARGET-COPY"]
    assert "value for value" in said["message"] and "--drop-embed identical --to sglang" in said["hint"]
    out = run_cli("--target", same, "--drop-embed", "identical", "--to", "vllm", src, tmp_path / "out", "--no-record")
    assert out.exit_code == 0, out.stderr
    assert "embed_tokens.weight" not in read_tensor_table(tmp_path / "out")[0]
    assert "I-EMBED-TARGET-COPY" not in validate(tmp_path / "out", "--target", same)[1]
    # a table that differs is refused, nothing written
    other = write_target_dir(tmp_path / "other", one_row_changed(stored_embedding(src), row=0))
    refused = run_cli("--target", other, "--drop-embed", "identical", "--to", "vllm", src, tmp_path / "no",
                      "--no-record")
    assert refused.exit_code != 0 and "[E-EMBED-NOT-TARGET]" in refused.stderr and "1 of 96 rows" in refused.stderr
    assert "Traceback" not in refused.stderr and not (tmp_path / "no").exists()
    # without local weights there is nothing to compare with
    alone = run_cli("--drop-embed", "identical", "--to", "vllm", src, tmp_path / "no", "--no-record")
    assert alone.exit_code != 0 and "[E-EMBED-NO-TARGET]" in alone.stderr and not (tmp_path / "no").exists()


def test_a_layout_whose_engine_cannot_do_without_it_refuses_the_drop(tmp_path: Path):
    # speculators 0.9.0 leaves a missing embedding uninitialised (docs/formats.md §6.4)
    src = drafter_with_embed(tmp_path / "drafter", "speculators")
    same = write_target_dir(tmp_path / "same", stored_embedding(src))
    refused = run_cli("--target", same, "--drop-embed", "identical", "--to", "speculators", src, tmp_path / "no",
                      "--no-record")
    assert refused.exit_code != 0 and "[E-EMBED-DROP-REFUSED]" in refused.stderr
    assert "uninitialised" in refused.stderr and not (tmp_path / "no").exists()
    # validate offers a layout that can
    assert "--drop-embed identical --to vllm" in validate(src, "--target", same)[1]["I-EMBED-TARGET-COPY"]["hint"]
    # speculators says whether the embedding was trained: false (its default) is the verifier's table, frozen
    other = write_target_dir(tmp_path / "other", one_row_changed(stored_embedding(src), row=1))
    config = json.loads((src / "config.json").read_text())
    for value, said in ((False, True), (True, False)):
        (src / "config.json").write_text(json.dumps({**config, "embed_requires_grad": value}))
        message = validate(src, "--target", other)[1]["W-EMBED-NOT-TARGET"]["message"]
        assert ("embed_requires_grad: false, so it was trained on the target's table" in message) == said


def test_a_drafter_of_another_width_keeps_its_table_in_every_engine_and_no_alarm_is_raised(tmp_path: Path):
    # SGLang's set_embed returns early when target_hidden_size != hidden_size, vLLM's torch.equal fails on the
    # shapes (0.33.0 checks the widths), TensorRT-LLM builds embed_tokens only then: all draft with the stored table
    src = build_drafter(tmp_path / "drafter", "sglang", DrafterSpec(embed_tokens=True, target_hidden_size=48))
    wide = tmp_path / "target"
    wide.mkdir()
    (wide / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                                                  "num_hidden_layers": 8, "hidden_size": 48, "vocab_size": V}))
    write_safetensors(wide / "model.safetensors", {"model.embed_tokens.weight": RawTensor("BF16", (V, 48),
                                                                                         bytes(V * 48 * 2))})
    found = validate(src, "--target", wide)[1]
    assert "W-EMBED-NOT-TARGET" not in found and "I-EMBED-TARGET-COPY" not in found
    refused = run_cli("--target", wide, "--drop-embed", "frozen", "--to", "vllm", src, tmp_path / "no", "--no-record")
    assert refused.exit_code != 0 and "[E-EMBED-DROP-REFUSED]" in refused.stderr and "its own" in refused.stderr
    assert not (tmp_path / "no").exists()


def test_deep_compares_with_the_recorded_local_target(tmp_path: Path):
    src = drafter_with_embed(tmp_path / "drafter")
    target = write_target_dir(tmp_path / "the target", one_row_changed(stored_embedding(src), row=5))
    converted = run_cli("--target", target, "--to", "sglang", src, tmp_path / "recorded", "--no-record")
    assert converted.exit_code == 0, converted.stderr
    assert "W-EMBED-NOT-TARGET" not in validate(tmp_path / "recorded")[1]  # headers only: nothing compared
    warned = validate(tmp_path / "recorded", "--deep")[1]["W-EMBED-NOT-TARGET"]
    assert "1 of 96 rows" in warned["message"] and f"--target {shlex.quote(str(target.resolve()))}" in warned["hint"]
    # the hint's command, pasted as printed (the path with a space quoted), writes a drafter the warning left
    [command] = re.findall(r"`(eagle3-convert [^`]*)`", warned["hint"])
    words = shlex.split(command)[1:]
    ran = run_cli(*words[:-1], tmp_path / "fixed", "--no-record")
    assert ran.exit_code == 0, ran.stderr
    assert "W-EMBED-NOT-TARGET" not in validate(tmp_path / "fixed", "--target", target)[1]


# ------------------------------------------------------------------ RoPE

def test_two_spellings_of_the_base_are_warned_with_what_the_engines_read(tmp_path: Path):
    src = build_drafter(tmp_path / "drafter", "sglang", DrafterSpec(extra={
        "rope_theta": 500000.0, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}))
    code, found = validate(src)
    warned = found["W-ROPE-SPELLINGS"]
    assert "rope_theta 500000, rope_parameters.rope_theta 10000" in warned["message"]
    assert "draft at 10000" in warned["message"]
    assert "transformers-4 reader takes rope_theta 500000" in warned["message"]
    assert "--rope-theta 10000 --to sglang" in warned["hint"]
    fixed = run_cli("--rope-theta", "10000", "--to", "sglang", src, tmp_path / "out", "--no-record")
    assert fixed.exit_code == 0, fixed.stderr
    assert "rope restated (--rope-theta 10000): the base the engines read 10000 (default) -> 10000 (default), in " \
           "every spelling; rope_theta was 500000" in fixed.stdout + fixed.stderr  # said, never silent
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["rope_theta"] == 10000.0 and config["rope_parameters"]["rope_theta"] == 10000.0
    assert "W-ROPE-SPELLINGS" not in validate(tmp_path / "out")[1]


def test_a_rope_scaling_object_replaces_rope_parameters_as_transformers_5_reads_it(tmp_path: Path):
    # transformers 5 (convert_rope_params_to_dict): rope_scaling wins whole; the top-level theta fills its base
    src = build_drafter(tmp_path / "drafter", "sglang", DrafterSpec(extra={
        "rope_theta": 500000.0, "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0},
        "rope_scaling": {"rope_type": "linear", "factor": 2.0}}))
    assert "draft at 500000" in validate(src)[1]["W-ROPE-SPELLINGS"]["message"]


def test_a_rope_not_the_target_s_is_warned_and_target_restates_it(tmp_path: Path):
    src = build_drafter(tmp_path / "drafter", "sglang", DrafterSpec(extra={"rope_theta": 10000.0}))
    llama3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 8192}
    target = write_target_dir(tmp_path / "target", bytes(V * H * 2), rope_theta=500000.0, rope_scaling=llama3)
    warned = validate(src, "--target", target)[1]["W-ROPE-TARGET"]
    assert "base 10000, default" in warned["message"] and "base 500000, llama3" in warned["message"]
    assert "#574" in warned["message"] and "--rope-theta target --to sglang" in warned["hint"]
    out = run_cli("--target", target, "--rope-theta", "target", "--to", "sglang", src, tmp_path / "out",
                  "--no-record")
    assert out.exit_code == 0, out.stderr
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert config["rope_theta"] == 500000.0 and config["rope_scaling"]["rope_type"] == "llama3"
    assert "W-ROPE-TARGET" not in validate(tmp_path / "out", "--target", target)[1]
    # the same rope as the target's: nothing said
    same = write_target_dir(tmp_path / "plain", bytes(V * H * 2), rope_theta=10000.0)
    assert "W-ROPE-TARGET" not in validate(src, "--target", same)[1]


def test_rope_theta_bad_values_are_one_line_errors(tmp_path: Path):
    src = build_drafter(tmp_path / "drafter", "sglang")
    for value, code in (("fast", "E-USAGE"), ("0.5", "E-USAGE"), ("target", "E-ROPE-NO-TARGET")):
        out = run_cli("--rope-theta", value, "--to", "sglang", src, tmp_path / "no", "--no-record")
        assert out.exit_code != 0 and f"[{code}]" in out.stderr and "Traceback" not in out.stderr
        assert not (tmp_path / "no").exists()
