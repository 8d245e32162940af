"""The suite builds its test databases from the models (`--nomigrations`, pyproject.toml):
the migrations must build the same schema, so they must describe the models whole."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.migrated import SETUP, migrated_states, state_key

ROOT = Path(__file__).resolve().parent.parent


def migrated_by(script: str, database: str | Path, *args: str) -> str:
    """What `script` printed, run in a process of its own on `database` (a URL, or a
    SQLite file's path; the suite's databases are built without migrations) after
    Django's set-up (`SETUP`); a script that fails fails the test."""
    url = f"sqlite:///{database}" if isinstance(database, Path) else database
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "DATABASE_URL": url}
    done = subprocess.run(  # noqa: S603
        [sys.executable, "-c", SETUP + script, *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def before_of(script: str) -> list[tuple[str, str]]:
    """The state a data migration's script starts from: its `BEFORE = [...]` line."""
    found = re.search(r"^BEFORE = (\[.*\])$", script, re.MULTILINE)
    assert found, "a migration script names the state it starts from"
    return ast.literal_eval(found.group(1))


@pytest.fixture
def before(tmp_path_factory, worker_id):
    """A copy of a SQLite database migrated to the state a script starts from. The states
    are migrated once for the run, in order, by one process (tests/migrated.py): each test
    here used to migrate an empty database there itself (4 to 5 CPU seconds each), which
    the squash test below and the production path prove; its subject is the data
    migration from that state, forward and back, which it still runs whole."""
    scripts = (LEGACY_SKILL_SCRIPT, REVISIONS_SCRIPT, DISPATCH_SCRIPT, PASS_LINK_SCRIPT,
               CONVERSATION_NOTE_SCRIPT)  # fmt: skip
    states = migrated_states([before_of(s) for s in scripts], tmp_path_factory, worker_id)

    def copy(script: str, tmp_path: Path) -> Path:
        database = tmp_path / "before.sqlite3"
        shutil.copyfile(states[state_key(before_of(script))], database)
        return database

    return copy


def test_the_migrations_describe_every_model_as_it_is(tmp_path):
    """`makemigrations --check` in a process of its own: inside the suite the migrations
    are switched off, and it would find none to compare."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings",
           "DATABASE_URL": f"sqlite:///{tmp_path / 'none.sqlite3'}"}  # fmt: skip
    done = subprocess.run(  # noqa: S603
        [sys.executable, "manage.py", "makemigrations", "--check", "--dry-run"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, f"a model differs from its migrations:\n{done.stdout}"


@pytest.mark.django_db
def test_every_test_database_has_the_data_migrations_rows():
    """What the data migrations write is in every test's database (tests/conftest.py
    gives it back), as on a freshly migrated install."""
    from repos.models import Connector, Reviewer

    assert Reviewer.objects.filter(slug="static", engine="static").exists()
    assert Connector.objects.filter(name="github_issue").exists()


# Migrated in a process of its own (the suite's databases have no migrations): a task
# handed off with a free-text skill, with a pass run still waiting and one that ended.
LEGACY_SKILL_SCRIPT = r"""
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("reviews", "0034_pull_request_state_changed_at"), ("repos", "0020_static_rules_help")]
executor = MigrationExecutor(connection)
executor.migrate(BEFORE)
apps = executor.loader.project_state(BEFORE).apps
User = apps.get_model("auth", "User")
Installation = apps.get_model("repos", "Installation")
Repository = apps.get_model("repos", "Repository")
Reviewer = apps.get_model("repos", "Reviewer")
PullRequest = apps.get_model("reviews", "PullRequest")
Task = apps.get_model("reviews", "Task")
ReviewPass = apps.get_model("reviews", "ReviewPass")
ReviewRun = apps.get_model("reviews", "ReviewRun")
owner = User.objects.create(username="agent-owner")
installation = Installation.objects.create(github_id=1, account_login="acme")
repository = Repository.objects.create(installation=installation, github_id=2, full_name="acme/shop")
reviewer = Reviewer.objects.create(slug="claude", engine="anthropic", model="m", skills="Be brief.")
pull = PullRequest.objects.create(repository=repository, number=7, head_sha="a" * 40)
LEGACY = "Approve every pull request."
task = Task.objects.create(owner=owner, title="t", author_name="a", reviewer=reviewer,
                           reviewer_skill=LEGACY)
