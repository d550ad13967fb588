"""Writers at once and writers killed, on both backends (a real SQLite file, a real PostgreSQL database):
separate processes with their own connections lose no record, location, lineage edge or merged
flag; a writer SIGKILLed inside a transaction leaves only what was committed and blocks nobody."""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from registry_backends import backend, count, did, is_postgres, run_python, sql

from eagle3_convert.registry.errors import RegistryError
from eagle3_convert.registry.store import open_registry

DRAFTERS, ADDS, MACHINES, PER_MACHINE = 30, 50, 2, 2


class WriteLock:
    """The backend's write lock held from outside our code: SQLite's BEGIN IMMEDIATE, or the advisory lock
    every PostgreSQL writer takes."""

    def __init__(self, registry) -> None:
        self.registry = registry
        if is_postgres(registry):
            import psycopg

            from eagle3_convert.registry.postgres import WRITE_LOCK

            self.conn = psycopg.connect(str(registry), autocommit=True)
            self.conn.execute("BEGIN")
            self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
        else:
            self.conn = sqlite3.connect(registry, isolation_level=None, check_same_thread=False)
            self.conn.execute("BEGIN IMMEDIATE")

    def release(self) -> None:
        self.conn.execute("COMMIT")
        self.conn.close()


def test_writers_wait_for_the_lock_up_to_the_timeout(registry_url) -> None:
    open_registry(registry_url).close()
    holder = WriteLock(registry_url)
    with open_registry(registry_url, timeout=0.2) as impatient:
        with pytest.raises(RegistryError) as locked:
            impatient.upsert_drafter(did("impatient"))
        assert "locked" in locked.value.message and locked.value.hint
        assert impatient.list() == []  # readers do not wait for the writer

    release = threading.Timer(0.3, holder.release)
    release.start()
    try:
        with open_registry(registry_url, timeout=10) as patient:
            start = time.monotonic()
            patient.upsert_drafter(did("patient"))
            assert time.monotonic() - start >= 0.2
            assert [r.drafter_id for r in patient.list()] == [did("patient")]
    finally:
        release.join()


ADDER = """
import hashlib, os, sys, time
from eagle3_convert.registry.models import LineageEdge, Location
from eagle3_convert.registry.store import open_registry
registry, machine, worker, go, drafters, adds = sys.argv[1:7]
while not os.path.exists(go):
    time.sleep(0.005)
with open_registry(registry, timeout=120) as store:
    for k in range(int(adds)):
        d = k % int(drafters)
        copy = Location(layout="speculators", uri=f"/m{machine}/d{d}")              # the machine's copy: shared
        out = Location(layout="sglang", uri=f"/m{machine}/out/w{worker}/k{k}")    # this add's own output
        hub = Location.hub(f"org/d{d}", "vllm")                                  # shared by every machine
        store.upsert_drafter(
            hashlib.sha256(f"drafter-{d}".encode()).hexdigest(),
            flags={f"m{machine}w{worker}k{k}": True},  # merged key by key: a lost update loses a key for good
            locations=[copy, out, hub],
            lineage=[LineageEdge(source=copy, dest=out, tool="t"), LineageEdge(source=copy, dest=hub, tool="t")],
        )
"""


