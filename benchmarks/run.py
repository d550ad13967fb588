"""Benchmark eagle3-convert against `cp` on realistic drafters with random weights.

One run generates drafters (streamed to disk in bounded chunks, no torch), then measures,
side by side and interleaved round by round: `cp -r` of the same directory (the floor),
`cat` of the weight files (the speed of reading them once), every conversion between the
layouts the CLI lists, `speculators convert` when installed, `validate` (header level and
`--deep`) when the CLI has it, `inspect`, and `--help` cold start. Every command is a
subprocess: wall time is the median of --runs, peak RSS comes from the kernel (wait4).

The `.bin` input (rows `<size> .bin`) is the same drafter as original EAGLE publishes it, a
torch zip `pytorch_model.bin` written here without torch: convert to every layout, validate,
inspect, against `cp` of that directory, `speculators convert` when installed, and, when
torch is installed, the torch.load + decode every .bin command paid before issue 16; then
`python -X importtime` shows whether the .bin commands import torch.

    python benchmarks/run.py [--sizes 8b,8b-embed,kimi] [--runs 3] [--inputs safetensors,bin]
                             [--out benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import numpy as np

from eagle3_convert.safetensors_io import InMemoryTensor, build_header, read_tensor_table

REPO = Path(__file__).resolve().parent.parent
DEFAULT_WORK = REPO / "benchmarks" / "work"
MiB = 1 << 20
GEN_CHUNK = 16 * MiB  # bytes of random weights held in memory at once while generating

# Issue 7 targets.
CONVERT_VS_CP = 1.3
PEAK_RSS_MIB = 100
VALIDATE_HEADER_S = 0.1
DEEP_VS_READ = 0.70
HELP_S = 0.3
VS_SPECULATORS = 8.0


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
        "rope_parameters": ({"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                             "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
                            if not s.mla else {"rope_type": "default", "rope_theta": 50000.0}),
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


# ------------------------------------------------------------------ original EAGLE pytorch_model.bin

# torch's typed storage classes, by safetensors dtype (what torch.save names in its pickle).
STORAGE_CLASSES = {"F64": "DoubleStorage", "F32": "FloatStorage", "F16": "HalfStorage", "BF16": "BFloat16Storage",
                   "I64": "LongStorage", "I32": "IntStorage", "I16": "ShortStorage", "I8": "CharStorage",
                   "U8": "ByteStorage", "BOOL": "BoolStorage"}


def _p_str(text: str) -> bytes:
    raw = text.encode()
    return b"X" + struct.pack("<I", len(raw)) + raw


def _p_int(n: int) -> bytes:
    if 0 <= n < 256:
        return b"K" + bytes([n])
    if n < 2**31:
        return b"J" + struct.pack("<i", n)
    raw = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(raw)]) + raw


def _p_tuple(items) -> bytes:
    return b"(" + b"".join(items) + b"t"


def _p_global(module: str, name: str) -> bytes:
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def state_dict_pickle(entries: list[tuple[str, str, tuple[int, ...], str, int]]) -> bytes:
    """data.pkl as torch.save(state_dict) writes it (protocol 2): an OrderedDict of _rebuild_tensor_v2 calls,
    one storage per tensor. `entries`: (name, dtype, shape, storage key, elements)."""
    empty_od = _p_global("collections", "OrderedDict") + b")R"
    out = b"\x80\x02" + empty_od + b"("
    for name, dtype, shape, key, numel in entries:
        stride, step = [], 1
        for d in reversed(shape):
            stride.insert(0, step)
            step *= d
        storage = _p_tuple([_p_str("storage"), _p_global("torch", STORAGE_CLASSES[dtype]), _p_str(key),
                            _p_str("cpu"), _p_int(numel)]) + b"Q"
        out += _p_str(name) + _p_global("torch._utils", "_rebuild_tensor_v2") + _p_tuple(
            [storage, _p_int(0), _p_tuple(map(_p_int, shape)), _p_tuple(map(_p_int, stride)), b"\x89", empty_od]) + b"R"
    return out + b"u."


def write_torch_bin(dest: Path, src_dir: Path) -> int:
    """Write `dest` (a torch zip checkpoint, as torch.save lays it out) holding the tensors of the safetensors
    drafter in `src_dir`, streamed in bounded chunks, without torch. Returns its size in bytes."""
    tensors, _ = read_tensor_table(src_dir)
    names = sorted(tensors)
    prefix = dest.stem  # torch names the archive's directory after the file
    entries = [(n, tensors[n].dtype, tensors[n].shape, str(i), tensors[n].numel) for i, n in enumerate(names)]
    stamp = (2026, 1, 1, 0, 0, 0)
    with zipfile.ZipFile(dest, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.writestr(zipfile.ZipInfo(f"{prefix}/data.pkl", stamp), state_dict_pickle(entries))
        zf.writestr(zipfile.ZipInfo(f"{prefix}/byteorder", stamp), b"little")
        for i, name in enumerate(names):
            ref = tensors[name]
            with open(ref.file, "rb") as f, zf.open(zipfile.ZipInfo(f"{prefix}/data/{i}", stamp), "w",
                                                     force_zip64=ref.nbytes >= 1 << 31) as member:
                f.seek(ref.start)
                left = ref.nbytes
                while left:
                    chunk = f.read(min(left, GEN_CHUNK))
                    member.write(chunk)
                    left -= len(chunk)
        zf.writestr(zipfile.ZipInfo(f"{prefix}/version", stamp), b"3\n")
    return dest.stat().st_size


def write_target(s: Size, base: Path) -> Path:
    target = base / "target" / "config.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(target_config(s), indent=2) + "\n")
    return target


def prepare_bin(s: Size, work: Path, cli: list[str], sources: dict[str, Path], reuse: bool
                ) -> tuple[Path | None, int, str]:
    """The drafter as original EAGLE publishes it: config.json + pytorch_model.bin, written from our eagle
    copy (made here when the run has none, then removed: at most two copies are on disk at once).
    Returns (its directory or None, the .bin's size, why not)."""
    if s.mla:
        return None, 0, "original EAGLE has no MLA drafter"
    base = work / s.name
    dest = base / "eagle-bin"
    stamp = base / "bin.json"
    made = json.loads(stamp.read_text()) if reuse and stamp.is_file() else None
    if made is not None and made["size"] == s.__dict__ and (dest / "pytorch_model.bin").is_file():
        return dest, made["nbytes"], ""
    shutil.rmtree(dest, ignore_errors=True)
    t = time.perf_counter()
    eagle, scratch = sources.get("eagle"), []
    if eagle is None:
        generated = base / "bin-speculators"
        shutil.rmtree(generated, ignore_errors=True)
        generate(s, generated)
        eagle = base / "bin-eagle"
        shutil.rmtree(eagle, ignore_errors=True)
        done = subprocess.run([*cli, "--to", "eagle", "--quiet", "--no-record", "--target", str(write_target(s, base)),
                               str(generated), str(eagle)], capture_output=True, text=True)
        shutil.rmtree(generated)
        scratch.append(eagle)
        if done.returncode != 0:
            shutil.rmtree(eagle, ignore_errors=True)
            return None, 0, "no eagle copy to write the .bin from: " + (done.stderr.strip().splitlines() or ["?"])[-1]
    dest.mkdir(parents=True)
    shutil.copy(eagle / "config.json", dest / "config.json")
    nbytes = write_torch_bin(dest / "pytorch_model.bin", eagle)
    for path in scratch:
        shutil.rmtree(path, ignore_errors=True)
    stamp.write_text(json.dumps({"size": s.__dict__, "nbytes": nbytes}))
    print(f"[{s.name}] wrote {dest / 'pytorch_model.bin'} ({nbytes / 1e9:.2f} GB) in {time.perf_counter() - t:.1f} s",
          flush=True)
    return dest, nbytes, ""


# What every .bin command paid before issue 16, the CLI aside: import torch, torch.load, decode every tensor.
TORCH_READ = ("import sys, torch\n"
              "state = torch.load(sys.argv[1], map_location='cpu', weights_only=True, mmap=True)\n"
              "for t in state.values():\n"
              "    t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()\n")


def has_torch() -> bool:
    return importlib.util.find_spec("torch") is not None


def before_tree(ref: str, work: Path) -> Path:
    """eagle3_convert as of git `ref` (e.g. the commit before issue 16), extracted under `work`."""
    tree = work / "before"
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, "eagle3_convert"], capture_output=True)
    if archive.returncode != 0:
        raise SystemExit(f"--before {ref}: {archive.stderr.decode(errors='replace').strip()}")
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree


