from django.apps import AppConfig


def _github_usage_flush(**kwargs: object) -> None:
    """After a web request or a worker task: record the GitHub calls it counted."""
    from repos.github.usage import usage_pending
    from repos.services import github_usage_flush

    if usage_pending():
        github_usage_flush()


class ReposConfig(AppConfig):
    name = "repos"
    verbose_name = "Repositories and policy"

    def ready(self) -> None:
        from django.core.signals import request_finished
        from django_q.signals import post_execute_in_worker

        from repos import checks  # noqa: F401  (registers the system checks)
        from repos.github import missing_settings, webhook_secret
        from webhooks import signing

        # The intake verifies deliveries with the App's secret, wherever it is kept.
        signing.source_register(signing.Source(secret=webhook_secret, missing=missing_settings))

        # The deliveries this app handles (webhooks/routing.py).
        from repos import reviewer_sync, services
        from webhooks import routing

        routing.register("installation", services.installation_event)
        routing.register("installation_repositories", services.installation_repositories_event)
        # A push to a reviewers repository syncs the reviewers read from it.
        routing.register("push", reviewer_sync.push_event)

        request_finished.connect(_github_usage_flush, dispatch_uid="repos.github_usage")
        post_execute_in_worker.connect(_github_usage_flush, dispatch_uid="repos.github_usage")
