"""Every write to a review run is in one module, reviews/queue/runs.py: its transitions,
leases and attempts, and what the stages record on it, each named by what it means.
Elsewhere a run is read, never updated (issue 37: a spine somebody owns)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("tasuku", "webhooks", "repos", "reviews", "sandbox")
OWNER = ROOT / "reviews" / "queue" / "runs.py"
# Making a run is intake's (and a local review's): only changing one is held to runs.py.
WRITES = {"update", "bulk_update", "update_or_create"}


def _run_writes(path: Path) -> list[str]:
    """The calls in `path` that write review runs: a write method on a query of
    ReviewRun (`ReviewRun.objects…`, a related `.runs`), or `save` on a run."""
    source = path.read_text()
    tree = ast.parse(source)
    # The module's own functions that return a query of runs (`_unlisted()`).
    queries = {
        f"{node.name}("
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef)
        and any(
            isinstance(inner, ast.Return)
            and inner.value is not None
            and "ReviewRun.objects" in ast.unparse(inner.value)
            for inner in ast.walk(node)
        )
    }
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        method = node.func.attr
        if method not in WRITES and method != "save":
            continue  # (the receiver's text is read only for a call that may write)
        receiver = ast.unparse(node.func.value)
        on_runs = (
            "ReviewRun.objects" in receiver
            or receiver.endswith(".runs")
            or ".runs." in receiver
            or any(receiver.startswith(query) for query in queries)
        )
        if (method in WRITES and on_runs) or (
            method == "save" and receiver.split(".")[-1] in {"run", "review_run"}
        ):
            found.append(f"{path.relative_to(ROOT)}:{node.lineno} {receiver}.{method}(…)")
    return found


def test_no_module_but_reviews_runs_writes_a_review_run():
    writes = [
        write
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts and path != OWNER
        for write in _run_writes(path)
    ]
    assert writes == [], "write through reviews/queue/runs.py instead:\n" + "\n".join(writes)


def test_the_check_finds_a_write_where_there_is_one(tmp_path):
    """The scan above would pass on code it cannot read: it is shown one of each form."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "ReviewRun.objects.filter(pk=1).update(stage='x')\n"
        "review_pass.runs.update(status='failed')\n"
        "run.save(update_fields=['reason'])\n"
        "ReviewRun.objects.filter(pk=1).values_list('stage')\n"
        "def _waiting():\n"
        "    return ReviewRun.objects.filter(status='queued')\n"
        "_waiting().filter(pk=1).update(stage='y')\n"
    )
    global ROOT
    kept, ROOT = ROOT, tmp_path
    try:
        assert [w.split(" ")[1] for w in _run_writes(sample)] == [
            "ReviewRun.objects.filter(pk=1).update(…)",
            "review_pass.runs.update(…)",
            "run.save(…)",
            "_waiting().filter(pk=1).update(…)",
        ]
    finally:
        ROOT = kept
