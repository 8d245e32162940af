"""The static engine beyond Python and shell: oxlint on JavaScript and TypeScript, hadolint
on Dockerfiles, zizmor on GitHub Actions workflows — each with its rules chosen for
precision, the repository's own configuration read from the base, and a pull request's
own suppression comments reported, never obeyed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from sandbox.contract import ChangedFile, LineRange, ReviewJob, StaticOptions
from sandbox.engines.static import review


def job(*files: ChangedFile, options: StaticOptions | None = None) -> ReviewJob:
    return ReviewJob(
        job_id="1",
        repository="a/b",
        pull_request=1,
        base_sha="a" * 40,
        head_sha="b" * 40,
        changed_files=files,
        static=options or StaticOptions(),
    )


def added(path: str, *lines: int) -> ChangedFile:
    return ChangedFile(
        path=path, status="modified", added=tuple(LineRange(start=n, end=n) for n in lines)
    )


def write(root: Path, path: str, text: str) -> None:
    (root / path).parent.mkdir(parents=True, exist_ok=True)
    (root / path).write_text(text)


def everything(root: Path, path: str, options: StaticOptions | None = None):
    count = len((root / path).read_text().splitlines())
    return review(job(added(path, *range(1, count + 1)), options=options), root)


def rules(result) -> list[tuple[int, str]]:
    return sorted((f["start_line"], f["rule"]) for f in result.findings)


TS = """import { readFileSync } from "fs";
export function check(a: number, kind: string) {
  if (a = 2) { return a; }
  if (typeof kind === "strng") { return 0; }
  const b = a;
  b = 3;
  return NaN == a;
}
let unusedCounter = 0;
"""


def test_typescript_gets_its_bugs_and_nothing_of_taste(tmp_path):
    write(tmp_path, "src/check.ts", TS)
    result = everything(tmp_path, "src/check.ts")
    assert rules(result) == [
        (1, "oxlint:eslint/no-unused-vars"),
        (3, "oxlint:eslint/no-cond-assign"),
        (4, "oxlint:eslint/valid-typeof"),
        (6, "oxlint:eslint/no-const-assign"),
        (6, "oxlint:eslint/no-unused-vars"),  # `b` is written, never read
        (7, "oxlint:eslint/use-isnan"),
        (9, "oxlint:eslint/no-unused-vars"),
    ]
    const = next(f for f in result.findings if f["rule"].endswith("no-const-assign"))
    assert const["severity"] == "high" and "TypeError" in const["body"]
    [coverage] = result.coverage
    assert "oxlint" in coverage.checkers and not coverage.not_checked
    assert any(a.startswith("JavaScript and TypeScript") for a in result.summary.inspected_areas)


def test_only_the_added_lines_of_a_javascript_file_are_the_authors(tmp_path):
    write(tmp_path, "a.js", "var x = 1;\nif (x = 2) {}\nif (x = 3) {}\nexport { x };\n")
    result = review(job(added("a.js", 3)), tmp_path)
    assert rules(result) == [(3, "oxlint:eslint/no-cond-assign")]


def test_the_pull_requests_own_eslint_config_and_ignore_file_change_nothing(tmp_path):
    write(tmp_path, ".oxlintrc.json", '{"rules": {"no-cond-assign": "off"}}')
    write(tmp_path, ".eslintignore", "a.js\n")
    write(tmp_path, "a.js", "var x = 1;\nif (x = 2) {}\nexport { x };\n")
    assert rules(everything(tmp_path, "a.js")) == [(2, "oxlint:eslint/no-cond-assign")]


def test_the_base_branchs_eslint_config_turns_a_rule_off(tmp_path):
    write(tmp_path, "web/a.js", "var x = 1;\nif (x = 2) {}\nexport { x };\n")
    base = StaticOptions(configs={"web/.eslintrc.json": '{"rules": {"no-cond-assign": 0}}'})
    assert rules(everything(tmp_path, "web/a.js", base)) == []


def test_an_eslint_disable_the_pull_request_adds_is_reported_not_obeyed(tmp_path):
    write(
        tmp_path,
        "a.js",
        "var x = 1;\n// eslint-disable-next-line no-cond-assign\nif (x = 2) {}\nexport { x };\n",
    )
    [found] = everything(tmp_path, "a.js").findings
    assert found["rule"] == "oxlint:eslint/no-cond-assign"
    assert found["suppressed_by"] == {
        "pragma": "eslint-disable-next-line no-cond-assign",
        "line": 2,
        "scope": "next",
    }


@pytest.mark.parametrize(
    ("text", "why"),
    [("const a = 1;\nconst b = ;\n", "oxlint could not parse it (line 2: Unexpected token)"),
     ("/* @flow */\ntype T = {a: number};\nconst a: T = {a: 1};\nif (a = 2) {}\n",
      "oxlint skipped it (it could not parse it)")],
    ids=["syntax-error", "flow"],
)  # fmt: skip
def test_a_file_oxlint_cannot_parse_is_named_not_reviewed(tmp_path, text, why):
    write(tmp_path, "a.js", text)
    result = everything(tmp_path, "a.js")
    assert result.findings == []
    [coverage] = result.coverage
    assert why in coverage.not_checked


DOCKERFILE = """FROM python
RUN apt-get update && apt-get install -y curl
RUN curl -fsSL https://example.com/install.sh | sh
CMD python app.py
CMD ["python", "other.py"]
"""


def test_a_dockerfile_gets_its_pitfalls_and_not_version_pinning(tmp_path):
    write(tmp_path, "Dockerfile", DOCKERFILE)
    result = everything(tmp_path, "Dockerfile")
    assert rules(result) == [
        (1, "hadolint:DL3006"),
        (4, "hadolint:DL3025"),
        (5, "hadolint:DL4003"),
    ]  # no DL3008 (pin apt versions), DL3015, DL3009: a team's taste; DL4006 on request
    assert "hadolint" in result.coverage[0].checkers


def test_a_dockerfile_by_any_of_its_names_is_read_by_hadolint(tmp_path):
    """`Dockerfile-alpine.template` (docker-library's, a jq template) was "reviewed" by
    secrets and hygiene alone; `Dockerfile_dev` too. hadolint reads both: the first does
    not parse, and is named so; notes about one, or its ignore file, are not one."""
    write(tmp_path, "Dockerfile_dev", DOCKERFILE)
    assert rules(everything(tmp_path, "Dockerfile_dev"))[0] == (1, "hadolint:DL3006")
    write(tmp_path, "Dockerfile-alpine.template", "{{\n  def v: 1\n-}}\nFROM alpine:{{ v }}\n")
    template = everything(tmp_path, "Dockerfile-alpine.template")
    assert "hadolint could not parse it" in template.coverage[0].not_checked
    for name in ("Dockerfiles.md", "Dockerfile.md", "Dockerfile.dockerignore", "dockerfile.py"):
        write(tmp_path, name, "# Notes\n")
        [entry] = everything(tmp_path, name).coverage
        assert "hadolint" not in entry.checkers and entry.not_checked == "", name


def test_a_health_checks_shell_form_command_is_not_told_about_stop_signals(tmp_path):
    """DL3025 is about the signal the main process gets when the container stops; a
    HEALTHCHECK's command is a probe, never sent it. The CMD beside it still is."""
    write(
        tmp_path,
        "Dockerfile",
        "FROM python:3.12\nHEALTHCHECK --interval=30s CMD curl -f localhost\nCMD python app.py\n",
    )
    assert rules(everything(tmp_path, "Dockerfile")) == [(3, "hadolint:DL3025")]


def test_the_base_branchs_hadolint_config_and_an_in_pr_ignore_comment(tmp_path):
    write(tmp_path, "docker/Dockerfile.prod", "FROM python\n# hadolint ignore=DL4006\nRUN a | b\n")
    base = StaticOptions(configs={".hadolint.yaml": "ignored:\n  - DL3006\n"}, select=("DL4006",))
    [found] = everything(tmp_path, "docker/Dockerfile.prod", base).findings
    assert found["rule"] == "hadolint:DL4006"
    assert found["suppressed_by"]["pragma"] == "# hadolint ignore=DL4006"


WORKFLOW = """name: ci
on:
  pull_request_target:
permissions: write-all
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: someone/deploy-action@main
      - run: echo "${{ github.event.pull_request.title }}"
"""


def test_a_workflow_gets_injection_unpinned_actions_and_write_all(tmp_path):
    write(tmp_path, ".github/workflows/ci.yml", WORKFLOW)
    result = everything(tmp_path, ".github/workflows/ci.yml")
    assert rules(result) == [
        (3, "zizmor:dangerous-triggers"),
        (4, "zizmor:excessive-permissions"),
        (10, "zizmor:unpinned-uses"),
        (11, "zizmor:template-injection"),
    ]  # actions/checkout@v4 is GitHub's own, pinned to a tag: not reported
    injection = next(f for f in result.findings if f["rule"].endswith("template-injection"))
    assert injection["severity"] == "high" and injection["blocking"]
    assert "zizmor" in result.coverage[0].checkers


BUMPED = WORKFLOW.replace("deploy-action@main", "deploy-action@v2").replace(
    "actions/checkout@v4", "actions/checkout@v4\n      - uses: other/setup-tool@v1"
)


@pytest.mark.parametrize(
    ("base_ref", "reported"),
    [("v1", False), ("main", False), ("a" * 40, True)],
    ids=["tag", "branch", "pinned-commit"],
)
def test_a_version_bump_of_an_action_the_base_used_by_a_tag_is_not_the_changes(
    tmp_path, base_ref, reported
):
    """A bot's bump of `someone/deploy-action` from one tag to another leaves it as
    unpinned as the base had it: not the change's doing. An action the change adds
    (`other/setup-tool`) is, and so is moving one off a commit the base pinned. Read from
    git's own diff of the two versions, as the pipeline reads a pull request's."""
    from reviews.scope.diff import diff_parse
    from sandbox.git import DIFF

    path = ".github/workflows/ci.yml"
    write(tmp_path, path, WORKFLOW.replace("deploy-action@main", f"deploy-action@{base_ref}"))
    env = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "PATH": os.environ["PATH"]}
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True, env=env)
    subprocess.run(["git", "add", "-A"], cwd=tmp_path, check=True, env=env)
    write(tmp_path, path, BUMPED)
    diff = subprocess.run(
        ["git", *DIFF, "--", path], cwd=tmp_path, check=True, env=env, capture_output=True,
        text=True,
    ).stdout  # fmt: skip
    [changed] = [f.changed_file() for f in diff_parse(diff).files]
    found = rules(review(job(changed), tmp_path))
    assert (10, "zizmor:unpinned-uses") in found  # other/setup-tool@v1, the change's own
    assert ((11, "zizmor:unpinned-uses") in found) is reported  # someone/deploy-action@v2


