"""What `registry site` judged before, so that a rebuild reads and judges only the local copies that changed.

A copy's verdicts depend on its files, the record's training facts (target, capture boundaries), the releases
judged and the rules of this tool. The key digests all of them: each file of the copy by its stat (size, mtime,
ctime, inode, as git's index tells a change without reading: a file rewritten, even with its mtime put back, has
another ctime, which no user call can set), the record's facts, the engines and releases, and the files of this
package (its rules are code and data: any other build of the tool judges afresh). A key that matches is the same
judgement the copy would get; anything else is judged again. Hub copies are not cached (read by headers only).

The cache is an SQLite file: $EAGLE3_SITE_CACHE, else $XDG_CACHE_HOME/eagle3-convert/site-verdicts.db (~/.cache
when unset). It is a speed-up, never a source of facts: one that cannot be opened or written is skipped, saying
why, and the site is judged in full. Entries unused for KEEP_DAYS are removed.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

CACHE_ENV = "EAGLE3_SITE_CACHE"
KEEP_DAYS = 30
FORMAT = 1  # of a cached entry: a change of what is stored is a new key


def default_path() -> Path:
    explicit = os.environ.get(CACHE_ENV, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"  # the XDG spec ignores relative values
    return base / "eagle3-convert" / "site-verdicts.db"


def code_digest() -> str:
    """sha256 of this package's files (modules and the data they read: layout schemas, config keys), the site's
    own templates and scripts aside: the rules that judged a copy."""
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parent
    for path in sorted(root.rglob("*")):
        name = path.relative_to(root).parts
        if path.is_file() and "__pycache__" not in name and name[0] != "site_files":
            digest.update("/".join(name).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def copy_state(path: Path) -> list[list[Any]] | None:
    """Each file of a local copy (a directory, walked, or one file) by relative name and stat (through symlinks: a
    Hugging Face snapshot's files are links to its blobs); None when it cannot be listed (then it is not cached)."""
    try:
        if not path.is_dir():
            return [_state(path.name, path.stat())]
        out: list[list[Any]] = []
        _walk(str(path), "", out)
    except OSError:
        return None
    return sorted(out)


def _walk(top: str, prefix: str, out: list[list[Any]]) -> None:
    with os.scandir(top) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                _walk(entry.path, f"{prefix}{entry.name}/", out)
            else:
                out.append(_state(prefix + entry.name, entry.stat()))


def _state(name: str, s: os.stat_result) -> list[Any]:
    return [name, s.st_size, s.st_mtime_ns, s.st_ctime_ns, s.st_ino, s.st_dev]


class VerdictCache:
    """Judged copies by key; `hits` and `judged` count this build's answers."""

    def __init__(self, path: Path | None, context: dict[str, Any]) -> None:
        self.path, self.problem = path, None
        self.hits = self.judged = 0
        self._context = json.dumps({"format": FORMAT, "code": code_digest(), **context}, sort_keys=True)
        self._new: dict[str, str] = {}
        self._used: list[str] = []
        self._conn: sqlite3.Connection | None = None
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(path, timeout=10)
            self._conn.execute("CREATE TABLE IF NOT EXISTS copies (key TEXT PRIMARY KEY, value TEXT NOT NULL, "
                               "used REAL NOT NULL)")
        except (OSError, sqlite3.Error) as exc:
            self._skip(exc)

    def _skip(self, exc: Exception) -> None:
        self.problem = f"verdict cache {self.path} not used: {exc}"
        if self._conn is not None:
            self._conn.close()
        self._conn = None

    def key(self, location: Any, record: Any) -> str | None:
        """The key of a local copy as it is now, with the record's facts; None: not cached (not local, not there)."""
        if self._conn is None or location.kind != "local":
            return None
        state = copy_state(Path(location.uri))
        if not state:
            return None
        facts = {"uri": location.uri, "layout": location.layout, "files": state,
                 "boundaries": record.capture_boundaries,
                 "target": record.target.model_dump(mode="json") if record.target is not None else None}
        return hashlib.sha256((self._context + json.dumps(facts, sort_keys=True)).encode()).hexdigest()

    def get(self, key: str | None) -> dict[str, Any] | None:
        if key is None or self._conn is None:
            return None
        try:
            row = self._conn.execute("SELECT value FROM copies WHERE key = ?", (key,)).fetchone()
            value = json.loads(row[0]) if row else None
        except (sqlite3.Error, ValueError) as exc:
            self._skip(exc)
            return None
        if value is not None:
            self.hits += 1
            self._used.append(key)
        return value

    def put(self, key: str | None, value: dict[str, Any] | None) -> None:
        """A copy read (and judged, unless `value` is None: then it is read again next time)."""
        self.judged += 1
        if key is not None and value is not None and self._conn is not None:
            self._new[key] = json.dumps(value)

    def close(self) -> None:
        """Store what this build judged, mark what it reused, drop what no build used for KEEP_DAYS."""
        if self._conn is None:
            return
        now = time.time()
        try:
            with self._conn:
                self._conn.executemany("INSERT OR REPLACE INTO copies (key, value, used) VALUES (?, ?, ?)",
                                       [(k, v, now) for k, v in self._new.items()])
                self._conn.executemany("UPDATE copies SET used = ? WHERE key = ?", [(now, k) for k in self._used])
                self._conn.execute("DELETE FROM copies WHERE used < ?", (now - KEEP_DAYS * 86400,))
        except sqlite3.Error as exc:
            self._skip(exc)
        else:
            self._conn.close()
            self._conn = None
