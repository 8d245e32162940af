"""The fake GitHub's web pages, for a person following the demo's links
(tests/fakes/serve.py): what GitHub's own pages would show of a pull request and of a
check run, as plain HTML.

- `GET /{owner}/{repo}/pull/{number}`: the pull request (title, branches, head), its
  check runs on the head, its conversation comments (the walkthrough), and every review
  with its inline comments and replies — each review at `#pullrequestreview-{id}` and
  each comment at `#discussion_r{id}`, the anchors of the `html_url`s the API gives.
- `GET /{owner}/{repo}/runs/{id}`: one check run (its status, conclusion and output).

No login: the demo's viewer is its only user. These are web pages, not the REST API, so
the contract (contract.py) lists them among the paths GitHub's description leaves out.
"""

from __future__ import annotations

import re
from html import escape
from typing import Any

from tests.fakes.github.state import CheckRun, HTTPError, RawBody, Request, Response

STYLE = (
    "body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}"
    "pre{white-space:pre-wrap;background:#f6f8fa;padding:.75rem;border-radius:6px}"
    "section{border:1px solid #d0d7de;border-radius:6px;padding:.5rem 1rem;margin:1rem 0}"
    ".muted{color:#57606a}.reply{margin-left:2rem}"
)


def _page(title: str, body: str) -> Response:
    html = (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title>"
        f"<style>{STYLE}</style></head><body>{body}"
        "<p class='muted'>The fake GitHub of Tasuku's demo: what GitHub would show.</p>"
        "</body></html>"
    )
    return 200, RawBody(html.encode(), "text/html; charset=utf-8"), {}


def _run_line(full_name: str, run: CheckRun) -> str:
    state = run.conclusion or run.status
    title = (run.output or {}).get("title") or ""
    return (
        f"<li><a href='/{escape(full_name)}/runs/{run.id}'>{escape(run.name)}</a> "
        f"<b>{escape(state)}</b> {escape(title)}</li>"
    )


class PageRoutes:
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)  # type: ignore[call-arg]
        owner_repo = r"/(?P<owner>[^/]+)/(?P<repo>[^/]+)"
        table = [
            ("GET", owner_repo + r"/pull/(?P<number>\d+)", "none", self._pull_page),
            ("GET", owner_repo + r"/runs/(?P<id>\d+)", "none", self._run_page),
        ]
        self.routes += [(m, re.compile(p), a, fn) for m, p, a, fn in table]  # type: ignore[attr-defined]

    def _pull_page(self, request: Request) -> Response:
        full_name = f"{request.params['owner']}/{request.params['repo']}"
        repo = self.repos.get(full_name)  # type: ignore[attr-defined]
        number = int(request.params["number"])
        pull = repo.pulls.get(number) if repo is not None else None
        if repo is None or pull is None:
            raise HTTPError(404, "Not Found")
        runs = [
            r for name, r in self.check_runs.values()  # type: ignore[attr-defined]
            if name == full_name and r.head_sha == pull.head_sha
        ]  # fmt: skip
        parts = [
            f"<h1>{escape(pull.title)} <span class='muted'>#{number}</span></h1>",
            f"<p>{escape(pull.state)} · <code>{escape(pull.head_ref)}</code> into "
            f"<code>{escape(pull.base_ref)}</code> · head <code>{pull.head_sha[:7]}</code></p>",
            "<h2>Checks on the head</h2>",
            "<ul>" + "".join(_run_line(full_name, r) for r in runs) + "</ul>"
            if runs
            else "<p class='muted'>No check run on this commit.</p>",
            "<h2>Conversation</h2>",
        ]
        for comment in sorted(repo.issue_comments.values(), key=lambda c: c["id"]):
            if comment["_number"] == number:
                parts.append(
                    f"<section id='issuecomment-{comment['id']}'><p><b>"
                    f"{escape(comment['user']['login'])}</b> commented</p>"
                    f"<pre>{escape(comment.get('body') or '')}</pre></section>"
                )
        comments = [c for c in repo.review_comments.values() if c["_number"] == number]
        for review in sorted(repo.reviews.values(), key=lambda r: r["id"]):
            if review["_number"] != number:
                continue
            parts.append(
                f"<section id='pullrequestreview-{review['id']}'><p><b>"
                f"{escape(review['user']['login'])}</b> reviewed "
                f"<code>{escape((review.get('commit_id') or '')[:7])}</code> · "
                f"{escape(review.get('state') or '')}</p>"
                f"<pre>{escape(review.get('body') or '')}</pre>"
            )
            for comment in sorted(comments, key=lambda c: c["id"]):
                if comment.get("pull_request_review_id") == review["id"]:
                    parts.append(self._comment_html(comment))
            parts.append("</section>")
        return _page(f"{pull.title} · {full_name}#{number}", "".join(parts))

    @staticmethod
    def _comment_html(comment: dict[str, Any]) -> str:
        where = f"{comment.get('path')}:{comment.get('line') or comment.get('original_line')}"
        css = " class='reply'" if comment.get("in_reply_to_id") else ""
        return (
            f"<div id='discussion_r{comment['id']}'{css}><p><b>"
            f"{escape(comment['user']['login'])}</b> on <code>{escape(where)}</code></p>"
            f"<pre>{escape(comment.get('body') or '')}</pre></div>"
        )

    def _run_page(self, request: Request) -> Response:
        full_name = f"{request.params['owner']}/{request.params['repo']}"
        found = self.check_runs.get(int(request.params["id"]))  # type: ignore[attr-defined]
        if found is None or found[0] != full_name:
            raise HTTPError(404, "Not Found")
        run = found[1]
        output = run.output or {}
        pulls = [
            p
            for p in self.repos[full_name].pulls.values()  # type: ignore[attr-defined]
            if p.head_sha == run.head_sha
        ]
        back = "".join(
            f"<p><a href='/{escape(full_name)}/pull/{p.number}'>{escape(full_name)}#{p.number}</a>"
            "</p>"
            for p in pulls
        )
        details = (
            f"<p>Details: <a href='{escape(run.details_url)}'>{escape(run.details_url)}</a></p>"
            if run.details_url and run.details_url.startswith(("http://", "https://"))
            else ""
        )
        body = (
            f"<h1>{escape(run.name)}</h1>{back}"
            f"<p><b>{escape(run.conclusion or run.status)}</b> on "
            f"<code>{run.head_sha[:7]}</code></p>"
            f"<h2>{escape(output.get('title') or '')}</h2>"
            f"<pre>{escape(output.get('summary') or '')}</pre>"
            + (f"<pre>{escape(output['text'])}</pre>" if output.get("text") else "")
            + details
        )
        return _page(f"{run.name} · {full_name}", body)
