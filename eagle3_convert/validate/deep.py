"""`--deep`: every byte read once, hashed and scanned in the same pass."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import Eagle3Error
from ..safetensors_io import TensorRef, TensorSource, iter_tensor_chunks
from .findings import Finding, finding, from_error


# dtype -> (unsigned view, mask of the magnitude bits, smallest NaN/Inf magnitude, bit pattern of 1.0)
_FLOAT_BITS: dict[str, tuple[str, int, int, int | None]] = {
    "BF16": ("<u2", 0x7FFF, 0x7F80, 0x3F80),
    "F16": ("<u2", 0x7FFF, 0x7C00, 0x3C00),
    "F32": ("<u4", 0x7FFF_FFFF, 0x7F80_0000, 0x3F80_0000),
    "F64": ("<u8", 0x7FFF_FFFF_FFFF_FFFF, 0x7FF0_0000_0000_0000, 0x3FF0_0000_0000_0000),
    "F8_E4M3": ("u1", 0x7F, 0x7F, 0x38),  # e4m3fn: no Inf, NaN = S.1111.111
    "F8_E5M2": ("u1", 0x7F, 0x7C, 0x3C),
    "F8_E8M0": ("u1", 0xFF, 0xFF, None),  # a scale format: NaN = 0xFF, no zero, no sign
}
_NORM_SUFFIXES = ("norm.weight", "layernorm.weight")


@dataclass
class TensorScan:
    sha256: str
    nonfinite: bool = False
    all_zero: bool = False
    all_ones: bool = False


DEEP_CHUNK = 4 * 1024 * 1024


def scan_tensor(src: TensorSource, check_ones: bool, on_bytes: Callable[[int], None] | None = None) -> TensorScan:
    """One pass over a tensor's bytes: sha256 and, for floats, NaN/Inf, all-zero and all-ones."""
    import numpy as np

    digest = hashlib.sha256()
    bits = _FLOAT_BITS.get(src.dtype)
    if bits is None:
        for part in iter_tensor_chunks(src, DEEP_CHUNK):
            digest.update(part)
            if on_bytes:
                on_bytes(len(part))
        return TensorScan(digest.hexdigest())
    view, magnitude, nonfinite_at, one = bits
    udt = np.dtype(view)
    mag, limit = udt.type(magnitude), udt.type(nonfinite_at)
    one_bits = udt.type(one) if one is not None and check_ones else None
    scan = TensorScan("", all_zero=src.dtype != "F8_E8M0" and src.nbytes > 0, all_ones=one_bits is not None)
    carry = b""
    scratch = None
    for part in iter_tensor_chunks(src, DEEP_CHUNK):
        digest.update(part)  # releases the GIL: hashing overlaps the numpy work of other threads
        if on_bytes:
            on_bytes(len(part))
        if carry:
            part = memoryview(carry + bytes(part))
        usable = len(part) - len(part) % udt.itemsize
        carry = bytes(part[usable:])
        if not usable:
            continue
        values = np.frombuffer(part[:usable], dtype=udt)
        if scratch is None or len(scratch) < len(values):
            scratch = np.empty(len(values), dtype=udt)
        masked = np.bitwise_and(values, mag, out=scratch[:len(values)])
        top = masked.max()
        scan.nonfinite = scan.nonfinite or bool(top >= limit)
        scan.all_zero = scan.all_zero and not top
        if scan.all_ones:
            scan.all_ones = bool((values == one_bits).all())
    scan.sha256 = digest.hexdigest()
    return scan


def deep_scan(tensors: Mapping[str, TensorSource], skip: set[str] = frozenset(), workers: int | None = None,
              on_bytes: Callable[[int], None] | None = None) -> tuple[dict[str, dict[str, Any]], list[Finding]]:
    """Read every byte once (tensors in parallel, bounded chunks): the sha256 manifest and value findings."""
    names = sorted((n for n in tensors if n not in skip), key=lambda n: -tensors[n].nbytes)
    is_norm = {n: n.endswith(_NORM_SUFFIXES) for n in names}  # the same suffixes in every layout
    # Each worker holds ~2 chunks; 4 workers keep --deep under 100 MiB on any machine and saturate sha256.
    workers = workers or min(4, os.cpu_count() or 1)

    def one(name: str) -> tuple[str, TensorScan | Eagle3Error]:
        try:
            return name, scan_tensor(tensors[name], is_norm[name], on_bytes)
        except Eagle3Error as exc:  # the file changed or was cut while being read
            return name, exc

    from concurrent.futures import ThreadPoolExecutor  # (with logging and queue: only --deep runs threads)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        results = dict(pool.map(one, names))
    manifest: dict[str, dict[str, Any]] = {}
    out: list[Finding] = []
    for name in sorted(results):
        result, src = results[name], tensors[name]
        if isinstance(result, Eagle3Error):
            out.append(from_error(result, where=name))
            continue
        manifest[name] = {"file": src.file.name if isinstance(src, TensorRef) else None, "dtype": src.dtype,
                          "shape": list(src.shape), "sha256": result.sha256}
        if result.nonfinite:
            out.append(finding("E-DEEP-NONFINITE", f"tensor {name!r} holds NaN or Inf values",
                               "the run diverged or the file is corrupt: re-export the drafter from a good step",
                               where=name))
        if result.all_zero and not name.endswith(".bias"):
            out.append(finding("E-DEEP-ZERO", f"tensor {name!r} is all zeros: left at an initial value or never "
                               "loaded before saving", "re-export the drafter from its training run", where=name))
    norms = [n for n in names if is_norm[n] and isinstance(results.get(n), TensorScan)]
    if norms and all(results[n].all_ones for n in norms):
        out.append(finding("W-DEEP-INIT-NORMS", f"every norm weight ({len(norms)} tensors) is exactly 1.0: the "
                           "drafter looks untrained (norms at their initial value)",
                           "check that the checkpoint was saved after training, not at initialisation"))
    return manifest, out