def test_a_zizmor_ignore_comment_the_pull_request_adds_is_reported(tmp_path):
    write(
        tmp_path,
        ".github/workflows/ci.yml",
        WORKFLOW.replace('title }}"', 'title }}" # zizmor: ignore[template-injection]'),
    )
    found = next(
        f
        for f in everything(tmp_path, ".github/workflows/ci.yml").findings
        if f["rule"] == "zizmor:template-injection"
    )
    assert found["suppressed_by"]["pragma"] == "# zizmor: ignore[template-injection]"


def test_the_base_branchs_zizmor_config_turns_an_audit_off(tmp_path):
    write(tmp_path, ".github/workflows/ci.yml", WORKFLOW)
    base = StaticOptions(
        configs={".github/zizmor.yml": "rules:\n  unpinned-uses:\n    disable: true\n"}
    )
    found = rules(everything(tmp_path, ".github/workflows/ci.yml", base))
    assert (10, "zizmor:unpinned-uses") not in found and found


def test_a_workflow_that_is_not_yaml_is_named_not_reviewed(tmp_path):
    write(tmp_path, ".github/workflows/bad.yml", "name: x\non: [push\njobs: {\n")
    result = everything(tmp_path, ".github/workflows/bad.yml")
    assert "zizmor could not read it" in result.coverage[0].not_checked


