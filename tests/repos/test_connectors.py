"""Connectors on Tasuku's side: a call checked (the reviewer's connectors, the input
against its schema — before anything is sent) and made with the stored credential to a
stand-in for the team's system, guarded (hosts, redirects, time, size, the credential
never handed back), the built-in GitHub issue connector against the fake GitHub, and
the admin's checks."""

from __future__ import annotations

import json
import time

import pytest

from repos.connectors.calls import CallScope, connector_call, connector_tools
from repos.connectors.models import GITHUB_ISSUE_SCHEMA, Connector, ConnectorKind
from repos.github import RepoRef
from repos.github import gateway as github_gateway
from repos.models import Reviewer
from tests.fakes.github import Issue
from tests.fakes.team import TeamSystem
from tests.gitworld import INSTALLATION, REPO, REPO_ID, world_build

TOKEN = "Bearer tk-team-secret-0042"
SCHEMA = {"type": "object", "properties": {"key": {"type": "string", "pattern": "^[A-Z]+-[0-9]+$"}},
          "required": ["key"], "additionalProperties": False}  # fmt: skip


@pytest.fixture(scope="module")
def team_server():
    system = TeamSystem().start()
    yield system
    system.stop()


@pytest.fixture
def team(team_server):
    team_server.reset()
    return team_server


def ticket(team: TeamSystem, **fields) -> Connector:
    values = {"name": "jira_ticket", "description": "A Jira ticket by its key.",
              "input_schema": SCHEMA, "url_template": f"{team.url}/tickets/{{key}}",
              "timeout_seconds": 5, **fields}  # fmt: skip
    connector = Connector(**values)
    connector.credential_set(TOKEN)
    return connector


def call(connector: Connector, arguments, **scope):
    return connector_call(connector.name, arguments,
                          scope=CallScope(allowed={connector.name: connector}, **scope))  # fmt: skip


def test_a_call_is_made_with_the_stored_credential_in_the_header_the_operator_named(team):
    answer = call(ticket(team), {"key": "PAY-12"})
    assert answer.status == "ok", answer.content
    assert json.loads(answer.content)["summary"] == "Refunds must refuse negative amounts"
    [seen] = team.seen
    assert (seen.method, seen.path) == ("GET", "/tickets/PAY-12")
    assert seen.headers["authorization"] == TOKEN
    assert answer.bytes == len(answer.content.encode()) and answer.duration_ms >= 0
    other = ticket(team, credential_header="X-Api-Key")
    assert call(other, {"key": "PAY-1"}).status == "ok"
    assert (
        team.seen[-1].headers["x-api-key"] == TOKEN and "authorization" not in team.seen[-1].headers
    )


def test_invalid_input_is_refused_before_any_http_call(team):
    for arguments in ({"key": "not a key"}, {}, {"key": "PAY-1", "more": 1}, "PAY-1", None):
        answer = call(ticket(team), arguments)
        assert answer.status == "refused", arguments
        assert "does not match jira_ticket's schema; nothing was sent" in answer.content
    assert team.seen == []


def test_a_connector_the_reviewer_may_not_use_is_refused(team):
    allowed = ticket(team)
    answer = connector_call("deploy_button", {"key": "PAY-1"},
                            scope=CallScope(allowed={"jira_ticket": allowed}))  # fmt: skip
    assert answer.status == "refused"
    assert (
        "may not use a connector named 'deploy_button' (it may use: jira_ticket)" in answer.content
    )
    allowed.enabled = False
    assert call(allowed, {"key": "PAY-1"}).status == "refused"
    assert team.seen == []


def test_values_are_url_encoded_and_cannot_climb_the_path(team):
    schema = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}
    connector = ticket(team, input_schema=schema)
    assert call(connector, {"key": "../admin?x=1#y"}).status == "ok"
    assert team.seen[-1].path == "/tickets/..%2Fadmin%3Fx%3D1%23y"
    for dots in ("..", "."):
        answer = call(connector, {"key": dots})
        assert answer.status == "refused" and "cannot be" in answer.content
    assert len(team.seen) == 1


def test_a_post_puts_the_values_into_its_body_as_json(team):
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    connector = ticket(team, input_schema=schema, method="POST",
                       url_template=f"{team.url}/search", body_template='{"query": {q}, "limit": 5}')  # fmt: skip
    answer = call(connector, {"q": 'a "quoted", }{ value'})
    assert answer.status == "ok", answer.content
    assert json.loads(team.seen[-1].body) == {"query": 'a "quoted", }{ value', "limit": 5}
    plain = ticket(team, input_schema=schema, method="POST", url_template=f"{team.url}/search")
    call(plain, {"q": "refunds"})
    assert json.loads(team.seen[-1].body) == {"q": "refunds"}
    assert team.seen[-1].headers["content-type"] == "application/json"


