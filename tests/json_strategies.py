"""Hypothesis strategies for JSON-like values, shared by the normaliser's property tests."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st


def scalars(text: st.SearchStrategy[str]) -> st.SearchStrategy[Any]:
    """Every JSON scalar orjson writes as it is: null, bools, int64/uint64, finite floats, text."""
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**63), max_value=2**64 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        text,
    )


def json_values(
    text: st.SearchStrategy[str], keys: st.SearchStrategy[str], max_leaves: int
) -> st.SearchStrategy[Any]:
    """Nested lists and objects of :func:`scalars`, with keys drawn from ``keys``."""
    return st.recursive(
        scalars(text),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
        max_leaves=max_leaves,
    )
