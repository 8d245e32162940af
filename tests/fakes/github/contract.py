"""The fake GitHub's contract with GitHub's published API description.

Every request the fake receives and every answer it sends is checked against what GitHub
publishes (vendored in tests/contract/, see tests/contract/vendor.py):

- REST: the path must match one of the vendored OpenAPI operations (else the request is
  a violation itself, unless ALLOWED lists it); its path and query parameters and its
  JSON body must satisfy the operation's parameters and request body; the JSON answer
  must satisfy the operation's response schema for its status code. A 4xx/5xx answer the
  operation does not describe (GitHub sends rate limits, 401s and 5xx on any operation)
  must still be GitHub's error body (`basic-error`); an undescribed 2xx/3xx is a
  violation.
- GraphQL (`POST /graphql`): the document must parse and validate against GitHub's
  schema (graphql-core), its variables must coerce to the operation's variable types,
  and a successful answer must be exactly what GitHub's schema makes of that document:
  the answer is executed as the data source of the document, so a missing non-null
  field, a wrong scalar or enum value, or a key the document did not ask for (GitHub
  never sends one) is a violation.

JSON Schema checks run twice over: jsonschema-rs (compiled once a schema, a process) gives
the verdict on the same converted schema and the same format functions; only when it
rejects does python's `jsonschema` walk the instance, for the pointer and the words of each
problem, and its verdict stands (tests/contract/test_fast_path.py holds both to the same
verdicts: docs/testing.md).

Violations are collected in `Contract.violations` (the test suite fails a test whose
fake saw any: tests/conftest.py). Tests that send a deliberately wrong request wrap it in
`with fake.contract.tolerated(): ...`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import json
import os
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache, partial
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import graphql
import jsonschema
import jsonschema_rs
from jsonschema.exceptions import ValidationError
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

CONTRACT_DIR = Path(__file__).resolve().parents[2] / "contract"
REST_FILE = CONTRACT_DIR / "github-rest.json"
GRAPHQL_FILE = CONTRACT_DIR / "github-schema.graphql.gz"
REST_URI = "urn:tasuku:github-rest"
ERROR_SCHEMA = "#/components/schemas/basic-error"

# Paths the fake serves that are not GitHub's REST API, and so not in its description.
ALLOWED: list[tuple[str, re.Pattern[str]]] = [
    # git's smart HTTP protocol (clone and push), served by github.com, not the API
    (
        "git smart HTTP",
        re.compile(r"/[^/]+/[^/]+\.git/(info/refs|git-upload-pack|git-receive-pack)"),
    ),
    # GitHub Actions' OIDC issuer (token.actions.githubusercontent.com): discovery and keys
    ("OIDC issuer", re.compile(r"(/[^/.][^/]*)*/\.well-known/(openid-configuration|jwks)")),
    # the Actions runtime's ID-token endpoint (a job's ACTIONS_ID_TOKEN_REQUEST_URL)
    ("Actions ID token", re.compile(r"/_apis/actions/runs/\d+/idtoken")),
    # GitHub's web UI where a person creates an App from a manifest (tests/fakes/github/manifests.py)
    ("App manifest page", re.compile(r"(/organizations/[^/]+)?/settings/apps/new(/confirm)?")),
    # GitHub's web pages of a pull request and of a check run (tests/fakes/github/pages.py)
    ("GitHub's web pages", re.compile(r"/[^/]+/[^/]+/(pull|runs)/\d+")),
    # what a browser asks of any web page's host (on the manifest page)
    ("a browser's favicon", re.compile(r"/favicon\.ico")),
    # GraphQL: checked against GitHub's GraphQL schema instead (see `_graphql_request`)
    ("GraphQL", re.compile(r"/graphql")),
]

# Template parameters GitHub's router lets span several segments (a branch or ref name
# with slashes, sent unencoded).
MULTI_SEGMENT = {"branch", "ref", "basehead"}

# GitHub's custom GraphQL scalars that it encodes as JSON strings (BigInt too: "Since the
# value may exceed the size of a 32-bit integer, it's encoded as a string").
STRING_SCALARS = {
    "Base64String",
    "BigInt",
    "Date",
    "DateTime",
    "GitObjectID",
    "GitRefname",
    "GitSSHRemote",
    "GitTimestamp",
    "HTML",
    "PreciseDateTime",
    "URI",
    "X509Certificate",
}


# Where GitHub's description contradicts GitHub's documented behaviour, the schema used
# instead: (JSON pointer of the schema in the vendored document, schema, why).
_DATE = r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2})?(\.\d+)?(Z|[+-]\d{2}:?\d{2})?)?"
ERRATA: list[tuple[str, dict[str, Any], str]] = [
    (
        "/components/parameters/created/schema",
        {"type": "string", "pattern": rf"^((>=|<=|>|<)?{_DATE}|({_DATE}|\*)\.\.({_DATE}|\*))$"},
        "`created` of list-workflow-runs is typed `date-time`, but its own description (and "
        "GitHub) takes the search syntax's date ranges: `>=2026-01-01T00:00:00Z`, `A..B`",
    ),
    (
        "/components/schemas/pull-request/properties/head/properties/repo",
        {"anyOf": [{"$ref": "#/components/schemas/repository"}, {"type": "null"}]},
        "a pull request's `head.repo` is typed a repository, but GitHub's description of "
        "the same object in its webhooks (`pull_request` events: `head.repo` null) says what "
        "it is once the fork the head was in is deleted: null",
    ),
]


@dataclass(frozen=True)
class Violation:
    operation: str  # e.g. "POST /repos/{owner}/{repo}/check-runs (checks/create)"
    sent: str  # the request as it arrived, e.g. "POST /repos/acme/widgets/check-runs"
    part: str  # "request" or "response 201"
    pointer: str  # a JSON pointer into the part: "/body/output/title", "/query/per_page"
    problem: str

    def __str__(self) -> str:
        return (
            f"{self.operation}: {self.part} {self.pointer or '/'}: {self.problem}"
            f"  [sent: {self.sent}]"
        )


def summary(violations: list[Violation]) -> list[str]:
    """One line per distinct violation (array indices folded: `/check_runs/*/app`), with
    how often it occurred."""
    counts: dict[tuple[str, str, str, str], list[Violation]] = {}
    for v in violations:
        key = (v.operation, v.part, re.sub(r"/\d+(?=/|$)", "/*", v.pointer), v.problem)
        counts.setdefault(key, []).append(v)
    lines = []
    for (operation, part, pointer, problem), seen in counts.items():
        times = f" ({len(seen)} times)" if len(seen) > 1 else ""
        lines.append(
            f"{operation}: {part} {pointer or '/'}: {problem}  [sent: {seen[0].sent}]{times}"
        )
    return lines


@dataclass
class Exchange:
    """One request as the contract sees it, kept until its answer is checked."""

    method: str
    path: str
    operation: str
    op: dict[str, Any] | None = None  # the OpenAPI operation; None: allowed or unknown
    pointer: str = ""  # JSON pointer of `op` in the vendored document
    graphql: tuple[graphql.DocumentNode, dict[str, Any], str | None] | None = None

    @property
    def sent(self) -> str:
        return f"{self.method} {self.path}"


# --- the vendored descriptions ---


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def pointer_of(parts: list[Any] | tuple[Any, ...]) -> str:
    return "".join(f"/{_escape(str(p))}" for p in parts)


def _schema(node: Any) -> Any:
    """An OpenAPI 3.0 schema object as JSON Schema 2020-12: `nullable` becomes a null type
    (or enum member), `$ref`s point into the registered document."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("properties", "patternProperties"):
            out[key] = {name: _schema(sub) for name, sub in value.items()}
        elif key in ("items", "not", "additionalProperties") and isinstance(value, dict):
            out[key] = _schema(value)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [_schema(sub) for sub in value]
        elif key == "$ref":
            out[key] = REST_URI + value
        elif key in ("nullable", "example", "discriminator", "xml", "externalDocs"):
            continue
        else:
            out[key] = value
    if node.get("nullable"):
        if isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
        if "enum" in out and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
        if any(k in out for k in ("$ref", "allOf", "anyOf", "oneOf")):
            out = {"anyOf": [{"type": "null"}, out]}
    return out


