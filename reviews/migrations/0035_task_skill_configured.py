# A task's skill is a configured review skill (repos.ReviewSkill) chosen by name; the free
# text callers wrote before is kept, renamed, to read, and is never sent to a reviewer again.

import django.db.models.deletion
from django.db import migrations, models

# reviews.models.RUN_FINAL_STATES, as values (a migration does not import the models).
RUN_FINAL = ("completed", "failed", "cancelled", "skipped")


def legacy_text_unsent(apps, schema_editor):
    """A pass's run that has not ended carries the caller's text in its configuration
    (reviews/passes/flow.py appended it to the reviewer's guidance): take it out, so no
    attempt from now on gives it to the reviewer. Nothing else in the configuration
    changes, and the text stays on its task."""
    ReviewRun = apps.get_model("reviews", "ReviewRun")
    runs = (
        ReviewRun.objects.filter(review_pass__isnull=False)
        .exclude(status__in=RUN_FINAL)
        .exclude(review_pass__task__legacy_skill_text="")
        .select_related("review_pass__task")
    )
    for run in runs:
        legacy = run.review_pass.task.legacy_skill_text
        config = run.config or {}
        changed = False
        for reviewer in config.get("reviewers") or ():
            skills = reviewer.get("skills") or ""
            # flow.py joined the reviewer's guidance and the caller's text with a blank line.
            if skills == legacy:
                reviewer["skills"] = ""
            elif skills.endswith("\n\n" + legacy):
                reviewer["skills"] = skills[: -len(legacy) - 2]
            else:
                continue
            changed = True
        if changed:
            ReviewRun.objects.filter(pk=run.pk).update(config=config)


class Migration(migrations.Migration):
    dependencies = [
        ("repos", "0021_review_skills"),
        ("reviews", "0034_pull_request_state_changed_at"),
    ]

    operations = [
        migrations.RenameField(
            model_name="task",
            old_name="reviewer_skill",
            new_name="legacy_skill_text",
        ),
        migrations.AlterField(
            model_name="task",
            name="legacy_skill_text",
            field=models.TextField(
                blank=True,
                help_text=(
                    "A skill the caller wrote itself, before skills were configured: not sent."
                ),
            ),
        ),
        migrations.AddField(
            model_name="task",
            name="skill",
            field=models.ForeignKey(
                blank=True,
                help_text="The configured review skill the hand-off named.",
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="tasks",
                to="repos.reviewskill",
            ),
        ),
        migrations.RunPython(legacy_text_unsent, migrations.RunPython.noop),
    ]
