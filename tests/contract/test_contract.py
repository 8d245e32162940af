"""The contract tests' own tests: the vendored descriptions are what they say, and the
validator the fake GitHub runs on every exchange (tests/fakes/github/contract.py) does
fail a request or an answer that leaves GitHub's description."""

from __future__ import annotations

import gzip
import json
import re

import pytest

from tests.contract import vendor
from tests.fakes.github import FakeGitHub, contract
from tests.fakes.github.contract import Contract, rest_description
from tests.fakes.github.state import RawBody

CHECK_RUNS = "/repos/acme/widgets/check-runs"


def check(
    method: str,
    path: str,
    *,
    body: object = None,
    query: dict[str, list[str]] | None = None,
    status: int = 200,
    answer: object = None,
    json_body: bool = True,
) -> list[contract.Violation]:
    checker = Contract()
    raw = json.dumps(body).encode() if body is not None else b""
    exchange = checker.request(method, path, query or {}, body, raw)
    checker.response(exchange, status, answer, json_body=json_body)
    return checker.take()


def one(violations: list[contract.Violation]) -> contract.Violation:
    assert len(violations) == 1, [str(v) for v in violations]
    return violations[0]


def test_the_vendored_files_name_their_package_version_and_licence():
    rest = json.loads(contract.REST_FILE.read_text())
    header = rest["x-tasuku-vendored"]
    assert header["package"] == "@octokit/openapi"
    assert re.fullmatch(r"\d+\.\d+\.\d+", header["version"])
    assert header["license"] == "MIT"
    assert header["source_file"] == "generated/api.github.com.json"
    assert rest["openapi"].startswith("3.0")
    assert "MIT License" in (contract.CONTRACT_DIR / header["license_file"]).read_text()
    # Only the operations the vendoring script lists, each present.
    listed = {f"{m} {p}" for m, p in vendor.OPERATIONS}
    assert set(header["operations"]) == listed
    vendored = {
        f"{m.upper()} {p}" for p, item in rest["paths"].items() for m in item if m != "parameters"
    }
    assert vendored == listed
    assert contract.REST_FILE.stat().st_size < 500_000
    with gzip.open(contract.GRAPHQL_FILE, "rt", encoding="utf-8") as f:
        first = f.readline()
    assert re.match(
        r"# Vendored from the npm package @octokit/graphql-schema \d+\.\d+\.\d+ ", first
    )
    licence = (contract.CONTRACT_DIR / "LICENSE.octokit-graphql-schema").read_text()
    assert "Licensed as MIT" in licence


def test_every_route_of_the_fake_is_an_operation_of_the_description_or_allowed():
    """A route the fake adds must be vendored (tests/contract/vendor.py OPERATIONS) or be
    in the explicit allow-list of what is not GitHub's REST API."""
    fake = FakeGitHub()
    try:
        description = rest_description()
        samples = {"owner": "acme", "repo": "widgets", "number": "7", "id": "42"}
        missing = []
        for method, pattern, _, _ in fake.routes:
            path = _sample_path(pattern.pattern, samples)
            allowed = any(p.fullmatch(path) for _, p in contract.ALLOWED)
            if not allowed and description.match(method, path) is None:
                missing.append(f"{method} {pattern.pattern}")
        assert not missing, (
            "routes of the fake with no operation in the vendored description; add them "
            "to OPERATIONS in tests/contract/vendor.py and refresh: " + ", ".join(missing)
        )
    finally:
        fake.stop()


def _sample_path(pattern: str, samples: dict[str, str]) -> str:
    """A path a route's regex matches, with plausible values for its groups."""

    def value(match: re.Match[str]) -> str:
        name, body = match.group(1), match.group(2)
        if name in samples:
            return samples[name]
        if name == "service_path":
            return "info/refs"
        if name == "prefix":
            return ""
        return "1" if "\\d" in body else "main"

    path = re.sub(r"\(\?P<(\w+)>((?:[^()]|\([^()]*\))*)\)", value, pattern)
    return path.replace("\\.", ".").replace("\\", "")


# --- the validator catches a wrong request ---


