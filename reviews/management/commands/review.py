"""Review a local git repository with the same pipeline as a pull request."""

from __future__ import annotations

import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from reviews.local import LocalReview, LocalReviewError, local_review
from reviews.reports import fails, report_json, report_sarif, report_text
from sandbox.contract import Severity


def _version() -> str:
    try:
        return version("tasuku")
    except PackageNotFoundError:
        return "0"


class Command(BaseCommand):
    help = (
        "Review the changes of a local git repository (default: HEAD against its merge base "
        "with the default branch) and print the findings. Exit code 1 when a finding "
        "reaches --fail-on, 2 on a usage or repository error."
    )
    requires_system_checks: list[str] = []  # the GitHub settings do not matter here

    def add_arguments(self, parser) -> None:
        parser.add_argument("--repo", required=True, help="path to a git repository")
        parser.add_argument("--base", help="base ref (default: the merge base with main/master)")
        parser.add_argument("--head", help="head ref (default: HEAD)")
        parser.add_argument("--reviewer", default="static", help="reviewer slug (default: static)")
        parser.add_argument("--format", choices=["text", "json", "sarif"], default="text")
        parser.add_argument(
            "--fail-on",
            choices=[s.value for s in Severity],
            help="exit with 1 when an open finding reaches this severity",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            result = local_review(
                repo=Path(options["repo"]),
                base=options["base"],
                head=options["head"],
                reviewer_slug=options["reviewer"],
            )
        except LocalReviewError as exc:
            raise CommandError(str(exc), returncode=2) from exc
        except DatabaseError as exc:
            raise CommandError(
                f"the database is not ready ({str(exc).splitlines()[0]}): run `python manage.py migrate`",
                returncode=2,
            ) from exc
        except Exception as exc:
            stage = getattr(exc, "stage", "") or "review"
            raise CommandError(f"the review failed at {stage}: {exc}", returncode=2) from exc

        review, findings = self.as_data(result)
        output = options["format"]
        if output == "json":
            self.stdout.write(report_json(review, findings))
        elif output == "sarif":
            self.stdout.write(report_sarif(review, findings, version=_version()))
        else:
            self.stdout.write(report_text(review, findings), ending="")
        threshold = Severity(options["fail_on"]) if options["fail_on"] else None
        if fails(findings, threshold):
            sys.exit(1)

    @staticmethod
    def as_data(result: LocalReview) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        run, review = result.run, result.review
        data = {
            "repository": run.pull_request.repository.full_name,
            "repository_uri": Path(run.pull_request.repository.full_name).as_posix(),
            "run": run.pk,
            "base": result.base_sha,
            "head": result.head_sha,
            "incremental": bool(result.incremental_since),
            "incremental_since": result.incremental_since or "",
            "state": review.state,
            "engine": review.engine,
            "triage": review.triage,
            "guidelines": review.guidelines,
            "inspected_areas": review.inspected_areas,
            "important_files": review.important_files,
            "validation": review.validation,
            "context_sources": review.context_sources,
            "confidence": review.confidence,
            "limitations": review.limitations,
            "reviewed": run.reviewed,
            "filtered": run.filtered,
            "omitted": run.omitted,
        }
        findings = []
        for finding in [*review.findings.all(), *result.reconciled]:
            findings.append(
                {
                    "path": finding.path,
                    "start_line": finding.start_line,
                    "end_line": finding.end_line,
                    "side": finding.side,
                    "severity": finding.severity,
                    "category": finding.category,
                    "title": finding.title,
                    "body": finding.body,
                    "evidence": finding.evidence,
                    "suggestion": finding.suggestion,
                    "confidence": finding.confidence,
                    "blocking": finding.blocking,
                    "fingerprint": finding.fingerprint,
                    "state": finding.state,
                    "suppression_reason": finding.suppression_reason or finding.resolution,
                    "rule": finding.rule,
                    "first_seen_sha": finding.first_seen_sha,
                }
            )
        return data, findings