def _convert(node: Any) -> Any:
    """Every schema object in the document converted (`_schema`); the rest as it is."""
    if isinstance(node, dict):
        return {
            key: (
                _schema(value)
                if key == "schema"
                else {name: _schema(s) for name, s in value.items()}
                if key == "schemas"
                else _convert(value)
            )
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_convert(item) for item in node]
    return node


def _inline(document: dict[str, Any]) -> dict[str, Any]:
    """`document` with each schema `$ref` replaced by the (shared) schema it names, so
    that validating follows no references (several times faster); a recursive schema
    keeps its `$ref` where it recurs."""
    prefix = REST_URI + "#/components/schemas/"
    schemas = document["components"]["schemas"]
    done: dict[str, Any] = {}

    def walk(node: Any, stack: frozenset[str]) -> Any:
        if isinstance(node, list):
            return [walk(item, stack) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if (
            isinstance(ref, str)
            and ref.startswith(prefix)
            and set(node) <= {"$ref", "description", "title"}
        ):
            name = ref[len(prefix) :]
            if name in stack:
                return node
            if name not in done:
                done[name] = walk(schemas[name], stack | {name})
            return done[name]
        return {key: walk(value, stack) for key, value in node.items()}

    return walk(document, frozenset())


class RestDescription:
    """The vendored OpenAPI operations, with their path matchers and validators."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw
        self.vendored = raw.get("x-tasuku-vendored", {})
        self.document = _convert(raw)
        for pointer, schema, _ in ERRATA:
            *parents, last = pointer[1:].split("/")
            node: Any = self.document
            for part in parents:
                node = node[part.replace("~1", "/").replace("~0", "~")]
            node[last] = schema
        # jsonschema-rs resolves `$ref`s itself: it gets the converted document as it is
        # (inlined, its shared schemas would be copied apart on the way into Rust).
        self.fast_registry = jsonschema_rs.Registry([(REST_URI, self.document)])
        self.fast_formats = fast_formats(self.document)
        self.document = _inline(self.document)
        resource = Resource(contents=self.document, specification=DRAFT202012)
        self.registry: Registry = Registry().with_resource(REST_URI, resource)
        self.format_checker = _format_checker()
        self._validators: dict[str, jsonschema.protocols.Validator] = {}
        self._fast: dict[str, jsonschema_rs.Validator | None] = {}
        self._lock = threading.Lock()
        # (regex, literal length, template): the most literal template wins a tie
        self.templates: list[tuple[re.Pattern[str], int, str]] = []
        for template in raw["paths"]:
            pattern = ""
            for piece in re.split(r"(\{[^}]+\})", template):
                if piece.startswith("{"):
                    name = piece[1:-1]
                    body = r"[^/]+(?:/[^/]+)*?" if name in MULTI_SEGMENT else r"[^/]+"
                    pattern += f"(?P<{name}>{body})"
                else:
                    pattern += re.escape(piece)
            literal = len(re.sub(r"\{[^}]+\}", "", template))
            self.templates.append((re.compile(pattern), literal, template))
        self.templates.sort(key=lambda t: -t[1])

    def ref(self, node: Any) -> Any:
        """`node`, or the component its `$ref` names (parameters, responses...)."""
        while isinstance(node, dict) and "$ref" in node:
            target: Any = self.raw
            for part in node["$ref"][2:].split("/"):
                target = target[part.replace("~1", "/").replace("~0", "~")]
            node = target
        return node

    def match(self, method: str, path: str) -> tuple[str, dict[str, str]] | None:
        """(template, raw path parameters) of the operation `method path` is, if any."""
        for pattern, _, template in self.templates:
            found = pattern.fullmatch(path)
            if found and method.lower() in self.raw["paths"][template]:
                return template, found.groupdict()
        return None

    def validator(self, pointer: str) -> jsonschema.protocols.Validator:
        """python's validator of the schema at `pointer` in the vendored document."""
        with self._lock:
            validator = self._validators.get(pointer)
            if validator is None:
                validator = jsonschema.Draft202012Validator(
                    {"$ref": REST_URI + "#" + pointer},
                    registry=self.registry,
                    format_checker=self.format_checker,
                )
                self._validators[pointer] = validator
        return validator

    def fast_validator(self, pointer: str) -> jsonschema_rs.Validator | None:
        """jsonschema-rs's validator of the same schema (None: it cannot compile it, and
        python alone judges)."""
        with self._lock:
            if pointer not in self._fast:
                self._fast[pointer] = compile_fast(
                    # a JSON pointer's `{owner}` is no URI fragment until percent-encoded
                    {"$ref": REST_URI + "#" + quote(pointer, safe="/~")},
                    jsonschema_rs.Draft202012Validator,
                    self.fast_formats,
                    registry=self.fast_registry,
                )
            return self._fast[pointer]

    def errors(self, pointer: str, instance: Any) -> list[tuple[str, str]]:
        """(JSON pointer into `instance`, problem) for each way `instance` fails the schema
        at `pointer` in the vendored document. Every instance is judged in full: nothing
        that passed before is taken for one like it (a likeness blind to a string's length
        or an enum's case let a 90,000-character summary or `COMMENTED` for `COMMENT`
        through: docs/testing.md). jsonschema-rs's acceptance is the answer; python's
        walk names the problems of what it does not accept, and its verdict stands."""
        if fast_accepts(self.fast_validator(pointer), instance):
            return []
        validator = self.validator(pointer)
        found: list[tuple[str, str]] = []
        missing: dict[str, list[str]] = {}  # pointer -> required properties absent there
        for error in validator.iter_errors(instance):
            if error.validator == "required" and not error.context:
                where = pointer_of(list(error.absolute_path))
                names = missing.setdefault(where, [])
                names += [
                    name
                    for name in error.validator_value
                    if name not in error.instance and name not in names
                ]
                continue
            found.append(_problem(error))
        for where, names in missing.items():
            found.append((where, f"required properties missing: {', '.join(names)}"))
        return found


def _problem(error: ValidationError) -> tuple[str, str]:
    """(JSON pointer, message) of one error; for an `anyOf`/`oneOf`, those of the
    alternative the instance came closest to (a nullable's null alternative aside)."""
    if error.validator in ("anyOf", "oneOf") and error.context:
        branches: dict[int, list[ValidationError]] = {}
        for sub in error.context:
            branches.setdefault(int(sub.relative_schema_path[0]), []).append(sub)
        alternatives = error.validator_value
        candidates = [
            (len(subs), index, subs)
            for index, subs in branches.items()
            if alternatives[index] != {"type": "null"}
        ]
        if candidates:
            _, index, subs = min(candidates, key=lambda c: (c[0], c[1]))
            ref = str(alternatives[index].get("$ref", ""))
            name = ref.rsplit("/", 1)[-1] if ref else ""
            required = [s for s in subs if s.validator == "required"]
            if required and len(required) == len(subs):
                names = [n for s in required for n in s.validator_value if n not in s.instance]
                pointer = pointer_of(list(required[0].absolute_path))
                missing = f"required properties missing: {', '.join(dict.fromkeys(names))}"
                return pointer, f"as {name}: {missing}" if name else missing
            pointer, message = _problem(subs[0])
            return pointer, f"as {name}: {message}" if name else message
    message = error.message
    if len(message) > 300:
        message = message[:300] + "…"
    return pointer_of(list(error.absolute_path)), message


def _format_checker() -> jsonschema.FormatChecker:
    checker = jsonschema.FormatChecker(formats=())

    @checker.checks("date-time", raises=ValueError)
    def date_time(value: Any) -> bool:
        if not isinstance(value, str):
            return True
        if "T" not in value.upper():
            raise ValueError("not an RFC 3339 date-time (no 'T')")
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
        if parsed.tzinfo is None:
            raise ValueError("not an RFC 3339 date-time (no time zone)")
        return True

    @checker.checks("uri")
    def uri(value: Any) -> bool:
        return not isinstance(value, str) or bool(urlsplit(value).scheme)

    @checker.checks("email")
    def email(value: Any) -> bool:
        return not isinstance(value, str) or "@" in value

    return checker


def _unchecked(value: Any) -> bool:
    return True


def fast_formats(document: Any) -> dict[str, Callable[[Any], bool]]:
    """jsonschema-rs's format checks, as python's `_format_checker` makes them: the same
    functions for the formats it checks, and no check of any other format `document`
    names (jsonschema-rs would check `uri-template`, `hostname`... by its own rules)."""
    checker = _format_checker()
    names: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("format"), str):
                names.add(node["format"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(document)
    formats: dict[str, Callable[[Any], bool]] = dict.fromkeys(names, _unchecked)
    for name in checker.checkers:
        formats[name] = partial(checker.conforms, format=name)
    return formats


def compile_fast(
    schema: dict[str, Any],
    cls: Any,
    formats: dict[str, Callable[[Any], bool]],
    **options: Any,
) -> jsonschema_rs.Validator | None:
    """jsonschema-rs's validator of `schema`, its formats checked by `formats` (None when
    it cannot compile it: python then judges alone)."""
    try:
        return cls(schema, validate_formats=True, formats=formats, **options)
    except Exception:  # noqa: BLE001  (python's check, the slower one, still runs)
        return None


def fast_accepts(validator: jsonschema_rs.Validator | None, instance: Any) -> bool:
    """True when jsonschema-rs accepts `instance` without a doubt; an error in it (an
    instance it cannot read, a format function that raised) is a doubt, for python to
    judge."""
    if validator is None:
        return False
    try:
        return bool(validator.is_valid(instance))
    except Exception:  # noqa: BLE001  (python's check runs instead, and says why)
        return False


@cache
def rest_description() -> RestDescription:
    return RestDescription(json.loads(REST_FILE.read_text()))


@cache
def graphql_schema() -> graphql.GraphQLSchema:
    with gzip.open(GRAPHQL_FILE, "rt", encoding="utf-8") as f:
        # assume_valid: GitHub's schema breaks a rule about itself that graphql-core 3.3
        # enforces (a deprecated field implementing an interface's undeprecated one);
        # documents are still validated against it in full. no_location: the schema's own
        # source positions are never reported (a third of the time, once per process).
        return graphql.build_schema(
            f.read(), assume_valid_sdl=True, assume_valid=True, no_location=True
        )


@cache
def _parsed(query: str) -> graphql.DocumentNode | graphql.GraphQLError:
    try:
        return graphql.parse(query)
    except graphql.GraphQLError as error:
        return error


@cache
def _validation(query: str) -> tuple[str, ...]:
    """`query` validated against the schema once (a document is the same every time)."""
    document = _parsed(query)
    if isinstance(document, graphql.GraphQLError):
        return (f"syntax: {document.message}",)
    return tuple(_graphql_message(e) for e in graphql.validate(graphql_schema(), document))


def graphql_document_errors(query: str) -> list[str]:
    """Why `query` is not a valid document against GitHub's schema (nothing: it is)."""
    document = _parsed(query)
    if isinstance(document, graphql.GraphQLError):
        return [f"syntax: {document.message}"]
    return [_graphql_message(e) for e in graphql.validate(graphql_schema(), document)]


def _graphql_message(error: graphql.GraphQLError) -> str:
    where = ""
    if error.locations:
        where = " (at " + ", ".join(f"{loc.line}:{loc.column}" for loc in error.locations) + ")"
    return error.message + where


def _operation(
    document: graphql.DocumentNode, name: str | None
) -> graphql.OperationDefinitionNode | None:
    operations = [d for d in document.definitions if isinstance(d, graphql.OperationDefinitionNode)]
    if name is None:
        return operations[0] if len(operations) == 1 else None
    return next((o for o in operations if o.name and o.name.value == name), None)


# --- checking a GraphQL answer: the answer as the data source of its own document ---


class _Mismatch(Exception):
    pass


_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "String": (str,),
    "ID": (str,),
    "Int": (int,),
    "Float": (int, float),
    "Boolean": (bool,),
}


def _field_resolver(source: Any, info: graphql.GraphQLResolveInfo, **_: Any) -> Any:
    node = info.field_nodes[0]
    key = node.alias.value if node.alias else info.field_name
    if not isinstance(source, dict):
        raise _Mismatch(f"expected an object holding {key!r}, got {type(source).__name__}")
    value = source.get(key)
    leaf = graphql.get_named_type(info.return_type)
    if value is not None and isinstance(leaf, graphql.GraphQLScalarType):
        values = value if isinstance(value, list) else [value]
        for item in values:
            if isinstance(item, list):
                continue  # nested lists: left to graphql-core
            wanted = _PYTHON_TYPES.get(leaf.name) or ((str,) if leaf.name in STRING_SCALARS else ())
            bad = wanted and (
                not isinstance(item, wanted) or (isinstance(item, bool) and bool not in wanted)
            )
            if bad:
                raise _Mismatch(
                    f"{leaf.name} is sent as a JSON {'/'.join(t.__name__ for t in wanted)}, "
                    f"not {type(item).__name__} ({item!r:.60})"
                )
    return value


def _type_resolver(value: Any, info: graphql.GraphQLResolveInfo, abstract: Any) -> str | None:
    if isinstance(value, dict) and isinstance(value.get("__typename"), str):
        return value["__typename"]
    possible = info.schema.get_possible_types(abstract)
    return possible[0].name if possible else None


def selection(query: str, variables: dict[str, Any], data: Any) -> Any:
    """`data` (a superset of what `query` asks) cut to what GitHub would answer: exactly
    the fields the document selects, under their aliases. `data` as it is when it does
    not fit the document (the contract check then says why)."""
    document = _parsed(query)
    if isinstance(document, graphql.GraphQLError) or not isinstance(data, dict):
        return data
    result = graphql.execute(
        graphql_schema(),
        document,
        root_value=data,
        variable_values=variables,
        field_resolver=_lenient_resolver,
        type_resolver=_type_resolver,
    )
    return data if result.errors else result.data


def _lenient_resolver(source: Any, info: graphql.GraphQLResolveInfo, **_: Any) -> Any:
    return source.get(info.field_name) if isinstance(source, dict) else None


def _first_difference(sent: Any, expected: Any, path: list[Any]) -> tuple[list[Any], str] | None:
    if isinstance(sent, dict) and isinstance(expected, dict):
        for key in sent:
            if key not in expected:
                return [*path, key], "answered a field the document did not ask for"
        for key in expected:
            if key not in sent:
                return [*path, key], "a field the document asked for is missing"
            found = _first_difference(sent[key], expected[key], [*path, key])
            if found:
                return found
        return None
    if isinstance(sent, list) and isinstance(expected, list):
        for index, (a, b) in enumerate(zip(sent, expected, strict=False)):
            found = _first_difference(a, b, [*path, index])
            if found:
                return found
        return None
    if sent != expected:
        return path, f"{sent!r:.80} is not what the schema makes of it ({expected!r:.80})"
    return None


# --- the contract ---


@dataclass
class Contract:
    """Checks the fake's exchanges; `violations` holds what left the description."""

    violations: list[Violation] = field(default_factory=list)
    tolerating: int = 0
    tolerated_violations: list[Violation] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def clear(self) -> None:
        with self.lock:
            self.violations.clear()
            self.tolerated_violations.clear()
            self.tolerating = 0

    def take(self) -> list[Violation]:
        """The violations so far, and none afterwards."""
        with self.lock:
            found, self.violations = self.violations, []
            return found

    @contextlib.contextmanager
    def tolerated(self) -> Iterator[list[Violation]]:
        """Within: violations are set aside (in the list yielded), not reported; for a test
        that sends the fake a deliberately wrong request."""
        with self.lock:
            self.tolerating += 1
            start = len(self.tolerated_violations)
        seen: list[Violation] = []
        try:
            yield seen
        finally:
            with self.lock:
                self.tolerating -= 1
                seen.extend(self.tolerated_violations[start:])

    def _add(self, exchange: Exchange, part: str, pointer: str, problem: str) -> None:
        violation = Violation(exchange.operation, exchange.sent, part, pointer, problem)
        if log := os.environ.get("TASUKU_CONTRACT_LOG"):  # a debugging aid: every violation
            with open(log, "a", encoding="utf-8") as f:
                f.write(json.dumps(dataclasses.asdict(violation)) + "\n")
        with self.lock:
            (self.tolerated_violations if self.tolerating else self.violations).append(violation)

    # --- requests ---

    def request(
        self, method: str, path: str, query: dict[str, list[str]], body: Any, raw: bytes
    ) -> Exchange:
        """Check one request as it arrived (`path` without its query string; `body` the
        parsed JSON or None); the returned exchange is handed to `response`. A failure of
        the check itself is a violation too, never a broken exchange."""
        try:
            return self._request(method, path, query, body, raw)
        except Exception as exc:  # noqa: BLE001  (reported, not raised in the server)
            exchange = Exchange(method, path, f"{method} {path}")
            self._add(exchange, "request", "", f"the contract check failed: {exc!r:.300}")
            return exchange

    def _request(
        self, method: str, path: str, query: dict[str, list[str]], body: Any, raw: bytes
    ) -> Exchange:
        for name, pattern in ALLOWED:
            if pattern.fullmatch(path):
                exchange = Exchange(method, path, f"{method} {path} ({name})")
                if name == "GraphQL":
                    self._graphql_request(exchange, body, raw)
                return exchange
        description = rest_description()
        matched = description.match(method, path)
        if matched is None:
            exchange = Exchange(method, path, f"{method} {path}")
            self._add(
                exchange,
                "request",
                "",
                "no operation in GitHub's description has this method and path",
            )
            return exchange
        template, params = matched
        item = description.raw["paths"][template]
        op = item[method.lower()]
        pointer = pointer_of(["paths", template, method.lower()])
        exchange = Exchange(
            method, path, f"{method} {template} ({op.get('operationId', '?')})", op, pointer
        )
        self._parameters(exchange, description, template, params, query)
        self._body(exchange, description, op, body, raw)
        return exchange

    def _parameters(
        self,
        exchange: Exchange,
        description: RestDescription,
        template: str,
        path_params: dict[str, str],
        query: dict[str, list[str]],
    ) -> None:
        # (in, name) -> (the parameter, the JSON pointer of it in the vendored document);
        # the operation's own parameters override the path item's
        item = description.raw["paths"][template]
        method = exchange.method.lower()
        declared: dict[tuple[str, str], tuple[dict[str, Any], str]] = {}
        for owner, entries in (
            (["paths", template], item.get("parameters", [])),
            (["paths", template, method], item[method].get("parameters", [])),
        ):
            for index, entry in enumerate(entries):
                where = pointer_of([*owner, "parameters", index])
                if "$ref" in entry:
                    where = entry["$ref"][1:]
                parameter = description.ref(entry)
                declared[(parameter["in"], parameter["name"])] = (parameter, where)
        supplied = {("path", k): [unquote(v)] for k, v in path_params.items()}
        supplied |= {("query", k): v for k, v in query.items()}
        for (place, name), (parameter, _) in declared.items():
            if (
                (place, name) not in supplied
                and parameter.get("required")
                and place in ("path", "query")
            ):
                self._add(
                    exchange, "request", f"/{place}/{name}", "a required parameter is missing"
                )
        for (place, name), values in supplied.items():
            if (place, name) not in declared:
                self._add(
                    exchange,
                    "request",
                    f"/{place}/{_escape(name)}",
                    "not a parameter of this operation (GitHub ignores it)",
                )
                continue
            parameter, where = declared[(place, name)]
            schema = description.ref(parameter.get("schema", {}))
            if len(values) > 1 and schema.get("type") != "array":
                self._add(
                    exchange, "request", f"/{place}/{_escape(name)}", f"sent {len(values)} times"
                )
            value = _coerce(values, schema)
            for sub, problem in description.errors(f"{where}/schema", value):
                self._add(exchange, "request", f"/{place}/{_escape(name)}{sub}", problem)

    def _body(
        self,
        exchange: Exchange,
        description: RestDescription,
        op: dict[str, Any],
        body: Any,
        raw: bytes,
    ) -> None:
        request_body = description.ref(op.get("requestBody"))
        if not request_body:
            if raw.strip():
                self._add(exchange, "request", "/body", "this operation takes no request body")
            return
        if not raw.strip():
            if request_body.get("required"):
                self._add(exchange, "request", "/body", "the required request body is missing")
            return
        content = request_body.get("content", {})
        if "application/json" not in content:
            return
        try:
            parsed = json.loads(raw)
        except ValueError:
            self._add(exchange, "request", "/body", "the body is not JSON")
            return
        pointer = f"{exchange.pointer}/requestBody/content/application~1json/schema"
        if "$ref" in op["requestBody"]:
            pointer = op["requestBody"]["$ref"][1:] + "/content/application~1json/schema"
        for sub, problem in description.errors(pointer, parsed):
            self._add(exchange, "request", f"/body{sub}", problem)

    def _graphql_request(self, exchange: Exchange, body: Any, raw: bytes) -> None:
        if exchange.method != "POST":
            self._add(exchange, "request", "", "GraphQL is sent as POST")
            return
        if not isinstance(body, dict) or not isinstance(body.get("query"), str):
            self._add(exchange, "request", "/body", "not a JSON object with a string `query`")
            return
        variables = body.get("variables") or {}
        if not isinstance(variables, dict):
            self._add(exchange, "request", "/body/variables", "not a JSON object")
            return
        extra = set(body) - {"query", "variables", "operationName"}
        if extra:
            self._add(exchange, "request", "/body", f"unknown members: {sorted(extra)}")
        document = _parsed(body["query"])
        if isinstance(document, graphql.GraphQLError):
            self._add(exchange, "request", "/body/query", f"syntax: {document.message}")
            return
        for message in _validation(body["query"])[:1]:
            self._add(exchange, "request", "/body/query", message)
            return
        name = body.get("operationName")
        operation = _operation(document, name)
        if operation is None:
            self._add(exchange, "request", "/body/operationName", "names no single operation")
            return
        exchange.operation = f"POST /graphql ({operation.operation.value} {name or (operation.name.value if operation.name else '')})".replace(
            " )", ")"
        )
        coerced = graphql.execution.values.get_variable_values(
            graphql_schema(), operation.variable_definitions or (), variables
        )
        if isinstance(coerced, list):
            for error in coerced:
                self._add(exchange, "request", "/body/variables", _graphql_message(error))
            return
        declared = {v.variable.name.value for v in operation.variable_definitions or ()}
        for unknown in sorted(set(variables) - declared):
            self._add(
                exchange, "request", f"/body/variables/{unknown}", "not a variable of the document"
            )
        exchange.graphql = (document, variables, name)

    # --- answers ---

    def response(
        self, exchange: Exchange | None, status: int, payload: Any, *, json_body: bool
    ) -> None:
        """Check the answer to `exchange` (`json_body`: `payload` is sent as JSON; else
        it is raw bytes or nothing)."""
        if exchange is None:
            return
        try:
            self._response(exchange, status, payload, json_body=json_body)
        except Exception as exc:  # noqa: BLE001  (reported, not raised in the server)
            self._add(
                exchange, f"response {status}", "", f"the contract check failed: {exc!r:.300}"
            )

    def _response(self, exchange: Exchange, status: int, payload: Any, *, json_body: bool) -> None:
        if exchange.graphql is not None and json_body:
            self._graphql_response(exchange, status, payload)
            return
        if exchange.op is None:
            return
        description = rest_description()
        part = f"response {status}"
        responses = exchange.op.get("responses", {})
        key = next(
            (k for k in (str(status), f"{status // 100}XX", "default") if k in responses), None
        )
        if key is None:
            if status < 400:
                self._add(
                    exchange,
                    part,
                    "",
                    f"status {status} is not an answer this operation describes (it describes {', '.join(responses)})",
                )
            elif json_body and payload is not None:
                for sub, problem in description.errors(ERROR_SCHEMA[1:], payload):
                    self._add(exchange, part, sub, f"{problem} (GitHub's error body)")
            return
        response = responses[key]
        pointer = f"{exchange.pointer}/responses/{key}"
        if "$ref" in response:
            pointer = response["$ref"][1:]
        response = description.ref(response)
        content = response.get("content") or {}
        if not content:
            if json_body and payload is not None:
                self._add(exchange, part, "", "answered a body where GitHub answers none")
            return
        if not json_body:
            return  # a diff, a patch: not JSON, not checked here
        media = "application/json" if "application/json" in content else next(iter(content))
        if "schema" not in content[media]:
            return
        if payload is None:
            self._add(exchange, part, "", "answered no body where GitHub answers one")
            return
        schema_pointer = f"{pointer}/content/{_escape(media)}/schema"
        for sub, problem in description.errors(schema_pointer, payload):
            self._add(exchange, part, sub, problem)

    def _graphql_response(self, exchange: Exchange, status: int, payload: Any) -> None:
        part = f"response {status}"
        if status != 200:
            return
        if not isinstance(payload, dict) or not ({"data", "errors"} & set(payload)):
            self._add(exchange, part, "", "not a JSON object with `data` or `errors`")
            return
        errors = payload.get("errors")
        if errors is not None:
            if not isinstance(errors, list) or not errors:
                self._add(exchange, part, "/errors", "not a non-empty list")
                return
            for index, error in enumerate(errors):
                if not isinstance(error, dict) or not isinstance(error.get("message"), str):
                    self._add(
                        exchange, part, f"/errors/{index}", "an error without a string `message`"
                    )
            return  # partial data beside errors: not checked
        assert exchange.graphql is not None
        document, variables, name = exchange.graphql
        data = payload.get("data")
        result = graphql.execute(
            graphql_schema(),
            document,
            root_value=data,
            variable_values=variables,
            operation_name=name,
            field_resolver=_field_resolver,
            type_resolver=_type_resolver,
        )
        if result.errors:
            for error in result.errors:
                self._add(
                    exchange,
                    part,
                    pointer_of(["data", *(error.path or [])]),
                    str(error.original_error or error.message),
                )
            return
        difference = _first_difference(data, result.data, ["data"])
        if difference:
            self._add(exchange, part, pointer_of(difference[0]), difference[1])


def _coerce(values: list[str], schema: dict[str, Any]) -> Any:
    """A query or path parameter's text as the JSON value its schema describes."""
    kind = schema.get("type")
    if kind == "array":
        items = [piece for value in values for piece in value.split(",")]
        return [_coerce([item], schema.get("items") or {}) for item in items]
    value = values[-1]
    if kind == "integer" and re.fullmatch(r"-?\d+", value):
        return int(value)
    if kind == "number":
        try:
            return float(value)
        except ValueError:
            return value
    if kind == "boolean" and value in ("true", "false"):
        return value == "true"
    return value
