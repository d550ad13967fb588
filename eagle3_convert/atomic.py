"""The atomic directory writer: a checkpoint is written into a locked temp dir beside its
destination, fsynced, and swapped into place in one step, so a reader (or a crash) sees either
the old directory or the complete new one, never a half-written one."""

from __future__ import annotations

import errno
import fnmatch
import glob
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from .errors import DestinationError
from .safetensors_io import TensorSource, write_tensor_files
from .writeback import write_durably

try:
    import fcntl
except ImportError:  # not POSIX: no temp-dir locks, so a dead writer's temp dir is left for the user
    fcntl = None

CONFIG_NAME = "config.json"
SIDECAR_NAME = "eagle3-convert.json"  # what we know of a drafter's training, beside its config (sidecar.py)
TREE_WRITERS = 8  # write_tree's files written and fsynced at once
_EMPTY_TEMP_DIR_AGE_S = 60  # an unlocked empty temp dir this old is a writer killed before its lock


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# The files a checkpoint writer puts in its directory: ours (config.json, the weights and their index, the
# sidecar, a GGUF) and the peers' (HF save_pretrained: generation_config.json, remote code, tokenizer files;
# EAGLE: pytorch_model.bin; ModelOpt: hf_quant_config.json; speculators: config.py). `--force` replaces a
# directory only when every entry matches one of these, and names each; anything else (training state such as
# optimizer.pt or training_args.json, logs, notes, a README.md, a subdirectory) is the user's and is refused.
CHECKPOINT_FILES = (
    CONFIG_NAME, "generation_config.json", SIDECAR_NAME, "hf_quant_config.json", "config.py",
    "model.safetensors", "model-*-of-*.safetensors", "model.safetensors.index.json",
    "pytorch_model.bin", "pytorch_model-*-of-*.bin", "pytorch_model.bin.index.json", "*.gguf",
    "configuration_*.py", "modeling_*.py",
    "tokenizer.json", "tokenizer_config.json", "tokenizer.model", "special_tokens_map.json", "added_tokens.json",
    "vocab.json", "merges.txt", "chat_template.jinja",
)


def _written_by_a_checkpoint_writer(path: Path) -> bool:
    return (path.is_file() and not path.is_symlink()
            and any(fnmatch.fnmatchcase(path.name, pattern) for pattern in CHECKPOINT_FILES))


def force_would_delete(dest: Path) -> list[str]:
    """What `--force` would delete in `dest` that no checkpoint writer writes ([] when it may replace it)."""
    return [p.name + ("/" if p.is_dir() and not p.is_symlink() else "")
            for p in sorted(dest.iterdir()) if not _written_by_a_checkpoint_writer(p)]


def force_replaces(dest: Path) -> list[str]:
    """The files `--force` replaces in `dest` (each one a checkpoint writer writes); [] when there is none."""
    if not dest.is_dir() or dest.is_symlink():
        return []
    return [p.name for p in sorted(dest.iterdir()) if _written_by_a_checkpoint_writer(p)]


def _refuse_force(dest: Path, strays: list[str], force: bool = True) -> DestinationError:
    shown = ", ".join(strays[:6]) + (f" (and {len(strays) - 6} more)" if len(strays) > 6 else "")
    what = "holds files no checkpoint writer writes"
    hint = f"move {'it' if len(strays) == 1 else 'them'} out of {dest}, or choose another destination"
    only = ("only what a checkpoint writer writes (config.json, weights and index, eagle3-convert.json, generation "
            "and tokenizer files)")
    if not force:  # --force would be refused too: the hint must not send the user there
        return DestinationError(f"destination {dest} is not empty and {what}: {shown}",
                                f"{hint} (--force would refuse too: it replaces {only})")
    return DestinationError(f"--force would delete {dest}, which {what}: {shown}", f"{hint}; --force replaces {only}",
                            code="E-DEST-NOT-CHECKPOINT")


def check_destination(dest: Path, src: Path | None, force: bool) -> None:
    dest_abs = dest.resolve()
    if src is not None:
        src_abs = src.resolve()
        if dest_abs == src_abs or src_abs in dest_abs.parents or dest_abs in src_abs.parents:
            raise DestinationError(f"destination {dest} overlaps the source {src}",
                                   "write to a separate directory; the source is never modified")
    try:
        cwd = Path.cwd().resolve()
    except OSError:  # the cwd was deleted: it cannot be the destination
        cwd = None
    if cwd is not None and (dest_abs == cwd or dest_abs in cwd.parents):
        where = "is the current directory" if dest_abs == cwd else f"contains the current directory {cwd}"
        raise DestinationError(f"destination {dest} {where}; replacing it would leave this shell in a deleted "
                               "directory", f"run from outside it (cd {dest_abs.parent}) and name the directory, "
                               "or choose another destination", code="E-DEST-CWD")
    if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
        raise DestinationError(f"destination {dest} exists and is not a directory",
                               "choose a new directory name")
    if dest.is_dir() and any(dest.iterdir()):
        strays = force_would_delete(dest)
        if strays:
            raise _refuse_force(dest, strays, force)
        if not force:
            raise DestinationError(f"destination {dest} is not empty (it holds {', '.join(force_replaces(dest))})",
                                   "pass --force to replace those files, or choose a new path")
    if dest_abs.parent.exists() and not dest_abs.parent.is_dir():
        raise DestinationError(f"{dest_abs.parent} is not a directory", "choose a destination inside a directory")


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold SIGINT back while a step that must complete or roll back runs; deliver it afterwards.

    Only the main thread receives signals (and may set handlers): elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if received:
            if callable(previous):
                previous(signal.SIGINT, None)  # Python's default handler raises KeyboardInterrupt here
            elif previous == signal.SIG_DFL:
                raise KeyboardInterrupt