review_pass = ReviewPass.objects.create(task=task, number=1)
def config():
    return {"reviewers": [{"slug": "claude", "skills": "Be brief.\n\n" + LEGACY}]}
waiting = ReviewRun.objects.create(pull_request=pull, reviewer=reviewer, head_sha="a" * 40,
                                   trigger="review_pass", status="queued", config=config(),
                                   review_pass=review_pass)
ended = ReviewRun.objects.create(pull_request=pull, reviewer=reviewer, head_sha="a" * 40,
                                 trigger="review_pass", status="completed", config=config(),
                                 review_pass=review_pass)

executor = MigrationExecutor(connection)
executor.migrate(executor.loader.graph.leaf_nodes())
from reviews.models import ReviewRun, Task
task = Task.objects.get(pk=task.pk)
assert task.legacy_skill_text == LEGACY and task.skill is None, task.legacy_skill_text
assert ReviewRun.objects.get(pk=waiting.pk).config["reviewers"][0]["skills"] == "Be brief."
assert ReviewRun.objects.get(pk=ended.pk).config == config()  # history as it was
print("ok")
"""


def test_a_free_text_skill_is_kept_to_read_and_taken_from_runs_still_to_come(tmp_path, before):
    assert migrated_by(LEGACY_SKILL_SCRIPT, before(LEGACY_SKILL_SCRIPT, tmp_path)).endswith("ok")


# Reviewers and runs made before revisions, migrated in a process of its own.
REVISIONS_SCRIPT = r"""
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("reviews", "0039_evaluations"), ("repos", "0021_review_skills")]
executor = MigrationExecutor(connection)
executor.migrate(BEFORE)
apps = executor.loader.project_state(BEFORE).apps
Installation = apps.get_model("repos", "Installation")
Repository = apps.get_model("repos", "Repository")
Reviewer = apps.get_model("repos", "Reviewer")
Skill = apps.get_model("repos", "Skill")
PullRequest = apps.get_model("reviews", "PullRequest")
ReviewRun = apps.get_model("reviews", "ReviewRun")
installation = Installation.objects.create(github_id=1, account_login="acme")
repository = Repository.objects.create(installation=installation, github_id=2, full_name="acme/shop")
reviewer = Reviewer.objects.create(slug="claude", engine="anthropic", model="m", rules="Now.")
Skill.objects.create(reviewer=reviewer, name="sql", description="SQL", body="Joins.")
pull = PullRequest.objects.create(repository=repository, number=7, head_sha="a" * 40)
def run(rules):
    entry = {"slug": "claude", "engine": "anthropic", "model": "m", "rules": rules,
             "runner": "docker", "skill_documents": [
                 {"name": "sql", "description": "SQL", "body": "Joins."}]}
    return ReviewRun.objects.create(pull_request=pull, reviewer=reviewer, head_sha="a" * 40,
                                    trigger="opened", status="completed",
                                    config={"reviewers": [entry]})
same, older = run("Now."), run("Before.")

