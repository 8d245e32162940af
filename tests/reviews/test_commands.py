from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django_q.models import Schedule

pytestmark = pytest.mark.django_db


def test_setup_schedules_registers_the_sweeper_and_is_idempotent(capsys):
    call_command("setup_schedules")
    call_command("setup_schedules")
    schedule = Schedule.objects.get()
    assert schedule.func == "webhooks.tasks.deliveries_sweep"
    assert (schedule.schedule_type, schedule.minutes, schedule.repeats) == (Schedule.MINUTES, 1, -1)
    assert "up to date" in capsys.readouterr().out


def test_setup_schedules_removes_schedules_it_no_longer_uses():
    Schedule.objects.create(
        name="tasuku: retired job", func="nowhere.func", schedule_type=Schedule.MINUTES, minutes=5
    )
    Schedule.objects.create(name="someone else's", func="their.func", schedule_type=Schedule.HOURLY)
    call_command("setup_schedules")
    assert set(Schedule.objects.values_list("name", flat=True)) == {
        "tasuku: sweep webhook deliveries",
        "someone else's",
    }


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