def test_a_request_body_outside_the_description_is_caught():
    violation = one(
        check(
            "POST",
            CHECK_RUNS,
            body={"name": "Tasuku", "head_sha": "a" * 40, "status": "waiting"},
            status=422,
            answer={"message": "Invalid request.", "documentation_url": "https://docs.github.com"},
        )
    )
    assert violation.operation == "POST /repos/{owner}/{repo}/check-runs (checks/create)"
    assert (violation.part, violation.pointer) == ("request", "/body/status")
    assert "'waiting' is not one of" in violation.problem
    assert violation.sent == f"POST {CHECK_RUNS}"
    assert "checks/create" in str(violation) and "/body/status" in str(violation)


def _annotations(count: int) -> list[dict[str, object]]:
    return [
        {"path": "app.py", "start_line": n, "end_line": n, "annotation_level": "warning",
         "message": "unused"}
        for n in range(1, count + 1)
    ]  # fmt: skip


ERROR = {"message": "Invalid request.", "documentation_url": "https://docs.github.com"}


@pytest.mark.parametrize(
    ("path", "valid", "invalid", "pointer", "problem"),
    [
        # GitHub's limit on a check run's summary: 65,535 characters
        (CHECK_RUNS,
         {"name": "Tasuku", "head_sha": "a" * 40, "output": {"title": "T", "summary": "Reviewed 3 files."}},
         {"name": "Tasuku", "head_sha": "a" * 40, "output": {"title": "T", "summary": "x" * 90_000}},
         "/body/output/summary", "…"),  # (the value itself is cut, not the pointer)
        # at most 50 annotations a request
        (CHECK_RUNS,
         {"name": "Tasuku", "head_sha": "a" * 40,
          "output": {"title": "T", "summary": "S", "annotations": _annotations(2)}},
         {"name": "Tasuku", "head_sha": "a" * 40,
          "output": {"title": "T", "summary": "S", "annotations": _annotations(60)}},
         "/body/output/annotations", "…"),
        # a review's event is COMMENT; COMMENTED is the state it leaves
        ("/repos/acme/widgets/pulls/7/reviews",
         {"commit_id": "a" * 40, "body": "b", "event": "COMMENT"},
         {"commit_id": "a" * 40, "body": "b", "event": "COMMENTED"},
         "/body/event", "is not one of"),
    ],
)  # fmt: skip
def test_a_wrong_request_is_caught_after_a_valid_one_like_it(
    path, valid, invalid, pointer, problem
):
    """Every exchange is checked in full: none is let through because one like it (the
    same members and types) passed before."""
    for _ in range(2):
        assert check("POST", path, body=valid, status=422, answer=ERROR) == []
    violation = one(check("POST", path, body=invalid, status=422, answer=ERROR))
    assert (violation.part, violation.pointer) == ("request", pointer)
    assert problem in violation.problem


def test_a_missing_required_member_and_a_wrong_type_are_caught():
    violations = check(
        "POST",
        CHECK_RUNS,
        body={"head_sha": "a" * 40, "output": {"title": 1, "summary": "s"}},
        status=422,
        answer={"message": "Invalid request.", "documentation_url": "https://docs.github.com/rest"},
    )
    found = {(v.pointer, v.problem) for v in violations}
    assert ("/body", "required properties missing: name") in found
    assert ("/body/output/title", "1 is not of type 'string'") in found


def test_a_path_that_is_no_operation_is_caught():
    violation = one(check("GET", "/repos/acme/widgets/pulls/7/everything"))
    assert violation.part == "request"
    assert "no operation in GitHub's description" in violation.problem
    violation = one(check("DELETE", "/repos/acme/widgets/check-runs/1"))  # a wrong method
    assert "no operation" in violation.problem


