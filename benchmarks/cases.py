"""The drafters a benchmark measures: sizes, random bf16 weights streamed to disk (no torch), the
layouts' copies made by our own convert, and the plan of commands timed on each."""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from eagle3_convert.safetensors_io import InMemoryTensor, build_header

REPO = Path(__file__).resolve().parent.parent
DEFAULT_WORK = REPO / "benchmarks" / "work"
MiB = 1 << 20
GEN_CHUNK = 16 * MiB  # bytes of random weights held in memory at once while generating
LLAMA3_MERGES = 280147  # BPE merges in Llama 3's tokenizer (128256 tokens): the bulk of a target GGUF's header


# ------------------------------------------------------------------ drafter sizes


@dataclass(frozen=True)
class Size:
    name: str
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int | None
    intermediate: int
    vocab: int
    draft_vocab: int
    target_layers: int
    verifier: str
    verifier_arch: str
    embed: bool = False
    aux: int = 3
    mla: dict[str, int] | None = None
    toy: bool = False  # too small for the speed targets: process start-up is all it measures

    @property
    def capture_ids(self) -> list[int]:  # speculators convention = boundaries, the engines' default
        L = self.target_layers
        return [2, L // 2, L - 3]


KIMI_MLA = {"q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
            "v_head_dim": 128}

SIZES: dict[str, Size] = {
    "tiny": Size("tiny", 64, 4, 2, 16, 128, 512, 128, 8, "example-org/tiny-llama-target", "LlamaForCausalLM",
                 toy=True),
    "8b": Size("8b", 4096, 32, 8, 128, 14336, 128256, 32000, 32, "meta-llama/Llama-3.1-8B-Instruct",
               "LlamaForCausalLM"),
    "8b-embed": Size("8b-embed", 4096, 32, 8, 128, 14336, 128256, 32000, 32, "meta-llama/Llama-3.1-8B-Instruct",
                     "LlamaForCausalLM", embed=True),
    # Kimi-K2.5 (DeepSeek-V3 class, 61 layers): MLA drafter when the tool knows the family.
    "kimi": Size("kimi", 7168, 64, 64, None, 18432, 163840, 32000, 61, "moonshotai/Kimi-K2.5",
                 "DeepseekV3ForCausalLM", mla=KIMI_MLA),
}


def as_llama(size: Size) -> Size:
    """The same widths with Llama attention (64 heads, 8 KV heads of 128), for a tool without MLA."""
    return Size(size.name, size.hidden, size.heads, 8, 128, size.intermediate, size.vocab, size.draft_vocab,
                size.target_layers, size.verifier, size.verifier_arch, size.embed, size.aux, None)


def tensor_shapes(s: Size) -> dict[str, tuple[int, ...]]:
    """Float tensors of a one-layer drafter, speculators names (docs/formats.md §1, §2.6)."""
    H, I, p = s.hidden, s.intermediate, "layers.0."
    shapes = {"fc.weight": (H, s.aux * H), "norm.weight": (H,), "lm_head.weight": (s.draft_vocab, H)}
    if s.embed:
        shapes["embed_tokens.weight"] = (s.vocab, H)
    if s.mla:
        m = s.mla
        shapes.update({
            p + "self_attn.q_a_proj.weight": (m["q_lora_rank"], 2 * H),
            p + "self_attn.q_a_layernorm.weight": (m["q_lora_rank"],),
            p + "self_attn.q_b_proj.weight": (s.heads * (m["qk_nope_head_dim"] + m["qk_rope_head_dim"]),
                                              m["q_lora_rank"]),
            p + "self_attn.kv_a_proj_with_mqa.weight": (m["kv_lora_rank"] + m["qk_rope_head_dim"], 2 * H),
            p + "self_attn.kv_a_layernorm.weight": (m["kv_lora_rank"],),
            p + "self_attn.kv_b_proj.weight": (s.heads * (m["qk_nope_head_dim"] + m["v_head_dim"]),
                                               m["kv_lora_rank"]),
            p + "self_attn.o_proj.weight": (H, s.heads * m["v_head_dim"]),
        })
    else:
        hd = s.head_dim
        shapes.update({
            p + "self_attn.q_proj.weight": (s.heads * hd, 2 * H),
            p + "self_attn.k_proj.weight": (s.kv_heads * hd, 2 * H),
            p + "self_attn.v_proj.weight": (s.kv_heads * hd, 2 * H),
            p + "self_attn.o_proj.weight": (H, s.heads * hd),
        })
    shapes.update({
        p + "mlp.gate_proj.weight": (I, H), p + "mlp.up_proj.weight": (I, H), p + "mlp.down_proj.weight": (H, I),
        p + "input_layernorm.weight": (H,), p + "hidden_norm.weight": (H,),
        p + "post_attention_layernorm.weight": (H,),
    })
    return shapes


def target_config(s: Size) -> dict:
    """The verifier's config.json, as much of it as capture ids need (depth, width, family)."""
    return {"architectures": [s.verifier_arch], "model_type": "deepseek_v3" if s.mla or s.name == "kimi" else "llama",
            "num_hidden_layers": s.target_layers, "hidden_size": s.hidden, "vocab_size": s.vocab,
            "max_position_embeddings": 131072}


def speculators_config(s: Size) -> dict:
    """config.json as speculators 0.9 writes it (docs/formats.md §2.1, §2.7)."""
    decoder = {
        "model_type": "deepseek_v3" if s.mla else "llama", "hidden_size": s.hidden,
        "intermediate_size": s.intermediate, "num_attention_heads": s.heads, "num_key_value_heads": s.kv_heads,
        "num_hidden_layers": 1, "rms_norm_eps": 1e-05 if not s.mla else 1e-06, "vocab_size": s.vocab,
        "hidden_act": "silu", "max_position_embeddings": 131072 if not s.mla else 262144,
        "attention_bias": False, "mlp_bias": False, "tie_word_embeddings": False,
        # Unscaled RoPE: the benchmark converts to every layout, and original EAGLE builds only linear and dynamic
        # scaling (cnets.py _init_rope; `--to eagle` refuses llama3's). Conversion time does not depend on it.
        "rope_parameters": {"rope_type": "default", "rope_theta": 500000.0 if not s.mla else 50000.0},
    }
    if s.head_dim:
        decoder["head_dim"] = s.head_dim
    if s.mla:
        decoder.update(s.mla)
    return {
        "architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3", "speculators_version": "0.9.0",
        "speculators_config": {
            "algorithm": "eagle3", "default_proposal_method": "greedy",
            "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3, "verifier_accept_k": 1,
                                  "accept_tolerance": 0.0}],
            "verifier": {"name_or_path": s.verifier, "architectures": [s.verifier_arch]}},
        "transformer_layer_config": decoder, "draft_vocab_size": s.draft_vocab, "target_hidden_size": None,
        "eagle_aux_hidden_state_layer_ids": s.capture_ids, "norm_before_residual": False, "norm_before_fc": False,
        "fc_norm": False, "norm_output": False, "embed_requires_grad": False, "tie_word_embeddings": False,
        "dtype": "bfloat16",
    }