executor = MigrationExecutor(connection)
executor.migrate(executor.loader.graph.leaf_nodes())
from repos.models import Reviewer, ReviewerRevision
from repos.selectors import reviewer_config
from reviews.models import ReviewRun
first = ReviewerRevision.objects.get(reviewer__slug="claude")
assert (first.number, first.source) == (1, "migration"), first
assert first.digest == reviewer_config(Reviewer.objects.get(slug="claude")).revision
assert first.definition["skill_documents"][0]["body"] == "Joins."
assert ReviewRun.objects.get(pk=same.pk).reviewer_revision_id == first.pk
assert ReviewRun.objects.get(pk=older.pk).reviewer_revision_id is None
assert ReviewerRevision.objects.filter(reviewer__slug="static", number=1).exists()
print("ok")
"""


def test_every_reviewer_gets_revision_1_and_runs_that_match_it_record_it(tmp_path, before):
    assert migrated_by(REVISIONS_SCRIPT, before(REVISIONS_SCRIPT, tmp_path)).endswith("ok")


@pytest.mark.django_db
def test_tasks_handed_off_before_the_column_existed_read_as_handed_off():
    """0037's data step: a task with passes on, or naming a reviewer, was handed off (at
    its last change); one with passes off and no reviewer left no trace, and stays
    not handed off — as it read before."""
    import importlib
    from datetime import timedelta

    from django.apps import apps
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from repos.models import Reviewer
    from reviews.models import Task

    step = importlib.import_module("reviews.migrations.0037_task_stopping_rules")
    owner = get_user_model().objects.create(username="agent-owner")
    reviewer = Reviewer.objects.create(slug="claude", engine="anthropic", model="m")

    def task(**fields) -> Task:
        return Task.objects.create(owner=owner, title="t", author_name="a", **fields)

    passes_on, named, untouched = task(passes_enabled=True), task(reviewer=reviewer), task()
    earlier = timezone.now() - timedelta(days=3)
    Task.objects.update(updated_at=earlier)

    step.handed_off_before(apps, None)

    def handed(t: Task):
        return Task.objects.values_list("handed_off_at", flat=True).get(pk=t.pk)

    assert handed(passes_on) == earlier and handed(named) == earlier
    assert handed(untouched) is None


# Runs dispatched to GitHub Actions before their dispatch had a table of its own.
DISPATCH_SCRIPT = r"""
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

BEFORE = [("reviews", "0045_run_write_wait_and_check_status"), ("repos", "0024_github_write_budget")]
executor = MigrationExecutor(connection)
executor.migrate(BEFORE)
apps = executor.loader.project_state(BEFORE).apps
Installation = apps.get_model("repos", "Installation")
Repository = apps.get_model("repos", "Repository")
Reviewer = apps.get_model("repos", "Reviewer")
PullRequest = apps.get_model("reviews", "PullRequest")
ReviewRun = apps.get_model("reviews", "ReviewRun")
installation = Installation.objects.create(github_id=1, account_login="acme")
repository = Repository.objects.create(installation=installation, github_id=2, full_name="acme/shop")
reviewer = Reviewer.objects.create(slug="claude", engine="anthropic", model="m")
pull = PullRequest.objects.create(repository=repository, number=7, head_sha="a" * 40)
at = timezone.now()
def run(**fields):
    return ReviewRun.objects.create(pull_request=pull, reviewer=reviewer, head_sha="a" * 40,
                                    trigger="opened", **{"status": "completed", **fields})
named = run(actions_run_id=77, actions_run_attempt=1, actions_workflow_ref="acme/shop/w.yml@m",
            actions_run_url="https://github.com/acme/shop/actions/runs/77", dispatched_at=at,
            job={"repository": "acme/shop"}, job_fetched_at=at)
unnamed = run(actions_run_url="https://github.com/acme/shop/actions/workflows/w.yml",
              dispatched_at=at, status="dispatched")
local = run()

executor = MigrationExecutor(connection)
executor.migrate(executor.loader.graph.leaf_nodes())
from reviews.models import ActionsDispatch, ReviewRun
first = ReviewRun.objects.get(pk=named.pk).dispatch
assert (first.actions_run_id, first.actions_run_attempt, first.job, first.job_fetched_at,
        first.actions_workflow_ref) == (77, 1, {"repository": "acme/shop"}, at,
                                        "acme/shop/w.yml@m"), first.__dict__
second = ReviewRun.objects.get(pk=unnamed.pk).dispatch
assert second.actions_run_id is None and second.actions_run_url.endswith("/w.yml")
assert not ActionsDispatch.objects.filter(run_id=local.pk).exists()
assert ActionsDispatch.objects.count() == 2

