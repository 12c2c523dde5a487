"""Hypothesis profiles for the property tests; ``HYPOTHESIS_PROFILE`` picks one.

``ci``: a fixed number of examples, derandomised (the same examples on every
run, no example database), so CI is reproducible and its time bounded. Tests
that should follow the profile leave ``max_examples`` out of their own
``@settings``. Imported by the property-test modules; importing it from
``tests/conftest.py`` as well makes the choice apply to every test module.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=200,
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "dev", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
if os.environ.get("HYPOTHESIS_PROFILE"):
    settings.load_profile(os.environ["HYPOTHESIS_PROFILE"])

PROPERTY = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
"""For property tests: no deadline on a shared machine; examples as the profile says."""
