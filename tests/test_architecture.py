"""The seams hold: the pipeline names no feature, and what plugs in by dotted path
resolves. (The layers and the absence of import circles are checked by `make lint`,
with import-linter's contracts in .importlinter.)"""

from __future__ import annotations

import re
from pathlib import Path

from django.utils.module_loading import import_string

from reviews import engines
from reviews.modes import REVIEW, RunMode
from reviews.passes.mode import PASS

ROOT = Path(__file__).resolve().parent.parent


def test_the_pipeline_names_no_feature():
    text = (ROOT / "reviews" / "pipeline.py").read_text()
    for word in ("review_pass", "passes", "Runner.ACTIONS", "actions", "author_bot"):
        assert not re.search(rf"\b{re.escape(word)}\b", text), word


def test_every_dispatcher_resolves_to_a_callable():
    for runner, path in engines.DISPATCHERS.items():
        assert callable(import_string(path)), runner
    assert engines.dispatcher_for("local") is None


def test_both_modes_give_everything_a_run_mode_declares():
    declared = {n for n in vars(RunMode) if not n.startswith("_")} | set(RunMode.__annotations__)
    assert declared >= {"fresh_look", "earlier_context", "rulings_settle", "after"}
    for mode in (REVIEW, PASS):
        assert all(hasattr(mode, name) for name in declared), mode