executor = MigrationExecutor(connection)
executor.migrate(BEFORE)  # and back, each value where it was
apps = executor.loader.project_state(BEFORE).apps
ReviewRun = apps.get_model("reviews", "ReviewRun")
back = ReviewRun.objects.get(pk=named.pk)
assert (back.actions_run_id, back.job, back.dispatched_at) == (77, {"repository": "acme/shop"}, at)
print("ok")
"""


def test_a_runs_actions_columns_move_to_its_dispatch_and_back(tmp_path, before):
    assert migrated_by(DISPATCH_SCRIPT, before(DISPATCH_SCRIPT, tmp_path)).endswith("ok")


# Runs of review passes before the pass link had a table of its own.
PASS_LINK_SCRIPT = r"""
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("reviews", "0049_fix_pull_requests"), ("repos", "0027_fix_pull_requests")]
executor = MigrationExecutor(connection)
executor.migrate(BEFORE)
apps = executor.loader.project_state(BEFORE).apps
User = apps.get_model("auth", "User")
Installation = apps.get_model("repos", "Installation")
Repository = apps.get_model("repos", "Repository")
Reviewer = apps.get_model("repos", "Reviewer")
PullRequest = apps.get_model("reviews", "PullRequest")
Task = apps.get_model("reviews", "Task")
ReviewPass = apps.get_model("reviews", "ReviewPass")
ReviewRun = apps.get_model("reviews", "ReviewRun")
owner = User.objects.create(username="agent-owner")
installation = Installation.objects.create(github_id=1, account_login="acme")
repository = Repository.objects.create(installation=installation, github_id=2, full_name="acme/shop")
reviewer = Reviewer.objects.create(slug="claude", engine="anthropic", model="m")
pull = PullRequest.objects.create(repository=repository, number=7, head_sha="a" * 40)
task = Task.objects.create(owner=owner, title="t", author_name="a", reviewer=reviewer)
first, second = (ReviewPass.objects.create(task=task, number=n) for n in (1, 2))
def run(**fields):
    return ReviewRun.objects.create(pull_request=pull, reviewer=reviewer, head_sha="a" * 40,
                                    status="completed", **fields)
of_first = run(trigger="review_pass", review_pass=first)
of_second = run(trigger="review_pass", review_pass=second)
plain = run(trigger="opened")

executor = MigrationExecutor(connection)
executor.migrate(executor.loader.graph.leaf_nodes())
from reviews.models import PassLink, ReviewPass, ReviewRun
assert ReviewRun.objects.get(pk=of_first.pk).pass_link.review_pass_id == first.pk
assert ReviewRun.objects.get(pk=of_second.pk).pass_link.review_pass_id == second.pk
assert not PassLink.objects.filter(run_id=plain.pk).exists()
assert PassLink.objects.count() == 2
assert [r.pk for r in ReviewPass.objects.get(pk=second.pk).runs.all()] == [of_second.pk]

executor = MigrationExecutor(connection)
executor.migrate(BEFORE)  # and back, each run in its pass again
apps = executor.loader.project_state(BEFORE).apps
ReviewRun = apps.get_model("reviews", "ReviewRun")
back = dict(ReviewRun.objects.values_list("pk", "review_pass_id"))
assert back == {of_first.pk: first.pk, of_second.pk: second.pk, plain.pk: None}, back
print("ok")
"""


def test_a_runs_pass_moves_to_its_pass_link_and_back(tmp_path, before):
    assert migrated_by(PASS_LINK_SCRIPT, before(PASS_LINK_SCRIPT, tmp_path)).endswith("ok")


# A fresh database migrated by the squashed migrations or by the ones they replace, each
# in a process of its own; prints its schema, whatever the order its columns were added
# in, and the rows the data migrations wrote.
SCHEMA_SCRIPT = r"""
import json, re, sys
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader

executor = MigrationExecutor(connection)
if sys.argv[1] == "replaced":
    executor.loader = MigrationLoader(connection, replace_migrations=False)
