from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("reviews", "0029_attempt_stage_times"),
    ]

    operations = [
        # Walkthroughs from before this field may have a comment on GitHub that no row
        # names: they keep looking for it (True); new ones start without (False).
        migrations.AddField(
            model_name="walkthrough",
            name="create_tried",
            field=models.BooleanField(default=True),
        ),
        migrations.AlterField(
            model_name="walkthrough",
            name="create_tried",
            field=models.BooleanField(default=False),
        ),
    ]