def write_target_gguf(s: Size, dest: Path) -> str | None:
    """The target's own GGUF, which `--to gguf` copies the tokenizer from and reads depth and width in: its keys
    and a tokenizer of s.vocab tokens (with Llama 3's number of BPE merges), written by the tests' helper with the
    `gguf` package; no weights, which --to gguf never reads (a toy size gets its small ones). None when written,
    else why not."""
    try:
        import gguf  # noqa: F401  (the helper needs it)
    except ImportError:
        return "the gguf package is not installed (pip install 'eagle3-convert[gguf]')"
    sys.path.insert(0, str(REPO / "tests"))
    from gguf_target import write_target_gguf as write

    dest.parent.mkdir(parents=True, exist_ok=True)
    write(dest, layers=s.target_layers, hidden=s.hidden, vocab=s.vocab, heads=s.heads, kv_heads=s.kv_heads,
          ff=s.intermediate, merges=0 if s.toy else LLAMA3_MERGES, tensors=s.toy)
    return None


def target_gguf(src: Path) -> Path:
    """Where prepare_size writes the target's GGUF for the drafter whose copy is `src`."""
    return src.parent / "target" / "target.gguf"


@dataclass(frozen=True)
class RandomBF16:
    """A bf16 tensor whose bytes are generated while writing (never held whole)."""

    shape: tuple[int, ...]
    dtype: str = "BF16"

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * 2