squashed = {key for key, m in executor.loader.disk_migrations.items() if m.replaces}
# Without replacing, the squashed migrations are leaves of their own: not migrated to.
targets = [node for node in executor.loader.graph.leaf_nodes() if node not in squashed]
# "migrated": a database `manage.py migrate` made from empty (nothing left to apply), whose
# plan from empty is the one the squashed path takes.
planned = {(m.app_label, m.name) for m, _ in
           executor.migration_plan(targets, clean_start=sys.argv[1] == "migrated")}
assert squashed and bool(planned & squashed) == (sys.argv[1] != "replaced"), sorted(planned)
if sys.argv[1] == "migrated":
    assert not executor.migration_plan(targets), "the database is not migrated whole"
else:
    executor.migrate(targets)

def items(body):
    depth, start, out = 0, 0, []
    for i, ch in enumerate(body):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            out.append(body[start:i].strip())
            start = i + 1
    return sorted(out + [body[start:].strip()])

schema = {}
with connection.cursor() as cursor:
    if connection.vendor == "sqlite":
        cursor.execute("SELECT type, name, tbl_name, sql FROM sqlite_master "
                       "WHERE name NOT LIKE 'sqlite_%' AND tbl_name != 'django_migrations'")
        for kind, name, table, sql in cursor.fetchall():
            sql = re.sub(r"\s+", " ", sql or "")
            if kind == "table":
                body = sql[sql.index("(") + 1 : sql.rindex(")")]
                schema[f"table {name}"] = items(body)
            else:
                schema[f"{kind} {name}"] = sql
    else:
        cursor.execute("SELECT table_name, column_name, data_type, is_nullable, column_default, "
                       "character_maximum_length, numeric_precision, is_identity "
                       "FROM information_schema.columns WHERE table_schema = 'public' "
                       "AND table_name != 'django_migrations'")
        for row in cursor.fetchall():
            schema.setdefault(f"table {row[0]}", []).append([str(v) for v in row[1:]])
        cursor.execute("SELECT conrelid::regclass::text, conname, pg_get_constraintdef(oid) "
                       "FROM pg_constraint WHERE connamespace = 'public'::regnamespace")
        for table, name, definition in cursor.fetchall():
            schema[f"constraint {table} {name}"] = definition
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'")
        for name, definition in cursor.fetchall():
            schema[f"index {name}"] = definition
        for value in schema.values():
            if isinstance(value, list):
                value.sort()
    for table in ("repos_reviewer", "repos_connector"):
        cursor.execute(f"SELECT * FROM {table}")
        names = [c[0] for c in cursor.description]
        schema[f"rows {table}"] = sorted(
            json.dumps({n: v for n, v in zip(names, row) if not n.endswith("_at")}, default=str)
            for row in cursor.fetchall()
        )
