"""The author's answers now count a try only when it fails for a reason of its own:
GitHub's weather (5xx, no answer, a rate limit) is a deferral. An answer still waiting
was counted under the old rule, and one with three such tries could never be claimed
again: its count starts afresh."""

from django.db import migrations


def tries_reset(apps, schema_editor):
    Answer = apps.get_model("reviews", "Answer")
    Answer.objects.filter(posting="queued").update(tries=0)


class Migration(migrations.Migration):
    dependencies = [("reviews", "0015_worker_stopped")]

    operations = [migrations.RunPython(tries_reset, migrations.RunPython.noop)]
