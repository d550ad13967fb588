"""Writeback during the copy (issue 16): sync_file_range is called window by window where Linux has it,
refusals fall back to the final fsync alone, and the bytes written are the same either way."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from eagle3_convert import writeback
from eagle3_convert.safetensors_io import InMemoryTensor, read_tensor_bytes, read_tensor_table, write_safetensors


def test_writeback_starts_window_by_window(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, int, int]] = []
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    try:
        wb = writeback.Writeback(fd)
        wb.fn = lambda fd_, off, n, flags: calls.append((off, n, flags)) or 0
        for _ in range(5):
            wb.advance(writeback.WINDOW // 2)
    finally:
        os.close(fd)
    w = writeback.WINDOW
    assert calls == [(0, w, writeback.SYNC_FILE_RANGE_WRITE), (w, w, writeback.SYNC_FILE_RANGE_WRITE)]


def test_a_refusal_turns_writeback_off_and_nothing_else(tmp_path: Path) -> None:
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    try:
        wb = writeback.Writeback(fd)
        wb.fn = lambda *a: -1  # EINVAL, ESPIPE: the file cannot
        wb.advance(writeback.WINDOW * 2)
        assert wb.fn is None and wb.started == 0
        wb.advance(writeback.WINDOW)  # no further calls, no error
    finally:
        os.close(fd)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sync_file_range is Linux-only")
def test_linux_has_it_and_it_accepts_a_regular_file(tmp_path: Path) -> None:
    assert writeback._libc_sync_file_range()
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT)
    try:
        os.write(fd, b"x" * 4096)
        assert writeback._libc_sync_file_range()(fd, 0, 4096, writeback.SYNC_FILE_RANGE_WRITE) == 0
    finally:
        os.close(fd)


@pytest.mark.parametrize("available", [True, False])
def test_the_file_written_is_the_same_with_or_without_writeback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                available: bool) -> None:
    monkeypatch.setattr(writeback, "WINDOW", 4096)
    if not available:
        monkeypatch.setattr(writeback, "_sync_file_range", False)
    data = bytes(range(256)) * 64  # 16 KiB: four windows
    src = tmp_path / "src.safetensors"
    write_safetensors(src, {"a": InMemoryTensor("U8", (len(data),), data), "b": InMemoryTensor("U8", (3,), b"xyz")})
    table, _ = read_tensor_table(tmp_path)
    out = tmp_path / "out" / "model.safetensors"
    out.parent.mkdir()
    write_safetensors(out, table)  # copied range by range, window by window
    assert out.read_bytes() == src.read_bytes()
    assert read_tensor_bytes(read_tensor_table(out.parent)[0]["a"]) == data
