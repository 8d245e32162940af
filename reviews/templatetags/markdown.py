"""`{{ text|markdown }}`: Markdown written by engines and people (a finding's body, a
summary), shown on the dashboard as GitHub would show it — but safely: CommonMark with
raw HTML off (markdown-it-py), then ammonia's whitelist (nh3): no scripts, no event
handlers, no images (a tracking pixel is an image), links only to http(s) and mailto,
each opening with rel="noopener noreferrer nofollow"."""

from __future__ import annotations

from functools import cache

import nh3
from django import template
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

register = template.Library()

TAGS = {
    "p", "br", "hr", "strong", "em", "del", "code", "pre", "blockquote", "ul", "ol", "li",
    "a", "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip
ATTRIBUTES = {"a": {"href", "title"}, "code": {"class"}, "ol": {"start"},
              "th": {"align"}, "td": {"align"}}  # fmt: skip
MAX_CHARS = 100_000


@cache
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(
        ["table", "strikethrough"]
    )


def markdown_html(text: str) -> str:
    """Sanitised HTML for `text` (Markdown)."""
    rendered = _parser().render(text[:MAX_CHARS])
    return nh3.clean(
        rendered,
        tags=TAGS,
        attributes=ATTRIBUTES,
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )


@register.filter(name="markdown")
def markdown_filter(text: object) -> SafeString:
    return mark_safe(markdown_html(str(text or "")))  # noqa: S308 - sanitised by nh3 above
