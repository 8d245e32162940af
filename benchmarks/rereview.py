"""Re-reviews: what a push of three files and the same head asked again cost.

    .venv/bin/python benchmarks/rereview.py [--files 400] [--history 40]
                                            [--port 0] [--database postgres]

Starts the fake GitHub (tests/fakes) with one repository of `--files` Python files and
shell scripts and `--history` commits, opens a pull request that changes ten files, and
puts review runs of the `static` reviewer (local runner) through the whole pipeline
(`run_execute`: check run, checkout, filters, engine, validation, publication):

1. the first review (the checkout cache is cold);
2. a push of three files, reviewed incrementally — with the checkout cache, and again on
   a second pull request with the cache off (`TASUKU_CHECKOUT_CACHE=off`);
3. the same head asked again (`@app review` with nothing pushed): the engine's result is
   reused.

Beside them: the bare tools (ruff and shellcheck) on the three changed files alone, the
floor; and a checkout of the pushed head from the warm mirror against a fresh clone.
GitHub's pacing between requests is off (Tasuku's own cost, not GitHub's pace).

--database (benchmarks/isolation.py): by default a new PostgreSQL database of a unique
name, dropped at the end; one named that was there is emptied first and never dropped.
The fake GitHub listens on --port (default: a free port).
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.isolation import arguments, own_database  # noqa: E402

APP_ID = 4242
INSTALLATION = 77
REPO = "bench/shop"
REPO_ID = 5006


def module(n: int, variant: int = 0) -> str:
    lines = [f'"""Module {n}."""', "", "import os", ""]
    for f in range(40):
        lines += [f"def f{f}(x):", f"    return x * {f + variant} + len(os.sep)", ""]
    return "\n".join(lines) + "\n"


def script(n: int, variant: int = 0) -> str:
    body = "\n".join(f'echo "step {i} {variant}" >> "$LOG"' for i in range(60))
    return f'#!/bin/bash\nset -euo pipefail\nLOG="/tmp/log{n}"\n{body}\n'


def tree(files: int, variant: int = 0) -> dict[str, str]:
    out: dict[str, str] = {"README.md": "# Shop\n"}
    for n in range(files):
        if n % 20 == 19:
            out[f"scripts/s{n}.sh"] = script(n, variant)
        else:
            out[f"pkg/m{n // 50}/mod{n}.py"] = module(n, variant)
    return out


def timed(fn, *args) -> tuple[float, object]:
    started = time.perf_counter()
    value = fn(*args)
    return time.perf_counter() - started, value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=400)
    parser.add_argument("--history", type=int, default=40)
    arguments(parser, port="the fake GitHub's port")
    args = parser.parse_args()
    with own_database(args.database, script="rereview", keep=args.keep_database) as db:
        os.environ["DATABASE_URL"] = db.url  # before Django reads it
        return run(args)


def run(args: argparse.Namespace) -> int:

    from tests.fakes.github import FakeGitHub, Pull, rsa_keypair

    fake = FakeGitHub(port=args.port).start()
    private, public = rsa_keypair()
    fake.add_app(APP_ID, public, "tasuku-bench")
    fake.add_installation(INSTALLATION, "bench")
    repo, git = fake.add_git_repo(REPO, installation_id=INSTALLATION, repo_id=REPO_ID)
    files = tree(args.files)
    base = git.commit(files, message="base", branch="main")
    for h in range(args.history):  # history, so that a full fetch and an increment differ
        base = git.commit({"README.md": f"# Shop\n\nRelease {h}.\n"}, parent=base, branch="main")
    names = sorted(p for p in files if p != "README.md")
    changed = names[:10]

    def push(pull: Pull, paths: list[str], variant: int) -> str:
        new = {p: (script if p.endswith(".sh") else module)(0, variant) for p in paths}
        sha = git.commit(
            new, parent=pull.head_sha, message=f"v{variant}", branch=f"pr{pull.number}"
        )
        pull.head_sha = sha
        repo.commits.add(sha)
        return sha

    pulls = {}
    for number in (1, 2):
        pull = fake.add_pull(
            REPO, Pull(number=number, title="Refunds", head_sha=base, base_sha=base)
        )
        push(pull, changed, 1)
        pulls[number] = pull

    cache = Path(tempfile.mkdtemp(prefix="tasuku-bench-mirrors-"))
    os.environ.update(
        DJANGO_SETTINGS_MODULE="tasuku.settings",
        GITHUB_API_URL=fake.url,
        GITHUB_APP_ID=str(APP_ID),
        GITHUB_APP_SLUG="tasuku-bench",
        GITHUB_PRIVATE_KEY=private,
        GITHUB_WEBHOOK_SECRET="bench",
        LOG_LEVEL="WARNING",
        TASUKU_CHECKOUT_CACHE=str(cache),
    )
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    settings.GITHUB_SECONDS_BETWEEN_WRITES = "0"
    from repos import github
    from repos.github import RepoRef
    from repos.models import Installation, Repository, Reviewer
    from repos.selectors import effective_config
    from repos.services import installation_upsert, repository_upsert
    from reviews.models import PullRequest, Review, ReviewRun, RunStatus
    from reviews.pipeline.flow import run_execute
    from sandbox.workspace import Workspace

    call_command("migrate", verbosity=0)
    ReviewRun.objects.all().delete()
    PullRequest.objects.all().delete()
    Repository.objects.all().delete()
    Installation.objects.all().delete()
    Reviewer.objects.update_or_create(slug="static", defaults={"engine": "static", "runner": "local",
                                                               "enabled": True})  # fmt: skip
    installation = installation_upsert(github_id=INSTALLATION, account_login="bench",
                                       account_type="Organization")  # fmt: skip
    repository = repository_upsert(installation=installation, github_id=REPO_ID, full_name=REPO,
                                   default_branch="main")  # fmt: skip
    Repository.objects.filter(pk=repository.pk).update(enabled=True)
    repository.refresh_from_db()
    static = Reviewer.objects.get(slug="static")

    def review(number: int, trigger: str) -> tuple[float, ReviewRun]:
        pull = pulls[number]
        row, _ = PullRequest.objects.update_or_create(
            repository=repository, number=number,
            defaults={"title": pull.title, "author_login": "dev", "author_type": "User",
                      "head_sha": pull.head_sha, "base_sha": base, "head_ref": f"pr{number}",
                      "base_ref": "main", "state": "open"},
        )  # fmt: skip
        run = ReviewRun.objects.create(
            pull_request=row, reviewer=static, head_sha=pull.head_sha, base_sha=base,
            trigger=trigger, status=RunStatus.QUEUED,
            config=effective_config(repository).model_dump(mode="json"),
        )  # fmt: skip
        seconds, outcome = timed(run_execute, run.pk)
        run.refresh_from_db()
        if run.status != RunStatus.COMPLETED:
            raise SystemExit(f"run {run.pk} {run.status}: {run.reason}")
        return seconds, run

    print(f"repository: {args.files} files, {args.history + 1} commits on main; the pull "
          f"request changes {len(changed)} files, the push 3")  # fmt: skip
    first, _ = review(1, "opened")
    print(f"first review (cold checkout cache)            {first:6.2f} s")
    push(pulls[1], changed[:3], 2)
    warm, inc = review(1, "synchronize")
    assert inc.incremental_since, "the push should be reviewed incrementally"
    print(f"push of 3 files, incremental, warm cache      {warm:6.2f} s")
    again, reused = review(1, "command")
    notes = Review.objects.get(run=reused).notes
    assert notes and "did not run again" in notes[0], notes
    print(f"same head asked again (engine result reused)  {again:6.2f} s")

    settings.TASUKU_CHECKOUT_CACHE = "off"
    review(2, "opened")
    push(pulls[2], changed[:3], 2)
    cold, _ = review(2, "synchronize")
    print(f"push of 3 files, incremental, cache off       {cold:6.2f} s")
    settings.TASUKU_CHECKOUT_CACHE = str(cache)

    # The checkout alone: the pushed head from the warm mirror against a fresh clone.
    token = github.gateway().contents_token(RepoRef(INSTALLATION, REPO_ID, REPO))
    url = f"{fake.url}/{REPO}.git"
    head = pulls[1].head_sha

    def checkout(mirror):
        with Workspace() as ws:
            ws.checkout(clone_url=url, token=token, head_sha=head, base_sha=base,
                        previous_sha=head, mirror=mirror)  # fmt: skip

    fresh_s, _ = timed(checkout, None)
    mirror_s, _ = timed(checkout, cache / f"{REPO_ID}.git")
    print(f"checkout of the head: fresh clone {fresh_s:.2f} s, from the mirror {mirror_s:.2f} s")

    # The floor: the bare tools on the three changed files.
    work = Path(tempfile.mkdtemp(prefix="tasuku-bench-bare-"))
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(git.git_dir), str(work / "c")],  # noqa: S603, S607
                   check=True)  # fmt: skip
    subprocess.run(["git", "-C", str(work / "c"), "checkout", "-q", head], check=True)  # noqa: S603, S607
    three = changed[:3]
    python = [p for p in three if p.endswith(".py")]
    shell = [p for p in three if p.endswith(".sh")]
    venv_bin = Path(sys.executable).parent

    def bare():
        if python:
            subprocess.run(
                [str(venv_bin / "ruff"), "check", "--no-cache", "--exit-zero", *python],
                cwd=work / "c",
                capture_output=True,
                check=False,
            )  # noqa: S603
        subprocess.run([str(venv_bin / "detect-secrets"), "scan", *three], cwd=work / "c",  # noqa: S603
                       capture_output=True, check=False)  # fmt: skip
        if shell and shutil.which("shellcheck"):
            subprocess.run(["shellcheck", *shell], cwd=work / "c", capture_output=True,  # noqa: S603, S607
                           check=False)  # fmt: skip

    floor, _ = timed(bare)
    print(
        f"bare tools on the 3 files (ruff, detect-secrets{', shellcheck' if shell else ''}) {floor:6.2f} s"
    )
    print(f"incremental review / bare tools: {warm / floor:.1f}x with the cache, "
          f"{cold / floor:.1f}x without; same head again: {again / floor:.1f}x")  # fmt: skip
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(cache, ignore_errors=True)
    fake.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
