"""Text from engines, API callers and pull requests is data: one escaper for everything
Tasuku posts on GitHub.

Pure. Two shapes of field:
- `inline_text`: a title, a category, a table cell. One line; no HTML, no links or
  images (brackets and bare URLs made inert), no mentions, bounded.
- `block_text`: a body, evidence, a summary field, an author's answer. Markdown stays
  Markdown (lists, emphasis, code, links), but raw HTML is shown as text (so no
  `<details>` or `</details>` closing Tasuku's own, no hidden `<!-- … -->` comments and
  so none of Tasuku's markers), mentions do not notify, an unclosed code fence is
  closed, a fence that asks to be a ```` ```suggestion ```` is a plain code block, and
  the length is bounded.

A suggestion is code and keeps every byte; `rendering.fence_for` gives it a fence it
cannot close.
"""

from __future__ import annotations

import re
import unicodedata

# Zero-width space: `@\u200bteam` renders as "@team" but notifies nobody and links
# nowhere (GitHub's mention needs the name right after the `@`).
ZWSP = "\u200b"

# A mention: `@` not inside a word or an email address, then a login or `org/team`.
MENTION = re.compile(r"(?<![\w`@.+-])@(?=[A-Za-z0-9])")
# Raw HTML: a tag, a closing tag, a comment, a declaration or a processing instruction.
HTML_START = re.compile(r"<(?=[A-Za-z/!?])")
BARE_URL = re.compile(r"(?i)\b(https?|ftp|mailto|javascript|data)(:)")
WWW = re.compile(r"(?i)\bwww\.")
FENCE_LINE = re.compile(r"^ {0,3}(`{3,}|~{3,})", re.MULTILINE)
# A code span as Markdown reads one: a backtick run, then text that crosses no blank
# line, then a run of exactly the same length.
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)((?:(?!\n[ \t]*\n).)+?)(?<!`)\1(?!`)", re.DOTALL)
# Control characters other than tab and newline; bidirectional overrides, which can
# make a line read differently from what it says.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u202a-\u202e\u2066-\u2069]")

INLINE_LIMIT = 200
BLOCK_LIMIT = 20_000


def _bounded(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 1)].rstrip() + "…"


def _clean(text: str) -> str:
    text = unicodedata.normalize("NFC", text or "").replace("\r\n", "\n").replace("\r", "\n")
    return CONTROL.sub("", text)


def _prose(text: str) -> str:
    """Outside code: no raw HTML, no live mention, and no lone backtick (it could pair
    with one of Tasuku's own further on and swallow what lies between)."""
    text = HTML_START.sub("&lt;", text).replace("`", "\\`")
    return MENTION.sub("@" + ZWSP, text)


def _code(text: str) -> str:
    """Inside code HTML and mentions are inert already; only a comment opener is
    changed, so no text of an engine ever looks like one of Tasuku's markers."""
    return text.replace("<!--", "&lt;!--")


def _outside_code(text: str, transform) -> str:
    """`transform` applied to the parts of `text` that are not code spans (code spans
    render as literal text: no links, tags or mentions there)."""
    out, last = [], 0
    for match in CODE_SPAN.finditer(text):
        out.append(transform(text[last : match.start()]))
        out.append(_code(match.group(0)))
        last = match.end()
    out.append(transform(text[last:]))
    return "".join(out)


def _inert_links(text: str) -> str:
    text = text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")
    text = text.replace("!", "\\!") if "\\[" in text else text
    text = BARE_URL.sub(lambda m: m.group(1) + ZWSP + m.group(2), text)
    return WWW.sub(lambda m: m.group(0)[:3] + ZWSP + ".", text)


def inline_text(text: str | None, limit: int = INLINE_LIMIT) -> str:
    """One line of data, safe anywhere in Markdown: a title, a category, a table cell."""
    # Bounded before escaping: a cut made afterwards could fall inside a code span and
    # leave what follows it raw.
    text = _bounded(" ".join(_clean(text or "").split()), limit)
    # Links first: it doubles backslashes, so the backtick escapes `_prose` adds stay
    # single (a doubled one would leave the backtick live).
    return _outside_code(text, lambda part: _prose(_inert_links(part)))


def block_text(text: str | None, limit: int = BLOCK_LIMIT) -> str:
    """Markdown from an engine or a caller, safe to place inside Tasuku's own post."""
    text = _bounded(_clean(text or "").strip(), limit)
    out, inside, opener = [], False, ""
    chunk: list[str] = []

    def flush() -> None:
        if chunk:
            joined = "\n".join(chunk)
            out.append(_code(joined) if inside else _outside_code(joined, _prose))
            chunk.clear()

    for line in text.split("\n"):
        fence = FENCE_LINE.match(line)
        if fence and fence.group(1)[0] == "`" and "`" in line[fence.end() :]:
            fence = None  # a backtick fence's info string has no backtick: this is prose
        if fence and not inside:
            flush()
            inside, opener = True, fence.group(1)
            out.append(_code(_no_suggestion(line, fence.end())))
        elif (
            fence
            and inside
            and fence.group(1)[0] == opener[0]
            and len(fence.group(1)) >= len(opener)
            and not line.strip().strip(opener[0])
        ):
            flush()
            inside = False
            out.append(line)
        else:
            chunk.append(line)
    flush()
    if inside:
        out.append(opener)  # close what it left open, so what follows is Tasuku's own
    # A fence inside a block quote or a list item opens a code block too.
    return NESTED_SUGGESTION.sub(r"\1text", "\n".join(out))


# The info string that makes GitHub offer a fenced block as a one-click commit.
SUGGESTION_INFO = re.compile(r"\s*suggestion\b", re.IGNORECASE)
# The same after block-quote or list markers (`> ```suggestion`, `- ```suggestion`).
NESTED_SUGGESTION = re.compile(
    r"^([ \t]*(?:(?:>|[-*+]|\d+[.)])[ \t]*)+(?:`{3,}|~{3,})[ \t]*)suggestion\b",
    re.IGNORECASE | re.MULTILINE,
)


def _no_suggestion(line: str, info_at: int) -> str:
    """A fence opener whose info string says `suggestion` says `text` instead: only
    Tasuku's own rendering of a finding's `suggestion` field (checked against the
    changed lines) may be a one-click commit, never words inside a body or evidence."""
    if SUGGESTION_INFO.match(line, info_at):
        return line[:info_at] + "text"
    return line


def code_span(text: str | None, limit: int = 1024) -> str:
    """`text` (a path, a name) as a code span it cannot break out of: a backtick run
    longer than any inside it, line breaks shown as `\\n`."""
    text = _clean(text or "").replace("\n", "\\n").replace("\t", "\\t")
    text = _code(_bounded(text, limit))
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"
