"""The `claude-code` and `codex` engines: a vendor's coding-agent CLI, run headless on the
checkout with read-only tools, asked for one JSON answer matching `Submission`.

Both run as a subprocess of the engine (its own process group, a deadline inside the
job's) with a fresh throwaway HOME holding the prompt files, and an environment of PATH,
HOME, locale, the one API key and, when the worker gave them, the provider's server and
the runner's egress proxy. What the CLI prints is parsed here: its usage, a transcript of
what it read, and its answer, whose findings stay raw dicts for the validation gate. A
bound reached without an answer (turns, budget, deadline) makes an incomplete review; a
provider's refusal (bad key, unknown model, rate limit) a `ProviderError`; a CLI that is
missing or breaks otherwise a `SandboxError`.

- `base`: the life every CLI engine shares (`CliEngine`): its HOME, skills and
  connectors, the run under the deadline, the result; each engine is a subclass;
- `common`: environment, running a CLI, reading its answer, its errors, the result;
- `claude`: Claude Code's command line and output;
- `codex`: Codex CLI's command line and output.

The command lines and output shapes were checked against Claude Code 2.1.197 and Codex
CLI 0.171.0 (tests/fixtures/cli/README.md).
"""

from __future__ import annotations

from sandbox.engines.cli.claude import (
    claude_command,
    claude_environment,
    claude_result,
    claude_watch,
    review_claude_code,
)
from sandbox.engines.cli.codex import (
    codex_command,
    codex_config,
    codex_environment,
    codex_output_schema,
    codex_result,
    codex_step_watch,
    review_codex,
)
from sandbox.engines.cli.common import (
    DEFAULT_PATH,
    Run,
    cli_run,
    cli_timeout,
    json_object_extract,
    submission_read,
)

__all__ = [
    "DEFAULT_PATH",
    "Run",
    "claude_command",
    "claude_environment",
    "claude_result",
    "claude_watch",
    "cli_run",
    "cli_timeout",
    "codex_command",
    "codex_config",
    "codex_environment",
    "codex_output_schema",
    "codex_result",
    "codex_step_watch",
    "json_object_extract",
    "review_claude_code",
    "review_codex",
    "submission_read",
]
