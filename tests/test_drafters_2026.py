"""Silent failures of the drafters published in 2026 (issue 22), each shown through the real CLI on files written
by tests/builders.py (independently of our writers), then edited as the producer writes them.

- `tie_word_embeddings: true` beside a stored, trained lm_head: SGLang ties lm_head to embed_tokens and never
  loads the head (engines/sglang.py); written false, and SGLang's verdict on a file with the flag on says so.
- `--to eagle`: SafeAILab/EAGLE's cnets.py derives head_dim = H // heads and builds only linear/dynamic RoPE from
  a two-field rope_scaling (converters/eagle.py): anything else is refused with the field that blocks it.
- Near-miss keys: a key one edit from a modelled key that is ALSO present is no typo (renaming it would write a
  duplicate key); DeepSeek-V4's `o_lora_rank` beside `q_lora_rank` is a key real producers write.
- Drafter kinds: P-EAGLE (`speculators_model_type: peagle`, `mask_token_id`, a learned `mask_hidden`) was refused with
  "E-SCHEMA: 'eagle3' was expected"; now read, validated, recorded with its kind and written to speculators, and
  refused by every EAGLE-3 layout with the field that names it. DFlash and DSpark (SpecForge's real configs) are
  recognised by name and refused in one line, by validate as by convert.
- Multi-layer names: a layer >= 1 whose `input_layernorm` and `hidden_norm` differ, one at RMSNorm's initial ones
  (a SpecForge fork applies the first and leaves the second all ones), is converted keeping the trained one and
  saying so (issue 34: it was refused by every conversion, E-KEY-DUPLICATE, though the tool named the untrained
  copy); validate warns, and errs only for an engine that applies the untrained copy. Identical twins are merged,
  and the output says so; twins that differ otherwise are refused (tests/test_caught_bugs.py, with two prefixes of
  one name).
"""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import pytest

from builders import (DrafterSpec, RawTensor, build_drafter, canonical_tensors, config_for, draft_vocab,
                      stored_tensors, write_safetensors)
from conftest import nothing_written, run_cli, serve_line, tensor_hashes

ERROR_LINE = re.compile(r"^error: .+ \[(E-[A-Z0-9-]+)\] — hint: .+$")


def edit_config(path: Path, **changes) -> dict:
    config = json.loads((path / "config.json").read_text())
    config.update(changes)
    (path / "config.json").write_text(json.dumps(config, indent=2))
    return config


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


# ------------------------------------------------------------------ --to eagle: what EAGLE's code can build

def refusal_code(stderr: str) -> str:
    assert "Traceback" not in stderr
    match = ERROR_LINE.match(stderr.strip().splitlines()[-1])
    assert match, stderr
    return match.group(1)


