"""A real PostgreSQL server for the registry tests: one per test session, a fresh database per test.

The server refuses to run as root, so under root initdb and postgres run as `nobody` (setpriv or
runuser), with the data directory in a temporary folder owned by that user. It listens on
127.0.0.1 at a free port with trust authentication, except for the role PASSWORD_USER, which must
give PASSWORD (scram-sha-256): the tests that check a password never leaks need one that counts.
"""

from __future__ import annotations

import glob
import itertools
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import peer_venv
import pytest

NOBODY = 65534
PASSWORD_USER = "alice"
PASSWORD = "Sup3r-s3cret-pw"  # deliberately odd, so a grep for it finds nothing else

STATE: dict[str, str] = {}  # what the session's server reported, for the terminal summary


def find_bin() -> Path | None:
    """The folder holding initdb, pg_ctl and postgres: on PATH, else Debian's /usr/lib/postgresql/N/bin."""
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).parent
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(found[-1]).parent if found else None


def ensure_server_binaries() -> None:
    """Debian's PostgreSQL server where the machine has none."""
    peer_venv.debian_package("PostgreSQL registry tests", "postgresql", lambda: find_bin() is not None)


def why_unavailable() -> str | None:
    """Why the PostgreSQL tests cannot run here (a failure of the tier, see tests/conftest.py), or None."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install -e '.[test]' installs it)"
    if os.geteuid() == 0 and not (shutil.which("setpriv") or shutil.which("runuser")):
        return "running as root without setpriv or runuser: PostgreSQL refuses to run as root"
    return None


def _as_server_user() -> list[str]:
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv"):
        return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
    return ["runuser", "-u", "nobody", "--"]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    def __init__(self) -> None:
        self.bin = find_bin()
        self.root = Path(tempfile.mkdtemp(prefix="eagle3-pg-"))
        self.data, self.log = self.root / "data", self.root / "server.log"
        self.port = 0
        self._names = itertools.count(1)
        if os.geteuid() == 0:
            os.chown(self.root, NOBODY, NOBODY)

    def _run(self, *argv: str) -> None:
        done = subprocess.run([*_as_server_user(), *argv], capture_output=True, text=True, timeout=120)
        if done.returncode:
            raise RuntimeError(f"{argv[0]} failed: {done.stderr[-2000:]}{self._log_tail()}")

    def _log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""

    def start(self) -> None:
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8",
                  "--locale=C", "--no-sync")
        with open(self.data / "pg_hba.conf", "w") as hba:  # password for PASSWORD_USER, trust for the rest
            hba.write(f"host all {PASSWORD_USER} 127.0.0.1/32 scram-sha-256\n"
                      "host all all 127.0.0.1/32 trust\nlocal all all trust\n")
        for attempt in range(3):  # a free port can be taken between the probe and the bind
            self.port = _free_port()
            options = f"-h 127.0.0.1 -p {self.port} -k {self.root} -c fsync=off -c max_connections=200"
            try:
                self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60",
                          "-o", options, "start")
                break
            except RuntimeError:
                if attempt == 2:
                    raise
        with self.admin() as conn:
            STATE["version"] = conn.execute("SHOW server_version").fetchone()[0]
            conn.execute(f"CREATE ROLE {PASSWORD_USER} LOGIN PASSWORD '{PASSWORD}'")

    def admin(self, database: str = "postgres"):
        import psycopg

        return psycopg.connect(self.url(database), autocommit=True)

    def url(self, database: str, user: str = "postgres") -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}"

    def new_database(self, owner: str = "postgres") -> str:
        """A fresh, empty database; its URL."""
        name = f"registry_{os.getpid()}_{next(self._names)}"
        with self.admin() as conn:
            conn.execute(f"CREATE DATABASE {name} OWNER {owner}")
        STATE["databases"] = str(int(STATE.get("databases", "0")) + 1)
        return self.url(name)

    def stop(self) -> None:
        if self.port:
            subprocess.run([*_as_server_user(), str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                            "-w", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(self.root, ignore_errors=True)


def start() -> Server:
    server = Server()
    begun = time.monotonic()
    try:
        server.start()
    except BaseException:
        server.stop()
        raise
    STATE["startup_s"] = f"{time.monotonic() - begun:.1f}"
    return server
