"""The contract checks' fast path (jsonschema-rs) and python's `jsonschema` give the same
verdict: the fast path's acceptance is final (tests/fakes/github/contract.py,
tests/contract/webhooks.py), so a document it accepted that python rejects would pass
unseen. Held here over what the contract tests send (every violation they provoke, each
beside its valid twin), every recorded webhook payload, and variants of them with a
member of a wrong type, missing, or in a bad format."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.contract.test_contract import (
    CHECK_RUNS,
    ERROR,
    _annotations,
    _installation,
    check,
)
from tests.contract.webhooks import _fast_validator, _validator, definition_for
from tests.fakes.github.contract import RestDescription, rest_description
from tests.fakes.github.payloads import FIXTURES, payload

# Strings on the edges of the formats python checks (date-time, uri, email), and of
# jsonschema-rs's own stricter rules for them, which the fast path must not follow.
EDGE_STRINGS = [
    "yesterday",
    "",
    "2026-01-01",
    "2026-01-01T00:00:00",
    "2026-01-01T00:00Z",
    "2026-01-01t00:00:00z",
    "2026-01-01T00:00:00.123456+02:00",
    "2026-01-01T00:00:00+0200",
    "2026-12-31T23:59:60Z",
    "2026-13-01T00:00:00Z",
    "2026-01-01T24:00:00Z",
    "T",
    "https://example.com/a b",
    "example.com/x",
    "mailto:nobody",
    "https://x",
    "1http://x",
    "nobody",
    "a@b",
    "@",
    "x" * 70_000,
]
FORMATTED = re.compile(r"^\d{4}-\d\d-\d\dT|://|@")
WRONG_VALUES: list[Any] = [None, "7", 7, 7.5, 7.0, True, [], {}, -(2**70)]


def variants(document: Any, *, every_value: bool = True) -> Iterator[Any]:
    """`document` with one member changed: each leaf given each wrong value and edge
    string in turn, each object member removed, each array emptied and grown. Not
    `every_value` (a large payload): each leaf given two of the wrong values, and only a
    string in a format's shape (a date-time, a URL, an address) every edge string, once
    a member name."""
    edged: set[Any] = set()
    for index, (path, value) in enumerate(_leaves(document)):
        replacements = WRONG_VALUES
        if not every_value:
            count = len(WRONG_VALUES)
            replacements = [WRONG_VALUES[index % count], WRONG_VALUES[(index + 4) % count]]
        name = path[-1] if path else None
        formatted = isinstance(value, str) and FORMATTED.search(value) and name not in edged
        if isinstance(value, str) and (every_value or formatted):
            edged.add(name)
            replacements = [*replacements, *EDGE_STRINGS]
        for replacement in replacements:
            yield _with(document, path, replacement)
        if path and isinstance(path[-1], str):
            yield _with(document, path, _DELETED)
    for path, array in _arrays(document):
        yield _with(document, path, [])
        yield _with(document, path, array * 60 if array else [None])


def _leaves(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node[:2]):
            yield from _leaves(value, (*path, index))
    else:
        yield path, node
    if isinstance(node, dict | list) and path:
        yield path, node  # the whole object or array as a leaf too


def _arrays(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    if isinstance(node, list):
        yield path, node
        for index, value in enumerate(node[:2]):
            yield from _arrays(value, (*path, index))
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _arrays(value, (*path, key))


_DELETED = object()


def _with(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    changed = copy.deepcopy(document)
    node = changed
    for part in path[:-1]:
        node = node[part]
    if value is _DELETED:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return changed


def disagreements(fast: Any, python: Any, documents: list[Any]) -> list[tuple[bool, bool, str]]:
    """(fast verdict, python's verdict, the document cut short) where they differ."""
    assert fast is not None, "jsonschema-rs did not compile the schema"
    found = []
    for document in documents:
        verdicts = (bool(fast.is_valid(document)), bool(python.is_valid(document)))
        if verdicts[0] != verdicts[1]:
            found.append((*verdicts, repr(document)[:300]))
    return found


# --- REST: what the contract tests send, as the fake's contract checks it ---


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """Every (schema pointer, instance) the contract checks while the test runs."""
    seen: dict[str, list[Any]] = {}
    errors = RestDescription.errors

    def recording(self: RestDescription, pointer: str, instance: Any) -> Any:
        seen.setdefault(pointer, []).append(copy.deepcopy(instance))
        return errors(self, pointer, instance)

    monkeypatch.setattr(RestDescription, "errors", recording)
    return seen


def _what_the_contract_tests_send() -> None:
    """The exchanges of tests/contract/test_contract.py, valid and not."""
    output = {"title": "T", "summary": "Reviewed 3 files."}
    for body in (
        {"name": "Tasuku", "head_sha": "a" * 40, "status": "waiting"},
        {"name": "Tasuku", "head_sha": "a" * 40, "output": output},
        {"name": "Tasuku", "head_sha": "a" * 40, "output": output | {"summary": "x" * 90_000}},
        {"name": "Tasuku", "head_sha": "a" * 40, "output": output | {"summary": "x" * 65_535}},
        {"name": "Tasuku", "head_sha": "a" * 40, "output": output | {"summary": "é" * 65_535}},
        {"name": "Tasuku", "head_sha": "a" * 40, "output": output | {"summary": "é" * 65_536}},
        *(
            {"name": "T", "head_sha": "a" * 40, "output": output | {"annotations": _annotations(n)}}
            for n in (2, 50, 51, 60)
        ),
        {"head_sha": "a" * 40, "output": {"title": 1, "summary": "s"}},
        {
            "name": "Tasuku",
            "head_sha": "a" * 40,
            "status": "completed",
            "conclusion": "neutral",
            "completed_at": "2026-01-01T00:00:00Z",
        },
        {"name": "Tasuku", "head_sha": "a" * 40, "started_at": "yesterday"},
    ):
        check("POST", CHECK_RUNS, body=body, status=422, answer=ERROR)
    for event in ("COMMENT", "COMMENTED", "APPROVE", "comment", None):
        body = {"commit_id": "a" * 40, "body": "b", "event": event}
        check("POST", "/repos/acme/widgets/pulls/7/reviews", body=body, status=422, answer=ERROR)
    check(
        "GET",
        "/repos/acme/widgets/commits/abc/check-runs",
        query={"filter": ["newest"], "per_page": ["many"]},
        answer={"total_count": 0, "check_runs": []},
    )
    check("GET", "/repos/acme/widgets/commits/abc/check-runs", query={"per_page": ["30"]})
    check("GET", "/repos/acme/widgets/pulls/seven", answer={})
    url = "/repos/acme/widgets/actions/workflows/tasuku.yml/runs"
    for created in (">=2026-01-01T00:00:00Z", "2026-01-01..2026-01-02", "<2026-01-01", "x"):
        check("GET", url, query={"created": [created]}, answer={"total_count": 0})
    for answer in ({"message": "Server Error"}, {"message": 502}, {}, []):
        check("GET", "/app/installations/7", status=502, answer=answer)
    installation = _installation()
    check("GET", "/app/installations/7", answer=installation)
    nulls = installation | {"suspended_at": None, "suspended_by": None, "single_file_name": None}
    check("GET", "/app/installations/7", answer=nulls)
    wrong = installation | {"id": "7", "app_slug": None, "repository_selection": "some"}
    check("GET", "/app/installations/7", answer=wrong)


def test_both_engines_judge_what_the_contract_tests_send_alike(checked):
    _what_the_contract_tests_send()
    description = rest_description()
    assert len(checked) >= 8, sorted(checked)
    for pointer, documents in checked.items():
        found = disagreements(
            description.fast_validator(pointer), description.validator(pointer), documents
        )
        assert found == [], (pointer, found)


def test_both_engines_judge_an_answer_with_any_member_changed_alike():
    description = rest_description()
    pointer = "/paths/~1app~1installations~1{installation_id}/get/responses/200/content/application~1json/schema"
    documents = list(variants(_installation()))
    assert len(documents) > 1000
    found = disagreements(
        description.fast_validator(pointer), description.validator(pointer), documents
    )
    assert found == []


def test_the_fast_path_decides_only_what_it_accepts(checked):
    """A document jsonschema-rs rejects is judged by python: the violation is python's,
    with its pointer and words."""
    check("POST", CHECK_RUNS, body={"name": "T", "head_sha": "a" * 40}, status=422, answer=ERROR)
    [(pointer, [document])] = [
        (p, d) for p, d in checked.items() if p.endswith("application~1json/schema")
    ]
    description = rest_description()
    assert description.fast_validator(pointer).is_valid(document)
    found = check("POST", CHECK_RUNS, body={"name": "T"}, status=422, answer=ERROR)
    assert [(v.pointer, v.problem) for v in found] == [
        ("/body", "required properties missing: head_sha")
    ]


# --- webhooks ---

RECORDED = sorted(path.stem for path in FIXTURES.glob("*.json"))


def _definition(event: str, body: Any) -> str:
    action = body.get("action") if isinstance(body, dict) else None
    definition = definition_for(event, action)
    assert definition is not None, (event, action)
    return definition


def test_both_engines_judge_every_recorded_payload_alike():
    for name in RECORDED:
        event, variant = name.split("__")
        body = payload(event, variant)
        definition = _definition(event, body)
        found = disagreements(_fast_validator(definition), _validator(definition), [body])
        assert found == [], (name, found)


def test_both_engines_judge_the_webhook_tests_malformed_payloads_alike():
    opened = payload("pull_request", "opened")
    del opened["pull_request"]["head"]
    opened["number"] = "7"
    completed = payload("check_run", "completed")
    completed["check_run"]["started_at"] = "yesterday"
    completed["repository"]["owner"]["user_view_type"] = "public"
    suspend = payload("installation", "suspend")
    suspend["installation"]["suspended_by"] = None
    for event, body in (
        ("pull_request", opened),
        ("check_run", completed),
        ("installation", suspend),
    ):
        definition = _definition(event, body)
        found = disagreements(_fast_validator(definition), _validator(definition), [body])
        assert found == [], (event, found)


@pytest.mark.parametrize(("event", "variant"), [("check_run", "completed"), ("ping", "default")])
def test_both_engines_judge_a_payload_with_any_member_changed_alike(event, variant):
    body = payload(event, variant)
    definition = _definition(event, body)
    documents = list(variants(body, every_value=False))
    found = disagreements(_fast_validator(definition), _validator(definition), documents)
    assert found == []
