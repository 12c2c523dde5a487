"""Item-level novelty: a list result is new only if it holds an item not seen in the run."""

from __future__ import annotations

from typing import Any

import pytest

from otel_stall import StallPolicy, ToolCall, Verdict, detect
from otel_stall.core.records import Status
from otel_stall.core.signing import Normaliser, Signer


def new_facts(results: list[Any], policy: StallPolicy | None = None) -> list[bool]:
    calls = [ToolCall("search", {"page": n}, result) for n, result in enumerate(results)]
    (report,) = detect(calls, policy)
    return [row.new_fact for row in report.ledger]


DOCS = [{"id": n, "title": f"doc {n}"} for n in range(6)]


@pytest.mark.parametrize("key", ["items", "results", "hits", "documents"])
def test_the_same_items_reordered_are_no_new_fact(key: str) -> None:
    """A search that returns the same documents in another order adds nothing."""
    first = {key: DOCS[:3], "total": 3}
    again = {key: list(reversed(DOCS[:3])), "total": 3}
    assert new_facts([first, again]) == [True, False]


def test_a_top_level_array_counts_by_item() -> None:
    """A JSON array result is a list of items too."""
    assert new_facts([DOCS[:3], DOCS[1:3], DOCS[2:4]]) == [True, False, True]


def test_a_page_that_overlaps_the_last_completely_is_no_new_fact() -> None:
    """Every item of the second page was on earlier pages: no fact, even with a new page number."""
    results = [{"items": DOCS[:4], "page": 1}, {"items": DOCS[2:4], "page": 2}]
    assert new_facts(results) == [True, False]


def test_one_new_item_is_a_new_fact() -> None:
    """A page with one unseen item brings a fact."""
    results = [{"items": DOCS[:3]}, {"items": [*DOCS[1:3], DOCS[5]]}]
    assert new_facts(results) == [True, True]


def test_items_are_normalised_as_results_are() -> None:
    """Key order inside an item and volatile keys do not make an item new."""
    first = {"items": [{"id": 1, "title": "a", "request_id": "r-1"}]}
    again = {"items": [{"title": "a", "id": 1, "request_id": "r-2"}], "extra": 1}
    assert new_facts([first, again]) == [True, False]


def test_item_novelty_can_be_switched_off() -> None:
    """With item_novelty off, a result that differs as a whole is new."""
    results = [{"items": DOCS[:3]}, {"items": list(reversed(DOCS[:3]))}]
    assert new_facts(results, StallPolicy(item_novelty=False)) == [True, True]
    assert StallPolicy.from_env({"OTEL_STALL_ITEM_NOVELTY": "false"}).item_novelty is False


@pytest.mark.parametrize(
    "result",
    ['{"total":3}', '"text"', "3", '{"items":"not a list"}', "", '{"a":{"items":[1]}}'],
)
@pytest.mark.parametrize("native", [True, False])
def test_results_without_a_list_have_no_items(result: str, native: bool) -> None:
    """Objects without a top-level list under an item key, scalars and text are judged whole."""
    normaliser = Normaliser(native=native)
    assert Signer(normaliser).sign("search", "{}", result, Status.OK).items is None


def test_a_search_that_keeps_returning_known_documents_stalls() -> None:
    """Rounds that only reshuffle known documents are rounds without new facts: they break."""
    results = [{"hits": DOCS[:3]}] + [{"hits": [DOCS[n % 3], DOCS[(n + 1) % 3]]} for n in range(6)]
    calls = [ToolCall("search", {"q": f"query {n}"}, r) for n, r in enumerate(results)]
    (report,) = detect(calls)
    assert report.verdict is Verdict.BREAK