@pytest.mark.parametrize(
    ("path", "text", "checker"),
    [
        ("web/App.vue", "<script>\nexport default { data() { return {}; } };\n</script>\n", "oxlint"),
        ("Containerfile", "FROM alpine:3.20\n", "hadolint"),
        ("action.yml", "name: a\nruns:\n  using: composite\n  steps:\n    - run: echo hi\n      shell: bash\n", "zizmor"),
    ],
)  # fmt: skip
def test_each_file_kind_is_read_by_its_checker(tmp_path, path, text, checker):
    write(tmp_path, path, text)
    [coverage] = everything(tmp_path, path).coverage
    assert checker in coverage.checkers and not coverage.not_checked


def test_a_policy_adds_and_turns_off_rules_of_each_tool_by_its_own_names(tmp_path):
    write(tmp_path, "Dockerfile", "FROM python:3.12\nRUN apt-get install -y curl\n")
    write(tmp_path, "a.js", "console.log(1);\n")
    write(tmp_path, ".github/workflows/ci.yml", WORKFLOW)
    write(tmp_path, "app.py", "import os\n")
    options = StaticOptions(
        select=("DL3008", "oxlint:eslint/no-console"), ignore=("zizmor:unpinned-uses", "F401")
    )
    paths = ["Dockerfile", "a.js", ".github/workflows/ci.yml", "app.py"]
    changed = [added(p, *range(1, len((tmp_path / p).read_text().splitlines()) + 1)) for p in paths]
    result = review(job(*changed, options=options), tmp_path)
    found = {f["rule"] for f in result.findings}
    assert {"hadolint:DL3008", "oxlint:eslint/no-console"} <= found
    assert "zizmor:unpinned-uses" not in found and "ruff:F401" not in found
    assert not result.partial  # ruff is never handed another tool's code


