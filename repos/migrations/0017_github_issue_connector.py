"""The one connector Tasuku ships: `github_issue`, a read-only lookup of an issue through
the gateway. Enabled, but allowed to no reviewer: an operator ticks it on a reviewer."""

from django.db import migrations

DESCRIPTION = (
    "Read an issue of this pull request's repository (or of another repository of the same "
    "GitHub installation, as owner/name) by its number: its title, state, labels and body. "
    "Use it to read the issue the pull request says it fixes or refers to (#123), to check "
    "the change does what the issue asks."
)
SCHEMA = {
    "type": "object",
    "properties": {
        "repository": {
            "type": "string",
            "pattern": r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$",
            "description": "owner/name; default: the pull request's repository.",
        },
        "number": {"type": "integer", "minimum": 1, "description": "The issue's number."},
    },
    "required": ["number"],
    "additionalProperties": False,
}


def create(apps, schema_editor):
    Connector = apps.get_model("repos", "Connector")
    Connector.objects.get_or_create(
        name="github_issue",
        defaults={
            "kind": "github_issue",
            "description": DESCRIPTION,
            "input_schema": SCHEMA,
            "credential_header": "",
            "timeout_seconds": 20,
            "max_response_bytes": 20_000,
            "enabled": True,
        },
    )


def remove(apps, schema_editor):
    apps.get_model("repos", "Connector").objects.filter(
        name="github_issue", kind="github_issue"
    ).delete()


class Migration(migrations.Migration):
    dependencies = [("repos", "0016_connectors")]

    operations = [migrations.RunPython(create, remove)]
