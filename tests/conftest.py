"""Fixtures and hypothesis profiles (helpers live in helpers.py)."""

from __future__ import annotations

import os

import pytest
from helpers import FakeClock
from hypothesis import HealthCheck, settings

# 500 examples for every property and state machine in the README's test command (and CI);
# GANGPLACE_HYPOTHESIS_PROFILE=long runs 20,000.
settings.register_profile(
    "default", max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci", max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "long", max_examples=20_000, deadline=None, suppress_health_check=list(HealthCheck)
)
settings.load_profile(os.environ.get("GANGPLACE_HYPOTHESIS_PROFILE", "default"))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