def test_an_injection_of_a_callers_input_is_a_hardening_not_a_blocking_hole(tmp_path):
    workflow = (
        "name: merge\non:\n  workflow_call:\n    inputs:\n      image:\n        type: string\n"
        "        required: true\npermissions: {}\njobs:\n  merge:\n    runs-on: ubuntu-latest\n"
        "    steps:\n      - run: |\n          merge --image ${{ inputs.image }}\n"
    )  # fmt: skip
    write(tmp_path, ".github/workflows/merge.yml", workflow)
    [found] = [
        f for f in everything(tmp_path, ".github/workflows/merge.yml").findings
        if f["rule"] == "zizmor:template-injection"
    ]  # fmt: skip
    assert (found["severity"], found["blocking"]) == ("medium", False)
    assert "caller" in found["body"]


def test_a_manual_runs_input_is_a_hardening_and_a_pull_requests_title_still_blocks(tmp_path):
    """`github.event.inputs.*` is what someone with write access typed into a manual run
    (`workflow_dispatch`), like `inputs.*`; `github.event.pull_request.title` is an
    outsider's text."""
    workflow = (
        "name: release\non:\n  workflow_dispatch:\n    inputs:\n      tag:\n        type: string\n"
        "  pull_request_target:\npermissions: {}\njobs:\n  release:\n    runs-on: ubuntu-latest\n"
        "    steps:\n      - run: release ${{ github.event.inputs.tag }}\n"
        "      - run: echo ${{ github.event.pull_request.title }}\n"
    )  # fmt: skip
    write(tmp_path, ".github/workflows/release.yml", workflow)
    found = {
        f["start_line"]: (f["severity"], f["blocking"])
        for f in everything(tmp_path, ".github/workflows/release.yml").findings
        if f["rule"] == "zizmor:template-injection"
    }
    assert found == {13: ("medium", False), 14: ("high", True)}


def test_the_base_branchs_name_is_the_repositorys_own_and_a_head_branchs_an_outsiders(tmp_path):
    """The base branch a pull request targets is named by someone with write access
    (`github.base_ref` was a hardening while the same value as
    `github.event.pull_request.base.ref` blocked, seen in pgcli); the head branch's name
    is the fork's. A line reading both is an outsider's."""
    workflow = (
        "name: t\non: pull_request_target\npermissions: {}\njobs:\n  t:\n"
        "    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: git fetch origin ${{ github.event.pull_request.base.ref }}\n"
        "      - run: git fetch origin ${{ github.base_ref }}\n"
        "      - run: echo ${{ github.event.repository.default_branch }}\n"
        "      - run: git diff ${{ github.event.pull_request.base.ref }} ${{ github.head_ref }}\n"
        "      - run: echo ${{ github.event.pull_request.head.ref }}\n"
    )  # fmt: skip
    write(tmp_path, ".github/workflows/t.yml", workflow)
    found = {
        f["start_line"]: (f["severity"], f["blocking"], "repository's own" in f["body"])
        for f in everything(tmp_path, ".github/workflows/t.yml").findings
        if f["rule"] == "zizmor:template-injection"
    }
    assert found == {
        8: ("medium", False, True), 9: ("medium", False, True), 10: ("medium", False, True),
        11: ("high", True, False), 12: ("high", True, False),
    }  # fmt: skip


def test_a_placeholder_the_build_replaces_is_not_a_constant_condition(tmp_path):
    """Seen in umami: `'__COLLECT_API_HOST__' || location.origin`, a token rollup
    replaces at build time, read as an `||` whose left side always wins. A real constant
    on the left still is one."""
    write(tmp_path, "src/tracker.js", (
        "const host = '__COLLECT_API_HOST__' || window.location.origin;\n"
        "const fallback = 'x' || window.name;\nexport { host, fallback };\n"
    ))  # fmt: skip
    assert rules(everything(tmp_path, "src/tracker.js")) == [
        (2, "oxlint:eslint/no-constant-binary-expression")
    ]


