"""The acceptance `verify` measured, in the registry (schema v6), on SQLite and PostgreSQL alike."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from registry_backends import count, did

from eagle3_convert.registry import Acceptance, RegistryError, open_registry


def measured(k: int = 3, mean: float = 2.123456789012345, when: int = 1, **changes) -> Acceptance:
    rates = [0.8123456789012345, 0.25, 0.0625][:k]
    return Acceptance.model_validate({
        "target_name_or_path": "meta-llama/Llama-3.1-8B-Instruct", "target_revision": "0e9e39f", "k": k,
        "prompts_sha256": "ab" * 32, "prompts": 8, "max_new_tokens": 64, "capture_boundaries": [2, 16, 29],
        "mean_accepted_length": mean, "per_position": rates, "rounds": 120, "tokens_per_second": 31.5,
        "device": "cpu", "tool": "eagle3-convert 0.1.0",
        "measured_at": datetime(2026, 12, 1, when, tzinfo=timezone.utc), **changes})


def test_each_measurement_is_kept_and_goes_with_its_drafter(registry_url) -> None:
    drafter, twin = did("measured"), did("its-twin")
    with open_registry(registry_url) as store:
        store.upsert_drafter(drafter)
        store.upsert_drafter(twin)
        assert store.add_acceptance(drafter[:8], measured(when=2))
        assert store.add_acceptance(twin, measured(k=2, mean=1.5, when=1))
        assert store.acceptance(drafter) == [measured(when=2)]  # every float exactly as measured
        store.absorb(twin, drafter)  # a merge moves what was measured of the twin
        assert [(m.k, m.mean_accepted_length) for m in store.acceptance(drafter)] == [(2, 1.5), (3, 2.123456789012345)]
        assert store.acceptance(did("nobody")) == []
        with pytest.raises(RegistryError) as unknown:
            store.add_acceptance(did("nobody"), measured())
        assert "no drafter" in unknown.value.message and unknown.value.hint
        assert store.remove(drafter)
    assert count(registry_url, "acceptance") == 0


@pytest.mark.parametrize("changes, says", [
    ({"per_position": [0.5]}, "per_position holds 1 rates for k = 3"),
    ({"prompts_sha256": "xyz"}, "sha256"),
    ({"per_position": [1.5, 0.0, 0.0]}, "less than or equal to 1"),
])
def test_a_malformed_measurement_is_refused(changes: dict, says: str) -> None:
    with pytest.raises(ValueError) as bad:
        measured(**changes)
    assert says in str(bad.value)