def before_cli(tree: Path) -> list[str]:
    """The CLI of that tree (first on sys.path, ahead of the installed package)."""
    return [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(tree)!r}); "
                                  "from eagle3_convert.cli import main; main()"]


def plan_bin_ops(s: Size, src: Path, layouts: list[str], out: Path, cli: list[str], commands: set[str],
                 peer: list[str] | None, peer_reason: str, before: tuple[str, Path] | None = None) -> list[Op]:
    """The rows of the .bin input, grouped under their own size label so ratios are to `cp -r` of the .bin."""
    label = f"{s.name} .bin"
    weights = src / "pytorch_model.bin"
    target = ["--target", str(src.parent / "target" / "config.json")]
    ops = [
        Op(label, "cp -r", "floor", ["cp", "-r", str(src), str(out / "cp")], out / "cp"),
        Op(label, "cp -r + sync", "floor", ["sh", "-c", 'cp -r "$1" "$2" && sync "$2"/*', "sh", str(src),
                                            str(out / "cps")], out / "cps"),
        Op(label, "cat weights > /dev/null", "read", ["cat", str(weights)]),
    ]
    for b in layouts:
        dest = out / f"bin-to-{b}"
        ops.append(Op(label, f"convert eagle .bin -> {b}", "convert",
                      [*cli, "--from", "eagle", "--to", b, "--quiet", *target, str(src), str(dest),
                       *(["--verifier", s.verifier] if b == "speculators" else [])], dest))
    peer_op = Op(label, "speculators convert (peer)", "peer", [], out / "peer")
    if peer is None:
        peer_op.skipped = peer_reason
    else:
        peer_op.cmd = [*peer, "convert", str(src), "--algorithm", "eagle3", "--verifier", str(src.parent / "target"),
                       "--output-path", str(out / "peer")]
    ops.append(peer_op)
    for name, kind, extra in (("validate", "validate", []), ("validate --deep", "deep", ["--deep"])):
        op = Op(label, name, kind, [*cli, "validate", *extra, *target, str(src)])
        if "validate" not in commands:
            op.skipped = "this build has no `validate` command"
        ops.append(op)
    ops.append(Op(label, "inspect", "inspect", [*cli, "inspect", str(src)]))
    load = Op(label, "torch.load + decode (every .bin command before issue 16)", "reference",
              [sys.executable, "-c", TORCH_READ, str(weights)])
    if not has_torch():
        load.skipped = "torch is not installed here (the reference only; our commands never need it)"
    ops.append(load)
    if before is not None:  # the same commands as of an older commit: what users had
        ref, tree = before
        old = before_cli(tree)
        dest = out / "before-to-speculators"
        for name, cmd, dest_dir in (
                ("inspect", [*old, "inspect", str(src)], None),
                ("validate", [*old, "validate", *target, str(src)], None),
                ("convert eagle .bin -> speculators", [*old, "--from", "eagle", "--to", "speculators", "--quiet",
                                                        *target, str(src), str(dest), "--verifier", s.verifier],
                 dest)):
            op = Op(label, f"{name} (as of {ref})", "before", cmd, dest_dir)
            if not has_torch():
                op.skipped = f"torch is not installed here, and the reader as of {ref} needs it"
            ops.append(op)
    return ops


