"""A tiny target model as a llama.cpp GGUF, written with the `gguf` package's own writer (not ours).

An SPM ("llama") tokenizer of `vocab` tokens: <unk>, <s>, </s>, the 256 byte tokens llama.cpp's
vocabulary loader looks up, and filler pieces; random F32 weights of a Llama (or another
architecture's name, for the capture rules) with `layers` blocks of width `hidden`. `merges` > 0 makes it
a byte-level BPE ("gpt2", as Llama 3's) with that many merges; `tensors=False` writes the keys alone (the
benchmark's 128k-token target of width 4096, whose weights `--to gguf` never reads).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np


def write_target_gguf(path: Path, *, layers: int = 8, hidden: int = 64, vocab: int = 512, arch: str = "llama",
                      heads: int = 4, kv_heads: int = 2, ff: int = 128, seed: int = 0, merges: int = 0,
                      tensors: bool = True) -> Path:
    import gguf

    rng = np.random.default_rng(seed)
    byte_tokens = 256 if vocab >= 260 else 0  # llama.cpp's loader needs them; small vocabs are for our tests only
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(byte_tokens)]
    tokens += [f"\u2581t{i}" for i in range(vocab - len(tokens))]
    types = [2, 3, 3] + [6] * byte_tokens + [1] * (vocab - 3 - byte_tokens)
    w = gguf.GGUFWriter(path, arch)
    w.add_name("tiny-target")
    w.add_context_length(2048)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_rope_dimension_count(hidden // heads)
    w.add_vocab_size(vocab)
    w.add_file_type(0)
    w.add_tokenizer_model("gpt2" if merges else "llama")
    w.add_tokenizer_pre("llama-bpe" if merges else "default")
    w.add_token_list(tokens)
    if merges:
        w.add_token_merges([f"\u0120t{i} t{i + 1}" for i in range(merges)])
    else:
        w.add_token_scores([0.0] * (3 + byte_tokens) + [-float(i) for i in range(vocab - 3 - byte_tokens)])
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)

    def t(*shape: int) -> np.ndarray:
        return rng.normal(0.0, 0.02, size=shape).astype(np.float32)

    hd = hidden // heads
    if tensors:
        w.add_tensor("token_embd.weight", t(vocab, hidden))
        w.add_tensor("output_norm.weight", np.ones(hidden, dtype=np.float32))
        w.add_tensor("output.weight", t(vocab, hidden))
    for i in range(layers if tensors else 0):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(hidden, dtype=np.float32))
        w.add_tensor(f"blk.{i}.attn_q.weight", t(heads * hd, hidden))
        w.add_tensor(f"blk.{i}.attn_k.weight", t(kv_heads * hd, hidden))
        w.add_tensor(f"blk.{i}.attn_v.weight", t(kv_heads * hd, hidden))
        w.add_tensor(f"blk.{i}.attn_output.weight", t(hidden, heads * hd))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(hidden, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_gate.weight", t(ff, hidden))
        w.add_tensor(f"blk.{i}.ffn_up.weight", t(ff, hidden))
        w.add_tensor(f"blk.{i}.ffn_down.weight", t(hidden, ff))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def rewrite_gguf(path: Path, out: Path, *, drop_key: str = "", drop_tensor: str = "", replace: dict | None = None,
                 arch: str | None = None, rename: Callable[[str], str] = lambda key: key) -> Path:
    """A copy of a GGUF written with the gguf package, without `drop_key` and `drop_tensor`, with `replace`
    {key: (value, type, sub_type)} set instead of the stored, under architecture `arch` (default: the stored one),
    each key written under `rename(key)`."""
    import gguf

    reader = gguf.GGUFReader(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(out, arch or reader.fields["general.architecture"].contents())
    for k, field in reader.fields.items():
        if k.startswith("GGUF.") or k in ("general.architecture", drop_key):
            continue
        main = field.types[0]
        if k in (replace or {}):
            value, main, sub = replace[k]
            w.add_key_value(rename(k), value, main, sub_type=sub)
        elif main == gguf.GGUFValueType.ARRAY:
            sub = field.types[-1]
            value = [bytes(field.parts[i]) for i in field.data] if sub == gguf.GGUFValueType.STRING else \
                [v for i in field.data for v in field.parts[i].tolist()]
            w.add_key_value(rename(k), value, main, sub_type=sub)
        else:
            w.add_key_value(rename(k), field.contents(), main)
    for t in reader.tensors:
        if t.name != drop_tensor:
            w.add_tensor(t.name, np.array(t.data), raw_dtype=t.tensor_type)  # uint8 data: byte shape
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out
