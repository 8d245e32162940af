from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django_q.models import Schedule

pytestmark = pytest.mark.django_db


def test_setup_schedules_registers_the_sweepers_and_the_reaper_and_is_idempotent(capsys):
    call_command("setup_schedules")
    call_command("setup_schedules")
    schedules = {s.name: s for s in Schedule.objects.all()}
    assert {s.func for s in schedules.values()} == {
        "webhooks.tasks.deliveries_sweep",
        "reviews.tasks.tasks_sweep",
        "repos.tasks.deliveries_recover",
        "reviews.tasks.data_prune",
    }
    assert len(schedules) == 4
    every = {"repos.tasks.deliveries_recover": 10, "reviews.tasks.data_prune": 1440}
    assert all(
        (s.schedule_type, s.minutes, s.repeats) == (Schedule.MINUTES, every.get(s.func, 1), -1)
        for s in schedules.values()
    )
    # The reaper is no schedule: the workers run it every few seconds (reviews/queue/reaper.py).
    assert "reviews.tasks.runs_reap" not in {s.func for s in schedules.values()}
    assert "up to date" in capsys.readouterr().out


def test_migrate_registers_the_schedules_itself(settings):
    from django.core.management.sql import emit_post_migrate_signal

    settings.TASUKU_AUTO_SCHEDULES = True
    emit_post_migrate_signal(verbosity=0, interactive=False, db="default")
    assert Schedule.objects.filter(name__startswith="tasuku: ").count() == 4
    settings.TASUKU_AUTO_SCHEDULES = False
    Schedule.objects.all().delete()
    emit_post_migrate_signal(verbosity=0, interactive=False, db="default")
    assert not Schedule.objects.exists()  # left to `setup_schedules`


def test_setup_schedules_removes_schedules_it_no_longer_uses():
    Schedule.objects.create(
        name="tasuku: retired job", func="nowhere.func", schedule_type=Schedule.MINUTES, minutes=5
    )
    # The reaper's schedules of before it ran in the workers: gone at the next migrate.
    for name in ("tasuku: reap review runs", "tasuku: reap review runs (half past)"):
        Schedule.objects.create(name=name, func="reviews.tasks.runs_reap",
                                schedule_type=Schedule.MINUTES, minutes=1)  # fmt: skip
    Schedule.objects.create(name="someone else's", func="their.func", schedule_type=Schedule.HOURLY)
    call_command("setup_schedules")
    names = set(Schedule.objects.values_list("name", flat=True))
    assert "tasuku: retired job" not in names
    assert not any(name.startswith("tasuku: reap") for name in names)
    assert "someone else's" in names


def test_ensure_admin_creates_one_admin_with_a_printed_password(capsys, client):
    call_command("ensure_admin")
    out = capsys.readouterr().out
    password = out.split("with password ")[1].split()[0]
    assert client.login(username="admin", password=password)
    call_command("ensure_admin")
    assert "with your admin account" in capsys.readouterr().out
    assert get_user_model().objects.count() == 1


def test_ensure_admin_uses_tasuku_admin_password(monkeypatch, client, capsys):
    monkeypatch.setenv("TASUKU_ADMIN_PASSWORD", "correct horse battery")
    call_command("ensure_admin")
    assert "correct horse battery" not in capsys.readouterr().out
    assert client.login(username="admin", password="correct horse battery")