def random_bf16_bytes(rng: np.random.Generator, nbytes: int) -> bytes:
    # Random sign and mantissa, exponent 2^-7 or 2^-6: magnitudes 0.008..0.03, never NaN/Inf/subnormal.
    bits = np.frombuffer(bytearray(rng.bytes(nbytes)), dtype="<u2")
    bits &= 0x80FF
    bits |= 0x3C00
    return bits.tobytes()


def vocab_tensors(s: Size, rng: np.random.Generator) -> dict[str, InMemoryTensor]:
    """Real d2t (int64 offsets) and t2d (bool mask) over sorted random target ids (docs/formats.md §3)."""
    target_ids = np.sort(rng.choice(s.vocab, size=s.draft_vocab, replace=False)).astype("<i8")
    d2t = target_ids - np.arange(s.draft_vocab, dtype="<i8")
    t2d = np.zeros(s.vocab, dtype=np.uint8)
    t2d[target_ids] = 1
    return {"d2t": InMemoryTensor("I64", (s.draft_vocab,), d2t.tobytes()),
            "t2d": InMemoryTensor("BOOL", (s.vocab,), t2d.tobytes())}


def generate(s: Size, dest: Path, seed: int = 2026) -> int:
    """Write a speculators-layout drafter into `dest`; returns the weight file's size in bytes."""
    rng = np.random.default_rng(seed)
    entries: dict[str, RandomBF16 | InMemoryTensor] = {n: RandomBF16(shape) for n, shape in tensor_shapes(s).items()}
    entries.update(vocab_tensors(s, rng))
    header, order = build_header(entries, {"format": "pt"})
    dest.mkdir(parents=True, exist_ok=True)
    weights = dest / "model.safetensors"
    with open(weights, "wb") as f:
        f.write(header)
        for name in order:
            src = entries[name]
            if isinstance(src, InMemoryTensor):
                f.write(src.data)
                continue
            left = src.nbytes
            while left:
                n = min(left, GEN_CHUNK)
                f.write(random_bf16_bytes(rng, n))
                left -= n
    (dest / "config.json").write_text(json.dumps(speculators_config(s), indent=2) + "\n")
    return weights.stat().st_size


@dataclass
class Sample:
    wall: float
    rss_kib: int
    rc: int
    stderr_tail: str


@dataclass
class Op:
    """One row of the table: a command run --runs times."""

    size: str
    name: str
    kind: str  # floor | read | convert | peer | validate | deep | inspect | help | before
    cmd: list[str]
    dest: Path | None = None  # removed before every run
    samples: list[Sample] = field(default_factory=list)
    skipped: str | None = None

    @property
    def wall(self) -> float:
        return statistics.median(s.wall for s in self.samples)

    @property
    def rss_mib(self) -> float:
        return max(s.rss_kib for s in self.samples) / 1024

    @property
    def failed(self) -> Sample | None:  # the first run that exited non-zero
        return next((s for s in self.samples if s.rc != 0), None)


# ------------------------------------------------------------------ the benchmark plan


def home_layout(s: Size) -> str:
    """Where a drafter of this kind is published: speculators, or vLLM's layout for MLA (the
    speculators library has no MLA drafter class, so our tool refuses to write one there)."""
    return "vllm" if s.mla else "speculators"


