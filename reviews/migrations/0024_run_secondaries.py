from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("reviews", "0023_run_cancel_request"),
    ]

    operations = [
        migrations.AddField(
            model_name="reviewrun",
            name="secondaries",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text="The secondary repositories beside the checkout: each mounted, or why not.",
            ),
        ),
    ]