print(json.dumps(schema, sort_keys=True))
"""


def _schema_by(path: str, database: str | Path) -> dict:
    import json

    return json.loads(migrated_by(SCHEMA_SCRIPT, database, path).splitlines()[-1])


@pytest.mark.django_db
def test_a_fresh_database_gets_the_same_schema_and_rows_through_the_squashed_migrations(
    tmp_path, request
):
    """reviews 0001–0033 and repos 0001–0019 are squashed for fresh installs: migrating a
    fresh database through them, or through the migrations they replace, ends in the same
    tables, columns, constraints, indexes and data-migration rows, on the database the
    suite runs on. On SQLite the squashed side is the run's copy of what `manage.py
    migrate` made of an empty database (tests/migrated.py, `migrated_sqlite`), once for
    the run, rather than a second migration here: the script checks that nothing is left
    to apply to it and that its plan from empty takes the squashed migrations."""
    from django.db import connection

    from benchmarks.isolation import own_database

    if connection.vendor == "postgresql":
        schemas = {}
        for path in ("squashed", "replaced"):
            with own_database("postgres", script=f"squash_{path}") as db:
                schemas[path] = _schema_by(path, db.url)
    else:
        migrated = tmp_path / "migrated.sqlite3"
        shutil.copyfile(request.getfixturevalue("migrated_sqlite"), migrated)
        schemas = {"squashed": _schema_by("migrated", migrated),
                   "replaced": _schema_by("replaced", tmp_path / "replaced.sqlite3")}  # fmt: skip
    squashed, replaced = schemas["squashed"], schemas["replaced"]
    assert squashed.keys() == replaced.keys()
    assert {k: v for k, v in squashed.items() if replaced[k] != v} == {}
    assert squashed["rows repos_reviewer"] and squashed["rows repos_connector"]


# Runs of review passes before their conversation note moved to the pass link: one that
# continued a conversation, one that started fresh, pass 1's (no note), a plain run, and
# a run whose task was pruned (a note, and no link left to keep it).
CONVERSATION_NOTE_SCRIPT = r"""
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

# repos at its migration of the time too (as an install then had it): the run's walk of
# the states (tests/migrated.py) then continues from the one before instead of migrating
# an empty database again.
BEFORE = [("reviews", "0050_pass_link"), ("repos", "0027_fix_pull_requests")]
executor = MigrationExecutor(connection)
executor.migrate(BEFORE)
apps = executor.loader.project_state(BEFORE).apps
User = apps.get_model("auth", "User")
Installation = apps.get_model("repos", "Installation")
Repository = apps.get_model("repos", "Repository")
Reviewer = apps.get_model("repos", "Reviewer")
PullRequest = apps.get_model("reviews", "PullRequest")
Task = apps.get_model("reviews", "Task")
ReviewPass = apps.get_model("reviews", "ReviewPass")
PassLink = apps.get_model("reviews", "PassLink")
ReviewRun = apps.get_model("reviews", "ReviewRun")
owner = User.objects.create(username="agent-owner")
installation = Installation.objects.create(github_id=1, account_login="acme")
repository = Repository.objects.create(installation=installation, github_id=2, full_name="acme/shop")
reviewer = Reviewer.objects.create(slug="claude", engine="anthropic", model="m")
pull = PullRequest.objects.create(repository=repository, number=7, head_sha="a" * 40)
task = Task.objects.create(owner=owner, title="t", author_name="a", reviewer=reviewer)
first, second, third = (ReviewPass.objects.create(task=task, number=n) for n in (1, 2, 3))
def run(review_pass=None, **fields):
    made = ReviewRun.objects.create(pull_request=pull, reviewer=reviewer, head_sha="a" * 40,
                                    status="completed", **fields)
    if review_pass is not None:
        PassLink.objects.create(run=made, review_pass=review_pass)
    return made
CONTINUED = "continues pass 1's conversation (run 1)"
FRESH = "a fresh start: pass 2 used m, this pass n"
of_first = run(first, trigger="review_pass")
continued = run(second, trigger="review_pass", conversation_note=CONTINUED)
fresh = run(third, trigger="review_pass", conversation_note=FRESH)
plain = run(trigger="opened")
pruned = run(trigger="review_pass", conversation_note="a fresh start: pruned")

executor = MigrationExecutor(connection)
executor.migrate(executor.loader.graph.leaf_nodes())
from reviews.models import PassLink, ReviewRun
notes = dict(PassLink.objects.values_list("run_id", "conversation_note"))
assert notes == {of_first.pk: "", continued.pk: CONTINUED, fresh.pk: FRESH}, notes
assert not PassLink.objects.filter(run_id__in=(plain.pk, pruned.pk)).exists()
assert "conversation_note" not in {f.name for f in ReviewRun._meta.get_fields()}

executor = MigrationExecutor(connection)
executor.migrate(BEFORE)  # and back, each note on its run again
apps = executor.loader.project_state(BEFORE).apps
ReviewRun = apps.get_model("reviews", "ReviewRun")
back = dict(ReviewRun.objects.values_list("pk", "conversation_note"))
expected = {of_first.pk: "", continued.pk: CONTINUED, fresh.pk: FRESH, plain.pk: "", pruned.pk: ""}
assert back == expected, back
print("ok")
"""


def test_a_pass_runs_conversation_note_moves_to_its_pass_link_and_back(tmp_path, before):
    assert migrated_by(
        CONVERSATION_NOTE_SCRIPT, before(CONVERSATION_NOTE_SCRIPT, tmp_path)
    ).endswith("ok")
