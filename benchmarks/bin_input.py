"""The `.bin` input: the drafter as original EAGLE publishes it, a torch zip `pytorch_model.bin`
written here without torch, and the commands timed on it."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
import time
import zipfile
from pathlib import Path

from eagle3_convert.safetensors_io import read_tensor_table

from cases import GEN_CHUNK, Op, Size, generate, target_config
from peers import TORCH_READ, before_cli, has_torch

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
