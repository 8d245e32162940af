"""Reviewer engines. Each takes a `ReviewJob` and the sanitised checkout and returns a
`ReviewResult`; they run inside a runner (sandbox/runners), never in the web or worker
process itself."""

from __future__ import annotations

ENGINES = {
    "static": "sandbox.engines.static:review",
    "anthropic": "sandbox.agent.anthropic_api:review",
    "openai": "sandbox.agent.openai_api:review",
    "claude-code": "sandbox.engines.cli:review_claude_code",
    "codex": "sandbox.engines.cli:review_codex",
}