def torch_imports(src: Path, out: Path) -> list[str]:
    """Whether inspect, validate and convert of the .bin import torch, from `python -X importtime`."""
    runs = {"inspect": ["inspect", str(src)], "validate": ["validate", str(src)],
            "convert": ["--to", "speculators", "--verifier", "x/y", "--quiet", "--no-record", str(src),
                        str(out / "imports")]}
    lines = []
    for name, argv in runs.items():
        shutil.rmtree(out / "imports", ignore_errors=True)
        done = subprocess.run([sys.executable, "-X", "importtime", "-m", "eagle3_convert", *argv],
                              capture_output=True, text=True)
        modules = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()
                   if line.startswith("import time:")]
        heavy = sorted({m.split(".")[0] for m in modules if m.split(".")[0] == "torch"})
        lines.append(f"{name} on the .bin: exit {done.returncode}, {len(modules)} modules imported, torch "
                     f"{'IMPORTED' if heavy else 'not imported'}, eagle3_convert.torch_zip "
                     f"{'imported' if 'eagle3_convert.torch_zip' in modules else 'NOT imported'}")
    shutil.rmtree(out / "imports", ignore_errors=True)
    return lines


# ------------------------------------------------------------------ running and timing


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


TIME_BIN = Path("/usr/bin/time")


