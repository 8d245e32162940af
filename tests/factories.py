"""factory-boy factories for every model; `.build()` for tests that need no database."""

from __future__ import annotations

import factory
from django.utils import timezone

from repos.models import Installation, Repository, RepositoryPolicy, Reviewer, SecondaryRepository
from reviews.models import Finding, PullRequest, Review, ReviewRun
from webhooks.models import WebhookDelivery


class InstallationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Installation
        django_get_or_create = ("github_id",)

    github_id = factory.Sequence(lambda n: 7000 + n)
    account_login = factory.Sequence(lambda n: f"acme{n}")
    account_type = "Organization"
    repository_selection = "selected"


class ReviewerFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Reviewer
        django_get_or_create = ("slug",)

    slug = factory.Sequence(lambda n: f"reviewer-{n}")
    name = factory.LazyAttribute(lambda o: o.slug.title())
    engine = "static"
    runner = "local"
    enabled = True


class RepositoryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Repository
        django_get_or_create = ("github_id",)
        skip_postgeneration_save = True

    installation = factory.SubFactory(InstallationFactory)
    github_id = factory.Sequence(lambda n: 900_000 + n)
    full_name = factory.LazyAttributeSequence(
        lambda o, n: f"{o.installation.account_login}/repo{n}"
    )
    default_branch = "main"
    enabled = True
    policy = factory.RelatedFactory("tests.factories.RepositoryPolicyFactory", "repository")


class RepositoryPolicyFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = RepositoryPolicy
        django_get_or_create = ("repository",)
        skip_postgeneration_save = True

    repository = factory.SubFactory(RepositoryFactory, policy=None)

    @factory.post_generation
    def reviewers(self, create: bool, extracted, **kwargs) -> None:
        if not create:
            return
        if extracted is None:
            extracted = Reviewer.objects.filter(slug="static")
        self.reviewers.set(extracted)


class SecondaryRepositoryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = SecondaryRepository

    repository = factory.SubFactory(RepositoryFactory)
    full_name = factory.Sequence(lambda n: f"acme/shared{n}")
    pinned_commit = factory.Sequence(lambda n: f"{n:040x}")
    approved = True


class PullRequestFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = PullRequest

    repository = factory.SubFactory(RepositoryFactory)
    number = factory.Sequence(lambda n: n + 1)
    title = "Make widgets faster"
    author_login = "octocat"
    author_type = "User"
    head_sha = factory.Sequence(lambda n: f"{n + 1:040x}")
    base_sha = factory.Sequence(lambda n: f"{n + 100000:040x}")
    head_ref = "feature"
    base_ref = "main"


class ReviewRunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ReviewRun

    pull_request = factory.SubFactory(PullRequestFactory)
    reviewer = factory.LazyFunction(lambda: Reviewer.objects.get(slug="static"))
    head_sha = factory.LazyAttribute(lambda o: o.pull_request.head_sha)
    base_sha = factory.LazyAttribute(lambda o: o.pull_request.base_sha)
    trigger = "opened"


class WebhookDeliveryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = WebhookDelivery

    hook_id = "123456"
    delivery_id = factory.Faker("uuid4")
    event = "ping"
    action = ""
    payload = factory.LazyFunction(dict)
    received_at = factory.LazyFunction(timezone.now)


class ReviewFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Review

    run = factory.SubFactory(
        ReviewRunFactory, pull_request=factory.SelfAttribute("..pull_request"), status="completed"
    )
    pull_request = factory.SubFactory(PullRequestFactory)
    reviewer = factory.LazyAttribute(lambda o: o.run.reviewer)
    base_sha = factory.LazyAttribute(lambda o: o.run.base_sha)
    head_sha = factory.LazyAttribute(lambda o: o.run.head_sha)
    engine = "static"


class FindingFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Finding

    review = factory.SubFactory(ReviewFactory)
    pull_request = factory.LazyAttribute(lambda o: o.review.pull_request)
    path = "app.py"
    start_line = 1
    end_line = 1
    severity = "medium"
    category = "bug"
    title = factory.Sequence(lambda n: f"Problem {n}")
    confidence = 0.9
    fingerprint = factory.Sequence(lambda n: f"{n:020x}")
