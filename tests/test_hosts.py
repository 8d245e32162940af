"""`make run BIND=...`: the URL in Tasuku's links and the hosts it answers come from the
address it serves on — a wildcard's from the machine's names, said to be a guess —
never `http://0.0.0.0:...` (tasuku/hosts.py, tasuku/settings.py, `manage.py serve`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reviews.management.commands.serve import where_said
from tasuku import hosts

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def machine(monkeypatch):
    """A machine called build7.lab.example, at 10.0.4.7."""
    monkeypatch.setattr(hosts.socket, "gethostname", lambda: "build7")
    monkeypatch.setattr(hosts.socket, "getfqdn", lambda name="": "build7.lab.example")
    monkeypatch.setattr(
        hosts.socket,
        "getaddrinfo",
        lambda *a, **k: [(2, 1, 6, "", ("127.0.1.1", 0)), (2, 1, 6, "", ("10.0.4.7", 0))],
    )
    monkeypatch.setattr(hosts, "PROBE", ("127.0.0.1", 9))  # the probe then says 127.0.0.1


def test_a_wildcard_bind_is_reached_by_the_machines_names(machine):
    found = hosts.served("0.0.0.0:8125")
    assert found.base_url == "http://build7.lab.example:8125"
    assert found.hosts == ["127.0.0.1", "localhost", "[::1]", "build7.lab.example", "build7",
                           "10.0.4.7"]  # fmt: skip
    assert found.wildcard
    assert hosts.served("[::]:8125").base_url == "http://build7.lab.example:8125"


def test_an_interfaces_address_is_its_own_name():
    found = hosts.served("192.168.1.20:8080")
    assert (found.base_url, found.wildcard) == ("http://192.168.1.20:8080", False)
    assert "192.168.1.20" in found.hosts
    assert hosts.served("8000").base_url == "http://127.0.0.1:8000"
    with pytest.raises(ValueError, match="TASUKU_BIND must be host:port"):
        hosts.served("0.0.0.0")  # noqa: S104


def settings_for(**env: str) -> dict:
    """The product's settings a fresh process reads with `env` (TASUKU_BASE_URL and
    ALLOWED_HOSTS as the caller gives them, or unset)."""
    code = (
        "import json, django; from django.conf import settings; django.setup(); "
        "print(json.dumps({k: getattr(settings, k) for k in "
        "('TASUKU_BASE_URL', 'ALLOWED_HOSTS', 'TASUKU_BASE_URL_GUESSED')}))"
    )
    base = {k: v for k, v in os.environ.items() if k not in ("TASUKU_BASE_URL", "ALLOWED_HOSTS")}
    # Empty values read as unset and keep `.env` from filling them.
    base.update(DJANGO_SETTINGS_MODULE="tasuku.settings", TASUKU_BASE_URL="", ALLOWED_HOSTS="")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**base, **env},  # noqa: S603
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_make_run_on_every_interface_never_links_to_0_0_0_0():
    found = settings_for(TASUKU_BIND="0.0.0.0:8125")
    assert "0.0.0.0" not in found["TASUKU_BASE_URL"]  # noqa: S104
    assert found["TASUKU_BASE_URL"].endswith(":8125") and found["TASUKU_BASE_URL_GUESSED"]
    assert hosts.machine_names()[0] in found["ALLOWED_HOSTS"]
    # Named by hand, the URL is not a guess, and its host is answered.
    named = settings_for(TASUKU_BIND="0.0.0.0:8125", TASUKU_BASE_URL="https://t.example.org")
    assert named["TASUKU_BASE_URL"] == "https://t.example.org"
    assert not named["TASUKU_BASE_URL_GUESSED"] and "t.example.org" in named["ALLOWED_HOSTS"]


def test_serve_says_when_the_links_are_a_guess_or_name_another_address(settings):
    settings.TASUKU_BIND, settings.TASUKU_BASE_URL = "0.0.0.0:8125", "http://build7:8125"
    settings.TASUKU_BASE_URL_GUESSED = True
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]", "build7", "10.0.4.7"]
    [said] = where_said("0.0.0.0:8125")
    assert "answers as build7, 10.0.4.7" in said and "set TASUKU_BASE_URL" in said
    [said] = where_said("0.0.0.0:9000")  # serve --bind without TASUKU_BIND
    assert "set TASUKU_BIND=0.0.0.0:9000" in said
    settings.TASUKU_BASE_URL_GUESSED = False
    assert where_said("0.0.0.0:8125") == []
