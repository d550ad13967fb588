"""llama.cpp tier, issue 35: what the tier's llama.cpp (0c1e57098, vendored by llama-cpp-python 0.3.36) does with a
GGUF of its `dflash` architecture, the facts engines/block_diffusion.py states for llama.cpp.

The first test's files are made from an EAGLE-3 GGUF that `--to gguf` writes, its `eagle3.*` keys renamed `dflash.*`:
the real loader (`llama_model_dflash::load_arch_hparams`) then decides. A GGUF whose DFlash keys sit one level lower,
as the file of llama.cpp issue 25116 had them, is refused with the message that issue quotes. The others load and run
the DFlash GGUF that `--to gguf` writes (converters/gguf_dflash.py).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from builders import DrafterSpec, build_drafter
from gguf_target import rewrite_gguf, write_target_gguf
from test_drafters_2026_block import H, TARGET_DEPTH, VOCAB, specforge_drafter, speculators_drafter
from test_llamacpp import LlamaCpp, llamacpp, log_drain_preload, probe, to_gguf  # noqa: F401  (the tier's fixtures)

pytestmark = pytest.mark.llamacpp


def renamed(src: Path, dest: Path, target_layers_key: str) -> Path:
    """`src`'s keys and tensors, with general.architecture `dflash`, every `eagle3.` key as `dflash.` but its
    target_layers, written as `target_layers_key`."""
    def name(key: str) -> str:
        key = "dflash." + key[len("eagle3."):] if key.startswith("eagle3.") else key
        return target_layers_key if key == "dflash.target_layers" else key

    return rewrite_gguf(src, dest, arch="dflash", rename=name)


def test_the_tiers_llama_cpp_has_the_dflash_arch_and_wants_its_target_layers_at_the_top(llamacpp: LlamaCpp,
                                                                                        tmp_path: Path):
    target = write_target_gguf(tmp_path / "target.gguf", layers=8, hidden=32, vocab=512)
    eagle3 = to_gguf(build_drafter(tmp_path / "src", "speculators", DrafterSpec(vocab_size=512, draft_vocab_size=512)),
                     tmp_path / "draft", target)
    refusal = "DFlash model requires 'target_layers' in GGUF metadata"
    top = probe(llamacpp, top=renamed(eagle3, tmp_path / "top.gguf", "dflash.target_layers"))
    # the ids read as written; then the EAGLE-3 tensors are not a DFlash drafter's, and the tensor check refuses them
    assert not top["top"]["loaded"] and refusal not in top["log"], top["log"][-3000:]
    assert "DFlash extract_layers = [2, 4, 5]" in top["log"] and "check_tensor_dims" in top["log"], top["log"][-3000:]
    nested = probe(llamacpp, nested=renamed(eagle3, tmp_path / "nested.gguf", "dflash.dflash.target_layers"))
    assert not nested["nested"]["loaded"]
    assert refusal in nested["log"], nested["log"][-3000:]


def test_our_dflash_gguf_loads_with_the_trained_layers_and_drafts(llamacpp: LlamaCpp, tmp_path: Path,
                                                                   log_drain_preload: dict[str, str]):
    """`--to gguf` of a SpecForge DFlash drafter (target_layer_ids [1, 9, 17, 25, 33] on a 36-layer target): llama.cpp
    loads it as `dflash`, taps the inputs of layers [2, 10, 18, 26, 34] (the outputs of the trained layers), and
    its draft-dflash loop drafts with it beside a tiny target (random weights: nothing is accepted), reading the
    mask token and block size we wrote."""
    src = specforge_drafter(tmp_path / "src", "dflash")
    trained = json.loads((src / "config.json").read_text())["dflash_config"]["target_layer_ids"]
    target = write_target_gguf(tmp_path / "target.gguf", layers=TARGET_DEPTH, hidden=H, vocab=VOCAB)
    draft = to_gguf(src, tmp_path / "draft", target)
    got = probe(llamacpp, draft=draft)
    assert got["draft"]["loaded"], got["log"][-3000:]
    assert got["draft"]["architecture"] == "dflash" and got["draft"]["n_layer"] == 2
    assert got["draft"]["target_layer_ids"] == [i + 1 for i in trained]
    for _attempt in range(3):  # the statistics are printed last: run again if the log lost them (test_llamacpp.py)
        proc = subprocess.run([str(llamacpp.speculative_simple), "-m", str(target), "-md", str(draft), "--spec-type",
                               "draft-dflash", "-p", "hello world", "-n", "16", "--temp", "0", "--top-k", "1",
                               "--seed", "42", "-c", "256", "-lv", "4"],
                              capture_output=True, timeout=600, env=log_drain_preload)
        log = proc.stderr.decode(errors="replace")
        assert proc.returncode == 0, log[-3000:]
        if "n_drafted =" in log:
            break
    assert f"block_size=16, mask_token_id={VOCAB - 3}, n_extract=5" in log, log[-3000:]
    drafted = [int(line.split("=")[-1]) for line in log.splitlines() if "n_drafted =" in line]
    assert drafted and drafted[-1] > 0, log[-3000:]


def test_our_reduced_vocabulary_dflash_gguf_loads_its_d2t_and_drafts(llamacpp: LlamaCpp, tmp_path: Path,
                                                                     log_drain_preload: dict[str, str]):
    """A speculators DFlash drafting 256 of 512 tokens: llama.cpp loads our I64 d2t (absolute target ids) and the
    drafter's own head, and drafts."""
    src = speculators_drafter(tmp_path / "src", "dflash", [1, 9, 17, 25, 33], draft_vocab=VOCAB // 2)
    target = write_target_gguf(tmp_path / "target.gguf", layers=TARGET_DEPTH, hidden=H, vocab=VOCAB)
    draft = to_gguf(src, tmp_path / "draft", target)
    got = probe(llamacpp, draft=draft)
    assert got["draft"]["loaded"] and got["draft"]["target_layer_ids"] == [1, 9, 17, 25, 33], got["log"][-3000:]
    assert f"DFlash using d2t mapping (draft_vocab_size = {VOCAB // 2})" in got["log"]
    proc = subprocess.run([str(llamacpp.speculative_simple), "-m", str(target), "-md", str(draft), "--spec-type",
                           "draft-dflash", "-p", "hello world", "-n", "16", "--temp", "0", "--top-k", "1", "--seed",
                           "42", "-c", "256", "-lv", "4"], capture_output=True, timeout=600, env=log_drain_preload)
    log = proc.stderr.decode(errors="replace")
    assert proc.returncode == 0 and "block_size=8, mask_token_id=509, n_extract=5" in log, log[-3000:]
