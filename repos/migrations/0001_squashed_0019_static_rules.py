"""repos 0001 to 0019 in one migration, for a database that has none of them.

The tables as 0019 left them, created at once instead of through some 35 operations,
then the two rows a fresh install needs (the `static` reviewer, the `github_issue`
connector) by the replaced migrations' own functions. A database that applied the
originals records this one as applied too.
"""

import django.core.validators
import django.db.models.deletion
import repos.models
from importlib import import_module

from django.db import migrations, models

# The rows a fresh install needs, written by the replaced migrations' own functions (one
# source; tests/conftest.py uses them too). Before deleting 0002 or 0017, move them here.
_static_reviewer = import_module("repos.migrations.0002_static_reviewer")
_github_issue = import_module("repos.migrations.0017_github_issue_connector")


class Migration(migrations.Migration):

    replaces = [('repos', '0001_initial'), ('repos', '0002_static_reviewer'), ('repos', '0003_reviewer_context_budget'), ('repos', '0004_repomemory'), ('repos', '0005_reviewer_provider'), ('repos', '0006_policy_runner'), ('repos', '0007_github_api_usage'), ('repos', '0008_policy_dismissal_and_approval'), ('repos', '0009_rate_limit_waits'), ('repos', '0010_reviewer_default_hint'), ('repos', '0011_app_registration'), ('repos', '0012_memory_source'), ('repos', '0013_installation_excluded_paths'), ('repos', '0014_reviewer_skills_explorers_web'), ('repos', '0015_policy_walkthrough'), ('repos', '0016_connectors'), ('repos', '0017_github_issue_connector'), ('repos', '0018_pull_request_suppressions'), ('repos', '0019_static_rules')]

    dependencies = [
    ]

    operations = [
        migrations.CreateModel(
            name='AppRegistration',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('app_id', models.BigIntegerField()),
                ('slug', models.CharField(max_length=100)),
                ('name', models.CharField(blank=True, max_length=200)),
                ('owner', models.CharField(blank=True, help_text='The account that owns it.', max_length=100)),
                ('html_url', models.URLField(blank=True, max_length=500)),
                ('api_url', models.URLField(help_text="GitHub's REST API, where it lives.", max_length=500)),
                ('private_key_sealed', models.TextField()),
                ('webhook_secret_sealed', models.TextField()),
                ('client_id', models.CharField(blank=True, max_length=100)),
                ('client_secret_sealed', models.TextField(blank=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
            options={
                'ordering': ['-created_at', '-pk'],
            },
        ),
        migrations.CreateModel(
            name='Connector',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(help_text="The tool's name, as the model calls it (e.g. `jira_ticket`): lower-case letters, digits and _, starting with a letter.", max_length=48, unique=True, validators=[django.core.validators.RegexValidator('^[a-z][a-z0-9_]{0,47}$', 'Lower-case letters, digits and _.')])),
                ('kind', models.CharField(choices=[('http', 'HTTP endpoint'), ('github_issue', 'GitHub issue (built in, read-only)')], default='http', max_length=20)),
                ('description', models.TextField(help_text='What the model is told the tool does and when to use it, e.g. “Look up a Jira ticket by its key (PAY-123): its summary, status and description.”', max_length=1000)),
                ('input_schema', models.JSONField(blank=True, default=dict, help_text='A JSON Schema (2020-12) of the tool\'s input, an object, e.g. {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}. Every call is validated against it before anything is sent. Built-in kinds have their own.')),
                ('method', models.CharField(choices=[('GET', 'GET'), ('POST', 'POST')], default='GET', max_length=8)),
                ('url_template', models.CharField(blank=True, help_text='http(s) URL; `{name}` placeholders in the path or query are filled from the input (URL-encoded), e.g. https://jira.example.com/rest/api/2/issue/{key}. The host is fixed: a placeholder may not be in it.', max_length=2000, verbose_name='URL template')),
                ('body_template', models.TextField(blank=True, help_text='For POST: the JSON body, with `{name}` placeholders filled with the input\'s values as JSON (a string with its quotes), e.g. {"query": {q}, "limit": 5}. Empty: the input itself, as JSON.')),
                ('credential_header', models.CharField(blank=True, default='Authorization', help_text='The header that carries the credential, e.g. Authorization or X-Api-Key.', max_length=100)),
                ('credential_sealed', models.TextField(blank=True, editable=False)),
                ('allowed_hosts', models.TextField(blank=True, help_text="One host per line (`*.example.com` for its subdomains) the call and its redirects may reach. Empty: only the URL template's host.")),
                ('timeout_seconds', models.PositiveSmallIntegerField(default=10, help_text='The whole call, redirects and answer included; a slower one is cut off.', validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(120)])),
                ('max_response_bytes', models.PositiveIntegerField(default=65536, help_text='The largest answer read; a larger one is cut off with an error.', validators=[django.core.validators.MinValueValidator(1024), django.core.validators.MaxValueValidator(1000000)])),
                ('enabled', models.BooleanField(default=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
            ],
            options={
                'ordering': ['name'],
            },
        ),
        migrations.CreateModel(
            name='Installation',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('github_id', models.BigIntegerField(help_text="GitHub's installation id.", unique=True)),
                ('account_login', models.CharField(blank=True, max_length=100)),
                ('account_type', models.CharField(blank=True, max_length=20)),
                ('repository_selection', models.CharField(blank=True, max_length=20)),
                ('permissions', models.JSONField(blank=True, default=dict)),
                ('suspended_at', models.DateTimeField(blank=True, null=True)),
                ('removed_at', models.DateTimeField(blank=True, help_text='When the App was uninstalled; history is kept.', null=True)),
                ('monthly_budget_usd', models.DecimalField(blank=True, decimal_places=2, help_text='Monthly spending cap on model reviews; empty means no cap.', max_digits=10, null=True, validators=[django.core.validators.MinValueValidator(0)])),
                ('degrade_over_budget', models.BooleanField(default=True, help_text='Past the cap, stop after triage and record the review incomplete.')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('quiet_reason', models.TextField(blank=True)),
                ('quiet_until', models.DateTimeField(blank=True, null=True)),
                ('excluded_paths', models.TextField(blank=True, help_text="One glob per line, gitignore semantics: not reviewed in any of this installation's repositories. A repository's own `!pattern` re-includes a path.", validators=[repos.models._validate_globs])),
            ],
            options={
                'ordering': ['account_login'],
            },
        ),
        migrations.CreateModel(
            name='GitHubApiUsage',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('app_id', models.CharField(max_length=40)),
                ('installation_id', models.BigIntegerField()),
                ('calls', models.BigIntegerField(default=0)),
                ('errors', models.BigIntegerField(default=0)),
                ('rate_limit_remaining', models.IntegerField(blank=True, null=True)),
                ('rate_limit_limit', models.IntegerField(blank=True, null=True)),
                ('rate_limit_reset', models.DateTimeField(blank=True, null=True)),
                ('updated_at', models.DateTimeField()),
            ],
            options={
                'verbose_name': 'GitHub API usage',
                'verbose_name_plural': 'GitHub API usage',
                'constraints': [models.UniqueConstraint(fields=('app_id', 'installation_id'), name='github_usage_unique')],
            },
        ),
        migrations.CreateModel(
            name='Repository',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('github_id', models.BigIntegerField(help_text="GitHub's repository id.", unique=True)),
                ('full_name', models.CharField(db_index=True, max_length=200)),
                ('private', models.BooleanField(default=False)),
                ('default_branch', models.CharField(blank=True, max_length=255)),
                ('enabled', models.BooleanField(default=True)),
                ('removed_at', models.DateTimeField(blank=True, help_text='When the installation lost access; history is kept.', null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('installation', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='repositories', to='repos.installation')),
            ],
            options={
                'verbose_name_plural': 'repositories',
                'ordering': ['full_name'],
            },
        ),
        migrations.CreateModel(
            name='RepoMemory',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('text', models.TextField(blank=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('source', models.CharField(choices=[('tally', 'the tally of outcomes'), ('model', 'folded by a model'), ('person', 'edited by an operator')], default='tally', max_length=10)),
                ('version', models.PositiveIntegerField(default=0)),
                ('repository', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='memory', to='repos.repository')),
            ],
            options={
                'verbose_name_plural': 'repository memories',
            },
        ),
        migrations.CreateModel(
            name='Reviewer',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('slug', models.SlugField(unique=True)),
                ('name', models.CharField(blank=True, max_length=100)),
                ('engine', models.CharField(choices=[('static', 'static'), ('anthropic', 'anthropic'), ('openai', 'openai'), ('claude-code', 'claude-code'), ('codex', 'codex')], max_length=20)),
                ('runner', models.CharField(choices=[('local', 'local'), ('docker', 'docker'), ('actions', 'actions')], default='local', max_length=20)),
                ('model', models.CharField(blank=True, help_text='Model name for model engines; empty for static.', max_length=100)),
                ('rules', models.TextField(blank=True, help_text='What this reviewer must and must not raise.')),
                ('skills', models.TextField(blank=True, help_text='Guidance always given to the reviewer, whole. For guidance that matters only to some changes, add named skills below: a model reviewer sees their names and descriptions and loads one when it needs it.', verbose_name='guidance')),
                ('cost_cap_usd', models.DecimalField(blank=True, decimal_places=2, help_text='Most one review may cost; empty means no cap.', max_digits=8, null=True, validators=[django.core.validators.MinValueValidator(0)])),
                ('step_limit', models.PositiveIntegerField(default=40, validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(500)])),
                ('enabled', models.BooleanField(default=True)),
                ('default_for_new_repositories', models.BooleanField(default=False, help_text='Enabled on the policy of every repository Tasuku learns of from now on. Repositories it knows already keep their reviewers: to add this one to them, use the action “Enable on every repository” in the reviewers list.')),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('context_budget_tokens', models.PositiveIntegerField(default=120000, help_text='Most diff tokens shown to the engine; the rest is named so it can read it itself. The default suits a 200k-token model.', validators=[django.core.validators.MinValueValidator(1000), django.core.validators.MaxValueValidator(2000000)])),
                ('api_key_sealed', models.TextField(blank=True, editable=False)),
                ('base_url', models.URLField(blank=True, help_text="The API's address, when not the provider's own: an OpenAI-compatible server (vLLM, Ollama, LM Studio: e.g. http://gpu-box:8000/v1) for openai and codex, a gateway for anthropic. Empty: OPENAI_BASE_URL / ANTHROPIC_BASE_URL, else the provider.", max_length=300)),
                ('triage_model', models.CharField(blank=True, help_text='A fast, cheap model of the same provider that triages a change before the deep review (trivial changes are then not reviewed in depth). Empty: the rule-based triage only.', max_length=100)),
                ('explorer_limit', models.PositiveSmallIntegerField(default=6, help_text='Most explorers one review may send (at most four at once).', validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(32)])),
                ('explorer_model', models.CharField(blank=True, help_text='A fast model of the same provider the reviewer may send to explore the repository and report back (anthropic and openai engines). Empty: no explorers.', max_length=100)),
                ('max_output_tokens', models.PositiveIntegerField(default=16000, help_text='Most tokens the model may write in one turn (anthropic and openai engines). With a cost cap it bounds what the next call can cost: a call that could pass the cap is not made.', validators=[django.core.validators.MinValueValidator(256), django.core.validators.MaxValueValidator(128000)])),
                ('web_research', models.BooleanField(default=False, help_text="Let the reviewer fetch public web pages (and search, with TASUKU_WEB_SEARCH_URL) during a review. Needs the local or actions runner: the docker runner's engine reaches nothing but the model API.")),
                ('connectors', models.ManyToManyField(blank=True, help_text="Connectors this reviewer may call (anthropic and openai engines): tools that ask the team's systems, with Tasuku making each call and holding the credential.", related_name='reviewers', to='repos.connector')),
            ],
            options={
                'ordering': ['slug'],
            },
        ),
        migrations.CreateModel(
            name='RepositoryPolicy',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('trigger_opened', models.BooleanField(default=True, verbose_name='review when opened')),
                ('trigger_reopened', models.BooleanField(default=True, verbose_name='review when reopened')),
                ('trigger_ready_for_review', models.BooleanField(default=True, verbose_name='review when marked ready')),
                ('trigger_synchronize', models.BooleanField(default=True, verbose_name='review every push')),
                ('review_drafts', models.BooleanField(default=False)),
                ('strictness', models.CharField(choices=[('low', 'low'), ('medium', 'medium'), ('high', 'high')], default='medium', help_text='What is worth raising; never what is published.', max_length=10)),
                ('max_changed_files', models.PositiveIntegerField(default=1000, help_text='Pull requests changing more files are not reviewed (the check says so).', validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(5000)])),
                ('comment_limit', models.PositiveIntegerField(default=25, help_text='Most inline comments one review posts; the rest stay on the dashboard.', validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(100)])),
                ('excluded_paths', models.TextField(blank=True, help_text='One glob per line, gitignore semantics; added to the default exclusions.', validators=[repos.models._validate_globs])),
                ('excluded_authors', models.TextField(blank=True, help_text='One GitHub login per line; `*` matches anything (e.g. `renovate*`).', validators=[repos.models._validate_logins])),
                ('min_severity', models.CharField(choices=[('info', 'info'), ('low', 'low'), ('medium', 'medium'), ('high', 'high'), ('critical', 'critical')], default='low', max_length=10)),
                ('fail_check_on', models.CharField(choices=[('info', 'info'), ('low', 'low'), ('medium', 'medium'), ('high', 'high'), ('critical', 'critical'), ('never', 'never (findings never fail the check)')], default='high', help_text='The check run fails while an open finding reaches this severity.', max_length=10)),
                ('auto_approve', models.BooleanField(default=False, help_text='Approve when no Tasuku finding is open on the current head. Tasuku never merges.')),
                ('triage_enabled', models.BooleanField(default=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('runner', models.CharField(blank=True, choices=[('', "each reviewer's own"), ('local', 'local'), ('docker', 'docker'), ('actions', 'actions')], help_text="Where this repository's reviews run, over each reviewer's runner: `actions` dispatches them to GitHub Actions runners in the repository.", max_length=20)),
                ('approve_with_nits', models.BooleanField(default=False, help_text='With auto-approval: approve even while non-blocking findings (nits) are open. Off: any open finding withholds the approval.')),
                ('author_may_dismiss', models.BooleanField(default=False, help_text="The pull request's author may dismiss findings on it (resolving the thread, or `@<app> dismiss <reason>`). People with write access always may.")),
                ('walkthrough', models.BooleanField(default=True, help_text='One comment on each pull request, kept up to date: what changed, risk areas, what each reviewer reviewed and did not, and how its review ended.')),
                ('honour_pr_suppressions', models.BooleanField(default=False, help_text='Off: a suppression comment the pull request adds itself (# noqa, # pragma: allowlist secret, # shellcheck disable=) keeps its finding open, shown as suppressed in this pull request, until someone with write access dismisses it. On: such a comment silences the finding. Suppressions the base branch already has are honoured either way. Review passes never honour them on blocking findings.', verbose_name="Honour the pull request's own suppressions")),
                ('static_rules', models.TextField(blank=True, help_text="Rules the static reviewer adds to its defaults, or turns off: rule codes or prefixes, separated by commas or lines; a minus turns one off (e.g. `B904, S113, -F401`, `SC2016`). The defaults are chosen for precision (see the reviewers documentation); the repository's own ruff, flake8 and shellcheck ignores, as its base branch has them, are honoured as well.", verbose_name="Static reviewer's rules")),
                ('repository', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='policy', to='repos.repository')),
                ('reviewers', models.ManyToManyField(blank=True, related_name='policies', to='repos.reviewer')),
            ],
            options={
                'verbose_name_plural': 'repository policies',
            },
        ),
        migrations.CreateModel(
            name='SecondaryRepository',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('full_name', models.CharField(max_length=200, validators=[django.core.validators.RegexValidator('^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$', 'Use the form owner/name.')])),
                ('pinned_commit', models.CharField(max_length=40, validators=[django.core.validators.RegexValidator('^[0-9a-f]{40}$', 'A full 40-character commit SHA.')])),
                ('approved', models.BooleanField(default=False, help_text='Only approved secondary repositories are mounted.')),
                ('repository', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='secondary_repositories', to='repos.repository')),
            ],
            options={
                'verbose_name_plural': 'secondary repositories',
                'constraints': [models.UniqueConstraint(fields=('repository', 'full_name'), name='secondary_repository_unique')],
            },
        ),
        migrations.CreateModel(
            name='Skill',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(help_text='What the model asks for, e.g. `django-migrations`.', max_length=64, validators=[django.core.validators.RegexValidator('^[a-z0-9][a-z0-9_-]{0,63}$', 'Lower-case letters, digits, - and _.')])),
                ('description', models.CharField(help_text='One line: when the skill applies. The model decides from this alone.', max_length=200)),
                ('body', models.TextField(help_text='The skill itself (at most 20,000 characters).', validators=[django.core.validators.MaxLengthValidator(20000)])),
                ('reviewer', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='skill_documents', to='repos.reviewer')),
            ],
            options={
                'ordering': ['name'],
                'constraints': [models.UniqueConstraint(fields=('reviewer', 'name'), name='skill_name_per_reviewer')],
            },
        ),
        migrations.RunPython(_static_reviewer.create_static_reviewer, migrations.RunPython.noop),
        migrations.RunPython(_github_issue.create, _github_issue.remove),
    ]
