"""Behaviours the mutation run (tools/mutation.py, issue 26) showed no test pinned: each test here kills mutants
that survived the rest of the suite, through the real CLI on files written by tests/builders.py (independently of
our writers) or on the real registry. tools/MUTATION-RESULTS.md names the mutants each one kills.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from builders import DrafterSpec, RawTensor, stored_tensors
from conftest import EXAMPLE, run_cli
from registry_backends import did, sql
from test_caught_bugs import validate_codes, write_checkpoint

from eagle3_convert.registry.errors import RegistryError
from eagle3_convert.registry.models import LineageEdge, Location
from eagle3_convert.registry.store import open_registry

SPEC = DrafterSpec(num_layers=1)  # vocab_size 96, draft_vocab_size 32
V, VD = SPEC.vocab_size, SPEC.vd


def d2t(values: list[int], dtype: str = "I64") -> RawTensor:
    code = {"I64": "q", "I32": "i"}[dtype]
    return RawTensor(dtype, (len(values),), struct.pack(f"<{len(values)}{code}", *values))


def t2d(target_ids: list[int], dtype: str = "BOOL") -> RawTensor:
    mask = bytearray(V)
    for t in target_ids:
        mask[t] = 1
    return RawTensor(dtype, (V,), bytes(mask))


def vocab_findings(tmp_path: Path, tensors: dict[str, RawTensor]) -> list[dict]:
    src = write_checkpoint(tmp_path / "src", "speculators", SPEC, tensors)
    exit_code, findings = validate_codes(src)
    assert exit_code == 1, findings
    return [f for f in findings if f["code"].startswith("E-VOCAB")]


def header(path: Path) -> dict:
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n])


# ------------------------------------------------------------------ vocab_map: a d2t stored as absolute ids

SPREAD = [3 * i for i in range(VD)]  # valid target ids, strictly increasing; i + SPREAD[i] overflows V


def swapped(values: list[int], i: int) -> list[int]:
    out = list(values)
    out[i], out[i + 1] = out[i + 1], out[i]
    return out


@pytest.mark.parametrize("offsets, code", [
    (SPREAD, "E-VOCAB-ABSOLUTE"),  # starts at target id 0, which is a valid id (0 <= v)
    ([3 * i + 1 for i in range(VD - 1)] + [V], "E-VOCAB-RANGE"),  # the last value is V itself: not a valid id
    (swapped(SPREAD, 10), "E-VOCAB-RANGE"),  # valid ids, not sorted (two neighbours swapped)
    (SPREAD[:11] + [SPREAD[10]] + SPREAD[12:], "E-VOCAB-RANGE"),  # valid ids, one repeated: not strictly increasing
], ids=["absolute-from-0", "last-is-V", "neighbours-swapped", "repeated"])
def test_a_d2t_without_t2d_is_called_absolute_only_when_it_reads_as_sorted_valid_ids(tmp_path: Path, offsets, code):
    """Without t2d to compare with, an overflowing arange(Vd) + d2t is blamed on absolute ids only when d2t itself
    is a strictly increasing list of ids in [0, V); otherwise it is out of range, and the repair hint would be wrong."""
    tensors = stored_tensors("speculators", SPEC)
    del tensors["t2d"]
    tensors["d2t"] = d2t(offsets)
    codes = [f["code"] for f in vocab_findings(tmp_path, tensors)]
    assert sorted(codes) == sorted([code, "E-VOCAB-NO-T2D"]), codes


def test_an_absolute_d2t_inside_the_vocab_is_said_to_disagree_with_t2d(tmp_path: Path):
    """d2t == nonzero(t2d) (absolute ids) while arange(Vd) + d2t stays inside V: nothing exceeds the vocab, so the
    message says it disagrees with t2d, not that 0 entries exceed it."""
    ids = list(range(VD))
    tensors = {**stored_tensors("speculators", SPEC), "d2t": d2t(ids), "t2d": t2d(ids)}
    [found] = vocab_findings(tmp_path, tensors)
    assert found["code"] == "E-VOCAB-ABSOLUTE"
    assert "arange(Vd) + d2t disagrees with nonzero(t2d);" in found["message"], found["message"]


def test_an_absolute_d2t_reaching_exactly_v_counts_as_exceeding_the_vocab(tmp_path: Path):
    """Target id V is already outside [0, V): one entry landing exactly on V is counted."""
    ids = list(range(VD - 1)) + [V - VD + 1]  # the last: (VD - 1) + ids[-1] == V
    tensors = {**stored_tensors("speculators", SPEC), "d2t": d2t(ids), "t2d": t2d(ids)}
    [found] = vocab_findings(tmp_path, tensors)
    assert found["code"] == "E-VOCAB-ABSOLUTE"
    assert f"exceeds the target vocab (1 of {VD} entries >= {V})" in found["message"], found["message"]


# ------------------------------------------------------------------ vocab_map: the vocab map written by convert

@pytest.mark.parametrize("stored", [("d2t", "I32"), ("t2d", "U8"), ("t2d only", "U8")],
                         ids=["d2t-I32", "t2d-U8", "t2d-only-U8"])
def test_convert_writes_d2t_as_int64_and_t2d_as_bool_whatever_the_source_held(tmp_path: Path, stored):
    """A source may hold d2t as int32 or t2d as uint8, or only t2d (all read fine); the output is what the engines
    load: int64 offsets and a bool mask, with the same values."""
    tensors = stored_tensors("speculators", SPEC)
    name, dtype = stored
    offsets = list(struct.unpack(f"<{VD}q", tensors["d2t"].data))
    target_ids = [i + o for i, o in enumerate(offsets)]
    tensors[name.split()[0]] = d2t(offsets, dtype) if name == "d2t" else t2d(target_ids, dtype)
    if name == "t2d only":
        del tensors["d2t"]
    src = write_checkpoint(tmp_path / "src", "speculators", SPEC, tensors)
    result = run_cli("--to", "vllm", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    out = tmp_path / "out" / "model.safetensors"
    written = header(out)
    assert (written["d2t"]["dtype"], written["t2d"]["dtype"]) == ("I64", "BOOL")
    data = out.read_bytes()
    base = 8 + struct.unpack("<Q", data[:8])[0]
    d2t_start, d2t_end = written["d2t"]["data_offsets"]
    t2d_start, t2d_end = written["t2d"]["data_offsets"]
    assert list(struct.unpack(f"<{VD}q", data[base + d2t_start:base + d2t_end])) == offsets
    assert data[base + t2d_start:base + t2d_end] == t2d(target_ids).data


# ------------------------------------------------------------------ vocab_map: the words of each vocab refusal

def f32(n: int) -> RawTensor:
    return RawTensor("F32", (n,), bytes(4 * n))


@pytest.mark.parametrize("name, tensor, message, hint", [
    ("d2t", f32(VD), "d2t has dtype F32; it must be an integer tensor",
     "d2t holds int64 offsets (target = draft + d2t); re-export the vocab map"),
    ("t2d", f32(V), "t2d has dtype F32; it must be a bool mask",
     "t2d marks the target ids present in the draft vocab"),
], ids=["d2t", "t2d"])
def test_a_vocab_tensor_of_the_wrong_dtype_is_refused_with_what_it_must_hold(tmp_path: Path, name, tensor, message,
                                                                            hint):
    """The user reads the message and the hint, nothing else: both name the tensor and what it must hold."""
    tensors = {**stored_tensors("speculators", SPEC), name: tensor}
    [found] = vocab_findings(tmp_path, tensors)
    assert (found["code"], found["message"], found["hint"]) == ("E-VOCAB-DTYPE", message, hint)


# ------------------------------------------------------------------ vocab_map: each refusal, word for word

BASE = stored_tensors("speculators", SPEC)
OFFSETS = list(struct.unpack(f"<{VD}q", BASE["d2t"].data))
IDS = [i + o for i, o in enumerate(OFFSETS)]  # the builder's draft vocab as target ids


def without(*names: str) -> dict[str, RawTensor]:
    return {n: t for n, t in BASE.items() if n not in names}


# convert names the whole command to run instead: its own, repaired (SRC and OUT: the test's paths)
REPAIR = "repair with `eagle3-convert --repair-d2t-absolute --to vllm SRC OUT` (d2t := d2t - arange(Vd))"
REFUSALS = {  # case: (tensors, the one-line error convert ends with)
    "no-map": (without("d2t", "t2d"),
               "draft_vocab_size 32 differs from vocab_size 96 but the checkpoint has neither d2t nor t2d "
               "[E-VOCAB-MISSING] — hint: the draft->target vocabulary map is missing: re-export it with the "
               "checkpoint (d2t offsets, t2d mask)"),
    "d2t-shape": ({**BASE, "d2t": d2t(OFFSETS[:-1])},
                  "d2t has shape [31], expected [32] (draft_vocab_size) [E-VOCAB-SHAPE] — hint: config "
                  "draft_vocab_size and d2t disagree"),
    "t2d-2d": ({**BASE, "t2d": RawTensor("BOOL", (V, 1), t2d(IDS).data)},  # V rows, but not a vector
               "t2d has shape [96, 1], expected [96] (target vocab_size) [E-VOCAB-SHAPE] — hint: config "
               "vocab_size and t2d disagree"),
    "t2d-count": ({**BASE, "t2d": t2d(IDS[:-1])},
                  "t2d marks 31 target ids, expected draft_vocab_size 32 [E-VOCAB-T2D] — hint: t2d must have "
                  "exactly Vd true entries"),
    "absolute": ({**BASE, "d2t": d2t(IDS)},
                 "d2t holds absolute target ids, not offsets (target = draft + d2t): its values equal nonzero(t2d), "
                 "and arange(Vd) + d2t exceeds the target vocab (6 of 32 entries >= 96); every engine would map "
                 f"draft tokens to the wrong target tokens [E-VOCAB-ABSOLUTE] — hint: {REPAIR}"),
    "mismatch": ({**BASE, "d2t": d2t(OFFSETS[::-1])},
                 "d2t and t2d disagree: nonzero(t2d) != arange(Vd) + d2t [E-VOCAB-MISMATCH] — hint: the vocab map "
                 "is inconsistent: re-export it from the training run"),
    "absolute-no-t2d": ({**without("t2d"), "d2t": d2t(SPREAD)},
                        "d2t looks like absolute target ids, not offsets: arange(Vd) + d2t exceeds the target vocab "
                        "(8 of 32 entries >= 96), while d2t itself is a strictly increasing list of valid target ids "
                        f"[E-VOCAB-ABSOLUTE] — hint: if so, {REPAIR}"),
    "range-no-t2d": ({**without("t2d"), "d2t": d2t(swapped(SPREAD, 10))},
                     "arange(Vd) + d2t gives 8 target id(s) outside [0, 96), e.g. 96 (d2t stored as absolute ids?) "
                     "[E-VOCAB-RANGE] — hint: d2t must hold offsets (target id - draft id) into the target vocab; "
                     "re-export the vocab map from the trainer"),
    "order-no-t2d": ({**without("t2d"), "d2t": d2t([t - i for i, t in enumerate(swapped(IDS, 10))])},
                     "arange(Vd) + d2t is not strictly increasing: draft ids are not the target ids in ascending "
                     "order [E-VOCAB-ORDER] — hint: re-export the vocab map"),
}


@pytest.mark.parametrize("case", REFUSALS)
def test_each_vocab_refusal_says_what_is_wrong_and_what_to_do(tmp_path: Path, case: str):
    """The message and the hint are all the user gets: each refusal of a bad vocab map, as convert prints it."""
    tensors, error = REFUSALS[case]
    src = write_checkpoint(tmp_path / "src", "speculators", SPEC, tensors)
    result = run_cli("--to", "vllm", src, tmp_path / "out")
    assert result.exit_code == 1
    error = error.replace("SRC OUT", f"{src} {tmp_path / 'out'}")
    assert result.stderr.splitlines()[-1] == f"error: {error}", result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "out").exists()


# ------------------------------------------------------------------ registry writes: copies forgotten, twins merged

def test_forget_location_spares_the_drafter_kept_and_touches_the_others(registry_url, tmp_path: Path):
    """A directory overwritten by another drafter's output: every other record forgets that copy (and says so
    in its updated_at), the drafter now there keeps it; with nothing kept, every record forgets it."""
    shared = Location.local(tmp_path / "out", "vllm")
    kept, stale, other = did("kept"), did("stale"), did("other")
    with open_registry(registry_url) as store:
        for drafter_id in (kept, stale, other):
            store.upsert_drafter(drafter_id, locations=[shared])
        before = store.get(stale)
        assert store.forget_location(shared.uri, keep=kept) == 2
        assert store.holding(shared.uri) == [kept]
        assert store.get(stale).updated_at > before.updated_at
        assert store.get(kept).locations == [shared]

        assert store.forget_location(shared.uri) == 1
        assert store.holding(shared.uri) == []


def test_add_alias_says_whether_the_alias_is_new(registry_url):
    one, two = did("one"), did("two")
    fingerprint = "ab" * 32
    with open_registry(registry_url) as store:
        store.upsert_drafter(one)
        store.upsert_drafter(two)
        assert store.add_alias(fingerprint, one) is True
        assert store.add_alias(fingerprint, two) is False  # it already names a drafter, which stays
        assert store.aliased(fingerprint) == one


def test_absorb_moves_the_twins_copies_and_touches_the_record_kept(registry_url, tmp_path: Path):
    twin, into = did("twin"), did("into")
    hub = Location.hub("acme/drafter", "sglang", revision="9f1c2e7")
    local = Location.local(tmp_path / "drafter", "speculators")
    with open_registry(registry_url) as store:
        store.upsert_drafter(twin, locations=[hub])
        store.upsert_drafter(into, locations=[local])
        before = store.get(into)
        store.absorb(twin, into)
        merged = store.get(into)
        assert store.aliased(twin) == into and store.get(twin) == merged  # the twin's id now names the record kept
        assert sorted(loc.uri for loc in merged.locations) == sorted([hub.uri, local.uri])
        assert merged.updated_at > before.updated_at


def test_a_new_record_is_created_and_updated_at_the_same_instant(registry_url, tmp_path: Path):
    with open_registry(registry_url) as store:
        record = store.upsert_drafter(did("new"))
        assert record.created_at == record.updated_at
        before = record.updated_at
        # A copy not yet recorded: added (True) and the record touched; the same copy again: nothing (False).
        copy = Location.local(tmp_path / "copy", "sglang")
        assert store.add_location(did("new"), copy) is True
        assert store.get(did("new")).updated_at > before
        assert store.add_location(did("new"), copy) is False


def test_upsert_onto_an_unreadable_record_names_the_registry(tmp_path: Path):
    """A record the registry cannot read any more (edited by hand, written by a newer tool): writing to it stops
    with a message that says which registry file holds it."""
    path = tmp_path / "reg" / "registry.db"
    with open_registry(path) as store:
        store.upsert_drafter(did("broken"), capture_boundaries=[2, 16, 29])
    sql(path, "UPDATE drafters SET capture_boundaries = '[-1]' WHERE drafter_id = ?", params=(did("broken"),))
    with open_registry(path) as store, pytest.raises(RegistryError) as refused:
        store.upsert_drafter(did("broken"), trained_with="SpecForge")
    assert refused.value.message.startswith(f"the registry {path} holds a record it cannot read"), refused.value


@pytest.mark.parametrize("new", ["location", "edge"])
def test_recording_one_new_copy_or_conversion_touches_the_record(registry_url, tmp_path: Path, new: str):
    """Re-recording a drafter whose fields are unchanged: a copy or a conversion not seen before is news (updated_at
    moves) even when everything else given was already recorded; given nothing new, the record stays as it was."""
    drafter_id = did("touched")
    first, second = (Location.local(tmp_path / name, "sglang") for name in ("first", "second"))
    edge = LineageEdge(source=first, dest=second, tool="eagle3-convert")
    with open_registry(registry_url) as store:
        before = store.upsert_drafter(drafter_id, locations=[first], lineage=[] if new == "edge" else [edge])
        assert store.upsert_drafter(drafter_id, locations=[first], lineage=[] if new == "edge" else [edge]) == before
        again = store.upsert_drafter(drafter_id, locations=[first, second] if new == "location" else [first],
                                     lineage=[edge])
        assert again.updated_at > before.updated_at
        assert store.get(drafter_id) == again


def test_a_d2t_only_map_reaching_target_ids_0_and_v_minus_1_converts(tmp_path: Path):
    """The edges of the target vocab are valid target ids: a draft vocab holding ids 0 and V - 1 (d2t only, so
    validity is checked on arange(Vd) + d2t alone) converts, and the written t2d marks both."""
    ids = [0] + IDS[1:-1] + [V - 1]
    assert ids == sorted(set(ids)) and len(ids) == VD
    tensors = {**without("t2d"), "d2t": d2t([t - i for i, t in enumerate(ids)])}
    src = write_checkpoint(tmp_path / "src", "speculators", SPEC, tensors)
    result = run_cli("--to", "vllm", src, tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    out = tmp_path / "out" / "model.safetensors"
    data, written = out.read_bytes(), header(out)
    start, end = written["t2d"]["data_offsets"]
    base = 8 + struct.unpack("<Q", data[:8])[0]
    assert data[base + start:base + end] == t2d(ids).data


# ------------------------------------------------------------------ atomic: the words of a --force refusal

FORCE_ONLY = ("--force replaces only what a checkpoint writer writes (config.json, weights and index, "
              "eagle3-convert.json, generation and tokenizer files)")


@pytest.mark.parametrize("strays", [1, 6, 7])
def test_force_refusal_names_up_to_six_files_of_the_user_and_counts_the_rest(tmp_path: Path, strays: int):
    """`--force` onto a checkpoint with files of the user beside it: the refusal names the first six, counts the
    others, and the hint says to move 'it' or 'them'; DST is left as it was."""
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "config.json").write_text("{}")
    names = [f"notes-{i}.txt" for i in range(strays)]
    for name in names:
        (dst / name).write_text("mine")
    result = run_cli("--to", "sglang", "--force", EXAMPLE, dst)
    assert result.exit_code == 1
    shown = ", ".join(names[:6]) + (f" (and {strays - 6} more)" if strays > 6 else "")
    assert result.stderr.splitlines()[-1] == (
        f"error: --force would delete {dst}, which holds files no checkpoint writer writes: {shown} "
        f"[E-DEST-NOT-CHECKPOINT] — hint: move {'it' if strays == 1 else 'them'} out of {dst}, or choose another "
        f"destination; {FORCE_ONLY}"), result.stderr
    assert sorted(p.name for p in dst.iterdir()) == sorted(["config.json", *names])


def test_force_onto_a_destination_that_does_not_exist_yet_just_writes_it(tmp_path: Path):
    """`--force` with nothing to replace: the conversion writes DST and says it replaced nothing."""
    dst = tmp_path / "new" / "dst"
    result = run_cli("--to", "sglang", "--force", EXAMPLE, dst)
    assert result.exit_code == 0, result.stderr
    assert (dst / "config.json").is_file() and "replac" not in result.stdout + result.stderr


def test_a_stored_value_that_is_not_json_is_a_one_line_registry_error(tmp_path: Path):
    """A JSON column edited into something that is not JSON: `registry list` names the registry, no traceback."""
    from conftest import run_cli

    path = tmp_path / "reg" / "registry.db"
    with open_registry(path) as store:
        store.upsert_drafter(did("broken"), capture_boundaries=[2, 16, 29])
    sql(path, "UPDATE drafters SET capture_boundaries = '[2, 16,' WHERE drafter_id = ?", params=(did("broken"),))
    listed = run_cli("registry", "list", "--registry", path)
    assert listed.exit_code == 1, listed.stdout + listed.stderr
    assert f"the registry {path} holds a record it cannot read: a stored JSON value" in listed.stderr
    assert "Traceback" not in listed.stdout + listed.stderr
