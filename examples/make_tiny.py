"""Rebuild examples/tiny-llama-speculators: a tiny random EAGLE-3 drafter in the speculators layout.

It is written by eagle3-convert's own writer, so the example the README converts is the
layout our tool emits. Dimensions match the peers' samples: hidden 64, 4 heads, 2 KV heads,
intermediate 128, target vocab 512, draft vocab 128, capture boundaries [2, 4, 5] of an
8-layer Llama target. Deterministic: the same bytes every run.

    python examples/make_tiny.py [OUT_DIR]
"""

from __future__ import annotations

import random
import struct
import sys
from pathlib import Path

from eagle3_convert.converters.base import ConvertOptions, write_directory
from eagle3_convert.converters.speculators import LAYOUT
from eagle3_convert.converters.vocab import VocabMap
from eagle3_convert.drafter import Drafter, DrafterConfig, TargetIdentity, expected_shapes
from eagle3_convert.safetensors_io import InMemoryTensor


def bf16_random(shape: tuple[int, ...], rng: random.Random, scale: float = 0.02, mean: float = 0.0) -> InMemoryTensor:
    n = 1
    for d in shape:
        n *= d
    floats = struct.pack(f"<{n}f", *(rng.gauss(mean, scale) for _ in range(n)))
    # bf16 is the high half of each float32.
    data = b"".join(floats[i + 2:i + 4] for i in range(0, len(floats), 4))
    return InMemoryTensor("BF16", shape, data)


def tiny_drafter() -> Drafter:
    rng = random.Random(2026)
    config = DrafterConfig(
        hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        max_position_embeddings=2048, rope={"rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"}},
        vocab_size=512, draft_vocab_size=128, capture_boundaries=[2, 4, 5],
        target=TargetIdentity(name_or_path="example-org/tiny-llama-target", architectures=["LlamaForCausalLM"],
                              model_type="llama", num_hidden_layers=8, hidden_size=64, vocab_size=512),
        top_extra={"dtype": "bfloat16"},
    )
    tensors = {}
    for name, shape in expected_shapes(config).items():
        is_norm = name.endswith("norm.weight")
        tensors[name] = bf16_random(shape, rng, 0.05 if is_norm else 0.02, 1.0 if is_norm else 0.0)
    vocab = VocabMap(tuple(sorted(rng.sample(range(512), 128))), 512)
    return Drafter(config, tensors, vocab)


def main(out: Path) -> None:
    plan = LAYOUT.plan(tiny_drafter(), ConvertOptions())
    write_directory(out, plan.config, plan.tensors, {}, src=None, force=True)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "tiny-llama-speculators")