def prepare_size(s: Size, work: Path, cli: list[str], layouts: list[str], reuse: bool
                 ) -> tuple[dict[str, Path], int, list[str]]:
    """The drafter in every layout that holds it (generated in the speculators layout, converted
    by us, untimed), the size of its weights, and why a layout could not hold it."""
    base = work / s.name
    stamp = base / "made.json"  # what was generated, so --keep can reuse it
    spec = {"size": s.__dict__, "layouts": layouts}
    made = json.loads(stamp.read_text()) if reuse and stamp.is_file() else None
    if made is not None and made["spec"] == spec:
        return {layout: base / layout for layout in made["layouts"]}, made["nbytes"], made["refused"]
    shutil.rmtree(base, ignore_errors=True)
    generated = base / "generated"
    t = time.perf_counter()
    generate(s, generated)
    target = base / "target" / "config.json"
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps(target_config(s), indent=2) + "\n")
    no_gguf = write_target_gguf(s, target_gguf(generated)) if "gguf" in layouts else None
    print(f"[{s.name}] generated {generated} in {time.perf_counter() - t:.1f} s", flush=True)
    sources: dict[str, Path] = {}
    refused = []
    for layout in layouts:
        if layout == "speculators" and not s.mla:
            continue  # the generated copy itself
        if layout == "gguf" and no_gguf:
            refused.append(f"{s.name}: no gguf copy, nor conversions to gguf: {no_gguf}")
            continue
        extra = ["--target-gguf", str(target_gguf(generated))] if layout == "gguf" else []
        done = subprocess.run([*cli, "--to", layout, "--quiet", "--target", str(target), "--verifier", s.verifier,
                               *extra, str(generated), str(base / layout)], capture_output=True, text=True)
        if done.returncode == 0:
            sources[layout] = base / layout
        else:
            why = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
            refused.append(f"{s.name}: no {layout} copy, so no conversion from it: {why}")
            print(f"[{s.name}] {refused[-1]}", flush=True)
    if s.mla:
        shutil.rmtree(generated)
    else:
        sources = {"speculators": generated.rename(base / "speculators"), **sources}
    if home_layout(s) not in sources:
        raise SystemExit(f"{s.name}: its home layout {home_layout(s)} could not be made; see above")
    nbytes = sum(f.stat().st_size for f in sources[home_layout(s)].glob("*.safetensors"))
    stamp.write_text(json.dumps({"spec": spec, "layouts": list(sources), "nbytes": nbytes, "refused": refused}))
    return sources, nbytes, refused


def plan_ops(s: Size, sources: dict[str, Path], layouts: list[str], out: Path, cli: list[str], commands: set[str],
             peer: list[str] | None, peer_reason: str) -> list[Op]:
    src = sources[home_layout(s)]
    weights = sorted(str(p) for p in src.glob("*.safetensors"))
    ops = [
        Op(s.name, "cp -r", "floor", ["cp", "-r", str(src), str(out / "cp")], out / "cp"),
        Op(s.name, "cp -r + sync", "floor",
           ["sh", "-c", 'cp -r "$1" "$2" && sync "$2"/*', "sh", str(src), str(out / "cps")], out / "cps"),
        Op(s.name, "cat weights > /dev/null", "read", ["cat", *weights]),
    ]
    verifier = ["--verifier", s.verifier]
    target = ["--target", str(src.parent / "target" / "config.json")]
    for a in sources:
        for b in layouts:  # a destination that cannot hold the drafter shows how fast the refusal is
            if a != b:
                dest = out / f"{a}-to-{b}"
                gguf = ["--target-gguf", str(target_gguf(src))] if b == "gguf" else []
                ops.append(Op(s.name, f"convert {a} -> {b}", "convert",
                              [*cli, "--from", a, "--to", b, "--quiet", *target, *gguf, str(sources[a]), str(dest),
                               *(verifier if b == "speculators" else [])], dest))
                if gguf and not target_gguf(src).is_file():
                    ops[-1].skipped = "no target GGUF: the gguf package is not installed"
    peer_op = Op(s.name, "speculators convert (peer)", "peer", [], out / "peer")
    if peer is None:
        peer_op.skipped = peer_reason
    elif "sglang" not in sources:
        peer_op.skipped = "no sglang copy to feed it"
    else:
        # The verifier is read for its config only: the local target config stands in for the Hub repo.
        peer_op.cmd = [*peer, "convert", str(sources["sglang"]), "--algorithm", "eagle3",
                       "--verifier", str(src.parent / "target"), "--output-path", str(out / "peer")]
    ops.append(peer_op)
    for name, kind, extra in (("validate", "validate", []), ("validate --deep", "deep", ["--deep"])):
        op = Op(s.name, name, kind, [*cli, "validate", *extra, *target, str(src)])
        if "validate" not in commands:
            op.skipped = "this build has no `validate` command"
        ops.append(op)
    ops.append(Op(s.name, "inspect", "inspect", [*cli, "inspect", str(src)]))
    return ops