_written: list[Path] = []


def written_destinations() -> list[Path]:
    """The destinations this process has swapped into place (as they were given): an interrupt after the
    swap must say that DST holds the new output, not that nothing was written."""
    return list(_written)


def _locked_temp_beside(dest: Path, dest_abs: Path) -> tuple[Path, int]:
    """A new temp dir beside `dest`, locked (dead ones of earlier runs removed first), with the mode the result
    should have (mkdtemp makes it private)."""
    parent = dest_abs.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        _remove_dead_temp_dirs(parent, dest_abs.name)
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest_abs.name}.tmp-", dir=parent))
        lock = _lock_dir(tmp)
        os.chmod(tmp, 0o777 & ~_umask())
    except OSError as exc:
        raise DestinationError(f"cannot write beside {dest}: {exc.strerror or exc}",
                               "check permissions and free space of the destination's parent") from None
    return tmp, lock


def write_directory(dest: Path, config: Mapping[str, Any], tensors: Mapping[str, TensorSource],
                    extra_files: Mapping[str, bytes] | Callable[[], Mapping[str, bytes]], *,
                    src: Path | None, force: bool,
                    max_shard_bytes: int | None = None,
                    on_progress: Callable[[int], None] | None = None,
                    writer: Callable[[Path, Path, Callable[[int], None] | None], list[str]] | None = None) -> list[str]:
    """Write a checkpoint into a temporary directory beside `dest`, then rename it into place.

    `extra_files` may be a function: it is called once the weights are written (files that
    describe the weights, e.g. a sidecar holding their digest, can then be completed).
    """
    dest = Path(dest)
    check_destination(dest, src, force)
    dest_abs = dest.resolve()
    parent = dest_abs.parent
    tmp: Path | None = None
    lock: int | None = None
    try:
        # SIGINT is held back from mkdtemp until the lock is taken (an interrupt there left an empty temp
        # dir behind), and over the swap (it completes, or rolls back, and then the old copy is removed).
        with interrupts_deferred():
            tmp, lock = _locked_temp_beside(dest, dest_abs)
        if writer is not None:  # a single-file format (GGUF): its metadata is inside the file, no config.json
            files = writer(tmp, dest_abs, on_progress)
        else:
            files = write_tensor_files(tmp, tensors, {"format": "pt"}, max_shard_bytes, on_progress)
        extra = extra_files() if callable(extra_files) else extra_files
        for name, data in ({**extra} if writer is not None else {CONFIG_NAME: json_bytes(config), **extra}).items():
            write_durably(tmp / name, data)
            files.append(name)
        # Why this is still atomic and durable although the weights' writeback starts during the copy
        # (safetensors_io.write_safetensors, eagle3_convert/writeback.py): sync_file_range only starts writing
        # dirty pages early; it promises nothing and replaces no step below. Every file in tmp is still
        # fsynced before it is closed (the weights after their last byte, config.json and the sidecar here),
        # so when the fsyncs return every byte and inode is on stable storage, whatever writeback did before;
        # then tmp itself is fsynced (its entries), and only then is it renamed (or exchanged) into place,
        # and the parent fsynced (the rename). A crash before the rename leaves the old dest and a dead,
        # unlocked tmp (removed by the next writer); after it, a complete dest. Starting writeback early
        # changes when the disk works, not what has reached it when each step returns.
        _fsync_dir(tmp)
        with interrupts_deferred():
            _swap_into_place(tmp, dest_abs, force)
            tmp = None
            _written.append(dest)
    except BaseException:
        if tmp is not None:
            with interrupts_deferred():
                shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if lock is not None:
            os.close(lock)
    _fsync_dir(parent)
    return files


