"""A reviewer's definition as data: what of a `ReviewerConfig` makes a revision, its
canonical form and content hash, and the difference between two definitions.

Pure: no database. A `ReviewerRevision` row (repos/models.py) keeps one definition with
its hash; `repos.services.revision_record` writes them, and every run records the one it
was given (docs/reviewers.md, *Revisions*).
"""

from __future__ import annotations

import difflib
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from repos.policy import ReviewerConfig

# What a revision holds: everything a run's `ReviewerConfig` carries that shapes the
# prompt or what the engine may do, and nothing about where it runs. Left out: the slug
# (the reviewer's name), the runner (a repository's policy may override it; it changes
# where the review runs, not what it is told), and of the connectors their definitions
# (a connector is its own admin object, edited apart): only which ones the reviewer may
# call. The API key is never part of anything recorded.
DEFINITION_FIELDS = (
    "engine",
    "model",
    "triage_model",
    "explorer_model",
    "base_url",
    "rules",
    "skills",
    "skill_documents",
    "cost_cap_usd",
    "step_limit",
    "context_budget_tokens",
    "max_output_tokens",
    "explorer_limit",
    "web_research",
    "connectors",
)

# The fields a reviewers repository writes (repos/reviewer_sources.py); the rest stay
# the admin's.
SYNCED_FIELDS = ("rules", "skills", "skill_documents")

LABELS = {"skills": "guidance", "skill_documents": "skills", "connectors": "connectors"}


def definition(config: ReviewerConfig) -> dict[str, Any]:
    """The reviewer's definition in canonical JSON form: plain values, skills as
    `{name, description, body}` in name order, connectors as their names."""
    dumped = config.model_dump(mode="json", include=set(DEFINITION_FIELDS) - {"connectors"})
    dumped["skill_documents"] = sorted(dumped["skill_documents"], key=lambda s: s["name"])
    dumped["connectors"] = sorted(c.name for c in config.connectors)
    return dumped


def digest(values: dict[str, Any]) -> str:
    """The definition's content hash: sha256 of its canonical JSON."""
    text = json.dumps(values, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def config_digest(config: ReviewerConfig) -> str:
    return digest(definition(config))


@dataclass(frozen=True)
class Change:
    """One field that differs: its label and the lines that show how (a unified diff
    for text, `old → new` for a value)."""

    field: str
    lines: tuple[str, ...]


def _text_lines(old: str, new: str, name: str) -> tuple[str, ...]:
    return tuple(
        line.rstrip("\n")
        for line in difflib.unified_diff(
            old.splitlines(), new.splitlines(), f"{name} (then)", f"{name} (now)", lineterm=""
        )
    )


def _skills_text(skills: list[dict[str, Any]]) -> dict[str, str]:
    return {s["name"]: f"{s.get('description', '')}\n\n{s.get('body', '')}" for s in skills}


def diff(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    """How `new` differs from `old`, field by field in the definition's order (a field
    one of them lacks, from a revision made before the field existed, counts as empty)."""
    changes = []
    for field in DEFINITION_FIELDS:
        before, after = old.get(field), new.get(field)
        if before == after:
            continue
        label = LABELS.get(field, field.replace("_", " "))
        if field == "skill_documents":
            then, now = _skills_text(before or []), _skills_text(after or [])
            lines: list[str] = []
            for name in sorted(then.keys() | now.keys()):
                if then.get(name) == now.get(name):
                    continue
                if name not in then:
                    lines.append(f"+ skill {name} added")
                elif name not in now:
                    lines.append(f"- skill {name} removed")
                lines.extend(_text_lines(then.get(name, ""), now.get(name, ""), f"skill {name}"))
            changes.append(Change(label, tuple(lines)))
        elif isinstance(before, str) and isinstance(after, str) and field in ("rules", "skills"):
            changes.append(Change(label, _text_lines(before, after, label)))
        else:
            changes.append(Change(label, (f"{_shown(before)} → {_shown(after)}",)))
    return changes


def _shown(value: Any) -> str:
    if value in (None, "", []):
        return "(none)"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)