def test_query_and_path_parameters_are_checked():
    found = check(
        "GET",
        "/repos/acme/widgets/commits/abc/check-runs",
        query={"filter": ["newest"], "per_page": ["many"], "colour": ["red"]},
        answer={"total_count": 0, "check_runs": []},
    )
    by_pointer = {v.pointer: v.problem for v in found}
    assert "'newest' is not one of" in by_pointer["/query/filter"]
    assert "is not of type 'integer'" in by_pointer["/query/per_page"]
    assert "not a parameter of this operation" in by_pointer["/query/colour"]
    found = check("GET", "/repos/acme/widgets/pulls/seven", answer={})
    assert any(v.pointer == "/path/pull_number" for v in found), [str(v) for v in found]


def test_a_body_sent_where_the_operation_takes_none_is_caught():
    violation = one(check("GET", "/repos/acme/widgets/check-runs/1", body={"x": 1}, status=404))
    assert (violation.pointer, violation.problem) == (
        "/body",
        "this operation takes no request body",
    )


def test_the_documented_date_range_syntax_of_created_is_accepted():
    url = "/repos/acme/widgets/actions/workflows/tasuku.yml/runs"
    answer = {"total_count": 0, "workflow_runs": []}
    for created in (">=2026-01-01T00:00:00Z", "2026-01-01..2026-01-02", "<2026-01-01"):
        assert check("GET", url, query={"created": [created]}, answer=answer) == []
    assert one(check("GET", url, query={"created": ["yesterday"]}, answer=answer)).pointer == (
        "/query/created"
    )


# --- the validator catches a wrong answer ---


def _installation() -> dict[str, object]:
    fake = FakeGitHub()
    try:
        fake.add_app(1, "")
        return fake._installation_json(fake.add_installation(7, "acme"))
    finally:
        fake.stop()


def test_a_complete_answer_passes():
    assert check("GET", "/app/installations/7", answer=_installation()) == []


def test_an_answer_missing_a_required_field_is_caught():
    answer = _installation()
    del answer["account"]["login"]  # type: ignore[attr-defined]
    violation = one(check("GET", "/app/installations/7", answer=answer))
    assert violation.operation == (
        "GET /app/installations/{installation_id} (apps/get-installation)"
    )
    assert (violation.part, violation.pointer) == ("response 200", "/account")
    assert "login" in violation.problem


def test_a_wrong_type_a_null_where_none_may_be_and_a_bad_enum_are_caught():
    answer = _installation()
    answer.update(id="7", app_slug=None, repository_selection="some")
    found = {v.pointer: v.problem for v in check("GET", "/app/installations/7", answer=answer)}
    assert "'7' is not of type 'integer'" in found["/id"]
    assert "None is not of type 'string'" in found["/app_slug"]
    assert "'some' is not one of ['all', 'selected']" in found["/repository_selection"]


def test_nullable_fields_take_null_and_formats_are_checked():
    answer = _installation()
    answer.update(suspended_at=None, suspended_by=None, single_file_name=None)
    assert check("GET", "/app/installations/7", answer=answer) == []
    answer["created_at"] = "yesterday"
    violation = one(check("GET", "/app/installations/7", answer=answer))
    assert (violation.pointer, "date-time" in violation.problem) == ("/created_at", True)


def test_an_undescribed_status_and_a_wrong_error_body_are_caught():
    violation = one(check("GET", "/app/installations/7", status=202, answer=_installation()))
    assert "status 202 is not an answer this operation describes" in violation.problem
    # A 5xx or a rate limit may answer any operation, in GitHub's error shape.
    assert (
        check("GET", "/app/installations/7", status=502, answer={"message": "Server Error"}) == []
    )
    violation = one(check("GET", "/app/installations/7", status=502, answer={"message": 502}))
    assert "GitHub's error body" in violation.problem


def test_a_body_where_github_answers_none_is_caught():
    # A 204 dispatch has no body.
    url = "/repos/acme/widgets/actions/workflows/tasuku.yml/dispatches"
    assert check("POST", url, body={"ref": "main"}, status=204) == []
    violation = one(check("POST", url, body={"ref": "main"}, status=204, answer={"ok": True}))
    assert violation.problem == "answered a body where GitHub answers none"


def test_a_raw_answer_is_not_read_as_json():
    diff = RawBody(b"diff --git a/x b/x\n", "text/plain")
    assert check("GET", "/repos/acme/widgets/pulls/7", answer=diff, json_body=False) == []


