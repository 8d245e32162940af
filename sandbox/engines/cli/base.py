"""The life every CLI engine shares, in one place (`CliEngine.review`): the connectors it
can offer and the prompt; a throwaway HOME with the environment, the reviewer's skills
and the connectors' spec; the CLI run under the job's deadline; its output read into a
`ReviewResult`. An engine says only what differs: its CLI's environment, its command
line and files, how it is watched, and what its output means (an `Outcome`)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from sandbox.contract import ReviewJob, ReviewResult, TranscriptEntry, Usage
from sandbox.engines import Provider
from sandbox.engines.cli.common import (
    SUBMISSION_SCHEMA,
    Run,
    base_environment,
    cli_failure,
    cli_run,
    cli_timeout,
    json_lines,
    note,
    provider_error,
    result_build,
)
from sandbox.engines.cli.extras import (
    ConnectorCalls,
    connectors_offered,
    connectors_spec_write,
    skills_install,
)
from sandbox.errors import ProviderError, SandboxError
from sandbox.prompt import Prompt, review_prompt


@dataclass(frozen=True)
class Launch:
    """How the CLI is started: its command line, and the variables it needs beyond the
    engine's environment (its connectors' server's)."""

    command: list[str]
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    """What a CLI's output says: its usage, what it did (after the connectors' notes,
    which the shared result puts first), its answer (None: none), and why it stopped
    without one ("" when it did not)."""

    usage: Usage
    transcript: list[TranscriptEntry]
    answer: object | None = None
    stopped: str = ""


class CliEngine:
    """One vendor's coding-agent CLI as a reviewer engine."""

    name: ClassVar[str]  # the engine's name (sandbox/engines REGISTRY)
    program: ClassVar[str]  # the CLI's program
    provider: ClassVar[Provider]  # whose API the CLI calls
    skills_folder: ClassVar[Path]  # where the CLI loads a user's skills, under HOME

    def review(self, job: ReviewJob, root: Path) -> ReviewResult:
        """The engine's run on the checkout at `root`."""
        job, unreachable = connectors_offered(job)
        prompt = review_prompt(job, finish="json", schema=SUBMISSION_SCHEMA)
        with tempfile.TemporaryDirectory(prefix=f"tasuku-{self.program}-") as folder:
            home = Path(folder)
            env = self.environment(folder)  # a missing key stops it before anything is written
            skills_install(job.skill_documents, home / self.skills_folder)
            spec = connectors_spec_write(job, home, prompt.boundary) if job.connectors else None
            launch = self.launch(job, root, home, prompt, spec)
            run = cli_run(
                launch.command,
                cwd=root,
                env=env | launch.env,
                stdin=prompt.user,
                timeout=cli_timeout(job.limits),
                watch=self.watch(job, prompt),
            )
            last_message = self.last_message(home)
            calls = ConnectorCalls(home if job.connectors else None, [unreachable])
        return self.result(job, run, calls=calls, last_message=last_message)

    def result(
        self,
        job: ReviewJob,
        run: Run,
        *,
        calls: ConnectorCalls | None = None,
        last_message: str = "",
    ) -> ReviewResult:
        """A ReviewResult from what the CLI printed (and `last_message`, its answer as it
        wrote it to a file), with the connector calls the MCP server logged (`calls`) in
        place of the CLI's own record of them."""
        calls = calls or ConnectorCalls(None)
        outcome = self.read(job, run, json_lines(run.stdout), calls, last_message)
        return result_build(
            self.name,
            job,
            outcome.answer,
            outcome.usage.model_copy(update={"connectors": calls.usage}),
            [note(text, error=True) for text in calls.notes] + outcome.transcript,
            incomplete=f"the {self.name} CLI {outcome.stopped}" if outcome.stopped else "",
        )

    def environment(self, home: str, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
        """PATH, HOME, locale and the proxy; the CLI's credentials; the provider's server
        when the worker names one."""
        env = base_environment(home, environ) | self.credentials(environ)
        if environ.get(self.provider.url_variable):
            env[self.provider.url_variable] = environ[self.provider.url_variable]
        return env

    # --- What each engine says ---------------------------------------------------------

    def credentials(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The variables that let the CLI call its provider."""
        raise NotImplementedError

    def launch(
        self, job: ReviewJob, root: Path, home: Path, prompt: Prompt, spec: Path | None
    ) -> Launch:
        """The files the CLI reads in `home` (written here), and how it is started;
        `spec`: the connectors' server's spec, when the job offers connectors."""
        raise NotImplementedError

    def watch(self, job: ReviewJob, prompt: Prompt) -> Callable[[str], str]:
        """What stops the CLI early, shown each line of its output."""
        raise NotImplementedError

    def last_message(self, home: Path) -> str:
        """The answer the CLI wrote to a file in `home`, if it writes one."""
        return ""

    def read(
        self, job: ReviewJob, run: Run, events: list[dict], calls: ConnectorCalls, last_message: str
    ) -> Outcome:
        """What the CLI's output `events` mean; raises the provider's refusal
        (`refused`) or the CLI's failure (`failed`)."""
        raise NotImplementedError

    # --- Failures, in the engine's name ------------------------------------------------

    def refused(self, message: str, status: int | None = None) -> ProviderError:
        return provider_error(self.name, message, status)

    def failed(self, run: Run) -> SandboxError:
        return cli_failure(self.name, run)