def test_a_slow_answer_is_cut_off_with_an_error(team):
    connector = ticket(team, input_schema={"type": "object"}, timeout_seconds=1,
                       url_template=f"{team.url}/slow?seconds=5")  # fmt: skip
    started = time.monotonic()
    answer = call(connector, {})
    assert answer.status == "failed" and "within 1 s" in answer.content
    assert time.monotonic() - started < 3


def test_an_answer_that_trickles_in_is_cut_off_at_the_timeout(team):
    connector = ticket(team, input_schema={"type": "object"}, timeout_seconds=2,
                       url_template=f"{team.url}/drip?seconds=30")  # fmt: skip
    started = time.monotonic()
    answer = call(connector, {})
    assert answer.status == "failed" and "did not end within 2 s" in answer.content
    assert time.monotonic() - started < 4


def test_a_huge_answer_is_cut_off_with_an_error(team):
    connector = ticket(team, input_schema={"type": "object"}, max_response_bytes=4096,
                       url_template=f"{team.url}/huge?bytes=2000000")  # fmt: skip
    answer = call(connector, {})
    assert answer.status == "failed" and "larger than 4096 bytes: cut off" in answer.content
    assert 4096 < answer.bytes < 200_000  # it stopped reading


def test_redirects_go_only_to_the_hosts_it_may_reach(team):
    elsewhere = "http://localhost:9/stolen"
    connector = ticket(team, input_schema={"type": "object"},
                       url_template=f"{team.url}/redirect?to={elsewhere}")  # fmt: skip
    answer = call(connector, {})
    assert answer.status == "failed" and "may not reach: not followed" in answer.content
    same = ticket(team, input_schema={"type": "object"},
                  url_template=f"{team.url}/redirect?to=/tickets/PAY-9")  # fmt: skip
    assert call(same, {}).status == "ok" and team.seen[-1].path == "/tickets/PAY-9"
    assert team.seen[-1].headers["authorization"] == TOKEN


def test_an_error_answer_or_one_that_is_not_text_is_a_failure(team):
    for path, said in (("/fail", "HTTP 500"), ("/binary", "application/octet-stream, not text")):
        connector = ticket(team, input_schema={"type": "object"}, url_template=team.url + path)
        answer = call(connector, {})
        assert answer.status == "failed" and said in answer.content
    nowhere = ticket(team, input_schema={"type": "object"}, url_template="http://127.0.0.1:9/x")
    assert call(nowhere, {}).status == "failed"


def test_a_system_that_echoes_the_credential_does_not_hand_it_to_the_model(team):
    connector = ticket(team, input_schema={"type": "object"}, url_template=f"{team.url}/echo")
    answer = call(connector, {})
    assert answer.status == "ok"
    assert "tk-team-secret-0042" not in answer.content and "[credential removed]" in answer.content


@pytest.mark.django_db
def test_the_admin_checks_what_it_saves():
    from django.core.exceptions import ValidationError

    def problems(**fields) -> dict:
        values = {"name": "jira_ticket", "description": "d", "input_schema": SCHEMA,
                  "url_template": "https://jira.example.com/issue/{key}", **fields}  # fmt: skip
        try:
            Connector(**values).full_clean()
        except ValidationError as exc:
            return exc.message_dict
        return {}

    assert problems() == {}
    assert "input_schema" in problems(input_schema={"type": "objet"})
    assert "input_schema" in problems(input_schema={"type": "string"})
    assert "url_template" in problems(url_template="ftp://example.com/{key}")
    assert "url_template" in problems(url_template="https://{key}.example.com/")
    assert "url_template" in problems(url_template="https://user:pw@example.com/{key}")
    unrequired = problems(url_template="https://jira.example.com/{key}/{other}")
    assert "required property" in unrequired["url_template"][0]
    assert "name" in problems(name="read_file") and "name" in problems(name="Jira")
    assert "body_template" in problems(body_template='{"a": {key}}')  # GET has no body
    assert "allowed_hosts" in problems(allowed_hosts="https://jira.example.com/")
    assert "allowed_hosts" in problems(allowed_hosts="other.example.com")
    assert problems(allowed_hosts="*.example.com\nother.example.com") == {}
    assert problems(name="issue", kind=ConnectorKind.GITHUB_ISSUE, url_template="") == {}