def test_allowed_paths_are_not_rest_operations():
    for path in (
        "/acme/widgets.git/info/refs",
        "/acme/widgets.git/git-upload-pack",
        "/_oidc/.well-known/jwks",
        "/.well-known/openid-configuration",
        "/_apis/actions/runs/12/idtoken",
    ):
        assert check("GET", path, answer={"anything": True}) == [], path


# --- GraphQL ---

THREADS = (
    "query($owner: String!, $name: String!, $number: Int!) { repository(owner: $owner, "
    "name: $name) { pullRequest(number: $number) { reviewThreads(first: 10) { nodes { id "
    "isResolved comments(first: 1) { nodes { fullDatabaseId author { __typename login } } } } "
    "} } } }"
)
VARIABLES = {"owner": "acme", "name": "widgets", "number": 7}


def graphql_answer(thread: dict[str, object]) -> dict[str, object]:
    return {"data": {"repository": {"pullRequest": {"reviewThreads": {"nodes": [thread]}}}}}


def thread(**changes: object) -> dict[str, object]:
    return {
        "id": "PRRT_1",
        "isResolved": False,
        "comments": {
            "nodes": [{"fullDatabaseId": "1", "author": {"__typename": "Bot", "login": "tasuku"}}]
        },
        **changes,
    }


def test_a_graphql_exchange_within_the_schema_passes():
    body = {"query": THREADS, "variables": VARIABLES}
    assert check("POST", "/graphql", body=body, answer=graphql_answer(thread())) == []


def test_an_invalid_graphql_document_is_caught():
    body = {"query": THREADS.replace("isResolved", "isSettled"), "variables": VARIABLES}
    violation = one(check("POST", "/graphql", body=body, answer=graphql_answer(thread())))
    assert (violation.part, violation.pointer) == ("request", "/body/query")
    assert "Cannot query field 'isSettled' on type 'PullRequestReviewThread'" in violation.problem
    syntax = one(check("POST", "/graphql", body={"query": "query {"}, answer={"data": None}))
    assert syntax.problem.startswith("syntax:")


def test_graphql_variables_of_the_wrong_type_are_caught():
    body = {"query": THREADS, "variables": {**VARIABLES, "number": "7"}}
    violation = one(check("POST", "/graphql", body=body, answer=graphql_answer(thread())))
    assert (violation.pointer, "Int" in violation.problem) == ("/body/variables", True)
    body = {"query": THREADS, "variables": {**VARIABLES, "extra": 1}}
    violation = one(check("POST", "/graphql", body=body, answer=graphql_answer(thread())))
    assert violation.pointer == "/body/variables/extra"


def test_a_graphql_answer_that_leaves_the_schema_is_caught():
    body = {"query": THREADS, "variables": VARIABLES}

    def problems(answer: dict[str, object]) -> dict[str, str]:
        return {v.pointer: v.problem for v in check("POST", "/graphql", body=body, answer=answer)}

    nodes = "/data/repository/pullRequest/reviewThreads/nodes/0"
    # a non-null field missing
    found = problems(graphql_answer({k: v for k, v in thread().items() if k != "isResolved"}))
    assert "non-nullable" in found[f"{nodes}/isResolved"]
    # a field the document did not ask for (GitHub answers exactly the selection)
    found = problems(graphql_answer(thread(isOutdated=False)))
    assert found[f"{nodes}/isOutdated"] == "answered a field the document did not ask for"
    # BigInt is a JSON string, not a number
    comment = {"fullDatabaseId": 1, "author": {"__typename": "Bot", "login": "tasuku"}}
    found = problems(graphql_answer(thread(comments={"nodes": [comment]})))
    assert "BigInt is sent as a JSON str" in found[f"{nodes}/comments/nodes/0/fullDatabaseId"]
    # a Boolean sent as a string
    found = problems(graphql_answer(thread(isResolved="no")))
    assert "Boolean" in found[f"{nodes}/isResolved"]
    # an Actor's __typename that is no Actor
    comment = {"fullDatabaseId": "1", "author": {"__typename": "Repository", "login": "x"}}
    found = problems(graphql_answer(thread(comments={"nodes": [comment]})))
    assert f"{nodes}/comments/nodes/0/author" in found


