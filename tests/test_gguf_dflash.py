"""Issue 35: `--to gguf` of a DFlash drafter writes llama.cpp's `dflash` architecture, and reads it back as the same
drafter (converters/gguf_dflash.py). The facts checked are llama.cpp's loader's (src/models/dflash.cpp): the capture
ids at the top level as `dflash.target_layers` (the inputs of those target layers: our boundaries), Qwen3 layers,
`fc` / `enc.output_norm` / `output_norm`, no embedding (the target's), the target's tokenizer copied. The tier test
tests/test_llamacpp_dflash.py loads the file with llama.cpp itself."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli, tensor_hashes
from gguf_target import rewrite_gguf, write_target_gguf
from test_drafters_2026_block import H, TARGET_DEPTH, VOCAB, findings, refusal, specforge_drafter, speculators_drafter


def target(tmp_path: Path, layers: int = TARGET_DEPTH, hidden: int = H) -> Path:
    return write_target_gguf(tmp_path / "target.gguf", layers=layers, hidden=hidden, vocab=VOCAB)


def keys_and_tensors(path: Path) -> tuple[dict, dict]:
    import gguf

    reader = gguf.GGUFReader(path)
    keys = {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.") and
            not k.startswith("tokenizer.ggml.t") and k != "tokenizer.ggml.merges"}
    return keys, {t.name: t for t in reader.tensors}


def test_a_specforge_dflash_drafter_round_trips_through_gguf_byte_for_byte(tmp_path: Path):
    src = specforge_drafter(tmp_path / "src", "dflash")
    trained = json.loads((src / "config.json").read_text())["dflash_config"]["target_layer_ids"]
    out = run_cli("--no-record", "--to", "gguf", "--target-gguf", target(tmp_path), src, tmp_path / "gguf")
    assert out.exit_code == 0, out.stderr
    file = next((tmp_path / "gguf").glob("*.gguf"))
    assert file.name.startswith("dflash-")
    keys, tensors = keys_and_tensors(file)
    assert keys["general.architecture"] == "dflash"
    assert keys["dflash.target_layers"] == [i + 1 for i in trained]  # llama.cpp converter's +1: our boundaries
    assert "dflash.dflash.target_layers" not in keys and keys["dflash.block_count"] == 2
    assert keys["tokenizer.ggml.mask_token_id"] == VOCAB - 3 and keys["dflash.block_size"] == 16
    assert "token_embd.weight" not in tensors and "output.weight" not in tensors
    assert {"fc.weight", "enc.output_norm.weight", "output_norm.weight", "blk.1.attn_k_norm.weight"} <= set(tensors)
    assert "llama.cpp b11434" in out.stdout and "serves as trained" in out.stdout.split("llama.cpp b11434")[1]
    assert "--spec-type draft-dflash" in out.stdout
    assert f"as written for gguf: {[i + 1 for i in trained]}" in out.stdout, out.stdout
    back = run_cli("--no-record", "--from", "gguf", "--to", "dflash", tmp_path / "gguf", tmp_path / "back")
    assert back.exit_code == 0, back.stderr
    assert tensor_hashes(tmp_path / "back") == tensor_hashes(src)
    assert json.loads((tmp_path / "back" / "config.json").read_text())["dflash_config"]["target_layer_ids"] == trained
    said = [(f["code"], f["where"]) for f in findings(tmp_path / "gguf")]
    assert said == [("I-CAPTURE-GGUF", "dflash.target_layers")], said


def test_the_verifiers_embedding_is_left_out_and_its_head_kept(tmp_path: Path):
    """speculators saves the verifier's embedding and head; llama.cpp's DFlash takes the target's embedding (its
    converter maps none) and loads an `output` of its own."""
    src = speculators_drafter(tmp_path / "src", "dflash", [1, 9, 17, 25, 33])
    out = run_cli("--no-record", "--to", "gguf", "--target-gguf", target(tmp_path), src, tmp_path / "gguf")
    assert out.exit_code == 0, out.stderr
    assert "embed_tokens.weight is left out" in out.stdout
    _, tensors = keys_and_tensors(next((tmp_path / "gguf").glob("*.gguf")))
    assert "output.weight" in tensors and "token_embd.weight" not in tensors
    back = run_cli("--no-record", "--from", "gguf", "--to", "dflash", tmp_path / "gguf", tmp_path / "back")
    assert back.exit_code == 0, back.stderr
    kept = {k: v for k, v in tensor_hashes(src).items() if k != "embed_tokens.weight"}
    assert tensor_hashes(tmp_path / "back") == kept


def test_a_reduced_vocabulary_is_written_as_absolute_d2t_and_read_back(tmp_path: Path):
    """src/models/dflash.cpp scatters draft row i to target row d2t[i] (I64): absolute ids, as for eagle3; ours
    are offsets, turned back on reading."""
    import numpy as np

    src = speculators_drafter(tmp_path / "src", "dflash", [1, 9, 17, 25, 33], draft_vocab=VOCAB // 2)
    out = run_cli("--no-record", "--to", "gguf", "--target-gguf", target(tmp_path), src, tmp_path / "gguf")
    assert out.exit_code == 0, out.stderr
    _, tensors = keys_and_tensors(next((tmp_path / "gguf").glob("*.gguf")))
    assert tensors["d2t"].tensor_type.name == "I64"
    assert np.array(tensors["d2t"].data).tolist() == list(range(0, VOCAB, 2))  # every other target token
    assert list(tensors["output.weight"].shape) == [H, VOCAB // 2]
    back = run_cli("--no-record", "--from", "gguf", "--to", "speculators", tmp_path / "gguf", tmp_path / "back")
    assert back.exit_code == 0, back.stderr
    kept = {k: v for k, v in tensor_hashes(src).items() if k != "embed_tokens.weight"}
    assert tensor_hashes(tmp_path / "back") == kept


def test_what_llamacpps_dflash_graph_cannot_build_is_refused_and_nothing_written(tmp_path: Path):
    tgt = target(tmp_path)
    cases = [
        (specforge_drafter(tmp_path / "dspark", "dspark"), tgt, "E-KIND-UNSUPPORTED"),
        (specforge_drafter(tmp_path / "wide", "dflash"), write_target_gguf(tmp_path / "t128.gguf", layers=TARGET_DEPTH,
                                                                           hidden=2 * H, vocab=VOCAB),
         "E-HIDDEN-UNSUPPORTED"),
        (specforge_drafter(tmp_path / "shallow", "dflash"), write_target_gguf(tmp_path / "t12.gguf", layers=12,
                                                                              hidden=H, vocab=VOCAB), "E-GGUF-TARGET"),
    ]
    last = specforge_drafter(tmp_path / "last", "dflash")  # id 35: boundary 36 = L, the last layer's output
    config = json.loads((last / "config.json").read_text())
    config["dflash_config"]["target_layer_ids"] = [1, 9, 17, 25, 35]
    (last / "config.json").write_text(json.dumps(config))
    cases.append((last, tgt, "E-CAPTURE-UNREACHABLE"))
    causal = specforge_drafter(tmp_path / "causal", "dflash")  # trained causal in the block; llama.cpp is not
    config = json.loads((causal / "config.json").read_text())
    config["dflash_config"]["causal"] = True
    (causal / "config.json").write_text(json.dumps(config))
    cases.append((causal, tgt, "E-ENGINE-WRONG"))  # the tier's llama.cpp aborts: "layer input tensor is null"
    for src, tg, code in cases:
        result = run_cli("--no-record", "--to", "gguf", "--target-gguf", tg, src, tmp_path / f"out-{src.name}")
        assert result.exit_code == 1 and refusal(result.stderr) == code, (src.name, result.stderr)
        assert not (tmp_path / f"out-{src.name}").exists()
    assert "dspark" in run_cli("--no-record", "--to", "gguf", "--target-gguf", tgt, tmp_path / "dspark",
                               tmp_path / "x").stderr
    # the causal drafter's hint names the layout whose engines serve it as trained, and following it does
    wrong = run_cli("--no-record", "--to", "gguf", "--target-gguf", tgt, causal, tmp_path / "y")
    assert "(`--to dflash`: the flat layout vLLM and SGLang both read)" in wrong.stderr
    assert "--to vllm" not in wrong.stderr
    mended = run_cli("--no-record", "--to", "dflash", causal, tmp_path / "flat")
    assert mended.exit_code == 0, mended.stderr
    assert "[E-" not in mended.stdout + mended.stderr


def test_a_gguf_with_nested_target_layers_is_refused_as_llamacpp_refuses_it(tmp_path: Path):
    """llama.cpp #25116: the ids one level down ("dflash.dflash.target_layers") and the loader throws."""
    src = specforge_drafter(tmp_path / "src", "dflash")
    assert run_cli("--no-record", "--to", "gguf", "--target-gguf", target(tmp_path), src,
                   tmp_path / "gguf").exit_code == 0
    rewrite_gguf(next((tmp_path / "gguf").glob("*.gguf")), tmp_path / "nested" / "dflash-nested-BF16.gguf",
                 rename=lambda key: "dflash.dflash.target_layers" if key == "dflash.target_layers" else key)
    said = {f["code"]: f["message"] for f in findings(tmp_path / "nested")}
    assert "E-ENGINE-REFUSES" in said and "DFlash model requires 'target_layers'" in said["E-ENGINE-REFUSES"], said
    back = run_cli("--no-record", "--from", "gguf", "--to", "dflash", tmp_path / "nested", tmp_path / "back")
    assert back.exit_code == 1 and refusal(back.stderr) == "E-GGUF-KEY", back.stderr