# Before: each converted to the eagle layout without a word; EAGLE's code would fail to load it.
EAGLE_CANNOT_BUILD = {
    "head-dim": ({"head_dim": 16}, "E-HEAD-DIM-UNSUPPORTED", "head_dim is 16"),
    "yarn": ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 512}},
             "E-ROPE-UNSUPPORTED", "'yarn'"),
    "llama3": ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                 "high_freq_factor": 4.0, "original_max_position_embeddings": 512}},
               "E-ROPE-UNSUPPORTED", "'llama3'"),
    "llama3-transformers5": ({"rope_parameters": {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                                                  "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                  "original_max_position_embeddings": 512}},
                             "E-ROPE-UNSUPPORTED", "'llama3'"),
    "mrope": ({"rope_scaling": {"rope_type": "default", "mrope_section": [1, 1, 2]}}, "E-ROPE-UNSUPPORTED",
              "mrope_section"),
}


@pytest.mark.parametrize("case", sorted(EAGLE_CANNOT_BUILD))
def test_to_eagle_refuses_what_eagles_code_cannot_build(tmp_path: Path, case: str):
    changes, code, blocking = EAGLE_CANNOT_BUILD[case]
    spec = DrafterSpec(capture_boundaries=None, head_dim=changes.get("head_dim", 8))  # EAGLE's default layers
    src = build_drafter(tmp_path / "src", "sglang", spec)
    edit_config(src, **{k: v for k, v in changes.items() if k != "head_dim"})
    before = tensor_hashes(src), (src / "config.json").read_text()

    result = run_cli("--no-record", "--to", "eagle", src, tmp_path / "out")
    assert result.exit_code == 1, result.stdout
    assert refusal_code(result.stderr) == code
    assert blocking in result.stderr and "--to sglang" in result.stderr
    assert nothing_written(tmp_path, "out")
    assert (tensor_hashes(src), (src / "config.json").read_text()) == before
    # the same drafter still goes where it can be served
    assert run_cli("--no-record", "--to", "vllm", src, tmp_path / "vllm").exit_code == 0


@pytest.mark.parametrize("spelling", ["rope_scaling", "rope_parameters"])
def test_to_eagle_writes_linear_rope_in_the_spelling_eagle_reads(tmp_path: Path, spelling: str):
    """A linear RoPE EAGLE can build is written as EConfig accepts it (two fields: type, factor), from either
    spelling of the source; plain RoPE stays without rope_scaling."""
    src = build_drafter(tmp_path / "src", "sglang", DrafterSpec(capture_boundaries=None))
    edit_config(src, **{spelling: {"rope_type": "linear", "factor": 2.0}})
    result = run_cli("--no-record", "--to", "eagle", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    written = json.loads((tmp_path / "out" / "config.json").read_text())
    assert written["rope_scaling"] == {"type": "linear", "factor": 2.0}

    plain = build_drafter(tmp_path / "plain", "sglang", DrafterSpec(capture_boundaries=None))
    assert run_cli("--no-record", "--to", "eagle", plain, tmp_path / "plain-out").exit_code == 0
    assert json.loads((tmp_path / "plain-out" / "config.json").read_text()).get("rope_scaling") is None


# ------------------------------------------------------------------ near-miss keys beside the key they resemble

def key_findings(path: Path) -> tuple[int, list[dict]]:
    result = run_cli("validate", "--json", path)
    return result.exit_code, [f for f in json.loads(result.stdout)["findings"] if "KEY" in f["code"]]


def test_a_near_miss_of_a_key_that_is_present_is_no_typo(tmp_path: Path):
    """Before: E-CONFIG-KEY-TYPO "did you mean 'hidden_size'", whose fix would write hidden_size twice.
    After: an unknown key (a warning, carried verbatim), and the drafter converts."""
    src = build_drafter(tmp_path / "src", "sglang", DrafterSpec())
    config = edit_config(src, hidden_sizes=[32, 64])  # a documented transformers key (ResNet-style configs)
    assert config["hidden_size"] == 32

    code, findings = key_findings(src)
    assert code == 0, findings
    assert [f["code"] for f in findings] == ["W-CONFIG-KEY-UNKNOWN"] and "hidden_sizes" in findings[0]["message"]
    result = run_cli("--no-record", "--to", "vllm", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr


def test_a_near_miss_of_an_absent_key_is_still_a_typo(tmp_path: Path):
    """The control: with the modelled key absent, the near miss is the typo it looks like."""
    src = build_drafter(tmp_path / "src", "sglang", DrafterSpec())
    config = json.loads((src / "config.json").read_text())
    config["hiden_size"] = config.pop("hidden_size")
    (src / "config.json").write_text(json.dumps(config))
    result = run_cli("--no-record", "--to", "vllm", src, tmp_path / "out")
    assert result.exit_code == 1
    assert refusal_code(result.stderr) == "E-CONFIG-KEY-TYPO" and "did you mean 'hidden_size'" in result.stderr


@pytest.mark.parametrize("layout", ["sglang", "vllm"])
def test_deepseek_v4_o_lora_rank_beside_q_lora_rank_is_known(tmp_path: Path, layout: str):
    """Before: "did you mean 'q_lora_rank'" refused every such MLA drafter. After: a key its producers write."""
    src = build_drafter(tmp_path / "src", layout, DrafterSpec(family="deepseek_mla", target_model_type="deepseek_v3"))
    edit_config(src, o_lora_rank=1024)
    code, findings = key_findings(src)
    assert code == 0 and not findings, findings
    result = run_cli("--no-record", "--to", "sglang" if layout == "vllm" else "vllm", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    assert json.loads((tmp_path / "out" / "config.json").read_text())["o_lora_rank"] == 1024  # carried verbatim


# ------------------------------------------------------------------ twin norms: the trained one is kept

BF16_ONE = b"\x80\x3f"


def fork_drafter(dest: Path, layout: str, layers: int, unused_norm: str, identical: bool = False) -> Path:
    """A multi-layer drafter as the SpecForge fork writes it: in every layer >= 1 one pre-attention norm trained
    (random bytes) and its twin never applied (all ones), unless `identical`."""
    spec = DrafterSpec(num_layers=layers)
    tensors = stored_tensors(layout, spec)
    for i in range(1, layers):
        name = f"layers.{i}.{unused_norm}.weight"
        old = tensors[name]
        assert old.dtype == "BF16"
        if not identical:
            tensors[name] = RawTensor(old.dtype, old.shape, BF16_ONE * old.shape[0])
    dest.mkdir(parents=True)
    (dest / "config.json").write_text(json.dumps(config_for(layout, spec), indent=2))
    write_safetensors(dest / "model.safetensors", tensors)
    return dest


# (source layout, the all-ones twin, destination): the SGLang reader (reads hidden_norm) and the vLLM reader (reads
# input_layernorm), each with either twin untrained, into the layouts that used to get one or the other
DIVERGED = [("sglang", "hidden_norm", "vllm"), ("sglang", "hidden_norm", "speculators"),
            ("sglang", "hidden_norm", "modelopt"), ("sglang", "hidden_norm", "sglang"),
            ("sglang", "input_layernorm", "vllm"), ("vllm", "input_layernorm", "sglang"),
            ("vllm", "hidden_norm", "speculators")]
# the engines that apply each name in layers >= 1 (vLLM: LlamaDecoderLayer.forward, llama_eagle3.py)
APPLIES = {"hidden_norm": "sglang", "input_layernorm": "vllm"}


@pytest.mark.parametrize("layout, unused, to", DIVERGED, ids=[f"{a}-{b}-to-{c}" for a, b, c in DIVERGED])
@pytest.mark.parametrize("layers", [2, 3])
def test_the_trained_later_norm_is_kept_and_the_untrained_one_dropped(tmp_path: Path, layout: str, unused: str,
                                                                        to: str, layers: int):
    """Before (issue 34): every conversion refused the file (E-KEY-DUPLICATE) although the untrained copy was named,
    and validate said E-KEY-DUPLICATE whatever the engine. After: convert keeps the trained norm under every name
    its layout writes, says which it dropped, and the output validates clean; validate of the source warns, and
    errs only for the engine that applies the untrained copy."""
    src = fork_drafter(tmp_path / "src", layout, layers, unused)
    trained_name = "input_layernorm" if unused == "hidden_norm" else "hidden_norm"
    source = tensor_hashes(src)
    trained = {i: source[f"layers.{i}.{trained_name}.weight"] for i in range(1, layers)}
    wrong_engine = APPLIES[unused]
    other = next(e for e in APPLIES.values() if e != wrong_engine)
    validated = json.loads(run_cli("validate", "--json", "--engine", "sglang", "--engine", "vllm", src).stdout)
    got = {(f["code"], f["engine"]) for f in validated["findings"]}
    assert "E-KEY-DUPLICATE" not in {c for c, _ in got} and ("W-KEY-UNTRAINED-TWIN", None) in got, got
    assert ("E-ENGINE-WRONG", wrong_engine) in got and ("E-ENGINE-WRONG", other) not in got, got
    served = run_cli("validate", "--json", "--engine", other, src)
    assert "E-ENGINE-WRONG" not in served.stdout and "W-KEY-UNTRAINED-TWIN" in served.stdout, served.stdout

    result = run_cli("--no-record", "--verifier", "org/target", "--to", to, src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    assert (f"kept layers.1.{trained_name}.weight, the trained pre-attention norm of its layer, and dropped "
            f"layers.1.{unused}.weight") in result.stdout + result.stderr
    out = tensor_hashes(tmp_path / "out")
    for i in range(1, layers):
        norms = {n: h for n, h in out.items() if re.fullmatch(rf"(model\.)?layers\.{i}\.(input_layernorm|hidden_norm)"
                                                             r"\.weight", n)}
        assert norms and set(norms.values()) == {trained[i]}, (i, norms)
    again = json.loads(run_cli("validate", "--json", tmp_path / "out").stdout)
    assert not {"W-KEY-UNTRAINED-TWIN", "E-ENGINE-WRONG", "E-KEY-DUPLICATE"} & {f["code"] for f in again[
        "findings"]}, again


@pytest.mark.parametrize("layout, to", [("sglang", "vllm"), ("vllm", "sglang")])
def test_identical_later_norms_are_merged_and_said(tmp_path: Path, layout: str, to: str):
    src = fork_drafter(tmp_path / "src", layout, 2, "hidden_norm", identical=True)
    result = run_cli("--no-record", "--to", to, src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    assert "(identical weights)" in result.stdout + result.stderr
    written = tensor_hashes(tmp_path / "out")
    assert written["layers.1.hidden_norm.weight"] == written["layers.1.input_layernorm.weight"] == \
        tensor_hashes(src)["layers.1.input_layernorm.weight"]


# ------------------------------------------------------------------ drafter kinds: P-EAGLE, DFlash, DSpark

PEAGLE = DrafterSpec(num_layers=2, peagle_mask_token_id=7)


def test_peagle_speculators_drafter_is_validated_converted_and_recorded(tmp_path: Path):
    """Before: validate said E-SCHEMA ('eagle3' was expected) and convert refused. After: a clean report, the
    speculators layout written back with its kind, mask token and every tensor, and the registry records the kind."""
    src = build_drafter(tmp_path / "src", "speculators", PEAGLE)
    validated = run_cli("validate", "--json", src)
    assert validated.exit_code == 0, validated.stdout
    assert "kind         peagle, mask token 7" in run_cli("inspect", src).stdout
    registry = tmp_path / "registry.db"
    result = run_cli("--to", "speculators", src, tmp_path / "out", "--registry", registry)
    assert result.exit_code == 0, result.stderr
    written = json.loads((tmp_path / "out" / "config.json").read_text())
    assert (written["speculators_model_type"], written["speculators_config"]["algorithm"]) == ("peagle", "peagle")
    assert written["mask_token_id"] == 7 and written["architectures"] == ["PEagleSpeculator"]
    before, after = tensor_hashes(src), tensor_hashes(tmp_path / "out")
    assert after["mask_hidden"] == before["mask_hidden"] and set(after) == set(before)
    [record] = json.loads(run_cli("registry", "list", "--json", "--registry", registry).stdout)["records"]
    assert record["drafter_kind"] == "peagle"


@pytest.mark.parametrize("to", ["sglang", "vllm", "eagle", "modelopt"])
def test_peagle_is_refused_by_the_eagle3_layouts_naming_the_field(tmp_path: Path, to: str):
    src = build_drafter(tmp_path / "src", "speculators", PEAGLE)
    result = run_cli("--no-record", "--to", to, src, tmp_path / "out")
    assert result.exit_code == 1
    assert refusal_code(result.stderr) == "E-KIND-UNSUPPORTED"
    assert "speculators_model_type 'peagle'" in result.stderr and "--to speculators" in result.stderr
    assert nothing_written(tmp_path, "out")


def test_peagle_without_its_mask_token_is_refused_naming_it(tmp_path: Path):
    """vLLM's update_peagle reads config_dict['mask_token_id']: without it the file names no servable drafter."""
    src = build_drafter(tmp_path / "src", "speculators", PEAGLE)
    config = json.loads((src / "config.json").read_text())
    del config["mask_token_id"]
    (src / "config.json").write_text(json.dumps(config))
    result = run_cli("--no-record", "--to", "speculators", src, tmp_path / "out")
    assert result.exit_code == 1 and refusal_code(result.stderr) == "E-CONFIG-FIELD"
    assert "mask_token_id" in result.stderr
    codes = {f["code"] for f in json.loads(run_cli("validate", "--json", src).stdout)["findings"]}
    assert {"E-SCHEMA", "E-ENGINE-REFUSES"} <= codes


def test_flat_peagle_converts_to_speculators_with_its_mask_token(tmp_path: Path):
    """SpecForge's PEagleDraftModel, with the token where vLLM reads it (pard_token), becomes speculators' P-EAGLE."""
    src = build_drafter(tmp_path / "src", "vllm", PEAGLE)
    result = run_cli("--no-record", "--verifier", "org/target", "--to", "speculators", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    written = json.loads((tmp_path / "out" / "config.json").read_text())
    assert (written["speculators_model_type"], written["mask_token_id"]) == ("peagle", 7)
    assert tensor_hashes(tmp_path / "out")["mask_hidden"] == tensor_hashes(src)["mask_hidden"]


# ------------------------------------------------------------------ NeMo Automodel's LlamaEagle3DraftModel

NEMO_UNPREFIXED = ("lm_head.", "d2t", "t2d", "mask_hidden")  # beside its `model.` backbone (draft_llama.py)


def nemo_drafter(dest: Path, spec: DrafterSpec, target_layers: int = 8) -> Path:
    """As NeMo Automodel's EAGLE-3 recipe saves it: the TARGET's config (a Qwen3 target here, its depth and
    layer_types) plus the draft's keys, and the backbone's tensors under `model.`."""
    tensors = {(n if n.startswith(NEMO_UNPREFIXED) else f"model.{n}"): t
               for n, t in canonical_tensors(spec).items()}
    ids = draft_vocab(spec)
    if ids is not None:  # its d2t/t2d buffers (set_vocab_mapping): offsets and the presence mask
        tensors["d2t"] = RawTensor("I64", (len(ids),), b"".join(struct.pack("<q", t - i) for i, t in enumerate(ids)))
        tensors["t2d"] = RawTensor("BOOL", (spec.vocab_size,), bytes(int(t in ids) for t in range(spec.vocab_size)))
    peagle = spec.peagle_mask_token_id is not None
    config = {"architectures": ["LlamaEagle3DraftModel"], "model_type": "qwen3", "hidden_size": spec.hidden_size,
              "intermediate_size": spec.intermediate_size, "num_attention_heads": spec.num_attention_heads,
              "num_key_value_heads": spec.num_key_value_heads, "head_dim": spec.head_dim,
              "num_hidden_layers": spec.num_layers if peagle else target_layers, "vocab_size": spec.vocab_size,
              "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "max_position_embeddings": 4096,
              "layer_types": ["full_attention"] * target_layers, "max_window_layers": target_layers,
              "use_sliding_window": False, "tie_word_embeddings": False, "draft_vocab_size": spec.vd,
              "target_hidden_size": spec.ht, "attn_implementation": "eager", "parallel_drafting": peagle,
              "torch_dtype": "bfloat16"}
    if peagle:
        config["mask_token_id"] = spec.peagle_mask_token_id
    dest.mkdir(parents=True)
    (dest / "config.json").write_text(json.dumps(config, indent=2))
    write_safetensors(dest / "model.safetensors", tensors)
    return dest


def test_nemo_draft_reads_as_the_draft_not_as_its_target(tmp_path: Path):
    """Before: E-LAYOUT-UNKNOWN. After: one Llama-style layer (not the target's 8 Qwen3 layers), the `model.` prefix
    removed, the target's depth known (so the default capture is the trained one), every tensor kept."""
    src = nemo_drafter(tmp_path / "src", DrafterSpec(capture_boundaries=None))
    validated = json.loads(run_cli("validate", "--json", src).stdout)
    # as saved, no engine resolves LlamaEagle3DraftModel (vLLM: "not supported")
    assert [(f["code"], f["engine"]) for f in validated["findings"] if f["severity"] == "error"] == \
        [("E-CONFIG-ARCH", "vllm")]
    result = run_cli("--no-record", "--to", "vllm", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    written = json.loads((tmp_path / "out" / "config.json").read_text())
    assert (written["model_type"], written["num_hidden_layers"]) == ("llama", 1)
    assert "layer_types" not in written and written["architectures"] == ["LlamaForCausalLMEagle3"]
    assert "default layers (the trained ones)" in serve_line(result.stdout, "vLLM (V1 runner)")
    stored = tensor_hashes(src)
    assert tensor_hashes(tmp_path / "out") == {n.removeprefix("model."): h for n, h in stored.items()}
    assert run_cli("validate", tmp_path / "out").exit_code == 0


def test_nemo_peagle_converts_to_speculators(tmp_path: Path):
    src = nemo_drafter(tmp_path / "src", DrafterSpec(capture_boundaries=None, num_layers=2, peagle_mask_token_id=5))
    result = run_cli("--no-record", "--verifier", "org/target", "--to", "speculators", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    written = json.loads((tmp_path / "out" / "config.json").read_text())
    assert (written["speculators_model_type"], written["mask_token_id"]) == ("peagle", 5)
    assert written["transformer_layer_config"]["num_hidden_layers"] == 2
    assert tensor_hashes(tmp_path / "out")["mask_hidden"] == tensor_hashes(src)["mask_hidden"]


def test_nemo_is_read_only(tmp_path: Path):
    src = build_drafter(tmp_path / "src", "vllm", DrafterSpec())
    result = run_cli("--no-record", "--to", "nemo", src, tmp_path / "out")
    assert result.exit_code == 1 and refusal_code(result.stderr) == "E-LAYOUT-READ-ONLY"
    assert nothing_written(tmp_path, "out")


# ------------------------------------------------------------------ architecture aliases

def test_community_draft_declaring_plain_llama_reads_as_vllm_native(tmp_path: Path):
    """Before: E-LAYOUT-UNKNOWN. A draft that declares LlamaForCausalLM with draft_vocab_size and layers.* names is
    what vLLM builds Eagle3LlamaForCausalLM from: read so, clean, and converted."""
    src = build_drafter(tmp_path / "src", "vllm", DrafterSpec())
    edit_config(src, architectures=["LlamaForCausalLM"])
    assert run_cli("validate", src).exit_code == 0
    result = run_cli("--no-record", "--to", "sglang", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    assert "detected vllm" in result.stderr
    assert json.loads((tmp_path / "out" / "config.json").read_text())["architectures"] == ["LlamaForCausalLMEagle3"]


@pytest.mark.parametrize("arch, family, written", [("EAGLE3LlamaForCausalLM", "llama", "LlamaForCausalLMEagle3"),
                                                   ("Eagle3DeepSeekV3ForCausalLM", "deepseek_mla",
                                                    "Eagle3DeepseekV2ForCausalLM")])
def test_tensorrt_llm_class_names_are_read_and_written_as_each_layout_names_them(tmp_path: Path, arch: str,
                                                                                   family: str, written: str):
    """TensorRT-LLM registers these names (modeling_speculative.py); vLLM and SGLang resolve neither. Before:
    E-LAYOUT-UNKNOWN. After: the family they name, a vLLM refusal said by validate, and outputs that engines load."""
    spec = DrafterSpec(family=family, target_model_type="deepseek_v3" if family == "deepseek_mla" else "llama")
    src = build_drafter(tmp_path / "src", "vllm", spec)
    edit_config(src, architectures=[arch])
    findings = json.loads(run_cli("validate", "--json", src).stdout)["findings"]
    assert [(f["code"], f["engine"]) for f in findings if f["severity"] == "error"] == [("E-CONFIG-ARCH", "vllm")]
    result = run_cli("--no-record", "--to", "vllm", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    assert f"{arch} is TensorRT-LLM's registered name" in result.stdout + result.stderr
    assert json.loads((tmp_path / "out" / "config.json").read_text())["architectures"] == [written]
    assert run_cli("validate", tmp_path / "out").exit_code == 0


def test_a_class_name_in_another_case_is_read_as_that_class(tmp_path: Path):
    """AngelSlim's configs/qwen3/eagle3/qwen3-4b-eagle3.json says Eagle3LLamaforCausalLM. Before: E-LAYOUT-UNKNOWN.
    After: read as Eagle3LlamaForCausalLM, validate says vLLM refuses that spelling, the output spells it right."""
    src = build_drafter(tmp_path / "src", "vllm", DrafterSpec())
    edit_config(src, architectures=["Eagle3LLamaforCausalLM"])
    findings = json.loads(run_cli("validate", "--json", src).stdout)["findings"]
    assert [(f["code"], f["engine"]) for f in findings if f["severity"] == "error"] == [("E-CONFIG-ARCH", "vllm")]
    result = run_cli("--no-record", "--to", "vllm", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    assert "Eagle3LlamaForCausalLM in another case" in result.stdout + result.stderr
    assert json.loads((tmp_path / "out" / "config.json").read_text())["architectures"] == ["LlamaForCausalLMEagle3"]
