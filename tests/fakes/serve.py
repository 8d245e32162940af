"""Try Tasuku without GitHub: serve the fake GitHub and send Tasuku real, signed webhooks.

    .venv/bin/python -m tests.fakes.serve --write-env     # terminal 1
    make run                                              # terminal 2

The first command starts the fake GitHub server (the one the test suite uses) on a free
port (or --port) with a test App, an installation and a real git repository holding one
pull request (it adds a shell command run through `shell=True`, an AWS key and an
unquoted shell variable); writes the matching GITHUB_* settings to `.env` (with
--write-env, or --env-file PATH; otherwise it prints them); waits for Tasuku to answer on
--tasuku (http://127.0.0.1:8000); then sends `installation.created` and
`pull_request.opened` deliveries, signed with the App's webhook secret, and reports every
check run and review Tasuku posts on the fake GitHub, with the address of the pull
request's page there. Press Enter to push a new commit to the pull request (a
`pull_request.synchronize`). Ctrl-C, or any stop signal, takes the settings out of `.env`.

Each run is a repository of its own (`acme/shop-<date-time>`): new to a Tasuku that saw
the last one, so its pull request is reviewed afresh, by every reviewer that is the
default for new repositories.
"""

from __future__ import annotations

import argparse
import json
import queue
import secrets
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

from tests.fakes.github import FakeGitHub, rsa_keypair
from tests.fakes.github.payloads import installation_payload, pull_request_payload
from tests.gitworld import INSTALLATION, world_build
from webhooks.signature import signature_for

ROOT = Path(__file__).resolve().parents[2]
APP_ID = 4242


