"""A fresh install reviews with the offline static reviewer and no configuration."""

from django.db import migrations


def create_static_reviewer(apps, schema_editor):
    Reviewer = apps.get_model("repos", "Reviewer")
    Reviewer.objects.get_or_create(
        slug="static",
        defaults={
            "name": "Static analysis (offline)",
            "engine": "static",
            "runner": "local",
            "enabled": True,
            "default_for_new_repositories": True,
            "rules": "",
        },
    )


class Migration(migrations.Migration):
    dependencies = [("repos", "0001_initial")]

    operations = [migrations.RunPython(create_static_reviewer, migrations.RunPython.noop)]
