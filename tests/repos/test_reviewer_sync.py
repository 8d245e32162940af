"""Reviewers synced from a reviewers repository: a TOML file per reviewer, read at the
tip of a branch over git (here a local repository as the remote: file://, no network),
each change a revision carrying the commit's SHA; a broken URL or file is a clear error
that changes nothing, and the synced fields are read-only in the admin."""

from __future__ import annotations

import subprocess
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from repos.models import Reviewer, ReviewerRevision, Skill
from repos.reviewer_sources import SourceError, definition_parse
from repos.services import revision_record
from tests.helpers import drain_queue, post_webhook, push_payload
from tests.repos.test_reviewer_admin import URL, form
from webhooks.models import WebhookDelivery

FILE = '''
rules = """
Raise bugs that break behaviour.
Never raise style."""
guidance = "We use Django 5."

[[skills]]
name = "migrations"
description = "Changes to Django migrations"
body = "Check the reverse migration."
'''


def _git(cwd: Path, *args: str) -> str:
    env = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "HOME": str(cwd),
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com", "PATH": "/usr/bin:/bin"}  # fmt: skip
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )  # noqa: S603, S607
    return done.stdout.strip()


def _commit(repo: Path, text: str, path: str = "reviewers/claude.toml") -> str:
    (repo / path).parent.mkdir(parents=True, exist_ok=True)
    (repo / path).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "reviewer")
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture
def remote(tmp_path, settings) -> Path:
    settings.TASUKU_REVIEWER_SOURCE_ALLOW_FILE = True
    repo = tmp_path / "reviewers"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    return repo


@pytest.fixture
def reviewer(remote) -> Reviewer:
    made = Reviewer.objects.create(
        slug="claude", engine="anthropic", model="claude-sonnet-5-5", rules="Old rules.",
        source_url=remote.as_uri(), source_path="reviewers/claude.toml", source_ref="main",
    )  # fmt: skip
    Skill.objects.create(reviewer=made, name="old", description="Old", body="Old body.")
    revision_record(reviewer=made, source=ReviewerRevision.Source.ADMIN, author="ann")
    return made


def _sync(client, reviewer: Reviewer) -> str:
    response = client.post(
        URL, {"action": "sync_from_repository", "_selected_action": [reviewer.pk]}, follow=True
    )
    assert response.status_code == 200
    return "\n".join(str(m) for m in response.context["messages"])


def _unchanged(reviewer: Reviewer) -> None:
    fresh = Reviewer.objects.get(pk=reviewer.pk)
    assert fresh.rules == "Old rules." and fresh.source_commit == ""
    assert list(fresh.skill_documents.values_list("name", flat=True)) == ["old"]
    assert fresh.revisions.count() == 1


@pytest.mark.django_db
def test_a_sync_makes_a_revision_with_the_commit_sha(admin_client, remote, reviewer):
    sha = _commit(remote, FILE)
    page = _sync(admin_client, reviewer)
    assert "claude: revision 2" in page and sha[:12] in page

    reviewer.refresh_from_db()
    assert reviewer.rules == "Raise bugs that break behaviour.\nNever raise style."
    assert reviewer.skills == "We use Django 5."
    assert [(s.name, s.body) for s in reviewer.skill_documents.all()] == [
        ("migrations", "Check the reverse migration.")
    ]
    assert reviewer.source_commit == sha
    revision = reviewer.revisions.order_by("-number").first()
    assert (revision.number, revision.source, revision.author, revision.commit) == (
        2, "sync", "sync", sha
    )  # fmt: skip
    assert revision.definition["rules"] == reviewer.rules
    assert revision.definition["model"] == "claude-sonnet-5-5"  # the admin's, kept

    # Synced again with nothing new: no revision; a new commit that changes it: one more.
    assert "unchanged at revision 2" in _sync(admin_client, reviewer)
    later = _commit(remote, FILE.replace("Django 5", "Django 6"))
    out = StringIO()
    call_command("reviewers_sync", stdout=out)
    assert "claude: new revision 3" in out.getvalue()
    latest = reviewer.revisions.order_by("-number").first()
    assert latest.commit == later and latest.definition["skills"] == "We use Django 6."