def _post(tasuku: str, secret: str, event: str, payload: dict) -> int:
    body = json.dumps(payload).encode()
    request = urllib.request.Request(  # noqa: S310  (an http URL the user gave)
        f"{tasuku}/webhooks/github",
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": str(uuid.uuid4()),
            "X-GitHub-Hook-ID": "1",
            "X-Hub-Signature-256": signature_for(secret, body),
            "User-Agent": "GitHub-Hookshot/fake",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _ping(fake: FakeGitHub, tasuku: str) -> dict:
    """The ping GitHub sends an App's webhook URL (the App's hook, as its published
    schema describes it)."""
    hook_id = 1
    return {
        "zen": "Keep it logically awesome.",
        "hook_id": hook_id,
        "hook": {
            "type": "App", "id": hook_id, "name": "web", "active": True, "app_id": APP_ID,
            "events": ["issue_comment", "pull_request", "pull_request_review_comment"],
            "config": {"content_type": "json", "url": f"{tasuku}/webhooks/github",
                       "insecure_ssl": "0"},
            "updated_at": "2026-01-01T00:00:00Z", "created_at": "2026-01-01T00:00:00Z",
            "url": f"{fake.url}/app/hook/config", "ping_url": f"{fake.url}/app/hook/pings",
            "deliveries_url": f"{fake.url}/app/hook/deliveries",
        },
    }  # fmt: skip


# What each press of Enter pushes: first a fix for the shell command (its thread gets
# "Verified fixed" and is resolved; the others stay), then the key removed with the
# code around it, then a file with a new problem.
PUSHES = [
    (
        "fix the shell command in app/payments.py",
        {
            "app/payments.py": 'import subprocess\n\nAWS_ACCESS_KEY_ID = "AKIAZ2Q7WJ4KXN5BL3TP"\n\n\n'
            "def refund(order_id):\n"
            '    return subprocess.call(["refund", "--order", str(order_id)])\n'
        },
    ),
    (
        "remove the hard-coded key",
        {
            "app/payments.py": "import subprocess\n\n\ndef refund(order_id):\n"
            '    return subprocess.call(["refund", "--order", str(order_id)])\n'
        },
    ),
    (
        "add app/debug.py with a breakpoint left in",
        {"app/debug.py": "def handler(event):\n    breakpoint()\n    return event\n"},
    ),
]


def scripted_reviewer(request):
    """The fake model's review: it reads each Python file it is shown, then submits a
    finding on every `shell=True` it read (a stand-in for a real model, for the demo)."""
    from tests.fakes.models import ToolCall

    text = json.dumps(request.messages)
    read = [r.content for r in request.tool_results]
    if not read and "app/payments.py" in text:
        return ToolCall("read_file", {"path": "app/payments.py"}, usage=(12_000, 120))
    findings = []
    for content in read:
        for line in content.splitlines()[1:]:
            number, _, code = line.partition("\t")
            if "shell=True" in code:
                findings.append({
                    "path": content.split(" ", 1)[0], "start_line": int(number),
                    "end_line": int(number), "severity": "high", "category": "security",
                    "title": "An order id reaches a shell",
                    "body": "`refund --order 1; rm -rf /` would run: the f-string goes to a shell. "
                            "Pass a list of arguments without shell=True.",
                    "confidence": 0.9, "blocking": True,
                })  # fmt: skip
    return ToolCall("submit_review", {"findings": findings}, usage=(14_000, 400))


def _stop_on(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # every stop takes the same way out: through `finally`


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--port", type=int, default=0, help="the fake GitHub's port (default: any free one)"
    )
    parser.add_argument(
        "--tasuku",
        default="http://127.0.0.1:8000",
        help="where Tasuku answers (default: http://127.0.0.1:8000, `make run`'s)",
    )
    parser.add_argument(
        "--write-env", action="store_true", help="write the settings to the project's .env"
    )
    parser.add_argument(
        "--env-file",
        type=Path,
        help="write the settings to this file instead (implies --write-env)",
    )
    parser.add_argument(
        "--model-api",
        action="store_true",
        help="also serve a fake Anthropic API (on a free port) whose scripted model reviews",
    )
    return parser.parse_args()


def main() -> None:
    args = _arguments()
    env_file = args.env_file or (ROOT / ".env" if args.write_env else None)
    # SIGINT too: Python leaves it ignored when the demo's parent ignored it (a script's
    # background job, a process that runs children with stop signals ignored), and then
    # Ctrl-C would not stop it.
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, _stop_on)

    private, public = rsa_keypair()
    secret = secrets.token_hex(16)
    try:
        fake = FakeGitHub(port=args.port).start()
    except OSError as exc:
        sys.exit(
            f"Cannot serve the fake GitHub on port {args.port} ({exc.strerror}): leave --port "
            "out for any free port, or name another."
        )
    fake.add_app(APP_ID, public, "tasuku-demo")
    # Commits dated now, in a repository of this run's own: new to a Tasuku that reviewed
    # the last run's, which the default reviewers reach as they reach any new repository.
    now = time.time_ns() // 1_000_000  # milliseconds: two runs within a second differ too
    clock = now // 1000
    stamp = time.strftime("%m%d-%H%M%S", time.localtime(clock))
    full_name = f"acme/shop-{stamp}-{now % 1000:03d}"
    world = world_build(fake, clock=clock, full_name=full_name, repo_id=now)
    pull = world.pull

    settings = {
        "GITHUB_API_URL": fake.url,
        "GITHUB_APP_ID": str(APP_ID),
        "GITHUB_APP_SLUG": "tasuku-demo",
        "GITHUB_WEBHOOK_SECRET": secret,
        "GITHUB_PRIVATE_KEY": private.replace("\n", "\\n"),
    }
    if args.model_api:
        from tests.fakes.models import ANTHROPIC_TEST_KEY, FakeAnthropic, Loop

        model_api = FakeAnthropic(port=0).start()
        model_api.script(Loop(scripted_reviewer))
        settings["ANTHROPIC_BASE_URL"] = model_api.base_url
        settings["ANTHROPIC_API_KEY"] = ANTHROPIC_TEST_KEY
        print(f"Fake Anthropic API on {model_api.base_url}.")
    lines = "".join(f'{k}="{v}"\n' for k, v in settings.items())
    page = f"{fake.url}/{full_name}/pull/{pull.number}"
    print(f"Fake GitHub on {fake.url} (App {APP_ID}, installation {INSTALLATION}, "
          f"{full_name}#{pull.number}: {page})")  # fmt: skip
    try:
        if env_file is not None:
            env_write(env_file, lines)
            print(f"Wrote the demo's settings to {env_file} (removed again when this stops); "
                  "start (or restart) Tasuku with `make run`.")  # fmt: skip
        else:
            print("Start Tasuku with these settings in its environment (or use --write-env):")
            print(lines)
        serve(args, fake, world, secret, page)
    except KeyboardInterrupt:
        pass
    finally:
        if env_file is not None and env_clear(env_file):
            print(f"Removed the demo's settings from {env_file}: restart Tasuku without them.")
        fake.stop()


