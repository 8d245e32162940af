"""A connector's endpoint template: `{name}` placeholders filled from the validated input.

In the URL a value is URL-encoded (a `/` cannot add a path segment, `?` or `#` cannot
start a query) and `.` or `..` are refused (a dot segment would climb the path);
placeholders may sit in the path and the query only, never in the scheme, host or port,
so the model can never choose where the call goes. In a body template a value goes in
as JSON (a string with its quotes), so it cannot break out of the JSON around it. Only
`{name}` where `name` is an identifier is a placeholder: the braces of JSON are left
alone. Pure: no Django.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import quote, urlsplit

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class TemplateError(ValueError):
    """The input cannot fill the template (said so to the model)."""


def placeholders(text: str) -> list[str]:
    return PLACEHOLDER.findall(text or "")


def url_problems(template: str) -> list[str]:
    """What is wrong with a URL template, for the admin."""
    parts = urlsplit(PLACEHOLDER.sub("x", template))
    problems = []
    if parts.scheme not in ("http", "https"):
        problems.append("The URL must start with http:// or https://.")
    if not parts.hostname:
        problems.append("The URL has no host.")
    if "{" in urlsplit(template).netloc or "}" in urlsplit(template).netloc:
        problems.append("Placeholders may be in the path and the query, never in the host.")
    if parts.username or parts.password:
        problems.append(
            "No credentials in the URL: set the credential and its header, stored sealed."
        )
    if parts.fragment:
        problems.append("A URL's fragment is never sent: leave it out.")
    try:
        parts.port  # noqa: B018 - a bad port raises
    except ValueError:
        problems.append("The URL's port is not a number.")
    return problems


def _text(name: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | str):
        return str(value)
    raise TemplateError(f"`{name}` must be a string or a number to go into the URL.")


def url_fill(template: str, values: dict[str, Any]) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values or values[name] is None:
            raise TemplateError(f"`{name}` is needed.")
        text = _text(name, values[name])
        if text in ("", ".", ".."):
            raise TemplateError(f"`{name}` cannot be {text!r}.")
        return quote(text, safe="")

    return PLACEHOLDER.sub(one, template)


def body_fill(template: str, values: dict[str, Any]) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise TemplateError(f"`{name}` is needed.")
        return json.dumps(values[name], ensure_ascii=False)

    return PLACEHOLDER.sub(one, template)