def _lock_dir(path: Path) -> int:
    """Hold an exclusive flock on a temp dir while writing into it: the kernel drops it when the
    writer dies (even by SIGKILL), which is how a later writer tells a dead temp dir from a live one."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_EX)  # blocking: a cleaner may hold it for an instant while it looks
    return fd


def _remove_dead_temp_dirs(parent: Path, name: str) -> None:
    """Remove `.{name}.tmp-*` dirs left by writers that died. A live writer locks its temp dir before
    putting anything in it, so unlocked and non-empty means dead; unlocked and empty may be a writer
    between mkdtemp and its lock (microseconds), so it is removed only once it is a minute old."""
    if fcntl is None:
        return
    for path in parent.glob(f".{glob.escape(name)}.tmp-*"):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if any(path.iterdir()):
                shutil.rmtree(path, ignore_errors=True)
            elif time.time() - os.fstat(fd).st_mtime > _EMPTY_TEMP_DIR_AGE_S:
                path.rmdir()
        except OSError:
            pass  # locked by a live writer, or renamed into place meanwhile
        finally:
            os.close(fd)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two directories in one atomic step (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    import ctypes
    import ctypes.util

    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    if ctypes.get_errno() in (errno.EINVAL, errno.ENOSYS, errno.EPERM):  # the filesystem cannot exchange
        return False
    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()), str(b))


def _swap_into_place(tmp: Path, dest: Path, force: bool,
                     strays_of: Callable[[Path], list[str]] = force_would_delete,
                     refusal: Callable[[Path, list[str]], DestinationError] = _refuse_force) -> None:
    """Put the complete `tmp` at `dest`, replacing (under force) what is there; on failure dest is as it was.
    `strays_of` names what in dest its writer did not write (and `refusal` refuses to delete it).

    Callers hold SIGINT back around this: it completes (old copy removed) or rolls back, never half.
    """
    old = None
    if dest.is_dir() and force and any(dest.iterdir()):
        strays = strays_of(dest)  # again: something may have been put there since the check
        if strays:
            raise refusal(dest, strays)
        # One atomic exchange: a kill at any instant leaves either the old or the new output at dest. The old
        # one is then in our temp dir, unlocked, and the next writer's cleanup removes it if we die here.
        if _exchange(tmp, dest):
            shutil.rmtree(tmp, ignore_errors=True)
            return
        old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=dest.parent))
        try:
            os.rename(dest, old / "d")
        except OSError as exc:
            old.rmdir()
            raise DestinationError(f"cannot move {dest} aside to replace it: {exc.strerror or exc}",
                                   "check that it is writable; retry") from None
    try:
        os.rename(tmp, dest)  # atomic; fails if another writer already filled dest
    except OSError as exc:
        if old is not None:
            os.rename(old / "d", dest)
            old.rmdir()
        raise DestinationError(f"cannot move the result into {dest}: {exc.strerror or exc}",
                               "another process wrote there at the same time, or it is not writable; retry") from None
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def write_tree(dest: Path, files: Mapping[str, bytes], *, force: bool,
               strays_of: Callable[[Path], list[str]],
               refusal: Callable[[Path, list[str]], DestinationError]) -> None:
    """Write `files` (relative path -> bytes: a static site) as the directory `dest`, as a checkpoint is written: into
    a locked temp dir beside it, every file fsynced, swapped into place in one step. A non-empty `dest` is replaced
    only under `force`, and only when `strays_of(dest)` finds nothing in it that this writer did not write."""
    dest = Path(dest)
    dest_abs = dest.resolve()
    if dest.is_symlink() or (dest.exists() and not dest.is_dir()):
        raise DestinationError(f"destination {dest} exists and is not a directory", "choose a new directory name")
    if dest.is_dir() and any(dest.iterdir()):
        strays = strays_of(dest)
        if strays:
            raise refusal(dest, strays)
        if not force:
            raise DestinationError(f"destination {dest} is not empty", "pass --force to replace it, or choose a new "
                                   "path")
    parent = dest_abs.parent
    tmp: Path | None = None
    lock: int | None = None
    try:
        with interrupts_deferred():
            tmp, lock = _locked_temp_beside(dest, dest_abs)
        root = tmp
        folders = {root}
        for name in files:
            if (root / name).parent not in folders:
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                folders.add((root / name).parent)
        # Written by several threads: each file's fsync waits for a journal commit, and waiting fsyncs share one
        # (a thousand pages: 4.2 s one by one, 0.3 s eight at a time, ext4, benchmarks/RESULTS-site.md).
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=TREE_WRITERS) as pool:
            list(pool.map(lambda item: write_durably(root / item[0], item[1]), files.items()))
        for folder in sorted(folders, key=lambda p: -len(p.parts)):  # each folder's entries, deepest first
            _fsync_dir(folder)
        with interrupts_deferred():
            _swap_into_place(tmp, dest_abs, force, strays_of, refusal)
            tmp = None
    except BaseException:
        if tmp is not None:
            with interrupts_deferred():
                shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if lock is not None:
            os.close(lock)
    _fsync_dir(parent)


def json_bytes(data: Any) -> bytes:
    return (json.dumps(data, indent=2) + "\n").encode()