def serve(args: argparse.Namespace, fake: FakeGitHub, world, secret: str, page: str) -> None:
    """Wait for Tasuku, send it the installation and the pull request, report what it
    posts, and push a commit at each Enter, until stopped."""
    repo, pull = world.repo, world.pull
    full_name = repo.full_name
    print(f"Waiting for Tasuku at {args.tasuku} ...")
    while True:
        try:
            status = _post(args.tasuku, secret, "ping", _ping(fake, args.tasuku))
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            status = 0
        if status == 200:
            break
        if status in (401, 503):
            print(
                f"Tasuku answers {status}: it runs without these settings (or an earlier "
                "demo's); restart it (with --write-env they are in .env)."
            )
            time.sleep(5)
        time.sleep(1)

    if args.model_api:
        print(
            "Tasuku is up. Add the reviewer in the admin now (Reviewers → Add: engine "
            "anthropic, slug claude, model claude-sonnet-5-5, API key empty, 'Default for new "
            f"repositories' ticked: it reaches {full_name}, new to Tasuku), then press Enter."
        )
        sys.stdin.readline()

    # Deliveries as GitHub sends them (its webhook schemas: tests/test_demo.py holds them).
    installed = installation_payload(fake, INSTALLATION, [repo])
    print("installation.created ->", _post(args.tasuku, secret, "installation", installed))

    def send_pull(action: str, **extra: object) -> None:
        payload = pull_request_payload(fake, repo, pull, action=action, **extra)
        print(f"pull_request.{action} ->", _post(args.tasuku, secret, "pull_request", payload))

    send_pull("opened")

    seen: set[object] = set()
    pushed: list[object] = []

    def report() -> None:
        while True:
            for run in fake.check_runs_of(full_name):
                key = (run.id, run.status, run.conclusion)
                if key not in seen:
                    seen.add(key)
                    print(
                        f"check run {run.id} {run.name!r} on {run.head_sha[:7]}: {run.status}"
                        f"{' / ' + run.conclusion if run.conclusion else ''} -> {run.details_url}"
                    )
            for review in fake.reviews_of(full_name, pull.number):
                if review["id"] not in seen:
                    seen.add(review["id"])
                    comments = [c for c in fake.review_comments_of(full_name, pull.number)
                                if c["pull_request_review_id"] == review["id"]]  # fmt: skip
                    print(
                        f"review {review['id']} on {review['commit_id'][:7]} with {len(comments)} "
                        f"inline comments ({page}#pullrequestreview-{review['id']}):"
                    )
                    for comment in comments:
                        reply = " (reply)" if comment.get("in_reply_to_id") else ""
                        print(
                            f"  {comment['path']}:{comment['line']}{reply}  {comment['body'].splitlines()[0]}"
                        )
            for thread in fake.threads_of(full_name, pull.number):
                key = ("resolved", thread["id"])
                if thread["isResolved"] and key not in seen:
                    seen.add(key)
                    first = thread["comments"][0]
                    print(f"thread on {first['path']}:{first['line']} resolved")
            time.sleep(0.5)

    threading.Thread(target=report, daemon=True).start()
    print(f"The pull request as GitHub would show it: {page}")
    print("Press Enter to push the next commit, Ctrl-C to stop.")
    for _ in _lines(sys.stdin):
        before = pull.head_sha
        step = PUSHES[min(len(pushed), len(PUSHES) - 1)]
        pushed.append(step)
        print(f"pushing: {step[0]}")
        world.push(step[1])
        send_pull("synchronize", before=before, after=pull.head_sha)
    while True:  # no terminal to read from: keep serving until stopped
        time.sleep(1)


def _lines(stream):  # type: ignore[no-untyped-def]
    """The lines of `stream` as they come, read by a thread of their own: the main thread
    waits at most a second at a time. A stop signal the kernel hands to another thread (the
    server's, the reporter's) only marks it pending, and Python runs its handler in the
    main thread when that thread next runs Python code: a main thread blocked in `read`
    or a long sleep would never stop."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    while True:
        try:
            line = lines.get(timeout=1)
        except queue.Empty:
            continue
        if line is None:
            return
        yield line


DEMO_BEGIN = "# --- the demo's fake GitHub (tests.fakes.serve; removed when it stops) ---\n"
DEMO_END = "# --- end of the demo's settings ---\n"


def env_write(env: Path, lines: str) -> None:
    """Put the demo's settings in `env` between markers, keeping everything else (and
    replacing an earlier demo's block), so they can be taken out again."""
    env_clear(env)
    kept = env.read_text() if env.exists() else ""
    if kept and not kept.endswith("\n"):
        kept += "\n"
    env.write_text(kept + DEMO_BEGIN + lines + DEMO_END)


def env_clear(env: Path) -> bool:
    """Remove the demo's block from `env`; whether there was one."""
    if not env.exists():
        return False
    text = env.read_text()
    start = text.find(DEMO_BEGIN)
    if start < 0:
        return False
    end = text.find(DEMO_END, start)
    end = len(text) if end < 0 else end + len(DEMO_END)
    rest = text[:start] + text[end:]
    if rest.strip():
        env.write_text(rest)
    else:
        env.unlink()
    return True


if __name__ == "__main__":
    main()
