"""The `Connector` row: an operator's tool for model reviewers (repos/connectors/)."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from repos.connectors.outbound import host_allowed
from repos.connectors.templates import PLACEHOLDER, placeholders, url_problems
from repos.credentials import key_open, key_seal
from sandbox.contract import (
    CONNECTOR_NAME,
    MAX_CONNECTOR_ANSWER,
    MAX_CONNECTOR_DESCRIPTION,
    RESERVED_TOOL_NAMES,
)

HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$")  # an HTTP token
HOST = re.compile(r"^(\*\.)?[A-Za-z0-9.-]{1,253}(:\d{1,5})?$")
TIMEOUT_RANGE = (1, 120)
RESPONSE_RANGE = (1024, MAX_CONNECTOR_ANSWER)


class ConnectorKind(models.TextChoices):
    HTTP = "http", "HTTP endpoint"
    GITHUB_ISSUE = "github_issue", "GitHub issue (built in, read-only)"


# What the built-in kinds take: the schema is theirs, not the operator's.
GITHUB_ISSUE_SCHEMA = {
    "type": "object",
    "properties": {
        "repository": {
            "type": "string",
            "pattern": r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$",
            "description": "owner/name; default: the pull request's repository.",
        },
        "number": {"type": "integer", "minimum": 1, "description": "The issue's number."},
    },
    "required": ["number"],
    "additionalProperties": False,
}
BUILT_IN_SCHEMAS = {ConnectorKind.GITHUB_ISSUE: GITHUB_ISSUE_SCHEMA}


def schema_problems(schema: object) -> list[str]:
    """What is wrong with an input schema, for the admin: it must be a JSON Schema
    (2020-12) of an object."""
    if not isinstance(schema, dict):
        return ["The input schema must be a JSON object (a JSON Schema)."]
    # jsonschema (and what it loads) is read when a schema is checked, not at every start.
    from jsonschema import Draft202012Validator, SchemaError

    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        return [f"Not a valid JSON Schema: {exc.message}"]
    if schema.get("type") != "object":
        return ['The input must be an object: the schema needs "type": "object".']
    return []


class Connector(models.Model):
    """A tool a model reviewer may call (when the reviewer is allowed it), whose call
    Tasuku makes: an HTTP endpoint with a sealed credential, or a built-in kind."""

    name = models.CharField(
        max_length=48,
        unique=True,
        validators=[RegexValidator(CONNECTOR_NAME, "Lower-case letters, digits and _.")],
        help_text=(
            "The tool's name, as the model calls it (e.g. `jira_ticket`): lower-case letters, "
            "digits and _, starting with a letter."
        ),
    )
    kind = models.CharField(
        max_length=20, choices=ConnectorKind.choices, default=ConnectorKind.HTTP
    )
    description = models.TextField(
        max_length=MAX_CONNECTOR_DESCRIPTION,
        help_text=(
            "What the model is told the tool does and when to use it, e.g. “Look up a Jira "
            "ticket by its key (PAY-123): its summary, status and description.”"
        ),
    )
    input_schema = models.JSONField(
        default=dict,
        blank=True,
        help_text=(
            "A JSON Schema (2020-12) of the tool's input, an object, e.g. "
            '{"type": "object", "properties": {"key": {"type": "string"}}, '
            '"required": ["key"]}. Every call is validated against it before anything is '
            "sent. Built-in kinds have their own."
        ),
    )
    method = models.CharField(
        max_length=8, choices=[("GET", "GET"), ("POST", "POST")], default="GET"
    )
    url_template = models.CharField(
        max_length=2000,
        blank=True,
        verbose_name="URL template",
        help_text=(
            "http(s) URL; `{name}` placeholders in the path or query are filled from the "
            "input (URL-encoded), e.g. https://jira.example.com/rest/api/2/issue/{key}. The "
            "host is fixed: a placeholder may not be in it."
        ),
    )
    body_template = models.TextField(
        blank=True,
        help_text=(
            "For POST: the JSON body, with `{name}` placeholders filled with the input's "
            "values as JSON (a string with its quotes), e.g. "
            '{"query": {q}, "limit": 5}. Empty: the input itself, as JSON.'
        ),
    )
    credential_header = models.CharField(
        max_length=100,
        blank=True,
        default="Authorization",
        help_text="The header that carries the credential, e.g. Authorization or X-Api-Key.",
    )
    credential_sealed = models.TextField(blank=True, editable=False)
    allowed_hosts = models.TextField(
        blank=True,
        help_text=(
            "One host per line (`*.example.com` for its subdomains) the call and its "
            "redirects may reach. Empty: only the URL template's host."
        ),
    )
    timeout_seconds = models.PositiveSmallIntegerField(
        default=10,
        validators=[MinValueValidator(TIMEOUT_RANGE[0]), MaxValueValidator(TIMEOUT_RANGE[1])],
        help_text="The whole call, redirects and answer included; a slower one is cut off.",
    )
    max_response_bytes = models.PositiveIntegerField(
        default=65_536,
        validators=[MinValueValidator(RESPONSE_RANGE[0]), MaxValueValidator(RESPONSE_RANGE[1])],
        help_text="The largest answer read; a larger one is cut off with an error.",
    )
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "repos"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def credential_set(self, value: str) -> None:
        self.credential_sealed = key_seal(value)

    def credential(self) -> str:
        """The credential (raises KeyUnreadable if SECRET_KEY changed)."""
        return key_open(self.credential_sealed)

    @property
    def built_in(self) -> bool:
        return self.kind in BUILT_IN_SCHEMAS

    @property
    def schema(self) -> dict:
        """The input schema calls are validated against and the model is shown."""
        return BUILT_IN_SCHEMAS.get(self.kind) or self.input_schema or {"type": "object"}

    def hosts(self) -> list[str]:
        return [
            line.strip().lower()
            for line in self.allowed_hosts.splitlines()
            if line.strip() and not line.strip().startswith("#")
        ]

    def clean(self) -> None:
        errors: dict[str, list[str]] = {}
        if self.name in RESERVED_TOOL_NAMES:
            errors["name"] = [f"{self.name!r} is one of the reviewer's own tools."]
        if self.built_in:
            if errors:
                raise ValidationError(errors)
            return
        if problems := schema_problems(self.input_schema):
            errors["input_schema"] = problems
        if not self.url_template:
            errors["url_template"] = ["An HTTP connector needs its URL."]
        elif problems := url_problems(self.url_template):
            errors["url_template"] = problems
        if self.body_template and self.method != "POST":
            errors["body_template"] = ["A body is sent with POST only."]
        if self.credential_header and not HEADER_NAME.match(self.credential_header):
            errors["credential_header"] = ["Not a header name."]
        bad_hosts = [h for h in self.hosts() if not HOST.match(h)]
        if bad_hosts:
            errors["allowed_hosts"] = [f"Not a host: {', '.join(bad_hosts)} (no scheme, no path)."]
        elif self.hosts() and "url_template" not in errors:
            parts = urlsplit(PLACEHOLDER.sub("x", self.url_template))
            port = parts.port or (443 if parts.scheme == "https" else 80)
            if not host_allowed(parts.hostname or "", port, self.hosts()):
                errors["allowed_hosts"] = [
                    f"The URL's host ({parts.hostname}) is not among them: no call could be made."
                ]
        if "input_schema" not in errors:
            required = set(self.input_schema.get("required") or [])
            for field, text in (
                ("url_template", self.url_template),
                ("body_template", self.body_template),
            ):
                missing = sorted(set(placeholders(text)) - required)
                if missing and field not in errors:
                    errors[field] = [
                        "Every placeholder must be a required property of the input schema: "
                        + ", ".join(missing)
                    ]
        if errors:
            raise ValidationError(errors)
