"""Repository policy: validation at the bounds, the effective config, the admin."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from repos.policy import Defaults, EffectiveConfig, Engine, Strictness, Trigger
from repos.selectors import effective_config
from repos.services import policy_copy
from sandbox.contract import Severity
from tests.factories import (
    InstallationFactory,
    RepositoryFactory,
    ReviewerFactory,
    SecondaryRepositoryFactory,
)

pytestmark = pytest.mark.django_db


def _errors(policy) -> dict:
    try:
        policy.full_clean()
    except ValidationError as exc:
        return exc.message_dict
    return {}


@pytest.mark.parametrize(("value", "valid"), [(0, False), (1, True), (5000, True), (5001, False)])
def test_max_changed_files_accepts_1_to_5000(value, valid):
    policy = RepositoryFactory().policy
    policy.max_changed_files = value
    assert ("max_changed_files" not in _errors(policy)) is valid


@pytest.mark.parametrize(("value", "valid"), [(0, False), (1, True), (100, True), (101, False)])
def test_comment_limit_accepts_1_to_100(value, valid):
    policy = RepositoryFactory().policy
    policy.comment_limit = value
    assert ("comment_limit" not in _errors(policy)) is valid


def test_excluded_paths_must_be_valid_gitignore_patterns():
    policy = RepositoryFactory().policy
    policy.excluded_paths = "docs/**\n*.lock\n# a comment\n\n!\n"
    errors = _errors(policy)
    assert "Not a valid gitignore pattern: '!'" in errors["excluded_paths"][0]
    policy.excluded_paths = "docs/**\n*.lock\n!docs/keep.md\n"
    assert "excluded_paths" not in _errors(policy)


def test_excluded_authors_must_look_like_logins():
    policy = RepositoryFactory().policy
    policy.excluded_authors = "renovate[bot]\ndeps-*\n"
    assert "excluded_authors" not in _errors(policy)
    policy.excluded_authors = "not a login\n"
    assert "excluded_authors" in _errors(policy)


@pytest.mark.parametrize("field", ["min_severity", "fail_check_on", "strictness"])
def test_severities_and_strictness_come_from_fixed_scales(field):
    policy = RepositoryFactory().policy
    setattr(policy, field, "catastrophic")
    assert field in _errors(policy)


def test_a_model_reviewer_needs_a_model_name():
    reviewer = ReviewerFactory.build(slug="claude", engine="anthropic", model="")
    with pytest.raises(ValidationError) as caught:
        reviewer.full_clean()
    assert "model" in caught.value.message_dict


def test_the_static_reviewer_exists_after_migrate_and_is_on_for_new_repositories():
    from repos.models import Reviewer

    static = Reviewer.objects.get(slug="static")
    assert (static.engine, static.enabled, static.default_for_new_repositories) == (
        "static",
        True,
        True,
    )


def test_an_unconfigured_repository_gets_the_site_defaults():
    config = effective_config(RepositoryFactory())
    assert config == EffectiveConfig(
        reviewers=config.reviewers, monthly_budget_usd=None, degrade_over_budget=True
    )
    assert [r.slug for r in config.reviewers] == ["static"]
    assert config.max_changed_files == Defaults.MAX_CHANGED_FILES
    assert config.triggers == frozenset(
        {Trigger.OPENED, Trigger.REOPENED, Trigger.READY_FOR_REVIEW, Trigger.SYNCHRONIZE}
    )
    assert config.fail_check_on == Severity.HIGH


def test_the_effective_config_overlays_the_policy_on_the_site_defaults():
    installation = InstallationFactory(monthly_budget_usd="50.00", degrade_over_budget=False)
    repository = RepositoryFactory(installation=installation)
    policy = repository.policy
    policy.strictness = "high"
    policy.trigger_synchronize = False
    policy.min_severity = "medium"
    policy.fail_check_on = "never"
    policy.excluded_paths = "docs/**\n# comment\n"
    policy.save()
    claude = ReviewerFactory(
        slug="claude", engine="anthropic", model="claude-sonnet-4-5", step_limit=25
    )
    ReviewerFactory(slug="disabled", enabled=False)
    policy.reviewers.add(claude, ReviewerFactory(slug="disabled"))
    SecondaryRepositoryFactory(repository=repository, full_name="acme/shared", approved=True)
    SecondaryRepositoryFactory(repository=repository, full_name="acme/unapproved", approved=False)

    config = effective_config(repository)

    assert config.strictness == Strictness.HIGH
    assert Trigger.SYNCHRONIZE not in config.triggers
    assert config.min_severity == Severity.MEDIUM
    assert config.fail_check_on is None
    assert config.excluded_paths == ("docs/**",)
    assert [(r.slug, r.engine, r.step_limit) for r in config.reviewers] == [
        ("claude", Engine.ANTHROPIC, 25),
        ("static", Engine.STATIC, 40),
    ]
    assert [s.full_name for s in config.secondary_repositories] == ["acme/shared"]
    assert str(config.monthly_budget_usd) == "50.00"
    assert config.degrade_over_budget is False
    # It is plain data: it survives a JSON round trip (it is stored on every run).
    assert EffectiveConfig.model_validate_json(config.model_dump_json()) == config


def test_copying_a_policy_gives_the_targets_the_same_settings_and_reviewers():
    source = RepositoryFactory()
    source.policy.comment_limit = 7
    source.policy.review_drafts = True
    source.policy.save()
    extra = ReviewerFactory(slug="extra")
    source.policy.reviewers.add(extra)
    targets = [RepositoryFactory(), RepositoryFactory()]

    assert policy_copy(source=source.policy, targets=[*targets, source]) == 2

    for target in targets:
        target.policy.refresh_from_db()
        assert target.policy.comment_limit == 7
        assert target.policy.review_drafts is True
        assert set(target.policy.reviewers.values_list("slug", flat=True)) == {"static", "extra"}


class TestAdmin:
    @pytest.fixture
    def admin_client(self, client, django_user_model):
        client.force_login(django_user_model.objects.create_superuser("root", password="pw"))
        return client

    def _form(self, repository, **policy):
        data = {
            "enabled": "on",
            "policy-TOTAL_FORMS": "1",
            "policy-INITIAL_FORMS": "1",
            "policy-MIN_NUM_FORMS": "1",
            "policy-MAX_NUM_FORMS": "1",
            "policy-0-id": str(repository.policy.pk),
            "policy-0-repository": str(repository.pk),
            "policy-0-trigger_opened": "on",
            "policy-0-trigger_synchronize": "on",
            "policy-0-strictness": "medium",
            "policy-0-max_changed_files": "300",
            "policy-0-comment_limit": "25",
            "policy-0-excluded_paths": "",
            "policy-0-excluded_authors": "",
            "policy-0-min_severity": "low",
            "policy-0-fail_check_on": "high",
            "policy-0-reviewers": [],
            "policy-0-tests_runner": "docker",
            "policy-0-tests_timeout_seconds": "600",
            "secondary_repositories-TOTAL_FORMS": "0",
            "secondary_repositories-INITIAL_FORMS": "0",
            "secondary_repositories-MIN_NUM_FORMS": "0",
            "secondary_repositories-MAX_NUM_FORMS": "1000",
            "memory-TOTAL_FORMS": "0",
            "memory-INITIAL_FORMS": "0",
            "memory-MIN_NUM_FORMS": "0",
            "memory-MAX_NUM_FORMS": "1",
        }
        data.update({f"policy-0-{k}": v for k, v in policy.items()})
        return data

    def test_the_pull_requests_own_tests_are_turned_on_in_the_admin_and_reach_the_config(
        self, admin_client
    ):
        repository = RepositoryFactory()
        url = f"/admin/repos/repository/{repository.pk}/change/"
        form = self._form(repository, tests_enabled="on", tests_command=" make test ",
                          tests_timeout_seconds="120")  # fmt: skip
        assert admin_client.post(url, form).status_code == 302
        tests = effective_config(repository).tests
        assert (tests.enabled, tests.command, tests.timeout_seconds) == (True, "make test", 120)
        assert (tests.runner, tests.network) == ("docker", False)
        # A limit past the sandbox's is refused with the field named.
        response = admin_client.post(url, self._form(repository, tests_timeout_seconds="7200"))
        assert response.status_code == 200
        assert (
            "tests_timeout_seconds"
            in response.context["inline_admin_formsets"][0].formset.errors[0]
        )

    def test_the_repository_page_edits_its_policy_inline(self, admin_client):
        repository = RepositoryFactory()
        url = f"/admin/repos/repository/{repository.pk}/change/"
        assert admin_client.get(url).status_code == 200
        response = admin_client.post(
            url, self._form(repository, comment_limit="40", max_changed_files="5000")
        )
        assert response.status_code == 302, response.content.decode()[:2000]
        repository.policy.refresh_from_db()
        assert (repository.policy.comment_limit, repository.policy.max_changed_files) == (40, 5000)

    @pytest.mark.parametrize(
        ("field", "value", "message"),
        [
            ("max_changed_files", "5001", b"less than or equal to 5000"),
            ("comment_limit", "0", b"greater than or equal to 1"),
            ("excluded_paths", "!", b"Not a valid gitignore pattern"),
        ],
    )
    def test_invalid_policy_values_are_shown_on_the_form_and_not_saved(
        self, admin_client, field, value, message
    ):
        repository = RepositoryFactory()
        url = f"/admin/repos/repository/{repository.pk}/change/"
        response = admin_client.post(url, self._form(repository, **{field: value}))
        assert response.status_code == 200
        assert message in response.content
        repository.policy.refresh_from_db()
        assert str(getattr(repository.policy, field)) != value

    def test_the_copy_policy_action_asks_for_the_source_then_copies(self, admin_client):
        source = RepositoryFactory(full_name="acme/source")
        source.policy.comment_limit = 9
        source.policy.save()
        target = RepositoryFactory(full_name="acme/target")
        url = "/admin/repos/repository/"
        page = admin_client.post(url, {"action": "copy_policy", "_selected_action": [target.pk]})
        assert page.status_code == 200
        assert b"acme/target" in page.content
        done = admin_client.post(
            url,
            {
                "action": "copy_policy",
                "_selected_action": [target.pk],
                "apply": "1",
                "source": source.pk,
            },
        )
        assert done.status_code == 302
        target.policy.refresh_from_db()
        assert target.policy.comment_limit == 9

    def test_the_admin_lists_search_and_filter(self, admin_client):
        RepositoryFactory(full_name="acme/findme")
        RepositoryFactory(full_name="acme/other")
        page = admin_client.get("/admin/repos/repository/", {"q": "findme"})
        assert b"acme/findme" in page.content and b"acme/other" not in page.content
        for url in (
            "/admin/repos/installation/",
            "/admin/repos/reviewer/",
            "/admin/repos/reviewer/add/",
            "/admin/webhooks/webhookdelivery/",
            "/admin/reviews/reviewrun/",
            "/admin/reviews/pullrequest/",
        ):
            assert admin_client.get(url).status_code == 200, url


def test_a_min_severity_above_the_failing_severity_is_refused():
    # The check would fail on a finding that is never published.
    policy = RepositoryFactory().policy
    policy.min_severity, policy.fail_check_on = "critical", "high"
    assert "min_severity" in _errors(policy)
    policy.fail_check_on = "never"
    assert "min_severity" not in _errors(policy)


def test_a_stored_policy_that_would_hide_a_failing_finding_publishes_it():
    from repos.policy import EffectiveConfig

    config = EffectiveConfig(min_severity="critical", fail_check_on="high")
    assert config.min_severity.value == "high"


def test_the_installations_exclusions_reach_every_repositorys_configuration():
    from repos.models import Installation

    repository = RepositoryFactory()
    Installation.objects.filter(pk=repository.installation_id).update(
        excluded_paths="generated_client/\n# a comment\n*.gen.ts\n"
    )
    repository.refresh_from_db()
    config = effective_config(repository)
    assert config.installation_excluded_paths == ("generated_client/", "*.gen.ts")
    assert config.excluded_paths == ()  # the repository's own are its policy's


def test_an_invalid_installation_glob_is_refused_in_the_admin(admin_client):
    repository = RepositoryFactory()
    installation = repository.installation
    response = admin_client.post(
        f"/admin/repos/installation/{installation.pk}/change/",
        {"excluded_paths": "!", "degrade_over_budget": "on", "monthly_budget_usd": ""},
    )
    assert response.status_code == 200
    assert b"Not a valid gitignore pattern" in response.content


@pytest.mark.parametrize(
    ("value", "valid"),
    [("B904, S113\n-F401", True), ("SC2016, DL3008", True),
     ("oxlint:eslint/no-console, -zizmor:unpinned-uses", True),
     ("eslint/no-console", False), ("--select=ALL", False), ("oxlint:; rm -rf", False)],
)  # fmt: skip
def test_the_static_rules_are_each_tools_codes_or_names(value, valid):
    policy = RepositoryFactory().policy
    policy.static_rules = value
    assert ("static_rules" not in _errors(policy)) is valid
