"""`manage.py review`: a pull request on GitHub (by its URL, with a person's token:
reviews/local/remote.py) or a local git repository (reviews/local/review.py) reviewed with the same
pipeline as an App's pull requests, reported as text, JSON or SARIF."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connection
from django.db.migrations.executor import MigrationExecutor

from reviews.local.remote import WHAT_AN_APP_ADDS, RemoteReview, pull_review
from reviews.local.reports import fails, report_json, report_sarif, report_text
from reviews.local.review import LocalReview, LocalReviewError, local_review
from sandbox.contract import Severity


def _git(repo: Path, *args: str) -> str | None:
    completed = subprocess.run(  # noqa: S603
        ["git", "-C", str(repo), *args],  # noqa: S607
        capture_output=True,
        check=False,
    )
    if completed.returncode != 0:
        return None
    try:
        return completed.stdout.decode("utf-8")
    except UnicodeDecodeError:
        return None  # not UTF-8: no columns to count


SCP_LIKE = re.compile(r"^(?:[^@/]+@)?(?P<host>[^:/]+):(?P<path>(?!/).*)$")


def remote_uri(url: str, root: Path) -> str | None:
    """A remote URL as an absolute URI with no credentials: `https://token@host/x` loses
    its user and password, `git@host:owner/name.git` becomes `ssh://host/owner/name.git`,
    a local path a `file://` URI. None when it cannot be one."""
    url = url.strip()
    if not url:
        return None
    parts = urlsplit(url)
    if parts.scheme and parts.netloc and len(parts.scheme) > 1:
        host = parts.hostname or ""
        if not host:
            return None
        netloc = host if ":" not in host else f"[{host}]"
        if parts.port:
            netloc += f":{parts.port}"
        return urlunsplit(
            (parts.scheme.lower(), netloc, quote(parts.path, safe="/%~:@!$&'()*+,;="), "", "")
        )
    if parts.scheme == "file":
        return urlunsplit(("file", "", quote(parts.path, safe="/%"), "", ""))
    match = SCP_LIKE.match(url)
    if match and not Path(url).exists():
        return f"ssh://{match['host']}/{quote(match['path'], safe='/%~')}"
    return (root / url).resolve().as_uri()


def repository_uri(root: Path) -> str:
    """The repository's origin as a URI, else the `file://` URI of its root."""
    url = _git(root, "remote", "get-url", "origin")
    return (remote_uri(url, root) if url else None) or root.as_uri()


def _version() -> str:
    try:
        return version("tasuku")
    except PackageNotFoundError:
        return "0"


def _embedded_database() -> bool:
    """Whether the database is the embedded default (SQLite in the project folder)."""
    database = settings.DATABASES["default"]
    return database["ENGINE"].endswith("sqlite3") and Path(str(database["NAME"])) == (
        Path(settings.BASE_DIR) / "db.sqlite3"
    )


def _database_ready(say) -> None:
    """Migrate the embedded SQLite database on first use (a review from a fresh clone
    needs no other step); any other database is the operator's to migrate."""
    if not _embedded_database():
        return
    executor = MigrationExecutor(connection)
    if executor.migration_plan(executor.loader.graph.leaf_nodes()):
        say("Setting up the database (db.sqlite3) for the first review…")
        call_command("migrate", verbosity=0, interactive=False)


