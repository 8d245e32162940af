"""`tasuku-runner`: the review job of a GitHub Actions run Tasuku dispatched.

Run by the workflow (docs/actions/tasuku.yml) after it checked out the repository:

1. asks the runner for an OIDC token whose audience is Tasuku's URL
   (ACTIONS_ID_TOKEN_REQUEST_URL / ACTIONS_ID_TOKEN_REQUEST_TOKEN, which need
   `permissions: id-token: write`), and fetches the job with it;
2. removes those two variables from the environment before anything else runs, so no
   engine can mint a token;
3. builds the workspace as the local runner does: a copy of the checkout at the job's
   head, sanitised (agent instruction files, `.git`, symlinks leading out), and beside
   it each secondary repository of the job, fetched at its pinned commit with the token
   Tasuku handed out beside the job (read-only, that one repository), sanitised the
   same way and made read-only; each token is revoked once its fetch is done, before
   the engine starts, and none is ever in the job, the environment or the log;
4. runs the job's engine in a subprocess with a scrubbed environment that holds only
   the engine's provider key (from the workflow's secrets) and, when the reviewer has
   connectors, the socket of a bridge back to this process: each connector call the
   engine makes is forwarded to Tasuku (`POST /api/runner/connector`, with a fresh
   token), which makes it with the credential it holds (sandbox/connectors.py);
5. writes the findings to the job summary (GITHUB_STEP_SUMMARY) and posts the result
   with a fresh token, retrying network errors and 5xx answers (Tasuku accepts a result
   once, so a repeat is harmless).

It imports no Django: it runs in the Actions job, not in Tasuku.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import requests

from sandbox import progress
from sandbox.connectors import ConnectorBridge, Handler, failed
from sandbox.contract import ConnectorAnswer, ReviewJob, ReviewResult
from sandbox.engines import REGISTRY
from sandbox.errors import StageError

TOKEN_VARIABLES = ("ACTIONS_ID_TOKEN_REQUEST_URL", "ACTIONS_ID_TOKEN_REQUEST_TOKEN")
ATTEMPTS = 5
TIMEOUT = 30


class RunnerError(Exception):
    pass


def log(message: str) -> None:
    print(f"tasuku-runner: {message}", file=sys.stderr, flush=True)


class TokenSource:
    """Mints OIDC tokens for `audience` with the request credentials it was given; they
    live only here once the environment is cleared."""

    def __init__(self, url: str, token: str, audience: str) -> None:
        self._url, self._token, self._audience = url, token, audience

    @classmethod
    def from_environment(cls, audience: str) -> TokenSource:
        url, token = (os.environ.get(name, "") for name in TOKEN_VARIABLES)
        if not url or not token:
            raise RunnerError(
                "no GitHub Actions OIDC token can be requested: the job needs "
                "`permissions: id-token: write` (ACTIONS_ID_TOKEN_REQUEST_URL is not set)"
            )
        return cls(url, token, audience)

    def mint(self) -> str:
        separator = "&" if "?" in self._url else "?"
        answer = _with_retries(
            "request an OIDC token",
            lambda: requests.get(
                f"{self._url}{separator}audience={quote(self._audience, safe='')}",
                headers={"Authorization": f"bearer {self._token}"},
                timeout=TIMEOUT,
            ),
        )
        try:
            return answer.json()["value"]
        except (ValueError, KeyError) as exc:
            raise RunnerError(f"the OIDC token answer has no value: {answer.text[:200]}") from exc


def _with_retries(what: str, call) -> requests.Response:
    """`call()` until it answers below 500, retrying network errors and 5xx with backoff."""
    delay = 1.0
    for attempt in range(1, ATTEMPTS + 1):
        try:
            answer = call()
        except requests.RequestException as exc:
            problem = f"{type(exc).__name__}: {exc}"
        else:
            if answer.status_code < 500:
                if answer.status_code >= 400:
                    raise RunnerError(f"could not {what}: {answer.status_code} {answer.text[:300]}")
                return answer
            problem = f"{answer.status_code} {answer.text[:200]}"
        if attempt == ATTEMPTS:
            raise RunnerError(f"could not {what} after {ATTEMPTS} attempts: {problem}")
        log(f"could not {what} ({problem}); trying again in {delay:.0f} s")
        time.sleep(delay)
        delay = min(delay * 2, 30)
    raise AssertionError("unreachable")


def _post(url: str, tokens: TokenSource, body: dict[str, Any] | None, what: str) -> dict:
    def call():
        return requests.post(
            url,
            json=body or {},
            timeout=TIMEOUT,
            headers={"Authorization": f"Bearer {tokens.mint()}"},
        )

    return _with_retries(what, call).json()


def connector_forward(base: str, tokens: TokenSource, job: ReviewJob) -> Handler:
    """The bridge's handler on a runner: each call goes to Tasuku, once (a connector may
    change something in the team's system: a call is never sent twice), and Tasuku's
    answer comes back to the engine. A failure to reach Tasuku is the model's to read."""
    timeout = max((c.timeout_seconds for c in job.connectors), default=30) + 10

    def handle(name: str, arguments: Any) -> ConnectorAnswer:
        try:
            answer = requests.post(
                f"{base}/api/runner/connector",
                json={"name": name, "input": arguments},
                headers={"Authorization": f"Bearer {tokens.mint()}"},
                timeout=timeout,
            )
        except (requests.RequestException, RunnerError) as exc:
            log(f"connector {name}: Tasuku could not be reached ({type(exc).__name__})")
            return failed(f"Tasuku could not be reached for this call ({type(exc).__name__}).")
        if answer.status_code != 200:
            log(f"connector {name}: Tasuku answered {answer.status_code}")
            return failed(f"Tasuku refused the call (HTTP {answer.status_code}).")
        try:
            return ConnectorAnswer.model_validate(answer.json())
        except ValueError:
            return failed("Tasuku's answer to the call could not be read.")

    return handle


