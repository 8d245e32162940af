from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    verbose_name = "Webhooks"

    def ready(self) -> None:
        from tasuku.doors import door_register
        from webhooks.intake import INTAKE_PATH
        from webhooks.wsgi import intake_door

        # GitHub's deliveries skip Django's middleware and URL resolution (tasuku/doors.py).
        door_register("POST", INTAKE_PATH, intake_door)