class Command(BaseCommand):
    help = (
        "Review a pull request on GitHub (its URL; a token from GITHUB_TOKEN, GH_TOKEN or "
        "`gh auth token`) or the changes of a local git repository (--repo; default: HEAD "
        "against its merge base with the default branch) and print the findings. Exit code "
        "1 when a finding reaches --fail-on, 2 on a usage or repository error."
    )
    requires_system_checks: list[str] = []  # the GitHub settings do not matter here

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "pull_request",
            nargs="?",
            help="a pull request's URL: https://github.com/<owner>/<repo>/pull/<number> "
            "(or your GitHub Enterprise Server's)",
        )
        parser.add_argument("--repo", help="path to a local git repository (instead of a URL)")
        parser.add_argument("--base", help="base ref (default: the merge base with main/master)")
        parser.add_argument("--head", help="head ref (default: HEAD)")
        parser.add_argument("--reviewer", default="static", help="reviewer slug (default: static)")
        parser.add_argument("--format", choices=["text", "json", "sarif"], default="text")
        parser.add_argument(
            "--fail-on",
            choices=[s.value for s in Severity],
            help="exit with 1 when an open finding reaches this severity",
        )
        parser.add_argument(
            "--post",
            action="store_true",
            help="post the review on the pull request (one review with inline comments, as "
            "the token's owner)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        url, repo = options["pull_request"], options["repo"]
        if bool(url) == bool(repo):
            raise CommandError(
                "pass a pull request's URL or --repo PATH (one of them)", returncode=2
            )
        if url and (options["base"] or options["head"]):
            raise CommandError(
                "--base and --head are for --repo: a pull request has its own", returncode=2
            )
        if repo and options["post"]:
            raise CommandError("--post needs a pull request's URL", returncode=2)
        remote: RemoteReview | None = None
        try:
            _database_ready(lambda line: self.stderr.write(line))
            if url:
                remote = pull_review(
                    url=url, reviewer_slug=options["reviewer"], post=options["post"]
                )
                result = remote.review
            else:
                result = local_review(
                    repo=Path(repo),
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
        except (
            Exception
        ) as exc:  # a command's boundary: any failure is its exit status and one line
            stage = getattr(exc, "stage", "") or "review"
            raise CommandError(f"the review failed at {stage}: {exc}", returncode=2) from exc

        if remote is not None:
            review, findings = self.as_data(result, root=None)
            head = remote.review.head_sha
            review["repository_uri"] = f"{remote.address.web_url}/{remote.address.full_name}"
            review["root_uri"] = f"{review['repository_uri']}/blob/{head}/"
            review["pull_request"] = remote.address.url
            mirror = remote.mirror

            def source(path: str) -> str | None:
                if mirror is None or not mirror.is_dir():
                    return None
                return _git(mirror, "show", f"{head}:{path}")
        else:
            top = _git(Path(repo).expanduser(), "rev-parse", "--show-toplevel")
            root = Path(top.strip()) if top else Path(repo).expanduser().resolve()
            review, findings = self.as_data(result, root=root)

            def source(path: str) -> str | None:
                return _git(root, "show", f"{result.head_sha}:{path}")

        output = options["format"]
        if output == "json":
            self.stdout.write(report_json(review, findings, source=source))
        elif output == "sarif":
            self.stdout.write(report_sarif(review, findings, version=_version(), source=source))
        else:
            self.stdout.write(report_text(review, findings), ending="")
        if remote is not None:
            # Beside the report: on stderr, so that JSON and SARIF stay one document.
            said = self.stdout if output == "text" else self.stderr
            said.write(self.pull_said(remote, options["reviewer"]))
        threshold = Severity(options["fail_on"]) if options["fail_on"] else None
        if fails(findings, threshold):
            sys.exit(1)

    @staticmethod
    def pull_said(remote: RemoteReview, reviewer: str) -> str:
        """Where the review went: posted (where, as whom, how), or how to post it."""
        if remote.posted is None:
            return (
                f"Not posted: add --post to publish it on {remote.address.url} as one review "
                f"with inline comments (as the owner of the token from {remote.token_from})."
            )
        posted = remote.posted
        how = (
            "the findings in its body (GitHub refused the inline anchors)"
            if posted.body_only
            else f"{posted.comments} inline comment{'s' if posted.comments != 1 else ''}"
        )
        return f"Posted as @{posted.login}: {posted.url} ({how}). " + WHAT_AN_APP_ADDS.format(
            reviewer=reviewer
        ).replace("*", "")

    @staticmethod
    def as_data(
        result: LocalReview, *, root: Path | None = None
    ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        run, review = result.run, result.review
        rules = {f.path: f.rule for f in result.core.filtered} if result.core else {}
        data = {
            "repository": run.pull_request.repository.full_name,
            "repository_uri": repository_uri(root) if root else "",
            "root_uri": root.as_uri() + "/" if root else "",
            "run": run.pk,
            "base": result.base_sha,
            "head": result.head_sha,
            "incremental": bool(result.incremental_since),
            "incremental_since": result.incremental_since or "",
            "reused_from": result.reused_from,
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
            # Every file the change touches: reviewed (by what), excluded (by which
            # rule), or not reviewed (why) — reviews/scope/coverage.py.
            "coverage": review.coverage,
            "in_full": not review.shortfall
            and not any(e["status"] == "not reviewed" and e["adds"] for e in review.coverage),
            "filtered": [
                {"path": path, "reason": reason, "rule": rules.get(path, "")}
                for path, reason, *_ in run.filtered
            ],
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
                    "original_start_line": finding.original_start_line,
                    "original_end_line": finding.original_end_line,
                    "suppressed_in_pr": finding.suppressed_in_pr,
                    # What a pull request would get as an inline comment of its own (an
                    # open finding may instead be listed in the comment of the same
                    # problem, or be past the comment limit: `suppression_reason` says).
                    "published": finding.published,
                }
            )
        return data, findings