def workspace_build(
    checkout: Path, head_sha: str, into: Path, *, agents: bool = True
) -> tuple[Path, list[str]]:
    """A sanitised copy of the checkout, after checking it is at the job's head
    (`agents`: whether an agent reads it, see `sanitise`)."""
    from sandbox.workspace import sanitise

    if (checkout / ".git").exists():
        found = subprocess.run(
            ["git", "-C", str(checkout), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        if found and found != head_sha:
            raise RunnerError(
                f"the checkout is at {found[:12]}, the job reviews {head_sha[:12]}: check out "
                "the dispatched head (actions/checkout with `ref: ${{ inputs.head_sha }}`)"
            )
    root = into / "checkout"
    shutil.copytree(checkout, root, symlinks=True, ignore=shutil.ignore_patterns(".git"))
    return root, sanitise(root, agents=agents)


def secondaries_fetch(job: ReviewJob, given: Any, into: Path) -> tuple[ReviewJob, list[str]]:
    """Each of the job's secondary repositories, fetched beside the checkout with the
    token Tasuku gave for it, which is then revoked. Returns the job naming only those
    that are there, and a limitation for each of the others."""
    from sandbox.secondaries import mount, unmounted_limitation

    if not job.secondaries:
        return job, []
    access = {g.get("full_name"): g for g in given or () if isinstance(g, dict)}
    kept, missing = [], []
    for secondary in job.secondaries:
        entry = access.get(secondary.full_name)
        if entry is None or entry.get("commit") != secondary.commit:
            why = "Tasuku could not give the runner a way to read it"
            missing.append(unmounted_limitation(secondary.full_name, why))
            continue
        try:
            mounted = mount(
                into,
                full_name=secondary.full_name,
                commit=secondary.commit,
                clone_url=str(entry.get("clone_url", "")),
                token=str(entry.get("token", "")),
            )
            kept.append(secondary)
            log(
                f"mounted {secondary.full_name} at {secondary.commit[:12]} (read-only)"
                + (f"; removed: {', '.join(mounted.removed[:20])}" if mounted.removed else "")
            )
        except (StageError, OSError, ValueError) as exc:
            why = f"the runner could not fetch it ({exc})"
            missing.append(unmounted_limitation(secondary.full_name, why))
            log(f"secondary repository {secondary.full_name} not mounted: {exc}")
        finally:
            token_revoke(entry)
    return job.model_copy(update={"secondaries": tuple(kept)}), missing


def token_revoke(entry: dict) -> None:
    """Revoke a token Tasuku handed out for one fetch (GitHub: DELETE /installation/token
    with the token itself). Best effort: it expires within the hour anyway."""
    api_url, token = str(entry.get("api_url") or ""), str(entry.get("token") or "")
    if not api_url.startswith(("https://", "http://")) or not token:
        return
    try:
        requests.delete(
            f"{api_url.rstrip('/')}/installation/token",
            timeout=TIMEOUT,
            headers={"Authorization": f"token {token}", "Accept": "application/vnd.github+json"},
        )
    except requests.RequestException as exc:
        log(f"could not revoke a secondary repository's token ({type(exc).__name__})")


def with_limitations(result: ReviewResult, limitations: list[str]) -> ReviewResult:
    if not limitations:
        return result
    summary = result.summary.model_copy(
        update={"limitations": [*result.summary.limitations[: 50 - len(limitations)], *limitations]}
    )
    return result.model_copy(update={"summary": summary})


def summary_write(result: ReviewResult | None, text: str) -> None:
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return
    lines = ["## Tasuku review", "", text, ""]
    if result is not None and result.findings:
        lines += ["| Severity | Where | Finding |", "| --- | --- | --- |"]
        for finding in result.findings:
            data = finding if isinstance(finding, dict) else finding.model_dump()
            title = str(data.get("title", "")).replace("|", "\\|")
            where = f"`{data.get('path')}:{data.get('start_line')}`"
            lines.append(f"| {data.get('severity', '')} | {where} | {title} |")
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tasuku-runner", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--url",
        default=os.environ.get("TASUKU_URL", ""),
        help="Tasuku's URL (default: $TASUKU_URL); also the token's audience",
    )
    parser.add_argument("--checkout", default=".", help="the repository checkout (default: .)")
    args = parser.parse_args(argv)
    if not args.url:
        log("Tasuku's URL is not set: pass --url or set TASUKU_URL")
        return 2
    base = args.url.rstrip("/")
    try:
        tokens = TokenSource.from_environment(base)
    except RunnerError as exc:
        log(str(exc))
        return 2
    # From here on no process this runner starts can ask for a token.
    for name in TOKEN_VARIABLES:
        os.environ.pop(name, None)

    try:
        answer = _post(f"{base}/api/runner/job", tokens, None, "fetch the review job")
    except RunnerError as exc:
        log(str(exc))
        return 1
    if answer.get("status") == "cancelled":
        text = f"Not reviewed: {answer.get('reason') or 'the run was cancelled'}."
        log(text)
        summary_write(None, text)
        return 0

    result: ReviewResult | None = None
    failure = ""
    try:
        job = ReviewJob.model_validate(answer["job"])
        engine = answer["engine"]
        with tempfile.TemporaryDirectory(prefix="tasuku-runner-") as scratch:
            root, removed = workspace_build(
                Path(args.checkout), answer["head_sha"], Path(scratch), agents=engine != "static"
            )
            job, missing = secondaries_fetch(job, answer.get("secondaries"), Path(scratch))
            if removed:
                log(f"removed from the workspace: {', '.join(removed[:20])}")
            if job.connectors:
                handler = connector_forward(base, tokens, job)
                with ConnectorBridge(handler, directory=scratch) as bridge:
                    result = engine_run(engine, job, root, connectors=bridge)
            else:
                result = engine_run(engine, job, root)
            result = with_limitations(result, missing)
    except (RunnerError, StageError, KeyError, ValueError) as exc:
        failure = f"{type(exc).__name__}: {exc}"
        log(f"the review failed: {failure}")

    if result is not None:
        text = (
            f"{len(result.findings)} finding(s) for run {answer['run']}; Tasuku validates and "
            "publishes them on the pull request."
        )
        if result.incomplete:
            text += f" The review is incomplete: {result.incomplete}."
        body: dict[str, Any] = {"result": result.model_dump(mode="json")}
    else:
        text = f"The review failed: {failure}"
        body = {"failure": failure}
    summary_write(result, text)
    try:
        posted = _post(f"{base}/api/runner/result", tokens, body, "post the result")
    except RunnerError as exc:
        log(str(exc))
        return 1
    log(f"result {posted.get('status')} for run {posted.get('run')}")
    return 0 if result is not None else 1


def engine_run(
    engine: str, job: ReviewJob, root: Path, connectors: ConnectorBridge | None = None
) -> ReviewResult:
    """The engine in a subprocess with the local runner's limits and a scrubbed
    environment: only the engine's provider key and server (and the connector bridge's
    socket and token)."""
    from sandbox.runners.local import Limits
    from sandbox.runners.local import engine_run as local_run

    if engine not in REGISTRY:
        raise RunnerError(f"unknown engine {engine!r}")
    allow = {n: os.environ[n] for n in REGISTRY[engine].variables if os.environ.get(n)}
    seconds = max(60, int(job.limits.deadline_seconds) + 60)
    return local_run(
        engine,
        job,
        root,
        limits=Limits(wall_seconds=seconds, cpu_seconds=seconds),
        allow_env=allow,
        **({"connectors": connectors} if connectors is not None else {}),
        # The job's log shows each model call, tool call and explorer as it happens.
        on_progress=lambda event: log(progress.described(event)),
    )


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