@pytest.mark.django_db
def test_the_credential_is_write_only_in_the_admin(staff_client, django_user_model):
    django_user_model.objects.filter(username="operator").update(is_superuser=True)
    form = {
        "name": "jira_ticket", "kind": "http", "enabled": "on", "description": "A ticket.",
        "input_schema": json.dumps(SCHEMA), "method": "GET",
        "url_template": "https://jira.example.com/issue/{key}", "body_template": "",
        "credential_header": "Authorization", "credential": TOKEN, "allowed_hosts": "",
        "timeout_seconds": "10", "max_response_bytes": "65536",
    }  # fmt: skip
    response = staff_client.post("/admin/repos/connector/add/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    connector = Connector.objects.get(name="jira_ticket")
    assert connector.credential() == TOKEN and "tk-team-secret" not in connector.credential_sealed
    page = staff_client.get(f"/admin/repos/connector/{connector.pk}/change/").content.decode()
    assert "tk-team-secret" not in page
    # Left blank, the saved credential is kept; cleared on request.
    staff_client.post(f"/admin/repos/connector/{connector.pk}/change/", {**form, "credential": ""})
    connector.refresh_from_db()
    assert connector.credential() == TOKEN
    staff_client.post(f"/admin/repos/connector/{connector.pk}/change/",
                      {**form, "credential": "", "clear_credential": "on"})  # fmt: skip
    connector.refresh_from_db()
    assert connector.credential() == ""


@pytest.mark.django_db
def test_a_reviewer_is_allowed_connectors_one_by_one_and_a_job_gets_no_secret():
    reviewer = Reviewer.objects.create(slug="claude", engine="anthropic", model="m")
    allowed = Connector.objects.create(name="jira_ticket", description="A ticket.",
                                       input_schema=SCHEMA, url_template="https://j.example/{key}")  # fmt: skip
    allowed.credential_set(TOKEN)
    allowed.save()
    Connector.objects.create(name="pagerduty", description="p", url_template="https://p.example/")
    off = Connector.objects.create(name="wiki", description="w", url_template="https://w.example/",
                                   enabled=False)  # fmt: skip
    reviewer.connectors.add(allowed, off)
    [tool] = connector_tools(reviewer)
    assert (tool.name, tool.description, tool.input_schema) == ("jira_ticket", "A ticket.", SCHEMA)
    dumped = tool.model_dump_json()
    assert "j.example" not in dumped and "tk-team" not in dumped


@pytest.mark.django_db
def test_the_github_issue_connector_ships_allowed_to_no_reviewer():
    shipped = Connector.objects.get(name="github_issue")
    assert shipped.kind == ConnectorKind.GITHUB_ISSUE and shipped.enabled
    assert shipped.schema == GITHUB_ISSUE_SCHEMA and not shipped.reviewers.exists()


@pytest.mark.django_db
def test_the_github_issue_connector_reads_an_issue_from_the_fake_github(fake_github):
    world_build(fake_github)
    fake_github.add_issue(REPO, Issue(number=12, title="Refunds pay out negative amounts",
                                      body="refund(-5) pays.", labels=["bug", "payments"]))  # fmt: skip
    fake_github.add_installation(77, "other-org")
    fake_github.add_repo("other-org/secrets", installation_id=77)
    fake_github.add_issue("other-org/secrets", Issue(number=1, title="Hidden"))
    fake_github.add_repo("acme/tools", installation_id=INSTALLATION)
    fake_github.add_issue("acme/tools", Issue(number=3, title="A tool", state="closed"))
    connector = Connector.objects.get(name="github_issue")
    scope = {"repo": RepoRef(INSTALLATION, REPO_ID, REPO), "gateway": github_gateway()}

    answer = call(connector, {"number": 12}, **scope)
    assert answer.status == "ok", answer.content
    assert answer.content.startswith("acme/shop#12 (issue, open): Refunds pay out negative amounts")
    assert "Labels: bug, payments" in answer.content and "refund(-5) pays." in answer.content
    # A pull request's number reads as its issue.
    assert call(connector, {"number": 7}, **scope).content.startswith("acme/shop#7 (pull request")
    # Another repository of the same installation, and none of another.
    other = call(connector, {"repository": "acme/tools", "number": 3}, **scope)
    assert other.content.startswith("acme/tools#3 (issue, closed): A tool")
    hidden = call(connector, {"repository": "other-org/secrets", "number": 1}, **scope)
    assert (
        hidden.status == "refused"
        and "not a repository of this pull request's installation" in hidden.content
    )
    missing = call(connector, {"number": 404}, **scope)
    assert missing.status == "failed" and "has no issue #404" in missing.content
    assert call(connector, {"number": "12"}, **scope).status == "refused"
    # Without GitHub (a local review), there is no issue to read.
    assert call(connector, {"number": 12}).status == "refused"
    # The token asked for Issues: read, and for this repository only.
    tokens = [c for c in fake_github.calls if c.path.endswith("/issues/12")]
    used = fake_github.tokens[tokens[0].token]
    asked = {k: v for k, v in used.permissions.items() if k != "metadata"}  # GitHub adds it
    assert asked == {"issues": "read"} and used.repository_ids == frozenset({REPO_ID})


@pytest.mark.django_db
def test_a_connectors_credential_is_resealed_with_the_reviewers_keys(settings):
    from django.core.management import call_command

    old = settings.SECRET_KEY
    connector = Connector.objects.create(name="jira_ticket", description="d",
                                         url_template="https://j.example/")  # fmt: skip
    connector.credential_set(TOKEN)
    connector.save()
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = (
        "a-new-secret-key-0123456789-abcdefghij",
        [old],
    )
    call_command("reseal_keys", stdout=open("/dev/null", "w"))  # noqa: SIM115
    settings.SECRET_KEY_FALLBACKS = []
    assert Connector.objects.get(pk=connector.pk).credential() == TOKEN
