"""`validate`: name every silent EAGLE-3 failure before a GPU is spent.

A check yields `Finding`s: a stable code, a severity, a one-line message naming the tensor
or config field, and a hint (usually the exact eagle3-convert command). Checks run on the
RAW checkpoint (config dict, tensors by stored name, headers only), so a broken file still
yields every finding instead of the first exception. Engine profiles replay how each
serving engine reads a checkpoint: the tensor names it loads, where it reads capture ids
and in which convention, and which config fields it defaults its own way (docs/formats.md §2,
§4, §5). `--deep` reads every byte once, hashing and scanning each chunk in one pass.

The modules, in the order a validation runs them:
  findings   the codes table, `Finding`, `finding()`, `from_error()`, `Report`
  raw        the checkpoint as far as it reads (`read_raw`, `RawCheckpoint`), truncated files
  context    `Context`: one checkpoint read in one layout, and the plumbing every check shares
  config     the layout's key table, the decoder config, the JSON Schema
  tensors    names, shapes and dtypes against the config
  vocab      d2t / t2d, and which map each engine needs
  capture    capture ids: where they are, what they mean, what each engine captures
  profiles   `EngineProfile`s, built from eagle3_convert.engines, and the engine tables
  engine     one engine's reading of the file, and the engine modules' verdicts
  target     `--target`: the facts, and the checks against them
  deep       `--deep`: sha256 manifest, NaN/Inf, all-zero, untrained norms
  gguf       a GGUF drafter: our reader's checks, then llama.cpp's reading
  report     `validate_checkpoint`, which runs the above
"""

from __future__ import annotations

from .capture import check_capture_record
from .context import Context
from .deep import TensorScan, deep_scan, scan_tensor
from .findings import CODES, SEVERITIES, Finding, Report, Severity, finding, from_error
from .profiles import ENGINE_LAYOUT, LAYOUT_ENGINES, EngineProfile, engine_profiles
from .raw import RawCheckpoint, read_raw
from .report import validate_checkpoint
from .target import load_target_facts

__all__ = ["CODES", "ENGINE_LAYOUT", "LAYOUT_ENGINES", "SEVERITIES", "Context", "EngineProfile", "Finding",
           "RawCheckpoint", "Report", "Severity", "TensorScan", "check_capture_record", "deep_scan", "engine_profiles",
           "finding", "from_error", "load_target_facts", "read_raw", "scan_tensor", "validate_checkpoint"]
