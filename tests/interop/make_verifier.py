"""Write a tiny random LlamaForCausalLM (config.json + model.safetensors) with transformers.

speculators' from_pretrained needs a verifier's config AND weights (embed_tokens, lm_head,
model.norm); its dimensions match the drafters under test: hidden 64, 8 layers, vocab 512.

    python make_verifier.py OUT_DIR
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import _peer  # noqa: F401  (offline environment)
import torch
from transformers import LlamaConfig, LlamaForCausalLM


REPO = "org/tiny-llama-verifier"


def main(out: str) -> None:
    torch.manual_seed(7)
    config = LlamaConfig(hidden_size=64, num_hidden_layers=8, vocab_size=512, num_attention_heads=4,
                         num_key_value_heads=2, head_dim=16, intermediate_size=128, tie_word_embeddings=False)
    with contextlib.redirect_stdout(sys.stderr):
        LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(out)
    # the Hub repo it stands for, as a checkpoint saved from a downloaded model names it: vLLM refuses a
    # speculators verifier that is a local path, so `--verifier OUT_DIR` writes this repo id
    config_file = Path(out) / "config.json"
    config_file.write_text(json.dumps({**json.loads(config_file.read_text()), "_name_or_path": REPO}, indent=2))
    json.dump({"verifier": out}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
