"""pytorch_model.bin read without torch: every tensor is the byte range torch.load decodes, byte for byte.

torch (the `test` extra) is the reference here and only here: the reader under test never imports it
for a zip checkpoint, which the import test proves on real processes. The hostile side (code-running
pickles, broken zips) is in the corpus of tests/hostile.py, run by tests/test_hostile.py.
"""

from __future__ import annotations

import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DATA, REPO, run_cli
from hostile import EXAMPLE, example_bin, valid_torch_bin

from eagle3_convert.bin_reader import read_bin_file, read_bin_tensors
from eagle3_convert.errors import FormatError
from eagle3_convert.safetensors_io import TensorRef, read_tensor_bytes, read_tensor_table
from eagle3_convert.torch_zip import read_state_dict

torch = pytest.importorskip("torch")

EAGLE_BIN = DATA / "eagle-original" / "checkpoint" / "pytorch_model.bin"
SAFETENSORS_DTYPES = {torch.bfloat16: "BF16", torch.float16: "F16", torch.float32: "F32", torch.float64: "F64",
                      torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
                      torch.uint8: "U8", torch.bool: "BOOL", torch.float8_e4m3fn: "F8_E4M3",
                      torch.float8_e5m2: "F8_E5M2", torch.uint16: "U16", torch.uint32: "U32", torch.uint64: "U64"}


def torch_bytes(t) -> bytes:
    """A tensor's values as raw little-endian bytes, row-major: what torch.load gives, as safetensors stores it."""
    return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""


def assert_same_as_torch_load(path: Path) -> int:
    """Our reading of `path` against torch.load(weights_only=True): names, order, dtypes, shapes, bytes."""
    ours = read_bin_file(path, path.name)
    theirs = torch.load(path, map_location="cpu", weights_only=True)
    assert list(ours) == list(theirs)
    for name, value in theirs.items():
        ref = ours[name]
        assert isinstance(ref, TensorRef) and ref.file == path  # a byte range of the file, nothing decoded
        assert (ref.dtype, ref.shape) == (SAFETENSORS_DTYPES[value.dtype], tuple(value.shape)), name
        assert read_tensor_bytes(ref) == torch_bytes(value), name
    return len(theirs)


def seeded(shape, dtype, seed: int):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if not dtype.is_floating_point:
        return torch.randint(-1000, 1000, shape, generator=g).to(dtype)
    return torch.randn(shape, generator=g).to(dtype)


def test_the_original_eagle_checkpoint_matches_torch_load():
    assert assert_same_as_torch_load(EAGLE_BIN) == 15


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.float64, torch.int64,
                                   torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool,
                                   torch.float8_e4m3fn, torch.float8_e5m2, torch.uint16, torch.uint32],
                         ids=str)
def test_every_dtype_matches_torch_load(dtype, tmp_path: Path):
    """Legacy typed storages (_rebuild_tensor_v2) and the newer dtypes (_rebuild_tensor_v3, untyped storage)."""
    state = {"w": seeded((3, 5), dtype, 1), "v": seeded((7,), dtype, 2), "s": seeded((), dtype, 3),
             "empty": seeded((0, 4), dtype, 4)}
    torch.save(state, tmp_path / "pytorch_model.bin")
    assert assert_same_as_torch_load(tmp_path / "pytorch_model.bin") == 4


def test_a_drafter_state_dict_matches_torch_load(tmp_path: Path):
    """What EAGLE trains and saves: model.state_dict() (an OrderedDict with _metadata), bf16 weights, an
    int64 d2t and a bool t2d, parameters among them."""
    model = torch.nn.Sequential(torch.nn.Linear(8, 16, bias=False), torch.nn.LayerNorm(16)).to(torch.bfloat16)
    state = model.state_dict()
    target_ids = torch.tensor([0, 3, 4, 9, 11, 20])
    state["d2t"] = target_ids - torch.arange(6)
    state["t2d"] = torch.zeros(32, dtype=torch.bool).index_fill_(0, target_ids, True)
    state["param"] = torch.nn.Parameter(seeded((4, 4), torch.float16, 5), requires_grad=True)
    torch.save(state, tmp_path / "pytorch_model.bin")
    assert hasattr(state, "_metadata")
    assert assert_same_as_torch_load(tmp_path / "pytorch_model.bin") == 6


