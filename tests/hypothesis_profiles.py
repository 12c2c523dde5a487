"""Hypothesis profiles for the property tests; chosen once for every test module.

``ci``: a fixed number of examples, derandomised (the same examples on every
run, no example database), so CI is reproducible and its time bounded. Tests
that should follow the profile leave ``max_examples`` out of their own
``@settings``. ``ci-extra``: the same, with a quarter of the examples, for
``.ci/run``'s extra Pythons: they check the interpreter and the oldest
dependencies under the main run's derandomised examples, and the main run does
the exploring (two cores hold no more). ``dev``: fresh random examples each
run, failures remembered in ``.hypothesis/``. None has a deadline: on a shared,
noisy machine a timing must not decide pass or fail.

The profile is ``HYPOTHESIS_PROFILE`` if set, else ``ci`` when ``CI=true`` (as
``.ci/run`` sets), else ``dev``. ``tests/conftest.py`` imports this module, so
the choice applies to every test module.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=100,
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("ci-extra", settings.get_profile("ci"), max_examples=25)
settings.register_profile(
    "dev", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
_DEFAULT = "ci" if os.environ.get("CI", "").lower() == "true" else "dev"
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or _DEFAULT)

PROPERTY = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
"""For property tests: no deadline on a shared machine; examples as the profile says."""
