from django.apps import AppConfig


class ReposConfig(AppConfig):
    name = "repos"
    verbose_name = "Repositories and policy"

    def ready(self) -> None:
        from repos import checks  # noqa: F401  (registers the system checks)