def test_shared_storages_and_views_with_offsets_match_torch_load(tmp_path: Path):
    """Several tensors over one storage, views starting past its beginning, size-1 dimensions with any stride."""
    base = seeded((10, 6), torch.float32, 6)
    state = {"base": base, "rows": base[2:5], "row": base[7], "tail": base.view(-1)[13:19],
             "same": base, "unsqueezed": base[4].unsqueeze(0), "size1": seeded((4, 1), torch.bfloat16, 7).t()}
    assert state["size1"].stride() == (1, 1) and state["size1"].is_contiguous()
    torch.save(state, tmp_path / "pytorch_model.bin")
    assert assert_same_as_torch_load(tmp_path / "pytorch_model.bin") == len(state)
    refs = read_bin_file(tmp_path / "pytorch_model.bin", "pytorch_model.bin")
    assert refs["rows"].start == refs["base"].start + 2 * 6 * 4  # one storage, read where the view starts
    assert refs["same"] == TensorRef(refs["base"].file, "same", "F32", (10, 6), refs["base"].start, refs["base"].end)


@pytest.mark.parametrize("saved_as", ["my drafter (copy).bin", "modèle-ébauche.pt", "archive"])
def test_the_archive_takes_any_plain_name_torch_gives_it(saved_as: str, tmp_path: Path):
    """torch names the archive's directory after the file it saved to; renamed to pytorch_model.bin later,
    the directory keeps that name (spaces, accents, no extension)."""
    torch.save({"w": seeded((4, 4), torch.bfloat16, 8)}, tmp_path / saved_as)
    os.rename(tmp_path / saved_as, tmp_path / "pytorch_model.bin")
    assert assert_same_as_torch_load(tmp_path / "pytorch_model.bin") == 1


def test_the_hand_built_corpus_base_is_what_torch_reads(tmp_path: Path):
    """The hostile corpus' valid base (pickles assembled by hand, no torch) is a torch checkpoint to torch too,
    and holds the example's tensors byte for byte."""
    valid_torch_bin(tmp_path / "ckpt")
    assert assert_same_as_torch_load(tmp_path / "ckpt" / "pytorch_model.bin") == len(example_bin()[0])
    ours, _ = read_bin_tensors(tmp_path / "ckpt", ["pytorch_model.bin"])
    example, _ = read_tensor_table(EXAMPLE)
    assert {n: read_tensor_bytes(r) for n, r in ours.items()} == {n: read_tensor_bytes(r) for n, r in example.items()}