def test_an_unused_parameter_is_a_signature_not_dead_code(tmp_path):
    # Seen in a real pull request: a mock's implementation keeping the real signature.
    write(tmp_path, "a.test.ts", (
        "export const mock = (paths: string[], primaryKey: string, restoreKey?: string[]) =>\n"
        "  Promise.resolve(primaryKey);\nconst unused = 1;\n"
    ))  # fmt: skip
    assert rules(everything(tmp_path, "a.test.ts")) == [(3, "oxlint:eslint/no-unused-vars")]


def test_an_expression_that_can_only_be_true_or_false_injects_nothing(tmp_path):
    # Seen in a real workflow: `run: ${{ startsWith(steps.x.outputs.version, '3.15.') }}`.
    workflow = (
        "name: t\non: pull_request\npermissions: {}\njobs:\n  t:\n    runs-on: ubuntu-latest\n"
        "    steps:\n      - id: x\n        run: echo version=3.15.0 >> $GITHUB_OUTPUT\n"
        "      - run: ${{ startsWith(steps.x.outputs.version, '3.15.') }}\n"
        "      - run: echo ${{ steps.x.outputs.version }}\n"
    )  # fmt: skip
    write(tmp_path, ".github/workflows/t.yml", workflow)
    found = [
        f["start_line"] for f in everything(tmp_path, ".github/workflows/t.yml").findings
        if f["rule"] == "zizmor:template-injection"
    ]  # fmt: skip
    assert 10 not in found
    from sandbox.engines.static.common import Target
    from sandbox.engines.static.zizmor import _only_booleans

    target = Target(".github/workflows/t.yml", tmp_path / ".github/workflows/t.yml", frozenset())
    assert _only_booleans(target, 10, 10)
    assert not _only_booleans(target, 11, 11)


def test_a_javascript_file_that_mentions_flow_but_parses_is_reviewed(tmp_path):
    # Seen in a real repository: `@flow` in a JSDoc block of plain JavaScript.
    write(tmp_path, "a.js", "/**\n * Local maxima.\n * @flow\n */\nconst a = 1;\nexport { a };\n")
    result = everything(tmp_path, "a.js")
    [coverage] = result.coverage
    assert "oxlint" in coverage.checkers and not coverage.not_checked
    assert result.findings == []  # the canary that tells a file was parsed is never said


# --- YAML syntax --------------------------------------------------------------------------


def test_yaml_that_does_not_parse_is_reported_on_the_added_line_where_it_stops(tmp_path):
    from sandbox.contract import ChangedFile, LineRange, ReviewJob
    from sandbox.engines.static import review

    (tmp_path / "compose.yaml").write_text(
        "services:\n  web:\n    image: nginx\n    ports:\n      - 80:80\n   environment: x\n"
    )
    (tmp_path / "stack.yml").write_text(  # a custom tag, as CloudFormation's: fine
        "Resources:\n  Bucket:\n    Type: AWS::S3::Bucket\n    Properties:\n      Name: !Ref Name\n"
    )
    (tmp_path / "chart.yaml").write_text(  # a Helm template: YAML only once rendered
        "spec:\n  replicas: {{ .Values.replicas }}\n  {{- if .Values.x }}\n  a: b\n"
    )
    (tmp_path / "old.yml").write_text("a: [1, 2\nb: 3\nc: 4\n")  # broken at line 2 before
    changed = (
        ChangedFile(path="compose.yaml", status="added", added=(LineRange(start=1, end=6),)),
        ChangedFile(path="stack.yml", status="added", added=(LineRange(start=1, end=5),)),
        ChangedFile(path="chart.yaml", status="added", added=(LineRange(start=1, end=4),)),
        ChangedFile(path="old.yml", status="modified", added=(LineRange(start=3, end=3),)),
    )
    result = review(
        ReviewJob(job_id="1", repository="a/b", pull_request=1, base_sha="a" * 40,
                  head_sha="b" * 40, changed_files=changed),
        tmp_path,
    )  # fmt: skip
    found = [(f["path"], f["start_line"], f["rule"], f["severity"]) for f in result.findings]
    assert found == [("compose.yaml", 6, "yaml:syntax", "high")]
    assert "does not parse" in result.findings[0]["title"]
    by_path = {c.path: c for c in result.coverage}
    assert "yaml" in by_path["stack.yml"].checkers
    assert "templated YAML" in by_path["chart.yaml"].not_checked
    assert any("templated YAML" in line for line in result.summary.limitations)