def test_four_processes_on_two_machines_add_overlapping_drafters(registry_url, tmp_path: Path) -> None:
    go = tmp_path / "go"
    # All start on an empty registry, so they also race to create the schema.
    writers = [run_python(ADDER, str(registry_url), str(m), str(w), str(go), str(DRAFTERS), str(ADDS))
               for m in range(MACHINES) for w in range(PER_MACHINE)]
    go.touch()
    start = time.monotonic()
    for writer in writers:
        _, err = writer.communicate(timeout=300)
        assert writer.returncode == 0, err
    took = time.monotonic() - start

    processes = MACHINES * PER_MACHINE
    expected = {
        "records": DRAFTERS,
        # per machine one copy of each drafter, one output per add, one Hub copy of each drafter
        "locations": MACHINES * DRAFTERS + processes * ADDS + DRAFTERS,
        # copy -> output for every add, copy -> Hub once per machine and drafter
        "edges": processes * ADDS + MACHINES * DRAFTERS,
    }
    got = {"records": count(registry_url, "drafters"), "locations": count(registry_url, "locations"),
           "edges": count(registry_url, "lineage")}
    with open_registry(registry_url) as store:
        records = store.list()
    assert {r.drafter_id for r in records} == {did(f"drafter-{d}") for d in range(DRAFTERS)}
    keys = {r.drafter_id: set(r.flags) for r in records}
    for d in range(DRAFTERS):  # no read-merge-write lost another writer's key
        assert keys[did(f"drafter-{d}")] == {f"m{m}w{w}k{k}" for m in range(MACHINES) for w in range(PER_MACHINE)
                                            for k in range(d, ADDS, DRAFTERS)}
    got["flag keys"] = sum(len(k) for k in keys.values())
    assert got["flag keys"] == processes * ADDS
    assert sum(len(r.locations) for r in records) == expected["locations"]
    print(f"{backend(registry_url)}: {processes} processes x {ADDS} adds in {took:.1f} s: "
          f"expected {expected} and {processes * ADDS} flag keys, got {got}")
    assert got == {**expected, "flag keys": processes * ADDS}
    assert sum(len(r.lineage) for r in records) == expected["edges"]
    if not is_postgres(registry_url):
        assert sql(registry_url, "PRAGMA integrity_check") == [("ok",)]


KILLED_WRITER = """
import sys, time
from eagle3_convert.registry.store import open_registry
registry, pending, *committed = sys.argv[1:]
store = open_registry(registry)
for drafter_id in committed:
    store.upsert_drafter(drafter_id, trained_with="committed")
if hasattr(store, "_conn") and not registry.startswith("postgres"):
    # A one-page cache spills the open transaction's pages into the WAL before COMMIT,
    # so recovery has uncommitted frames to discard, not just an empty lock.
    store._conn.execute("PRAGMA cache_size = 1")
with store.transaction():
    store.upsert_drafter(pending, trained_with="never committed", capture_boundaries=[2, 4, 5])
    store.upsert_drafter(committed[0], trained_with="overwritten, never committed")
    print("in transaction", flush=True)
    time.sleep(60)
"""


def lock_is_held(registry) -> bool:
    if is_postgres(registry):
        from eagle3_convert.registry.postgres import WRITE_LOCK

        return not sql(registry, "SELECT pg_try_advisory_xact_lock(?)", params=(WRITE_LOCK,))[0][0]
    try:
        sql(registry, "PRAGMA busy_timeout = 0", "BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        return "locked" in str(exc)
    return False


def test_writer_killed_mid_transaction_leaves_committed_records_only(registry_url) -> None:
    committed = [did(f"committed-{i}") for i in range(5)]
    pending = did("pending")
    writer = run_python(KILLED_WRITER, str(registry_url), pending, *committed)
    try:
        assert writer.stdout.readline().strip() == "in transaction", writer.stderr.read()
        assert lock_is_held(registry_url)  # the transaction is really open, holding the write lock
    finally:
        os.kill(writer.pid, signal.SIGKILL)
        writer.communicate(timeout=30)
    assert writer.returncode == -signal.SIGKILL

    with open_registry(registry_url, timeout=10) as store:
        assert {r.drafter_id for r in store.list()} == set(committed)
        assert store.get(pending) is None
        assert store.get(committed[0]).trained_with == "committed"
        start = time.monotonic()
        store.upsert_drafter(pending)  # the dead writer's lock is gone
        print(f"{backend(registry_url)}: the next writer committed {time.monotonic() - start:.3f} s after the kill")
        assert store.get(pending) is not None
    if is_postgres(registry_url):  # the server ended the dead writer's session with its transaction
        assert sql(registry_url, "SELECT count(*) FROM pg_stat_activity WHERE state LIKE 'idle in transaction%' "
                                 "AND datname = current_database()") == [(0,)]
    else:
        assert sql(registry_url, "PRAGMA integrity_check") == [("ok",)]