@pytest.mark.django_db
def test_a_sync_from_a_broken_url_is_an_admin_error_and_changes_nothing(
    admin_client, tmp_path, reviewer
):
    Reviewer.objects.filter(pk=reviewer.pk).update(source_url=(tmp_path / "nowhere").as_uri())
    page = _sync(admin_client, reviewer)
    assert "claude: not synced, nothing changed. Could not fetch" in page
    _unchanged(reviewer)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('rules = "unclosed', "is not valid TOML"),
        ('rules = "R"\nguidence = "typo"', "unknown key(s) guidence"),
        ("rules = 3", "`rules` must be a string"),
        ('[[skills]]\nname = "x"\ndescription = "X"', "a skill needs a body"),
        ('[[skills]]\nname = "Bad Name"\ndescription = "X"\nbody = "B"', "name"),
    ],
)
@pytest.mark.django_db
def test_a_malformed_file_is_an_admin_error_and_changes_nothing(
    admin_client, remote, reviewer, text, said
):
    _commit(remote, text)
    page = _sync(admin_client, reviewer)
    assert "claude: not synced, nothing changed." in page and said in page
    _unchanged(reviewer)


@pytest.mark.django_db
def test_a_missing_file_or_branch_is_an_error_and_changes_nothing(remote, reviewer):
    _commit(remote, FILE, path="elsewhere.toml")
    with pytest.raises(CommandError, match="claude"):
        call_command("reviewers_sync", stdout=StringIO(), stderr=StringIO())
    _unchanged(reviewer)
    Reviewer.objects.filter(pk=reviewer.pk).update(source_ref="no-such-branch")
    err = StringIO()
    with pytest.raises(CommandError):
        call_command("reviewers_sync", "claude", stdout=StringIO(), stderr=err)
    assert "Could not fetch" in err.getvalue()
    _unchanged(reviewer)


@pytest.mark.django_db
def test_the_synced_fields_are_read_only_in_the_admin(admin_client, remote, reviewer):
    _commit(remote, FILE)
    _sync(admin_client, reviewer)
    page = admin_client.get(f"{URL}{reviewer.pk}/change/").content.decode()
    assert 'name="rules"' not in page and 'name="skills"' not in page
    assert "Raise bugs that break behaviour." in page  # shown, not editable
    assert 'name="skill_documents-0-body"' not in page
    assert "sync (" in page  # the revisions' history: who made each

    # A save of the rest keeps the file's rules and makes no revision of its own.
    response = admin_client.post(
        f"{URL}{reviewer.pk}/change/",
        form(
            source_url=reviewer.source_url, source_path=reviewer.source_path,
            source_ref="main", rules="Sneaked in.", **{"skill_documents-INITIAL_FORMS": "1",
            "skill_documents-TOTAL_FORMS": "1", "skill_documents-0-id": str(reviewer.skill_documents.get().pk),
            "skill_documents-0-reviewer": str(reviewer.pk)},
        ),
    )  # fmt: skip
    assert response.status_code == 302, response.content.decode()[-3000:]
    reviewer.refresh_from_db()
    assert reviewer.rules.startswith("Raise bugs") and reviewer.revisions.count() == 2


@pytest.mark.django_db
def test_the_admin_takes_https_only_with_the_token_apart_and_sealed(admin_client, settings):
    settings.TASUKU_REVIEWER_SOURCE_ALLOW_FILE = False
    response = admin_client.post(
        f"{URL}add/", form(source_url="file:///srv/reviewers", source_path="r.toml")
    )
    assert "must be an https:// git URL" in response.content.decode()
    response = admin_client.post(
        f"{URL}add/",
        form(source_url="https://bob:pw@git.example.com/r.git", source_path="r.toml"),
    )
    assert "Put no credentials in the URL" in response.content.decode()
    response = admin_client.post(
        f"{URL}add/", form(source_url="https://git.example.com/r.git", source_path="../r.toml")
    )
    assert "a path inside the repository" in response.content.decode()

    response = admin_client.post(
        f"{URL}add/",
        form(source_url="https://git.example.com/r.git", source_path="r.toml",
             source_token="github_pat_secret"),
    )  # fmt: skip
    assert response.status_code == 302
    reviewer = Reviewer.objects.get(slug="claude")
    assert reviewer.source_token() == "github_pat_secret"
    assert "github_pat_secret" not in reviewer.source_token_sealed
    page = admin_client.get(f"{URL}{reviewer.pk}/change/").content.decode()
    assert "github_pat_secret" not in page and reviewer.source_token_sealed not in page