def test_conversion_copies_the_bytes_torch_load_gives(tmp_path: Path):
    """convert of a .bin (here with a storage two tensors share) writes exactly torch.load's values."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_bytes((EAGLE_BIN.parent / "config.json").read_bytes())
    state = torch.load(EAGLE_BIN, weights_only=True)
    joined = torch.cat([state["midlayer.input_layernorm.weight"], state["norm.weight"]])
    state["midlayer.input_layernorm.weight"], state["norm.weight"] = joined[:joined.numel() // 2], \
        joined[joined.numel() // 2:]
    torch.save(state, src / "pytorch_model.bin")
    result = run_cli("--to", "eagle", "--no-record", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    written, _ = read_tensor_table(tmp_path / "out")
    assert {n: read_tensor_bytes(r) for n, r in written.items()} == {n: torch_bytes(v) for n, v in state.items()}


def test_a_non_contiguous_tensor_is_refused_in_one_line(tmp_path: Path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_bytes((EAGLE_BIN.parent / "config.json").read_bytes())
    state = torch.load(EAGLE_BIN, weights_only=True)
    state["fc.weight"] = state["fc.weight"].t().contiguous().t()  # same values, column-major strides
    torch.save(state, src / "pytorch_model.bin")
    result = run_cli("inspect", src)
    assert result.exit_code == 1
    (line,) = result.stderr.splitlines()
    assert "[E-BIN-FORMAT]" in line and "not contiguous" in line and "v.contiguous()" in line


def test_a_sharded_bin_checkpoint_is_checked_against_its_index(tmp_path: Path):
    import json

    state = torch.load(EAGLE_BIN, weights_only=True)
    names = sorted(state)
    half = len(names) // 2
    shards = {"pytorch_model-00001-of-00002.bin": names[:half], "pytorch_model-00002-of-00002.bin": names[half:]}
    for shard, members in shards.items():
        torch.save({n: state[n] for n in members}, tmp_path / shard)
    index = {"weight_map": {n: shard for shard, members in shards.items() for n in members}}
    (tmp_path / "pytorch_model.bin.index.json").write_text(json.dumps(index))
    tensors, files = read_bin_tensors(tmp_path, sorted(shards))
    assert files == sorted(shards) and sorted(tensors) == names
    index["weight_map"][names[0]] = "pytorch_model-00002-of-00002.bin"
    (tmp_path / "pytorch_model.bin.index.json").write_text(json.dumps(index))
    with pytest.raises(FormatError) as refused:
        read_bin_tensors(tmp_path, sorted(shards))
    assert refused.value.code == "E-FILE-INDEX"


# ------------------------------------------------------------------ zip64 (what torch writes past 4 GiB)


def as_zip64(blob: bytes) -> bytes:
    """The same archive with every size and offset moved into zip64 fields and zip64 end records, as a
    writer does for files over 4 GiB (local headers and data unchanged)."""
    (_, _, _, _, count, cd_size, cd_offset, _) = struct.unpack("<4s4H2LH", blob[-22:])
    entries, pos = [], cd_offset
    for _ in range(count):
        fixed = bytearray(blob[pos:pos + 46])
        nlen, xlen, clen = struct.unpack_from("<3H", fixed, 28)
        csize, usize = struct.unpack_from("<2L", fixed, 20)
        (offset,) = struct.unpack_from("<L", fixed, 42)
        name = blob[pos + 46:pos + 46 + nlen]
        extra = struct.pack("<HH3Q", 1, 24, usize, csize, offset)
        struct.pack_into("<2L", fixed, 20, 0xFFFFFFFF, 0xFFFFFFFF)
        struct.pack_into("<L", fixed, 42, 0xFFFFFFFF)
        struct.pack_into("<H", fixed, 30, len(extra))
        entries.append(bytes(fixed) + name + extra)
        pos += 46 + nlen + xlen + clen
    cd = b"".join(entries)
    z64_at = cd_offset + len(cd)
    z64 = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, len(cd), cd_offset)
    locator = struct.pack("<4sLQL", b"PK\x06\x07", 0, z64_at, 1)
    eocd = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
    return blob[:cd_offset] + cd + z64 + locator + eocd


def test_a_zip64_archive_reads_the_same(tmp_path: Path):
    import zipfile

    path = tmp_path / "pytorch_model.bin"
    path.write_bytes(as_zip64(EAGLE_BIN.read_bytes()))
    assert zipfile.ZipFile(path).namelist() == zipfile.ZipFile(EAGLE_BIN).namelist()  # a zip64 zipfile reads too
    zip64 = read_state_dict(path, path.name)
    plain = read_state_dict(EAGLE_BIN, EAGLE_BIN.name)
    assert {n: (r.start, r.end, r.dtype, r.shape) for n, r in zip64.items()} == \
        {n: (r.start, r.end, r.dtype, r.shape) for n, r in plain.items()}
    assert assert_same_as_torch_load(path) == 15


# ------------------------------------------------------------------ torch is optional


def run_python(code: str, *args: str, **kw) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")}
    env.update(HF_HUB_OFFLINE="1", PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, *kw.pop("flags", []), "-c", code, *args], capture_output=True, text=True,
                          env=env, timeout=120, **kw)


WITHOUT_TORCH = """
import sys
sys.modules["torch"] = None  # `import torch` now raises ImportError, as where the extra is not installed
sys.argv = ["eagle3-convert", *sys.argv[1:]]
from eagle3_convert.__main__ import run
run()
"""


@pytest.mark.parametrize("command", ["inspect", "validate", "convert"])
def test_bin_commands_do_not_import_torch(command: str, tmp_path: Path):
    argv = {"inspect": ["inspect", str(EAGLE_BIN.parent)], "validate": ["validate", str(EAGLE_BIN.parent)],
            "convert": ["--to", "speculators", "--verifier", "org/target", "--no-record", str(EAGLE_BIN.parent),
                        str(tmp_path / "out")]}[command]
    code = "import sys; sys.argv = ['eagle3-convert', *sys.argv[1:]]\nfrom eagle3_convert.__main__ import run\nrun()"
    done = run_python(code, *argv, flags=["-X", "importtime"], cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr[-2000:]  # validate may exit 1 on findings; it ran
    assert "Traceback" not in done.stderr
    imported = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert "eagle3_convert.torch_zip" in imported  # the .bin was read...
    assert not [m for m in imported if re.fullmatch(r"torch(\..*)?", m)]  # ...and torch never imported
    # Blocked outright, the command still works.
    done = run_python(WITHOUT_TORCH, *argv[:-1], str(tmp_path / "out2") if command == "convert" else argv[-1],
                      cwd=tmp_path)
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr and "E-BIN-TORCH" not in done.stderr


def test_a_legacy_bin_without_torch_names_the_extra_in_one_line(tmp_path: Path):
    src = tmp_path / "legacy"
    src.mkdir()
    (src / "config.json").write_bytes((EAGLE_BIN.parent / "config.json").read_bytes())
    torch.save(torch.load(EAGLE_BIN, weights_only=True), src / "pytorch_model.bin",
               _use_new_zipfile_serialization=False)
    done = run_python(WITHOUT_TORCH, "inspect", str(src), cwd=tmp_path)
    assert done.returncode == 1
    (line,) = done.stderr.splitlines()
    assert "[E-BIN-TORCH]" in line and "eagle3-convert[torch]" in line and "legacy" in line


def test_the_benchmark_bin_writer_writes_what_torch_loads(tmp_path: Path):
    """The benchmarks write their 8b pytorch_model.bin without torch: torch.load must read it as we do."""
    import importlib

    bench = REPO / "benchmarks"
    before = set(sys.modules)
    sys.path.insert(0, str(bench))
    try:  # wherever the benchmark keeps its writer (run.py, or a module beside it)
        candidates = [importlib.import_module(p.stem) for p in sorted(bench.glob("*.py"))
                      if "def write_torch_bin(" in p.read_text()]
    finally:
        sys.path.remove(str(bench))
        for name in set(sys.modules) - before:  # the benchmark's modules have generic names: leave none behind
            if getattr(sys.modules[name], "__file__", "") and str(bench) in sys.modules[name].__file__:
                del sys.modules[name]
    assert candidates, "no benchmark module defines write_torch_bin"
    candidates[0].write_torch_bin(tmp_path / "pytorch_model.bin", EXAMPLE)
    assert assert_same_as_torch_load(tmp_path / "pytorch_model.bin") == len(example_bin()[0])


# ------------------------------------------------------------------ differential fuzzing against torch.load

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hostile import _torch_zip, state_pickle  # noqa: E402

BIN_CODES = {"E-BIN-FORMAT", "E-BIN-UNSAFE", "E-BIN-ZIP", "E-FILE-DTYPE"}


def _mutated(data: bytes, edits: list[tuple[int, int, int]]) -> bytes:
    out = bytearray(data)
    for kind, at, value in edits:
        at %= max(len(out), 1)
        if kind == 0:
            out[at] = value
        elif kind == 1:
            out.insert(at, value)
        elif out:
            del out[at]
    return bytes(out)


@settings(max_examples=int(os.environ.get("BIN_FUZZ_EXAMPLES", "150")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 1 << 16), st.integers(0, 255)), min_size=1,
                      max_size=4))
def test_a_mutated_pickle_is_refused_cleanly_or_read_as_torch_reads_it(edits, tmp_path: Path):
    """Byte edits of a valid data.pkl: we refuse with a code (never another exception), and whatever we
    accept, torch.load(weights_only=True) accepts too, with the same bytes: never looser than torch."""
    tensors, storages = example_bin()
    pkl = _mutated(state_pickle([(t.name, t.pickle()) for t in tensors]), edits)
    path = tmp_path / f"fuzz-{abs(hash(pkl))}.bin"
    path.write_bytes(_torch_zip(pkl, storages))
    try:
        ours = read_state_dict(path, path.name)
    except FormatError as exc:
        assert exc.code in BIN_CODES and "\n" not in str(exc)
        return
    theirs = torch.load(path, map_location="cpu", weights_only=True)  # raises if torch is stricter than we are
    assert list(ours) == list(theirs)
    for name, value in theirs.items():
        assert read_tensor_bytes(ours[name]) == torch_bytes(value) and ours[name].shape == tuple(value.shape)


@settings(max_examples=int(os.environ.get("BIN_FUZZ_EXAMPLES", "150")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 1 << 20), st.integers(0, 255)), min_size=1,
                      max_size=3))
def test_a_mutated_zip_is_refused_cleanly_or_read_as_torch_reads_it(edits, tmp_path: Path):
    """Byte edits anywhere in the archive (directory, headers, data): the same contract as for the pickle."""
    path = tmp_path / f"fuzz-{abs(hash(tuple(edits)))}.bin"
    path.write_bytes(_mutated(EAGLE_BIN.read_bytes(), edits))
    try:
        ours = read_state_dict(path, path.name)
    except FormatError as exc:
        assert exc.code in BIN_CODES and "\n" not in str(exc)
        return
    theirs = torch.load(path, map_location="cpu", weights_only=True)
    assert list(ours) == list(theirs)
    for name, value in theirs.items():
        assert read_tensor_bytes(ours[name]) == torch_bytes(value) and ours[name].shape == tuple(value.shape)
