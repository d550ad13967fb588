"""Kill tests of the provenance path (issue 33 item 6): provenance.py, registry/recording.py, target_identity.py,
records.py, sidecar.py, cli/common.py's registry lookup, sources.py and fingerprint.py, each run by
tools/mutation.py. Real files (tests/data, builder-written checkpoints), the real CLI through run_cli, the real
registry on SQLite, or direct calls of the module's functions with real data: no mock of our code."""

from __future__ import annotations