def run_child(cmd: list[str]) -> Sample:
    """Run `cmd` (stdout to /dev/null), returning its wall time and the kernel's peak RSS for it.

    The RSS comes from GNU time's wait4: a child of this Python process would report our own
    peak too (the kernel keeps the pre-exec image's high-water mark), and numpy alone is 40 MiB.
    """
    with tempfile.TemporaryFile() as err, tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        wrapped = [str(TIME_BIN), "-f", "%M", "-o", rss.name, *cmd] if TIME_BIN.is_file() else cmd
        start = time.perf_counter()
        proc = subprocess.Popen(wrapped, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        reported = rss.read().strip().splitlines()
        peak = int(reported[-1]) if reported and reported[-1].isdigit() else usage.ru_maxrss
        err.seek(max(0, err.seek(0, os.SEEK_END) - 4096))  # the last lines say why it failed
        return Sample(wall, peak, proc.returncode, err.read().decode(errors="replace"))


def files_under(paths: list[Path]) -> list[Path]:
    return [f for path in paths for f in (sorted(path.rglob("*")) if path.is_dir() else [path]) if f.is_file()]


def evict(paths: list[Path]) -> None:
    """Drop these files from the page cache (POSIX_FADV_DONTNEED after a sync): cold data, warm Python."""
    os.sync()
    for f in files_under(paths):
        fd = os.open(f, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def warm(paths: list[Path]) -> None:
    os.sync()
    for f in files_under(paths):
        with open(f, "rb") as fh:
            while fh.read(GEN_CHUNK):
                pass


def cli_entry() -> list[str]:
    """The console script itself (a pyenv shim in front of it adds ~70 ms of bash, not ours to count)."""
    beside = Path(sys.executable).parent / "eagle3-convert"
    if beside.is_file():
        return [str(beside)]
    found = shutil.which("eagle3-convert")
    return [found] if found else [sys.executable, "-c", "from eagle3_convert.cli import main; main()"]


def cli_capabilities(cli: list[str]) -> tuple[list[str], set[str]]:
    """Layouts `--to` accepts and the commands the CLI has, read from its own --help."""
    top = subprocess.run([*cli, "--help"], capture_output=True, text=True, check=True).stdout
    commands = set(re.findall(r"^  ([a-z][\w-]*)\s", top.split("Commands:", 1)[-1].split("Layouts", 1)[0], re.M))
    conv = subprocess.run([*cli, "convert", "--help"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"--to \[([^\]]+)\]", conv)
    layouts = m.group(1).split("|") if m else ["speculators", "sglang"]
    return layouts, commands


def warm_bytecode(cli: list[str], work: Path, layouts: list[str], commands: set[str], bin_input: bool = False) -> None:
    """Run each command once on a toy drafter, untimed, so every module's bytecode is cached."""
    toy = work / "warmup"
    shutil.rmtree(toy, ignore_errors=True)
    generate(SIZES["tiny"], toy / "speculators")
    runs = [[*cli, "--help"], [*cli, "inspect", str(toy / "speculators")]]
    if "validate" in commands:
        runs += [[*cli, "validate", str(toy / "speculators")], [*cli, "validate", "--deep", str(toy / "speculators")]]
    runs += [[*cli, "--to", layout, "--quiet", "--verifier", "x/y", str(toy / "speculators"), str(toy / layout)]
             for layout in layouts if layout != "speculators"]
    for cmd in runs:
        subprocess.run(cmd, capture_output=True)
    if bin_input:  # the .bin reader's modules too
        shutil.rmtree(toy / "eagle", ignore_errors=True)
        subprocess.run([*cli, "--to", "eagle", "--quiet", "--no-record", "--target",
                        str(write_target(SIZES["tiny"], toy)), str(toy / "speculators"), str(toy / "eagle")],
                       capture_output=True, check=True)
        (toy / "eagle-bin").mkdir()
        shutil.copy(toy / "eagle" / "config.json", toy / "eagle-bin" / "config.json")
        write_torch_bin(toy / "eagle-bin" / "pytorch_model.bin", toy / "eagle")
        subprocess.run([*cli, "inspect", str(toy / "eagle-bin")], capture_output=True)
    shutil.rmtree(toy)


def supports_mla(cli: list[str], scratch: Path) -> bool:
    """Whether this build reads an MLA (DeepSeek/Kimi) drafter: try a tiny one."""
    tiny = Size("mla-probe", 64, 4, 4, None, 128, 512, 128, 8, "x/y", "DeepseekV3ForCausalLM",
                mla={"q_lora_rank": 32, "kv_lora_rank": 16, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8,
                     "v_head_dim": 8})
    probe = scratch / "mla-probe"
    shutil.rmtree(probe, ignore_errors=True)
    generate(tiny, probe)
    ok = subprocess.run([*cli, "inspect", str(probe)], capture_output=True).returncode == 0
    shutil.rmtree(probe)
    return ok


def speculators_cli(explicit: str | None) -> tuple[list[str] | None, str]:
    """The peer's command and how it was found (with its version), or None and why it is skipped."""
    found = shutil.which("speculators")
    cmd = shlex.split(explicit) if explicit else ([found] if found else None)
    if cmd is None:
        return None, "speculators is not installed (optional peer; pass --speculators-cmd to point at one in a venv)"
    said = subprocess.run([*cmd, "--version"], capture_output=True, text=True)
    lines = said.stdout.strip().splitlines() if said.returncode == 0 else []
    version = lines[-1] if lines else "version unknown"
    return cmd, f"`{shlex.join(cmd)}` ({version})"


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
    print(f"[{s.name}] generated {generated} in {time.perf_counter() - t:.1f} s", flush=True)
    sources: dict[str, Path] = {}
    refused = []
    for layout in layouts:
        if layout == "speculators" and not s.mla:
            continue  # the generated copy itself
        done = subprocess.run([*cli, "--to", layout, "--quiet", "--target", str(target), "--verifier", s.verifier,
                               str(generated), str(base / layout)], capture_output=True, text=True)
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
                ops.append(Op(s.name, f"convert {a} -> {b}", "convert",
                              [*cli, "--from", a, "--to", b, "--quiet", *target, str(sources[a]), str(dest),
                               *(verifier if b == "speculators" else [])], dest))
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


def measure(ops: list[Op], runs: int, cold: bool, sources: list[Path]) -> None:
    """Round-robin over the ops so drift (other load, writeback) touches every row alike."""
    live = [op for op in ops if op.skipped is None]
    for r in range(runs):
        for op in live:
            if op.dest is not None:
                shutil.rmtree(op.dest, ignore_errors=True)
            (evict if cold else warm)(sources)
            op.samples.append(run_child(op.cmd))
            if op.dest is not None:
                shutil.rmtree(op.dest, ignore_errors=True)
        print(f"[{ops[0].size}] round {r + 1}/{runs} done", flush=True)


# ------------------------------------------------------------------ progress bars


def check_progress(cli: list[str], src: Path, out: Path, commands: set[str]) -> list[str]:
    """Is a progress bar drawn on a terminal, and absent with --quiet or without one?"""
    if not shutil.which("script"):
        return ["`script` (util-linux) is missing: progress under a pseudo-terminal not checked"]
    dest = out / "progress"
    convert = [*cli, "--to", "sglang", str(src), str(dest)]
    sized = "stty cols 120 rows 40; "  # a terminal's size: `script`'s pty here is 0x0
    cases = [("convert, terminal 120x40", convert, sized),
             ("convert, terminal 120x40, --quiet", [*convert, "--quiet"], sized),
             ("convert, terminal 0x0 (as `script` gives here)", convert, ""),
             ("convert, pipe (no TTY)", convert, None)]
    if "validate" in commands:
        deep = [*cli, "validate", "--deep", str(src)]
        cases += [("validate --deep, terminal 120x40", deep, sized), ("validate --deep, pipe (no TTY)", deep, None)]
    lines = []
    for label, cmd, tty in cases:
        shutil.rmtree(dest, ignore_errors=True)
        if tty is None:
            done = subprocess.run(cmd, capture_output=True)
            text = done.stderr.decode(errors="replace")
        else:
            done = subprocess.run(["script", "-qfec", tty + shlex.join(cmd), "/dev/null"], capture_output=True)
            text = done.stdout.decode(errors="replace")
        bar = re.search(r"\d+%\|", text) is not None
        redraws = len(re.findall(r"\r(?!\n)", text))
        said = [line for line in text.replace("\r", "\n").splitlines() if line.startswith("error:")]
        lines.append(f"{label}: exit {done.returncode}, bar {'drawn' if bar else 'absent'}"
                     + (f" ({redraws} redraws)" if bar else "") + (f"; {said[-1][:200]}" if said else ""))
    shutil.rmtree(dest, ignore_errors=True)
    return lines


# ------------------------------------------------------------------ report


def fmt_ratio(x: float | None) -> str:
    return "" if x is None else f"{x:.2f}×"


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


REFUSAL = re.compile(r"^error: .*\[(E-[A-Z0-9-]+)\]")


def outcome(op: Op) -> tuple[str, str | None]:
    """('ok' | 'refused' | 'failed', the line that says why) over all of an op's runs."""
    bad = op.failed
    if bad is None:
        return "ok", None
    last = bad.stderr_tail.strip().splitlines()[-1] if bad.stderr_tail.strip() else f"exit {bad.rc}"
    # Our CLI refusing what a layout cannot express is correct behaviour, not a failure.
    if op.kind == "convert" and bad.rc == 1 and REFUSAL.match(last):
        return "refused", f"refused [{REFUSAL.match(last).group(1)}]"
    return "failed", f"exit {bad.rc}: {last[:160]}"


def rows_and_failures(ops: list[Op], toys: set[str]) -> tuple[list[list[str]], list[str]]:
    """Table rows, and a line for every command that failed (a refusal is not a failure)."""
    rows, failures = [], []
    for op in ops:
        if op.skipped is not None:
            rows.append([op.size, op.name, "skipped", "", "", "", "", op.skipped])
            continue
        same = {o.name: o for o in ops if o.size == op.size and o.samples}
        floor, durable = same.get("cp -r"), same.get("cp -r + sync")
        read = same.get("cat weights > /dev/null")
        ours = same.get("convert sglang -> speculators") or same.get("convert eagle .bin -> speculators")
        walls = [s.wall for s in op.samples]
        state, why = outcome(op)
        target = ""
        if state != "ok":
            target = why
            if state == "failed":
                failures.append(f"{op.size} {op.name}: {why}")
        elif op.size in toys and op.kind in ("convert", "deep", "peer"):
            target = "toy size: no speed target"
        elif op.kind == "convert" and floor:
            target = f"≤ {CONVERT_VS_CP}× cp: {verdict(op.wall / floor.wall <= CONVERT_VS_CP)}"
        elif op.kind == "deep" and read:
            speed = read.wall / op.wall
            target = f"{speed:.0%} of read speed (≥ {DEEP_VS_READ:.0%}): {verdict(speed >= DEEP_VS_READ)}"
        elif op.kind == "validate":
            target = f"≤ {VALIDATE_HEADER_S} s: {verdict(op.wall <= VALIDATE_HEADER_S)}"
        elif op.kind == "help":
            target = f"≤ {HELP_S} s: {verdict(op.wall <= HELP_S)}"
        elif op.kind == "peer" and ours and outcome(ours)[0] == "ok":
            speedup = op.wall / ours.wall
            target = (f"ours ({ours.name.removeprefix('convert ')}) {speedup:.1f}× faster (≥ {VS_SPECULATORS:g}×): "
                      f"{verdict(speedup >= VS_SPECULATORS)}")
        elif op.kind == "reference" and same.get("inspect"):
            target = f"reference: {op.wall / same['inspect'].wall:.1f}× our inspect of the same file"
        elif op.kind == "before" and same.get(op.name.split(" (as of ")[0]):
            now = same[op.name.split(" (as of ")[0]]
            target = f"now {op.wall / now.wall:.1f}× faster, {op.rss_mib / now.rss_mib:.0f}× less memory"
        ratio_kinds = ("floor", "read", "convert", "peer", "deep", "reference", "before")
        rows.append([op.size, op.name, f"{op.wall:.3f}", f"{min(walls):.3f}–{max(walls):.3f}", f"{op.rss_mib:.1f}",
                     fmt_ratio(op.wall / floor.wall) if floor and op.kind in ratio_kinds else "",
                     fmt_ratio(op.wall / durable.wall) if durable and op.kind == "convert" else "", target])
    return rows, failures


def target_summary(ops: list[Op], toys: set[str]) -> list[str]:
    """One line per issue-7 target and size: the measured figure, the bound, met or MISSED."""
    lines = []
    measured = [o for o in ops if o.samples and outcome(o)[0] == "ok"]
    for size in dict.fromkeys(o.size for o in measured):
        same = {o.name: o for o in measured if o.size == size}
        floor, durable, read = same.get("cp -r"), same.get("cp -r + sync"), same.get("cat weights > /dev/null")
        converts = [o for o in measured if o.size == size and o.kind == "convert"]
        refused = [o for o in ops if o.size == size and o.kind == "convert" and outcome(o)[0] == "refused"]
        if converts and floor and size not in toys:
            ratios = [o.wall / floor.wall for o in converts]
            met = sum(r <= CONVERT_VS_CP for r in ratios)
            durable_part = ""
            if durable:
                d = [o.wall / durable.wall for o in converts]
                durable_part = f" (vs cp -r + sync: {min(d):.2f}–{max(d):.2f}×)"
            lines.append(f"{size}: convert ≤ {CONVERT_VS_CP}× cp — {min(ratios):.2f}–{max(ratios):.2f}× over "
                         f"{len(converts)} directions{durable_part}; met in {met}/{len(converts)}: "
                         f"{verdict(met == len(converts))}"
                         + (f"; {len(refused)} refused by design" if refused else ""))
        ours = [o for o in measured if o.size == size and o.kind in ("convert", "validate", "deep", "inspect", "help")]
        if ours:
            top = max(ours, key=lambda o: o.rss_mib)
            lines.append(f"{size}: peak RSS ≤ {PEAK_RSS_MIB} MiB — highest {top.rss_mib:.1f} MiB ({top.name}): "
                         f"{verdict(top.rss_mib <= PEAK_RSS_MIB)}")
        if "validate" in same:
            wall = same["validate"].wall
            lines.append(f"{size}: header-level validate ≤ {VALIDATE_HEADER_S} s — {wall:.3f} s: "
                         f"{verdict(wall <= VALIDATE_HEADER_S)}")
        if "validate --deep" in same and read and size not in toys:
            speed = read.wall / same["validate --deep"].wall
            lines.append(f"{size}: validate --deep ≥ {DEEP_VS_READ:.0%} of read speed — {speed:.0%}: "
                         f"{verdict(speed >= DEEP_VS_READ)}")
        ours_name = next((n for n in ("convert sglang -> speculators", "convert eagle .bin -> speculators")
                          if n in same), None)
        if "speculators convert (peer)" in same and ours_name and size not in toys:
            speedup = same["speculators convert (peer)"].wall / same[ours_name].wall
            lines.append(f"{size}: ≥ {VS_SPECULATORS:g}× faster than speculators convert — {speedup:.1f}×: "
                         f"{verdict(speedup >= VS_SPECULATORS)}")
        befores = [o for o in measured if o.size == size and o.kind == "before"]
        pairs = [(o, same[o.name.split(" (as of ")[0]]) for o in befores if o.name.split(" (as of ")[0] in same]
        if pairs:
            header = [f"{now.name} {old.wall / now.wall:.1f}×" for old, now in pairs if now.kind != "convert"]
            copies = [f"{now.name} {old.wall / now.wall:.1f}× ({old.wall:.2f} s → {now.wall:.2f} s; a copy of the "
                      "weights, bound by the disk)" for old, now in pairs if now.kind == "convert"]
            fast = all(old.wall / now.wall >= 10 for old, now in pairs if now.kind != "convert")
            lines.append(f"{size}: .bin commands ≥ 10× faster than {pairs[0][0].name.split(' (as of ')[1][:-1]} — "
                         f"{', '.join(header)}: {verdict(fast)}" + (f"; {', '.join(copies)}" if copies else ""))
        if "eagle3-convert --help" in same:
            wall = same["eagle3-convert --help"].wall
            lines.append(f"--help ≤ {HELP_S} s — {wall:.3f} s: {verdict(wall <= HELP_S)}")
    return lines


HEADERS = ["size", "operation", "wall s (median)", "min–max", "peak RSS MiB", "× cp", "× cp+sync", "target / note"]


def markdown_table(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def machine() -> dict[str, str]:
    mem = next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
               if line.startswith("MemTotal"))
    fs = subprocess.run(["df", "-T", str(DEFAULT_WORK.parent)], capture_output=True, text=True).stdout.splitlines()
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    versions = []
    for pkg in ("eagle3-convert", "click", "pydantic", "safetensors", "huggingface_hub", "numpy", "tqdm", "torch",
                "speculators"):
        try:
            versions.append(f"{pkg} {metadata.version(pkg)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{pkg} (not installed)")
    return {
        "cpu": f"{os.cpu_count()} × {cpu}", "memory": f"{int(mem) / (1 << 20):.1f} GiB",
        "kernel": platform.release(), "filesystem": fs[-1].split()[1] if len(fs) > 1 else "?",
        "python": platform.python_version(), "packages": ", ".join(versions),
    }


def write_results(out: Path, table: str, summary: list[str], failures: list[str], notes: list[str], progress: list[str],
                  argv: list[str], info: dict[str, str], sizes: dict[str, tuple[Size, int]],
                  bin_sizes: dict[str, tuple[Size, int]] | None = None, imports: list[str] | None = None) -> None:
    size_lines = [f"- `{s.name}`: {'MLA' if s.mla else 'Llama'} attention, H={s.hidden}, heads {s.heads}/"
                  f"{s.kv_heads}, I={s.intermediate}, V={s.vocab}, Vd={s.draft_vocab}, k={s.aux}, "
                  f"{'with' if s.embed else 'no'} embed_tokens, bf16: {n / 1e9:.2f} GB of weights"
                  for s, n in sizes.values()]
    text = "\n".join([
        "# Benchmark results", "",
        "Produced by `benchmarks/run.py` in one run; reproduce with:", "",
        "```", "python " + shlex.join(["benchmarks/run.py", *argv]), "```", "",
        "## Machine", "",
        *[f"- {k}: {v}" for k, v in info.items()], "",
        *(["## Drafters (random bf16 weights, generated in the speculators layout; the others converted from it)", "",
           *size_lines, ""] if size_lines else []),
        *(["## Original EAGLE `pytorch_model.bin` (rows `<size> .bin`)", "",
           *[f"- `{s.name} .bin`: the same drafter in the original-EAGLE layout (midlayer.*, its config.json as our "
             f"`--to eagle` writes it) as a torch zip `pytorch_model.bin` of {n / 1e9:.2f} GB, one storage per tensor, "
             "written by `write_torch_bin` (no torch: the pickle torch.save writes, assembled by hand; "
             "`tests/test_bin_reader.py` checks torch.load reads it)" for s, n in bin_sizes.values()],
           "- torch imports on .bin commands (`python -X importtime -m eagle3_convert ...`):",
           *[f"  - {line}" for line in imports or ["not checked in this run"]], ""]
          if bin_sizes else []),
        "## Results", "",
        table, "",
        "`× cp` is the median wall time over the median of `cp -r` of the same directory in the same run;",
        "`× cp+sync` over `cp -r` followed by `sync` of the copied files (our convert fsyncs its output).",
        "Peak RSS is the kernel's `ru_maxrss` of the command as GNU `time -f %M` reports it (wait4).", "",
        "## Targets (issue 7)", "",
        *[f"- {line}" for line in summary], "",
        *(["Commands that failed (a refusal by design is not a failure):", "", *[f"- {f}" for f in failures], ""]
          if failures else []),
        "## Progress bars (on the largest size)", "",
        *([f"- {line}" for line in progress] or ["- not checked in this run"]), "",
        "## Notes", "",
        *[f"- {n}" for n in notes], "",
    ])
    out.write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="8b,8b-embed,kimi", help=f"comma list of {', '.join(SIZES)}")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per command (median reported)")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "RESULTS.md",
                        help="markdown report; '-' for none")
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK, help="where drafters are generated")
    parser.add_argument("--layouts", help="comma list of layouts to convert between (default: all `--to` lists)")
    parser.add_argument("--cache", choices=("cold", "warm"), default="cold",
                        help="cold: evict the drafters from the page cache before every command; warm: pre-read them")
    parser.add_argument("--keep", action="store_true", help="keep (and reuse) the generated drafters")
    parser.add_argument("--before", metavar="GIT_REF",
                        help="also time inspect, validate and convert of the .bin with eagle3_convert as of this "
                             "commit (e.g. the one before issue 16; its reader needs torch)")
    parser.add_argument("--inputs", default="safetensors,bin",
                        help="comma list: safetensors (the layouts' copies) and/or bin (an original-EAGLE "
                             "pytorch_model.bin); bin alone keeps at most two copies of the weights on disk")
    parser.add_argument("--speculators-cmd", help="the `speculators` executable to compare with, e.g. a venv's")
    parser.add_argument("--no-progress-check", action="store_true", help="skip the pseudo-terminal progress check")
    args = parser.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv

    names = [n.strip() for n in args.sizes.split(",") if n.strip()]
    unknown = [n for n in names if n not in SIZES]
    if unknown:
        parser.error(f"unknown size(s) {', '.join(unknown)}; known: {', '.join(SIZES)}")
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    inputs = {x.strip() for x in args.inputs.split(",") if x.strip()}
    if not inputs or not inputs <= {"safetensors", "bin"}:
        parser.error("--inputs is a comma list of safetensors, bin")

    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    # Conversions record themselves in the drafter registry: keep that out of the user's own.
    registry = work / "registry.db"
    os.environ.update(EAGLE3_CONVERT_REGISTRY=str(registry), HF_HUB_OFFLINE="1")
    # An installed wheel has bytecode; a sandbox with PYTHONDONTWRITEBYTECODE would recompile
    # our modules on every start. Cache it under the work dir instead of the source tree.
    bytecode_off = os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None
    pycache = work / "pycache"
    os.environ["PYTHONPYCACHEPREFIX"] = str(pycache)
    load_before = os.getloadavg()
    cli = cli_entry()
    layouts, commands = cli_capabilities(cli)
    if args.layouts:
        wanted = [x.strip() for x in args.layouts.split(",") if x.strip()]
        if "speculators" not in wanted or not set(wanted) <= set(layouts):
            parser.error(f"--layouts must include speculators (the generated one) and be among {', '.join(layouts)}")
        layouts = wanted
    warm_bytecode(cli, work, layouts, commands, bin_input="bin" in inputs)
    notes = [f"CLI measured: `{shlex.join(cli)}` (the console script, not a shell shim in front of it)",
             "bytecode: cached under the work dir (PYTHONPYCACHEPREFIX) and warmed once, untimed"
             + ("; this environment sets PYTHONDONTWRITEBYTECODE=1, which would recompile every module of ours "
                "on every start" if bytecode_off else ""),
             f"layouts converted between: {', '.join(layouts)}; CLI commands: {', '.join(sorted(commands))}"]
    cold = args.cache == "cold"
    notes.append("cache: " + ("cold data — `sync`, then every source file evicted from the page cache "
                              "(posix_fadvise DONTNEED) before every command; Python's own modules stay cached"
                              if cold else "warm — `sync`, then the sources read once before every command"))
    peer, peer_reason = speculators_cli(args.speculators_cmd)
    notes.append(f"speculators convert: {peer_reason}")
    mla = "kimi" in names and supports_mla(cli, work)
    if "kimi" in names:
        notes.append("kimi: " + ("MLA drafter (deepseek_v3 decoder, q_lora 1536, kv_lora 512, 64 heads)" if mla else
                                 "this build does not read MLA drafters: Llama attention with Kimi's widths"))

    all_ops: list[Op] = []
    sizes: dict[str, tuple[Size, int]] = {}
    out_dir = work / "out"
    progress: list[str] = []
    bin_sizes: dict[str, tuple[Size, int]] = {}
    imports: list[str] = []
    old_tree = before_tree(args.before, work) if args.before and "bin" in inputs else None
    try:
        help_op = Op("no drafter", "eagle3-convert --help", "help", [*cli, "--help"])
        for name in names:
            s = SIZES[name] if name != "kimi" or mla else as_llama(SIZES[name])
            sources: dict[str, Path] = {}
            out_dir.mkdir(parents=True, exist_ok=True)
            if "safetensors" in inputs:
                sources, nbytes, refused = prepare_size(s, work, cli, layouts, reuse=args.keep)
                notes += refused
                sizes[name] = (s, nbytes)
                ops = plan_ops(s, sources, layouts, out_dir, cli, commands, peer, peer_reason)
                measure(ops, args.runs, cold, list(sources.values()))
                all_ops += ops
            if "bin" in inputs:
                bin_dir, bin_bytes, why = prepare_bin(s, work, cli, sources, reuse=args.keep)
                if bin_dir is None:
                    notes.append(f"{s.name} .bin: not measured: {why}")
                    continue
                bin_sizes[name] = (s, bin_bytes)
                if old_tree:  # compile the old tree's bytecode, untimed, as warm_bytecode does ours
                    subprocess.run([*before_cli(old_tree), "inspect", str(bin_dir)], capture_output=True)
                ops = plan_bin_ops(s, bin_dir, layouts, out_dir, cli, commands, peer, peer_reason,
                                   (args.before, old_tree) if old_tree else None)
                measure(ops, args.runs, cold, [bin_dir])
                all_ops += ops
                imports += [f"{s.name}: {line}" for line in torch_imports(bin_dir, out_dir)]
        measure([help_op], args.runs, cold, [])
        all_ops.append(help_op)
        if not args.no_progress_check and sizes:
            biggest = max(sizes, key=lambda n: sizes[n][1])
            home = work / biggest / home_layout(sizes[biggest][0])
            progress = [f"{biggest}: {line}" for line in check_progress(cli, home, out_dir,
                                                                     commands)]
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
        shutil.rmtree(pycache, ignore_errors=True)
        shutil.rmtree(work / "before", ignore_errors=True)
        for f in work.glob(registry.name + "*"):
            f.unlink()
        if not args.keep:
            for name in names:
                shutil.rmtree(work / name, ignore_errors=True)

    load_after = os.getloadavg()
    notes.append("load average (1, 5, 15 min) at start {:.2f} {:.2f} {:.2f}, at end {:.2f} {:.2f} {:.2f}; "
                 "the machine has {} cores".format(*load_before, *load_after, os.cpu_count()))
    toys = {n for n, (s, _) in sizes.items() if s.toy} | {f"{n} .bin" for n, (s, _) in bin_sizes.items() if s.toy}
    rows, failures = rows_and_failures(all_ops, toys)
    summary = target_summary(all_ops, toys)
    table = markdown_table(rows)
    print()
    print(table)
    print()
    for line in summary:
        print(f"target: {line}")
    for line in failures:
        print(f"FAILED: {line}")
    for line in progress:
        print(f"progress: {line}")
    for line in imports:
        print(f"imports: {line}")
    if str(args.out) != "-":
        write_results(args.out, table, summary, failures, notes, progress, argv, machine(), sizes, bin_sizes, imports)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
