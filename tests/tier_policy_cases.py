"""Cases for tests/test_tier_policy.py, run by it in a pytest of their own (the name keeps them out of the suite)."""

import peer_venv
import pytest

OFFLINE = "WARNING: Retrying after connection broken by 'NewConnectionError: Failed to establish a new connection'\n" \
          "ERROR: No matching distribution found for vllm==0.33.0"
BROKEN = "ERROR: Cannot install vllm==0.33.0 because these package versions have conflicting dependencies."


@pytest.mark.engines
def test_tier_skipped_for_another_reason():
    pytest.skip("no cached wheel; run it by hand first")


@pytest.mark.llamacpp
def test_tier_offline():
    peer_venv.unavailable("llama.cpp tier", "pip download llama-cpp-python==0.3.36", OFFLINE)


@pytest.mark.interop
def test_tier_build_broken_with_the_index_up():
    peer_venv.unavailable("interop tier", "pip install speculators==0.9.0", BROKEN)


def test_not_a_tier():
    pytest.skip("an ordinary skip")


def test_postgresql_without_a_server():
    pytest.skip("PostgreSQL registry tests: psycopg is not installed")


def test_browser_that_would_not_start():
    pytest.skip("browser site tests: chromium would not start")


def test_browser_offline():
    peer_venv.unavailable("browser site tests", "apt-get update", "Err:1 http://deb.debian.org/debian bookworm "
                          "InRelease\n  Temporary failure in name resolution 'deb.debian.org'")
