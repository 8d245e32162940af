"""Memory folds become a durable queue (reviews/memory/folds.py, `FOLDS`): the fold's row is
written when it is asked for, and a sweeper rings one whose doorbell was lost. The folds
recorded before were all done: they are marked so, and a new row starts queued."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('repos', '0024_github_write_budget'),
        ('reviews', '0046_actions_dispatch'),
    ]

    operations = [
        migrations.AddField(
            model_name='memoryfold',
            name='attempts',
            field=models.PositiveSmallIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='memoryfold',
            name='error',
            field=models.TextField(blank=True),
        ),
        migrations.AddField(
            model_name='memoryfold',
            name='leased_until',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='memoryfold',
            name='next_attempt_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='memoryfold',
            name='rung_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='memoryfold',
            name='status',
            field=models.CharField(choices=[('queued', 'Queued'), ('folding', 'Folding'), ('done', 'Done'), ('failed', 'Failed')], default='done', max_length=16),
        ),
        migrations.AlterField(
            model_name='memoryfold',
            name='status',
            field=models.CharField(choices=[('queued', 'Queued'), ('folding', 'Folding'), ('done', 'Done'), ('failed', 'Failed')], default='queued', max_length=16),
        ),
        migrations.AddIndex(
            model_name='memoryfold',
            index=models.Index(fields=['status', 'next_attempt_at'], name='memoryfold_due'),
        ),
    ]
