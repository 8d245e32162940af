"""Every GraphQL document the gateway sends (repos/github/) is valid against GitHub's
published GraphQL schema (vendored: tests/contract/github-schema.graphql.gz)."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import graphql
import pytest

import repos.github
from tests.fakes.github.contract import graphql_document_errors, graphql_schema

GATEWAY = Path(repos.github.__file__).resolve().parent


def _documents() -> dict[str, str]:
    """Module-level strings of repos/github/ that are GraphQL operations, by qualified name."""
    found: dict[str, str] = {}
    for module in pkgutil.iter_modules([str(GATEWAY)]):
        loaded = importlib.import_module(f"repos.github.{module.name}")
        for name, value in vars(loaded).items():
            if isinstance(value, str) and value.lstrip().startswith(("query", "mutation", "{")):
                try:
                    graphql.parse(value)
                except graphql.GraphQLError:
                    continue
                found[f"{module.name}.{name}"] = value
    return found


DOCUMENTS = _documents()


def test_the_gateways_documents_are_found():
    assert {"conversation.THREADS_QUERY", "conversation.RESOLVE_MUTATION"} <= set(DOCUMENTS)


@pytest.mark.parametrize("name", sorted(DOCUMENTS))
def test_a_document_validates_against_githubs_schema(name):
    assert graphql_document_errors(DOCUMENTS[name]) == []


def test_every_graphql_call_in_the_gateway_sends_a_checked_document():
    """Each `graphql_query(...)` call in repos/github/ names a module-level document
    (directly or in a conditional expression), so that the test above covers it."""
    unchecked = []
    for path in sorted(GATEWAY.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr
                in ("graphql_query", "graphql_query_class", "graphql_named_mutation")
            ):
                continue
            names = _names(node.args[0]) if node.args else []
            if not names or any(f"{path.stem}.{n}" not in DOCUMENTS for n in names):
                unchecked.append(f"{path.name}:{node.lineno}")
    assert not unchecked, f"GraphQL sent from a document the static check cannot see: {unchecked}"


def _names(node: ast.expr) -> list[str]:
    """The module-level names an argument may be: `DOC`, `A if c else B` ([] otherwise)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.IfExp):
        body, orelse = _names(node.body), _names(node.orelse)
        return body + orelse if body and orelse else []
    return []


def test_an_invalid_document_is_reported():
    assert graphql_document_errors("query { viewer { nonsense } }") == [
        "Cannot query field 'nonsense' on type 'User'. (at 1:18)"
    ]
    assert graphql_document_errors("query {")[0].startswith("syntax:")


def test_the_vendored_schema_is_githubs():
    schema = graphql_schema()
    assert schema.query_type and schema.query_type.name == "Query"
    assert "resolveReviewThread" in schema.mutation_type.fields  # type: ignore[union-attr]
