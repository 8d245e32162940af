"""Guideline packs by language, the triage rule, the budget's 80 % alert."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import pytest

from reviews.models import BudgetAlert
from reviews.scope import guidelines
from reviews.scope.budget import Budget, budget_alert, installation_budget
from reviews.scope.diff import diff_parse
from reviews.scope.triage import SUBSTANTIVE, TRIVIAL, triage_rule
from tests.factories import (
    InstallationFactory,
    PullRequestFactory,
    RepositoryFactory,
    ReviewFactory,
)


def detect(changed, tree=(), files=None):
    files = files or {}
    return guidelines.detect(changed, [*tree, *files], files.get)


@pytest.mark.parametrize(
    ("changed", "packs"),
    [
        (["app/models.py"], ["python"]),
        (["web/app.ts"], ["javascript"]),
        (["cmd/main.go"], ["go"]),
        (["src/lib.rs"], ["rust"]),
        (["src/Main.java"], ["java"]),
        (["Api/Controller.cs"], ["csharp"]),
        (["scripts/deploy.sh"], ["shell"]),
        (["db/schema.sql"], ["sql"]),
        (["Dockerfile"], ["docker"]),
        (["deploy/docker-compose.yml"], ["docker"]),
        (["infra/main.tf"], ["terraform"]),
        ([".github/workflows/ci.yml"], ["github-actions"]),
        (["web/Button.tsx"], ["javascript", "react"]),
        (["README.md"], []),
    ],
)
def test_each_language_is_detected_from_its_paths(changed, packs):
    assert detect(changed) == packs


def test_shebangs_name_scripts_without_an_extension():
    assert detect(["bin/release"], files={"bin/release": "#!/usr/bin/env bash\nset -e\n"}) == [
        "shell"
    ]
    assert detect(["bin/tool"], files={"bin/tool": "#!/usr/bin/env python3\nprint(1)\n"}) == [
        "python"
    ]


DJANGO_MANAGE = (
    "#!/usr/bin/env python\nimport os\nimport sys\n\n\ndef main():\n"
    '    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop.settings")\n'
    "    from django.core.management import execute_from_command_line\n"
)


def test_django_is_detected_from_the_tree_when_python_changes():
    assert detect(["shop/views.py"], files={"manage.py": DJANGO_MANAGE}) == ["django", "python"]
    # A Flask application's manage.py is no Django project's (CTFd's).
    flask = "from flask.cli import FlaskGroup\n\ncli = FlaskGroup(create_app)\n"
    assert detect(["app/views.py"], files={"manage.py": flask}) == ["python"]
    # The static reviewer's checkout writes what `detect` reads of the tree.
    assert "src/manage.py" in guidelines.manifests(["src/manage.py", "src/app.py"])
    assert detect(["shop/views.py"], files={"requirements.txt": "Django>=5.2\n"}) == [
        "django",
        "python",
    ]
    assert detect(["README.md"], files={"manage.py": DJANGO_MANAGE}) == []


def test_react_is_detected_from_package_json():
    assert detect(["src/app.js"], files={"package.json": '{"dependencies": {"react": "^19"}}'}) == [
        "javascript",
        "react",
    ]


RN_PACKAGE = '{"dependencies": {"react": "19.1.0", "react-native": "0.81.0"}}'


def test_react_native_gets_its_own_pack_and_never_the_web_one():
    # A package.json depending on react-native (it depends on react too).
    assert detect(["src/Cart.tsx"], files={"package.json": RN_PACKAGE}) == [
        "javascript",
        "react-native",
    ]
    # Platform files are React Native's whatever the manifests say.
    assert detect(["src/Button.ios.tsx", "src/Button.android.js"]) == ["javascript", "react-native"]


def test_a_monorepos_web_app_stays_react_beside_its_react_native_app():
    files = {
        "apps/mobile/package.json": RN_PACKAGE,
        "apps/web/package.json": '{"dependencies": {"react": "^19", "react-dom": "^19"}}',
    }
    assert detect(["apps/mobile/src/List.tsx"], files=files) == ["javascript", "react-native"]
    assert detect(["apps/web/src/List.tsx"], files=files) == ["javascript", "react"]
    both = detect(["apps/mobile/src/List.tsx", "apps/web/src/List.tsx"], files=files)
    assert both == ["javascript", "react", "react-native"]


def test_every_pack_has_guidance_text():
    for name in guidelines.available():
        assert guidelines.pack_text(name).startswith("# ")
    assert len(guidelines.available()) == 14


def _diff(path, removed, added):
    body = "".join(f"-{line}\n" for line in removed) + "".join(f"+{line}\n" for line in added)
    return f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1,{len(removed)} +1,{len(added)} @@\n{body}"


@pytest.mark.parametrize(
    ("text", "path", "verdict"),
    [
        (_diff("docs/setup.md", ["old"], ["new"]), "docs/setup.md", TRIVIAL),
        (_diff("CHANGELOG", ["a"], ["b"]), "CHANGELOG", TRIVIAL),
        (_diff("app.py", ["# old comment"], ["# new comment", ""]), "app.py", TRIVIAL),
        (_diff("ui.ts", ["// a"], ["/* b", " * c", " */"]), "ui.ts", TRIVIAL),
        (
            _diff("package.json", ['  "version": "1.2.3",'], ['  "version": "1.2.4",']),
            "package.json",
            TRIVIAL,
        ),
        (
            _diff("pyproject.toml", ['version = "0.1.0"'], ['version = "0.2.0"']),
            "pyproject.toml",
            TRIVIAL,
        ),
        (_diff("app.py", ["x = 1"], ["x = 2"]), "app.py", SUBSTANTIVE),
        # Code is code whatever its name or folder, and a `*/` at the end of a Python
        # line does not make it a comment.
        (_diff("app/changes.py", ["x = 1"], ["x = 2"]), "app/changes.py", SUBSTANTIVE),
        (_diff("docs/deploy.py", ["x = 1"], ["x = 2"]), "docs/deploy.py", SUBSTANTIVE),
        (_diff("app.py", [], ['KEY = "AKIA"  # */']), "app.py", SUBSTANTIVE),
        (_diff("ui.ts", [], ["call(); */"]), "ui.ts", SUBSTANTIVE),
        (_diff("docs/Makefile", ["a"], ["b"]), "docs/Makefile", TRIVIAL),
        (_diff("app.py", ["# note"], ["# note", "os.remove(path)"]), "app.py", SUBSTANTIVE),
        (
            _diff("package.json", ['"version": "1"'], ['"version": "2"', '"main": "x.js"']),
            "package.json",
            SUBSTANTIVE,
        ),
    ],
)
def test_the_triage_rule(text, path, verdict):
    assert triage_rule(diff_parse(text), [path]).verdict == verdict


def test_whitespace_only_changes_and_filtered_only_changes_are_trivial():
    diff = diff_parse(_diff("app.py", ["x = 1"], ["x = 1  "]))
    assert triage_rule(diff, ["app.py"]).verdict == TRIVIAL
    for indented in (["x=1"], ["x = 1"]), (["x = 1"], ["    x = 1"]):  # a change in Python
        assert triage_rule(diff_parse(_diff("app.py", *indented)), ["app.py"]).verdict == (
            SUBSTANTIVE
        )
    assert triage_rule(diff, []).verdict == TRIVIAL
    assert "lock files" in triage_rule(diff, []).summary  # files changed, none reviewed
    # No file changed at all (a base and head with the same tree): said as such.
    assert (
        triage_rule(diff_parse(""), []).summary == "Nothing changed between the base and the head."
    )
    assert triage_rule(diff_parse(_diff("app.py", ["x=1"], ["x=2"])), ["app.py"]).verdict == (
        SUBSTANTIVE
    )


@pytest.mark.django_db
class TestBudget:
    def test_spend_sums_this_months_reviews_of_the_installation(self):
        installation = InstallationFactory(monthly_budget_usd=Decimal("20"))
        repository = RepositoryFactory(installation=installation)
        ReviewFactory(
            pull_request=PullRequestFactory(repository=repository), cost_usd=Decimal("3.5")
        )
        ReviewFactory(
            pull_request=PullRequestFactory(repository=repository), cost_usd=Decimal("1.25")
        )
        ReviewFactory(cost_usd=Decimal("100"))  # another installation
        budget = installation_budget(installation)
        assert (budget.spent, budget.cap, budget.exhausted) == (
            Decimal("4.75"),
            Decimal("20"),
            False,
        )

    def test_the_alert_fires_once_at_80_percent_and_again_next_month(self):
        installation = InstallationFactory(monthly_budget_usd=Decimal("10"))
        assert budget_alert(installation, Budget(Decimal("7.99"), Decimal("10"))) is None
        assert budget_alert(installation, Budget(Decimal("8"), Decimal("10"))) is not None
        assert budget_alert(installation, Budget(Decimal("9.5"), Decimal("10"))) is None
        later = datetime(2099, 1, 5)
        assert (
            budget_alert(installation, Budget(Decimal("9"), Decimal("10")), now=later) is not None
        )
        assert BudgetAlert.objects.count() == 2

    def test_no_cap_means_no_alert_and_never_exhausted(self):
        installation = InstallationFactory(monthly_budget_usd=None)
        budget = Budget(Decimal("1000"), None)
        assert not budget.exhausted
        assert budget_alert(installation, budget) is None