@pytest.mark.database_free
def test_a_reviewer_file_is_rules_guidance_and_skills():
    parsed = definition_parse(FILE, where="claude.toml")
    assert parsed.rules.startswith("Raise bugs") and parsed.guidance == "We use Django 5."
    assert [s.name for s in parsed.skills] == ["migrations"]
    with pytest.raises(SourceError, match="a second skill named migrations"):
        definition_parse(
            FILE + FILE.split("\n\n", 1)[1].split("guidance")[0] + FILE[FILE.index("[[skills]]") :],
            where="x",
        )
    with pytest.raises(SourceError, match="model"):
        definition_parse('model = "gpt"', where="x")  # the engine and model stay the admin's


@pytest.mark.django_db
def test_the_deploy_token_is_resealed_after_a_secret_key_rotation(settings):
    old = settings.SECRET_KEY
    reviewer = Reviewer.objects.create(slug="claude", engine="anthropic", model="m")
    reviewer.source_token_set("github_pat_1")
    reviewer.save()
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = "a-new-secret-key-" + "q7" * 20, [old]
    call_command("reseal_keys", stdout=StringIO())
    settings.SECRET_KEY_FALLBACKS = []
    assert Reviewer.objects.get(pk=reviewer.pk).source_token() == "github_pat_1"


# --- synced on a push to the reviewers repository (repos/reviewer_sync.py, `push_event`) -----
# Through the webhook intake as GitHub delivers it: the branch a reviewer follows, not
# another; a deleted branch or an unrelated repository changes nothing; a file that does
# not parse is named in the delivery's outcome and changes nothing.


def push(client, test_app, remote_path, *, ref="refs/heads/main", after="", **extra):
    uri = remote_path.as_uri()
    body = push_payload(
        full_name="acme/reviewers", repo_id=4711, installation_id=41, ref=ref,
        after=after or "a" * 40, clone_url=f"{uri}.git" if not uri.endswith(".git") else uri,
        html_url=uri, **extra,
    )  # fmt: skip
    response = post_webhook(client, "push", body, secret=test_app.webhook_secret)
    assert response.status_code == 202, response.content
    drain_queue()
    return WebhookDelivery.objects.order_by("-pk").first()


@pytest.mark.django_db
def test_a_push_to_the_branch_a_reviewer_follows_syncs_it(
    fake_github, client, test_app, remote, reviewer
):
    commit = _commit(remote, FILE)
    delivery = push(client, test_app, remote, after=commit)

    reviewer.refresh_from_db()
    assert reviewer.source_commit == commit
    assert reviewer.rules.startswith("Raise bugs")
    assert sorted(Skill.objects.filter(reviewer=reviewer).values_list("name", flat=True)) == [
        "migrations"
    ]
    assert "claude synced at" in delivery.outcome and "new revision 2" in delivery.outcome
    # GitHub delivers it again (a redelivery): the same revision, nothing new
    again = push(client, test_app, remote, after=commit)
    assert "unchanged, revision 2" in again.outcome


@pytest.mark.django_db
def test_a_push_to_another_branch_a_deleted_branch_or_another_repository_syncs_nothing(
    fake_github, client, test_app, remote, reviewer, tmp_path
):
    _commit(remote, FILE)
    other = push(client, test_app, remote, ref="refs/heads/experiment")
    gone = push(client, test_app, remote, deleted=True)
    elsewhere = push(client, test_app, tmp_path / "someone-else")
    reviewer.refresh_from_db()
    assert reviewer.rules == "Old rules." and not reviewer.source_commit
    assert "nothing to sync" in other.outcome and "was deleted" in gone.outcome
    assert "nothing to sync" in elsewhere.outcome


@pytest.mark.django_db
def test_a_reviewer_without_a_ref_follows_the_default_branch(
    fake_github, client, test_app, remote, reviewer
):
    Reviewer.objects.filter(pk=reviewer.pk).update(source_ref="")
    commit = _commit(remote, FILE)
    push(client, test_app, remote, after=commit, default_branch="main")
    reviewer.refresh_from_db()
    assert reviewer.source_commit == commit


@pytest.mark.django_db
def test_a_file_that_does_not_parse_is_named_and_changes_nothing(
    fake_github, client, test_app, remote, reviewer
):
    _commit(remote, "rules = [not toml")
    delivery = push(client, test_app, remote)
    reviewer.refresh_from_db()
    assert reviewer.rules == "Old rules."
    assert "claude not synced (nothing changed)" in delivery.outcome
    assert delivery.status != "failed"
