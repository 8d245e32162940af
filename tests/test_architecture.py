"""The seams hold: the pipeline names no feature, and the features plug in by
registration. (The layers and the absence of import circles are checked by `make lint`,
with import-linter's contracts in .importlinter.)"""

from __future__ import annotations

import re
from pathlib import Path

from reviews.core.modes import REVIEW, RunMode
from reviews.engines import boundary as engines
from reviews.passes.mode import PASS

ROOT = Path(__file__).resolve().parent.parent


def test_the_pipeline_names_no_feature():
    text = (ROOT / "reviews" / "pipeline" / "flow.py").read_text()
    for word in ("review_pass", "passes", "Runner.ACTIONS", "actions", "author_bot", "walkthrough"):
        assert not re.search(rf"\b{re.escape(word)}\b", text), word


def test_a_local_review_is_the_pipeline_with_a_local_forge_not_a_second_orchestration():
    text = (ROOT / "reviews" / "local" / "review.py").read_text()
    assert re.search(r"\bpipeline\(ctx\)", text)
    for step in ("engine_run", "job_build", "persist", "validate", "decide", "carry"):
        assert not re.search(rf"\b{step}\(", text), step


def test_the_actions_runner_registers_its_dispatcher_and_the_local_runner_needs_none():
    from reviews.actions.workflow import review_dispatch

    assert engines.dispatcher_for("actions") is review_dispatch
    assert engines.dispatcher_for("local") is None


def test_both_forges_give_everything_a_forge_declares(tmp_path):
    from reviews.core.context import Forge
    from reviews.local.review import Local
    from reviews.pipeline.forges import GITHUB

    declared = {n for n in vars(Forge) if not n.startswith("_")} | set(Forge.__annotations__)
    assert declared >= {
        "guards",
        "checkout",
        "conversation",
        "publish",
        "reexecutes",
        "under_way",
        "ended",
    }
    for forge in (GITHUB, Local(tmp_path)):
        assert all(hasattr(forge, name) for name in declared), forge


def test_both_modes_give_everything_a_run_mode_declares():
    declared = {n for n in vars(RunMode) if not n.startswith("_")} | set(RunMode.__annotations__)
    assert declared >= {"fresh_look", "earlier_context", "rulings_settle", "after"}
    for mode in (REVIEW, PASS):
        assert all(hasattr(mode, name) for name in declared), mode


TOP = ("tasuku", "webhooks", "repos", "reviews", "sandbox")
LEAD = "|".join(TOP)
# Django's own conventions, named by the framework rather than the map.
CONVENTIONAL = {"management", "commands", "templatetags", "migrations"}


def _architecture() -> str:
    return (ROOT / "docs" / "architecture.md").read_text()


def test_every_path_and_dotted_name_the_architecture_map_gives_exists():
    import importlib

    doc = _architecture()
    paths = set(re.findall(rf"`((?:{LEAD})(?:/[A-Za-z0-9_.\-]+)+/?)`", doc))
    assert paths, "the map names no path"
    assert [p for p in sorted(paths) if not (ROOT / p.rstrip("/")).exists()] == []
    dotted = set(re.findall(rf"`((?:{LEAD})(?:\.[A-Za-z_]\w*)+)(?:\(\))?`", doc))
    missing = []
    for name in sorted(dotted):
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                found = importlib.import_module(".".join(parts[:cut]))
                break
            except ImportError:
                continue
        try:
            for attribute in parts[cut:]:
                found = getattr(found, attribute)
        except AttributeError:
            missing.append(name)
    assert missing == []


def test_every_package_is_on_the_architecture_map():
    """Named by its path, or by its path within a package the map's line is about
    (`engines/static/` in the sandbox's row)."""
    doc = _architecture()
    unnamed = []
    for top in TOP:
        for init in sorted((ROOT / top).rglob("__init__.py")):
            package = init.parent.relative_to(ROOT).as_posix()
            parts = package.split("/")
            if CONVENTIONAL & set(parts) or "__pycache__" in parts:
                continue
            tails = ["/".join(parts[i:]) + "/" for i in range(len(parts))]
            if not any(f"{lead}{tail}" in doc for tail in tails for lead in "`( "):
                unnamed.append(package)
    assert unnamed == []


def test_every_module_of_the_core_and_the_intake_is_in_its_layers_row():
    """The two small packages are mapped module by module, in the layers table's row of
    the package (Django's admin, apps and urls modules aside): a new module of either
    says there what it is for."""
    doc = _architecture()
    unnamed = []
    for package in ("tasuku", "webhooks"):
        [row] = [
            line
            for line in doc.splitlines()
            if line.startswith("|") and f"| `{package}/` |" in line
        ]
        for path in sorted((ROOT / package).glob("*.py")):
            if path.name in ("__init__.py", "admin.py", "apps.py", "urls.py"):
                continue
            if f"`{path.name}`" not in row and f"`{package}/{path.name}`" not in row:
                unnamed.append(f"{package}/{path.name}")
    assert unnamed == []


def test_the_map_names_the_inline_first_run_and_the_error_codes():
    doc = _architecture()
    assert "inline first run" in doc and "`webhooks/tasks.py`" in doc
    assert "`tasuku/errors.py`" in doc and "`tasuku/logs.py`" in doc


def test_every_broad_except_says_why_it_is_broad():
    """`except Exception` (or BaseException, or a bare `except:`) only where a boundary
    needs one — a task, a thread, a door, a cleanup that re-raises — each saying which
    in a comment on its line or the next."""
    broad = re.compile(r"^\s*except(\s+(Exception|BaseException)\b.*)?:")
    silent = []
    for top in TOP:
        for path in sorted((ROOT / top).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            lines = path.read_text().splitlines()
            for number, line in enumerate(lines, 1):
                following = lines[number] if number < len(lines) else ""
                if broad.match(line) and "#" not in line and not following.strip().startswith("#"):
                    silent.append(f"{path.relative_to(ROOT)}:{number}")
    assert silent == []


def test_a_runs_status_changes_only_in_reviews_runs():
    """Every write of a run's status — a claim, a hand-back, a supersede, a dispatch, a
    finish — is a named function of reviews/queue/runs.py (`run_claim`, `run_release`,
    `run_supersede_waiting`, `run_dispatch`, `run_finish`…): read there, they are all
    the states a run can move through."""
    import ast

    writers = []
    for top in ("reviews", "repos", "webhooks", "tasuku"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if "migrations" in path.parts or path == ROOT / "reviews" / "queue" / "runs.py":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                    continue
                if node.func.attr not in ("update", "bulk_update"):
                    continue
                chain = ast.unparse(node.func.value)
                sets_status = any(k.arg == "status" for k in node.keywords) or (
                    node.func.attr == "bulk_update" and "status" in ast.unparse(node)
                )
                if "ReviewRun" in chain and sets_status:
                    writers.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert writers == []


def test_a_reviewers_instructions_never_come_from_a_repository_on_the_review_path():
    """Only the admin and `reviewers_sync` read a reviewers repository: no module of the
    review path (reviews/, sandbox/) names the sync, so nothing a pull request's checkout
    holds can become a reviewer's rules, guidance or skills (.importlinter says so too,
    for indirect imports)."""
    named = [
        str(path.relative_to(ROOT))
        for top in ("reviews", "sandbox")
        for path in sorted((ROOT / top).rglob("*.py"))
        if re.search(r"\breviewer_(sources|sync)\b", path.read_text())
    ]
    assert named == []
    contract = (ROOT / ".importlinter").read_text()
    assert "forbidden_modules =\n    repos.reviewer_sources\n    repos.reviewer_sync" in contract