def test_publish_layout_gguf_names_a_dflash_file_dflash_and_serves_it_with_draft_dflash(monkeypatch, tmp_path: Path):
    """Not the `eagle3-*.gguf` sidecar name (llama.cpp's -hf pickup would serve it with draft-eagle3)."""
    from huggingface_hub import ModelCard, snapshot_download

    from hub_server import isolated_hub

    src = specforge_drafter(tmp_path / "src", "dflash")
    repo, token = "test-user/tiny-dflash-gguf", "hf_publish_test_token"
    with isolated_hub(monkeypatch, tmp_path / "hf-home") as hub:
        result = run_cli("publish", src, repo, "--layout", "gguf", "--target-gguf", target(tmp_path),
                         "--endpoint", hub.url, "--token", token, "--no-registry")
        assert result.exit_code == 0, result.stderr
        snapshot = Path(snapshot_download(repo, endpoint=hub.url, token=token, cache_dir=tmp_path / "dl"))
        ggufs = [p.name for p in snapshot.iterdir() if p.name.endswith(".gguf")]
        assert ggufs == ["dflash-tiny-dflash-BF16.gguf"], ggufs
        card = ModelCard.load(snapshot / "README.md").text
        assert "-md dflash-tiny-dflash-BF16.gguf" in card and "--spec-type draft-dflash" in card, card
        assert "draft-eagle3" not in card and "eagle3-*.gguf" not in card
        back = run_cli("--no-record", "--to", "dflash", snapshot, tmp_path / "back")
        assert back.exit_code == 0, back.stderr
        assert tensor_hashes(tmp_path / "back") == tensor_hashes(src)
