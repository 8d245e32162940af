"""Reviewers in the admin: the provider key is write-only and sealed at rest, limits
that cannot be enforced are refused, and the engine gets only its provider's key."""

from __future__ import annotations

import pytest

from repos.models import Reviewer
from repos.selectors import reviewer_config
from reviews.engines.boundary import engine_environment, explorers_for, web_research_for
from sandbox.errors import ProviderError

pytestmark = pytest.mark.django_db

URL = "/admin/repos/reviewer/"


def form(**values):
    data = {
        "slug": "claude", "name": "", "enabled": "on", "engine": "anthropic",
        "model": "claude-sonnet-5-5", "triage_model": "", "runner": "local", "base_url": "",
        "api_key": "", "rules": "", "skills": "", "step_limit": "40", "cost_cap_usd": "",
        "context_budget_tokens": "120000", "max_output_tokens": "16000", "explorer_limit": "6",
        "explorer_model": "",
        # the named skills' inline: none
        "skill_documents-TOTAL_FORMS": "0", "skill_documents-INITIAL_FORMS": "0",
        "skill_documents-MIN_NUM_FORMS": "0", "skill_documents-MAX_NUM_FORMS": "20",
    }  # fmt: skip
    data.update(values)
    return data


def test_the_key_is_saved_sealed_never_shown_and_kept_when_left_blank(admin_client):
    response = admin_client.post(f"{URL}add/", form(api_key="sk-ant-secret-1"))
    assert response.status_code == 302, response.content
    reviewer = Reviewer.objects.get(slug="claude")
    assert reviewer.api_key() == "sk-ant-secret-1"
    assert "sk-ant-secret-1" not in reviewer.api_key_sealed

    page = admin_client.get(f"{URL}{reviewer.pk}/change/").content.decode()
    assert "sk-ant-secret-1" not in page and reviewer.api_key_sealed not in page

    admin_client.post(f"{URL}{reviewer.pk}/change/", form(step_limit="20"))
    reviewer.refresh_from_db()
    assert reviewer.step_limit == 20 and reviewer.api_key() == "sk-ant-secret-1"

    admin_client.post(f"{URL}{reviewer.pk}/change/", form(clear_api_key="on"))
    reviewer.refresh_from_db()
    assert reviewer.api_key() == ""


def test_a_cost_cap_needs_a_known_price(admin_client, settings):
    response = admin_client.post(f"{URL}add/", form(model="my-finetune", cost_cap_usd="2"))
    assert response.status_code == 200
    assert "No price is known for" in response.content.decode()
    settings.TASUKU_MODEL_PRICES = '{"my-finetune": [1, 4]}'
    response = admin_client.post(f"{URL}add/", form(model="my-finetune", cost_cap_usd="2"))
    assert response.status_code == 302


def test_a_reviewer_may_run_on_github_actions(admin_client):
    response = admin_client.post(f"{URL}add/", form(runner="actions"))
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Reviewer.objects.filter(runner="actions").count() == 1


def test_the_engine_gets_only_its_providers_key_and_server(settings):
    settings.ANTHROPIC_API_KEY = "sk-site-anthropic"
    settings.OPENAI_API_KEY = "sk-site-openai"
    settings.OPENAI_BASE_URL = ""
    claude = Reviewer(slug="c", engine="anthropic", model="claude-sonnet-5-5")
    assert engine_environment(claude) == {"ANTHROPIC_API_KEY": "sk-site-anthropic"}
    local = Reviewer(slug="o", engine="openai", model="llama", base_url="http://gpu:8000/v1")
    assert engine_environment(local) == {
        "OPENAI_API_KEY": "sk-site-openai",
        "OPENAI_BASE_URL": "http://gpu:8000/v1",
    }
    assert engine_environment(Reviewer.objects.get(slug="static")) == {}


def test_a_key_sealed_under_another_secret_key_says_to_enter_it_again(settings):
    reviewer = Reviewer(slug="c", engine="anthropic", model="claude-sonnet-5-5")
    reviewer.api_key_set("sk-ant-1")
    settings.SECRET_KEY = "another-secret-key-entirely-0123456789"
    with pytest.raises(ProviderError) as failure:
        engine_environment(reviewer)
    assert failure.value.permanent and "enter it again" in str(failure.value)


@pytest.mark.django_db
def test_a_rotated_secret_key_still_opens_sealed_keys_and_reseal_moves_them_over(settings):
    from django.core.management import CommandError, call_command

    old = settings.SECRET_KEY
    reviewer = Reviewer.objects.create(slug="c", engine="anthropic", model="claude-sonnet-5-5")
    reviewer.api_key_set("sk-ant-1")
    reviewer.save()
    lost = Reviewer.objects.create(slug="d", engine="openai", model="gpt-5.4")
    settings.SECRET_KEY = "a-key-sealed-under-a-key-nobody-keeps-0123456789"
    lost.api_key_set("sk-lost")
    lost.save()

    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = (
        "the-new-secret-key-after-rotation-0123456789",
        [old],
    )
    assert Reviewer.objects.get(slug="c").api_key() == "sk-ant-1"  # the fallback opens it
    with pytest.raises(CommandError, match="Enter those keys again in the admin") as told:
        call_command("reseal_keys")
    assert "d" in str(told.value) and "c," not in str(told.value)
    settings.SECRET_KEY_FALLBACKS = []  # the old key can go now
    assert Reviewer.objects.get(slug="c").api_key() == "sk-ant-1"


