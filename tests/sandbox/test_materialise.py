"""A static review's checkout writes only what the static engine reads: the changed
files, the linters' configuration, the modules that import from a changed module and the
files a changed script sources — decided from git before anything is written, and
fetched in one request from a partial clone. What it says is what a checkout of every
file says."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
from pathlib import Path

import pytest
from django.core.management import call_command

from repos import github
from repos.github import RepoRef
from repos.policy import Engine, ReviewerConfig
from reviews.core import stages
from sandbox.engines.static.reads import module_names, reads
from sandbox.git import Git
from sandbox.workspace import HeadView, Workspace
from tests.gitlocal import commit, git, repo_init
from tests.gitworld import REPO, REPO_ID, world_build

COMPAT = "from json import loads\n\n\ndef parse(text):\n    return loads(text)\n\n\nLIMIT = 3\n"
USES_COMPAT = "from pkg.compat import LIMIT, parse\n\nprint(parse('[]'), LIMIT)\n"
LIB = "#!/bin/bash\ngreet() { echo hi; }\n"
DEEPER = "#!/bin/bash\nfarewell() { echo bye; }\n"


@pytest.fixture
def repo(tmp_path) -> Path:
    """A project with a compatibility module others import from, a shell library that
    sources another, configuration, documentation and unrelated code; the branch changes
    the module and the script."""
    path = tmp_path / "project"
    repo_init(path)
    base = {
        "pyproject.toml": '[project]\nname = "pkg"\nrequires-python = ">=3.9"\n',
        "pkg/__init__.py": "",
        "pkg/compat.py": COMPAT,
        "pkg/api.py": USES_COMPAT,
        "pkg/other.py": "import os\n\nprint(os.sep)\n",
        "tests/test_compat.py": "from .helpers import compat\n",
        "scripts/lib/common.sh": '#!/bin/bash\n# shellcheck source=scripts/lib/deeper.sh\n. "scripts/lib/deeper.sh"\n',
        "scripts/lib/deeper.sh": DEEPER,
        "scripts/unrelated.sh": LIB,
        "docs/index.md": "# Docs\n",
        "web/app.js": "console.log(1)\n",
    }
    commit(path, base, "base")
    git(path, "checkout", "-q", "-b", "feature")
    commit(
        path,
        {
            "pkg/compat.py": COMPAT.replace("LIMIT = 3\n", ""),  # still imported by api.py
            "scripts/run.sh": '#!/bin/bash\nsource "lib/common.sh"\ngreet "$1"\n',
        },
        "feature",
    )
    return path


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def test_the_static_engine_reads_the_changes_configuration_importers_and_sourced_files(repo):
    head, base = git(repo, "rev-parse", "feature"), git(repo, "rev-parse", "main")
    with Workspace() as workspace:
        checkout = workspace.checkout_local(
            repository=repo, head_sha=head, base_sha=base, materialise=reads
        )
        written = _files(checkout.root)
    assert written == {
        "pkg/compat.py", "scripts/run.sh",  # changed
        "pyproject.toml",  # configuration
        "pkg/api.py",  # imports from the changed module
        "scripts/lib/common.sh", "scripts/lib/deeper.sh",  # sourced, and what that sources
    }  # fmt: skip
    assert checkout.materialised == len(written)


def test_a_reviewer_that_explores_the_repository_gets_every_file(repo):
    head, base = git(repo, "rev-parse", "feature"), git(repo, "rev-parse", "main")
    explorer = ReviewerConfig(slug="claude", engine=Engine.ANTHROPIC, model="m")
    static = ReviewerConfig(slug="static", engine=Engine.STATIC)
    assert stages.materialise_for(explorer) is None
    assert stages.materialise_for(static) is not None
    with Workspace() as workspace:
        checkout = workspace.checkout_local(repository=repo, head_sha=head, base_sha=base)
        assert "docs/index.md" in _files(checkout.root)
        assert checkout.materialised is None


def _review(repo: Path) -> list[tuple]:
    out = io.StringIO()
    with contextlib.suppress(SystemExit):  # the exit status says whether it found any
        call_command("review", "--repo", str(repo), "--head", "feature", "--base", "main",
                     "--format", "json", stdout=out)  # fmt: skip
    data = json.loads(out.getvalue())
    return sorted(
        (f["path"], f["start_line"], f["rule"], f["title"], f["severity"]) for f in data["findings"]
    )


@pytest.mark.django_db
def test_what_a_partial_checkout_finds_is_what_a_whole_one_finds(repo, monkeypatch):
    partial = _review(repo)
    monkeypatch.setattr(stages, "materialise_for", lambda reviewer: None)
    git(repo, "commit", "-q", "--allow-empty", "-m", "again")  # a new head: reviewed afresh
    whole = _review(repo)
    assert partial == whole
    # The finding that needs another module read: `LIMIT` removed, pkg/api.py imports it.
    assert any(rule == "ruff:removed-import" and path == "pkg/compat.py"
               for path, _, rule, _, _ in partial)  # fmt: skip


def test_module_names_are_what_an_import_would_say():
    assert module_names(["a/b/compat.py", "pkg/__init__.py", "x.pyi", "bin/tool", "README.md",
                         "odd-name.py"]) == {"compat", "__init__", "pkg", "x", "tool"}  # fmt: skip


def test_names_git_patterns_treat_as_special_are_written_exactly(tmp_path):
    """A sparse checkout's patterns are gitignore's: `*`, `?`, `[`, a backslash and
    trailing spaces in a name are that name, never a wildcard over its neighbours."""
    repo = tmp_path / "odd"
    repo_init(repo)
    base = commit(repo, {"keep.txt": "x\n"}, "base")
    names = ["a*b.txt", "a?c.txt", "[x].txt", "back\\slash.txt", "trailing .txt ", "-rf"]
    neighbours = ["aXb.txt", "aZc.txt", "x.txt", "back/slash.txt", "trailing .txt"]
    head = commit(repo, {n: "new\n" for n in names + neighbours}, "odd names")
    with Workspace() as workspace:
        checkout = workspace.checkout_local(
            repository=repo, head_sha=head, base_sha=base, materialise=lambda view: names
        )
        assert _files(checkout.root) == set(names)


def test_a_partial_clone_fetches_what_the_static_engine_reads_in_one_go(fake_github, tmp_path):
    """From GitHub (a clone without files), the search for importers fetches the Python
    files it reads together, and nothing else of the tree is fetched or written."""
    world = world_build(fake_github)
    start = world.push({
        "lib/shared.py": "def helper():\n    return 1\n",
        "lib/user_a.py": "from lib.shared import helper\n",
        "lib/user_b.py": "from lib.shared import helper\n\nhelper()\n",
        **{f"lib/more/m{n}.py": f"N = {n}\n" for n in range(20)},
        "docs/big.md": "words\n" * 10_000,
    })  # fmt: skip
    head = world.push({"lib/shared.py": "def helper():\n    return 2\n"})
    token = github.gateway().contents_token(RepoRef(41, REPO_ID, REPO))
    mirror = tmp_path / "mirror"
    with Workspace(str(tmp_path)) as workspace:
        checkout = workspace.checkout(
            clone_url=f"{fake_github.url}/{REPO}.git", token=token, head_sha=head,
            base_sha=start, mirror=mirror, materialise=reads,
        )  # fmt: skip
        written = _files(checkout.root)
    assert written == {"lib/shared.py", "lib/user_a.py", "lib/user_b.py"}
    # The history, then the 23 Python files searched together: never a request a file.
    posts = fake_github.requests(method="POST", path=r"git-upload-pack$")
    assert len(posts) <= 3, [c.path for c in posts]  # a request a file: 27
    # The documentation's blob never came: the mirror does not hold it.
    blob = subprocess.run(["git", "-C", str(mirror), "rev-parse", f"{head}:docs/big.md"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    lacks = subprocess.run(
        ["git", "-C", str(mirror), "rev-list", "--objects", "--missing=print", "--no-object-names",
         f"{head}^{{tree}}"], capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert f"?{blob}" in lacks


def test_the_head_view_reads_and_searches_without_writing(repo):
    head = git(repo, "rev-parse", "feature")
    view = HeadView(Git(repo, {"PATH": "/usr/bin:/bin", "HOME": str(repo)}), head,
                    {p: "" for p in git(repo, "ls-tree", "-r", "--name-only", head).split("\n")},
                    ["pkg/compat.py"])  # fmt: skip
    assert view.read(["pkg/api.py", "nowhere.py"], limit=1_000) == {
        "pkg/api.py": USES_COMPAT.encode()
    }
    assert view.grep("from[[:space:]]+pkg[.]compat", (".py",)) == {"pkg/api.py"}
