"""What a run carries through the pipeline (reviews/pipeline.py) and its stages: the run,
its lease and heartbeat, its configuration and mode, and the gateway to GitHub."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from repos.github import GitHubGateway
from repos.policy import EffectiveConfig
from reviews.models import ReviewRun
from reviews.modes import REVIEW, RunMode
from reviews.runs import Heartbeat, Held, run_stage


@dataclass
class Context:
    run: ReviewRun
    held: Held
    beat: Heartbeat
    config: EffectiveConfig
    gateway: GitHubGateway
    mode: RunMode = REVIEW  # what this kind of run adds (reviews/modes.py)
    repository_info: Any = None  # the repository as GitHub described it when cloned
    reused_from: int | None = None  # the run whose engine result this run reuses

    @property
    def repository(self):
        return self.run.pull_request.repository

    @property
    def where(self) -> dict:
        repository = self.repository
        return {
            "installation_id": repository.installation.github_id,
            "repository_id": repository.github_id,
            "full_name": repository.full_name,
        }

    def stage(self, stage: str) -> None:
        self.beat.check()
        run_stage(self.held, stage)
        self.run.stage = stage