@pytest.mark.parametrize(
    ("key", "weak"),
    [
        ("short", True),
        ("a" * 60, True),
        ("changeme", True),
        ("django-insecure-" + "x1y2z3" * 8, True),
        ("Zq3-vN8_pK2mW9xR4tB7yL1cH6dF0sJ5gT8aE3uQ", False),
    ],
)
def test_a_weak_secret_key_from_the_environment_is_an_error_outside_debug(settings, key, weak):
    from repos.checks import secret_key_check

    settings.SECRET_KEY, settings.SECRET_KEY_FROM_ENV, settings.DEBUG = key, True, False
    assert bool(secret_key_check()) is weak
    settings.DEBUG = True
    assert secret_key_check() == []


def test_enable_on_every_repository_reaches_the_ones_tasuku_knows_already(admin_client):
    from repos.models import RepositoryPolicy
    from repos.services import policy_create_default
    from tests.factories import RepositoryFactory

    known = [RepositoryFactory(), RepositoryFactory()]  # learnt of before the reviewer
    for repository in known:
        policy_create_default(repository=repository)
    reviewer = Reviewer.objects.create(slug="claude", engine="anthropic", model="m",
                                       default_for_new_repositories=True)  # fmt: skip
    page = admin_client.get(f"{URL}{reviewer.pk}/change/").content.decode()
    assert "Repositories it knows already keep their reviewers" in page
    for repository in known:  # the default did not reach them
        assert reviewer not in RepositoryPolicy.objects.get(repository=repository).reviewers.all()

    def enable():
        response = admin_client.post(
            URL, {"action": "enable_everywhere", "_selected_action": [reviewer.pk]}, follow=True
        )
        return [str(m) for m in response.context["messages"]]

    assert enable() == ["claude: enabled on 2 more repository policies."]
    for repository in known:
        assert reviewer in RepositoryPolicy.objects.get(repository=repository).reviewers.all()
    assert enable() == ["claude: enabled on 0 more repository policies."]


@pytest.mark.django_db
def test_reseal_moves_the_created_apps_credentials_over_too(settings):
    from django.core.management import call_command

    from repos.credentials import key_open, key_seal
    from repos.models import AppRegistration

    old = settings.SECRET_KEY
    app = AppRegistration.objects.create(
        app_id=9, slug="made-here", api_url="https://api.github.com",
        private_key_sealed=key_seal("-----BEGIN RSA PRIVATE KEY-----"),
        webhook_secret_sealed=key_seal("hook-secret"),
    )  # fmt: skip
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = (
        "the-new-secret-key-after-rotation-0123456789",
        [old],
    )
    call_command("reseal_keys", stdout=open("/dev/null", "w"))  # noqa: SIM115
    settings.SECRET_KEY_FALLBACKS = []  # the old key can go now
    app.refresh_from_db()
    assert key_open(app.webhook_secret_sealed) == "hook-secret"
    assert key_open(app.private_key_sealed).startswith("-----BEGIN")


def test_named_skills_are_edited_on_the_reviewer_and_reach_its_configuration(admin_client):
    skill = {
        "skill_documents-TOTAL_FORMS": "1",
        "skill_documents-0-name": "django-migrations",
        "skill_documents-0-description": "Changes to Django migrations",
        "skill_documents-0-body": "A NOT NULL column without a default locks the table.",
    }
    response = admin_client.post(f"{URL}add/", form(**skill, skills="Always check refunds."))
    assert response.status_code == 302, response.content.decode()[:3000]
    reviewer = Reviewer.objects.get(slug="claude")
    config = reviewer_config(reviewer)
    assert config.skills == "Always check refunds."  # the guidance stays, always in the prompt
    [document] = config.skill_documents
    assert (document.name, document.description) == (
        "django-migrations",
        "Changes to Django migrations",
    )
    bad = {**skill, "skill_documents-0-name": "Django Migrations!"}
    response = admin_client.post(f"{URL}add/", form(slug="other", **bad))
    assert response.status_code == 200 and "Lower-case letters, digits" in response.content.decode()


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"web_research": "on", "runner": "docker"}, "reaches nothing but the model API"),
        ({"engine": "static", "model": "", "explorer_model": "x"}, "cannot use them"),
        ({"engine": "claude-code", "runner": "docker", "web_research": "on"}, "cannot use them"),
        (
            {"cost_cap_usd": "0.10", "max_output_tokens": "16000"},
            "could cost $0.16, more than the cap",
        ),
        ({"cost_cap_usd": "2", "explorer_model": "my-tiny-model"}, "No price is known for"),
    ],
)
def test_reach_that_cannot_be_kept_to_is_refused(admin_client, values, message):
    response = admin_client.post(f"{URL}add/", form(**values))
    assert response.status_code == 200
    assert message in response.content.decode()


def test_web_research_is_dropped_where_the_runner_has_no_way_out(settings):
    settings.TASUKU_WEB_SEARCH_URL = "https://searx.example/search?q={query}&format=json"
    reviewer = Reviewer.objects.create(
        slug="claude", engine="anthropic", model="claude-sonnet-5-5", web_research=True,
        explorer_model="claude-haiku-5-5", explorer_limit=10,
    )  # fmt: skip
    web = web_research_for(reviewer_config(reviewer))
    assert web.provider == "sandbox.agent.tools.web:HttpWeb"
    assert web.search_url == settings.TASUKU_WEB_SEARCH_URL
    # A repository's policy moving the reviewer onto docker turns it off.
    assert web_research_for(reviewer_config(reviewer, runner="docker")) is None
    explorers = explorers_for(reviewer_config(reviewer))
    assert (explorers.model, explorers.per_call, explorers.per_review) == (
        "claude-haiku-5-5",
        4,
        10,
    )
    assert explorers.price.input_per_mtok == 0.5