def test_graphql_errors_are_checked_for_their_shape_only():
    body = {"query": THREADS, "variables": VARIABLES}
    answer = {"data": {"repository": None}, "errors": [{"type": "NOT_FOUND", "message": "No"}]}
    assert check("POST", "/graphql", body=body, answer=answer) == []
    violation = one(check("POST", "/graphql", body=body, answer={"errors": [{"type": "X"}]}))
    assert violation.pointer == "/errors/0"


# --- the check in the test suite ---


def test_violations_seen_by_the_fake_are_collected_and_a_tolerated_one_set_aside(fake_github):
    import requests

    with fake_github.contract.tolerated() as seen:
        requests.get(f"{fake_github.url}/repos/acme/widgets/nothing-here", timeout=5)
    assert [v.problem for v in seen] == [
        "no operation in GitHub's description has this method and path"
    ]
    assert fake_github.contract.take() == []
    requests.get(f"{fake_github.url}/repos/acme/widgets/nothing-here", timeout=5)
    found = fake_github.contract.take()  # taken here, so this test's teardown passes
    assert [v.sent for v in found] == ["GET /repos/acme/widgets/nothing-here"]


def test_the_vendoring_script_cuts_only_what_is_listed():
    spec = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/a/{id}": {
                "get": {
                    "parameters": [{"$ref": "#/components/parameters/id"}],
                    "responses": {
                        "200": {
                            "description": "ok",
                            "content": {
                                "application/json": {
                                    "schema": {"$ref": "#/components/schemas/a"},
                                    "examples": {"default": {"$ref": "#/components/examples/a"}},
                                }
                            },
                        }
                    },
                },
                "delete": {"responses": {"204": {"description": "gone"}}},
            },
            "/b": {"get": {"responses": {}}},
        },
        "components": {
            "parameters": {"id": {"name": "id", "in": "path", "schema": {"type": "integer"}}},
            "schemas": {
                "a": {
                    "type": "object",
                    "properties": {"example": {"$ref": "#/components/schemas/b"}},
                    "example": {"x": 1},
                },
                "b": {"type": "string"},
                "unused": {"type": "string"},
                "basic-error": {"type": "object"},
                "validation-error": {"type": "object"},
                "validation-error-simple": {"type": "object"},
            },
            "examples": {"a": {"value": {}}},
        },
    }
    original = vendor.OPERATIONS
    try:
        vendor.OPERATIONS = [("GET", "/a/{id}")]
        cut = vendor.cut(spec)
    finally:
        vendor.OPERATIONS = original
    assert list(cut["paths"]) == ["/a/{id}"]
    assert list(cut["paths"]["/a/{id}"]) == ["get"]
    media = cut["paths"]["/a/{id}"]["get"]["responses"]["200"]["content"]["application/json"]
    assert "examples" not in media
    schemas = cut["components"]["schemas"]
    assert set(schemas) == {"a", "b", "basic-error", "validation-error", "validation-error-simple"}
    assert "example" in schemas["a"]["properties"]  # a property of that name stays
    assert "example" not in schemas["a"]  # the schema's example goes
    assert "examples" not in cut["components"]


def test_a_failure_of_the_check_itself_is_a_violation_not_a_broken_exchange(monkeypatch):
    def broken() -> object:
        raise RuntimeError("no description")

    monkeypatch.setattr(contract, "rest_description", broken)
    violation = one(check("GET", "/repos/acme/widgets"))
    assert violation.problem == "the contract check failed: RuntimeError('no description')"


def test_the_summary_folds_repeats():
    answer = _installation()
    del answer["account"]["login"]  # type: ignore[attr-defined]
    found = check("GET", "/app/installations/7", answer=answer) * 3
    [line] = contract.summary(found)
    assert line.endswith("(3 times)")
    assert line.startswith("GET /app/installations/{installation_id} (apps/get-installation): ")
