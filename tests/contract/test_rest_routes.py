"""Every REST route Tasuku's code calls is an operation of GitHub's description
(`github-rest.json`, vendored), read from the code without running it.

The fake's contract (tests/fakes/github/contract.py) checks the routes the tests drive;
this test checks the ones no test happens to drive too. It reads, in the project's code:

- each `requester.requestJsonAndCheck(METHOD, URL, ...)`: the URL as the code builds
  it, an f-string or a string, followed through the names it is built from (a variable
  of the function or of an enclosing one, a parameter through every call that passes it,
  a module function returning an f-string). A formatted value the test cannot follow
  (`{owner}`, `{quote(branch)}`) stands for one path segment. A URL it cannot read at
  all fails the test: build it as an f-string, or teach `_templates` the new shape.
- each `requests.<verb>(URL)` in the gateway (repos/github/; the manifest conversion,
  which needs no authentication), its URL read the same way after the API's base.
- each call of a PyGithub method that requests something by itself: PyGithub builds
  those URLs inside the library, so `PYGITHUB_ROUTES` below names the route of each
  method the code uses (checked against the method's own source), and a call of a
  PyGithub method the table does not name, in a module that imports PyGithub or in the
  gateway, fails the test.

GraphQL documents are checked apart (test_graphql_documents.py).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import github
import pytest

from tests.fakes.github.contract import MULTI_SEGMENT, rest_description

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("repos", "reviews", "webhooks", "tasuku", "sandbox")

# PyGithub method → (the route it requests, where PyGithub defines it). GraphQL
# (`graphql_query`) is checked by test_graphql_documents.py; `requestJsonAndCheck` is
# read from its arguments.
PYGITHUB_ROUTES: dict[str, tuple[str, str, object]] = {
    "get_repo": ("GET", "/repos/{owner}/{repo}", github.Github.get_repo),
    "get_pull": (
        "GET",
        "/repos/{owner}/{repo}/pulls/{pull_number}",
        github.Repository.Repository.get_pull,
    ),
    "create_check_run": (
        "POST",
        "/repos/{owner}/{repo}/check-runs",
        github.Repository.Repository.create_check_run,
    ),
    "get_app": ("GET", "/app", github.GithubIntegration.get_app),
    "get_repo_installation": (
        "GET",
        "/repos/{owner}/{repo}/installation",
        github.GithubIntegration.get_repo_installation,
    ),
}
NOT_A_ROUTE = {"requestJsonAndCheck", "graphql_query"}
# The segment a formatted value the test cannot follow stands for.
ANY = "\0"


@dataclass(frozen=True)
class Call:
    where: str  # path:line
    method: str
    url: str  # with ANY for each segment value the code fills in


GATEWAY = "repos/github/"
HTTP_VERBS = {"get", "post", "put", "patch", "delete"}


def _modules() -> list[tuple[str, ast.Module]]:
    return [
        (str(path.relative_to(ROOT)), ast.parse(path.read_text()))
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    ]


def _uses_pygithub(path: str, tree: ast.Module) -> bool:
    return path.startswith(GATEWAY) or any(
        (isinstance(node, ast.Import) and any(a.name.split(".")[0] == "github" for a in node.names))
        or (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "github")
        for node in ast.walk(tree)
    )


def _parents(tree: ast.AST) -> dict[ast.AST, ast.AST]:
    return {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}


class Reader:
    """Follows the expression a URL is built from back to string templates."""

    def __init__(self, modules: list[tuple[str, ast.Module]]) -> None:
        self.modules = modules
        self.parents: dict[ast.AST, ast.AST] = {}
        self.functions: dict[str, list[ast.FunctionDef]] = {}
        self.calls: dict[str, list[ast.Call]] = {}
        for _, tree in modules:
            self.parents |= _parents(tree)
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef):
                    self.functions.setdefault(node.name, []).append(node)
                elif isinstance(node, ast.Call):
                    func = node.func
                    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                    self.calls.setdefault(name, []).append(node)

    def _enclosing(self, node: ast.AST) -> Iterator[ast.FunctionDef]:
        while node in self.parents:
            node = self.parents[node]
            if isinstance(node, ast.FunctionDef):
                yield node

    def _templates(self, expr: ast.expr, depth: int = 0) -> set[str] | None:
        """The strings `expr` may be, each formatted value it cannot follow as ANY;
        None when it is no string the test can read."""
        if depth > 8:
            return None
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return {expr.value}
        if isinstance(expr, ast.JoinedStr):
            found = {""}
            for part in expr.values:
                if isinstance(part, ast.Constant):
                    pieces = {str(part.value)}
                else:
                    assert isinstance(part, ast.FormattedValue)
                    pieces = self._templates(part.value, depth + 1) or {ANY}
                found = {a + b for a in found for b in pieces}
            return found
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
            left = self._templates(expr.left, depth + 1)
            right = self._templates(expr.right, depth + 1)
            if left is None or right is None:
                return None
            return {a + b for a in left for b in right}
        if isinstance(expr, ast.Name):
            return self._name(expr, depth)
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name):
            # A module function that returns one string template (`_workflow_url`).
            found: set[str] = set()
            for function in self.functions.get(expr.func.id, []):
                returns = [n for n in ast.walk(function) if isinstance(n, ast.Return)]
                for ret in returns:
                    got = self._templates(ret.value, depth + 1) if ret.value else None
                    if got is None:
                        return None
                    found |= got
            return found or None
        return None

    def _name(self, name: ast.Name, depth: int) -> set[str] | None:
        for function in self._enclosing(name):
            assigned = [
                node.value
                for node in ast.walk(function)
                if isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == name.id for t in node.targets)
            ]
            if assigned:
                found: set[str] = set()
                for value in assigned:
                    got = self._templates(value, depth + 1)
                    if got is None:
                        return None
                    found |= got
                return found
            params = [a.arg for a in function.args.args + function.args.kwonlyargs]
            if name.id in params:
                return self._argument(function, name.id, depth)
        return None

    def _argument(self, function: ast.FunctionDef, param: str, depth: int) -> set[str] | None:
        """What every call of `function` passes as `param`."""
        positional = [a.arg for a in function.args.args]
        found: set[str] = set()
        calls = self.calls.get(function.name, [])
        for call in calls:
            args = call.args
            if isinstance(call.func, ast.Attribute) and positional[:1] == ["self"]:
                args = [call.func.value, *args]  # type: ignore[list-item]
            given = [k.value for k in call.keywords if k.arg == param]
            if param in positional and positional.index(param) < len(args):
                given.append(args[positional.index(param)])
            for expr in given:
                got = self._templates(expr, depth + 1)
                if got is None:
                    return None
                found |= got
        return found or None

    def rest_calls(self) -> Iterator[Call | str]:
        """Each REST call the code makes, or the place of one whose URL it cannot read."""
        for path, tree in self.modules:
            for node in ast.walk(tree):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                    continue
                where = f"{path}:{node.lineno}"
                if node.func.attr == "requestJsonAndCheck":
                    method, url = node.args[0], node.args[1]
                    urls = self._templates(url)
                    if not (isinstance(method, ast.Constant) and urls):
                        yield where
                        continue
                    for template in urls:
                        yield Call(where, method.value, template)
                elif (
                    node.func.attr in HTTP_VERBS
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "requests"
                    and path.startswith(GATEWAY)
                ):
                    urls = self._templates(node.args[0]) if node.args else None
                    if not urls or not all(u.startswith(ANY + "/") for u in urls):
                        yield where
                        continue
                    for template in urls:
                        yield Call(where, node.func.attr.upper(), template[len(ANY) :])
                elif node.func.attr in PYGITHUB_ROUTES and _uses_pygithub(path, tree):
                    method, route, _ = PYGITHUB_ROUTES[node.func.attr]
                    yield Call(where, method, re.sub(r"\{[^}]+\}", ANY, route))


def _pygithub_methods() -> set[str]:
    """Every public method name of PyGithub's classes but those of Python's own types
    (`get`, `close`, `read`…), which the code calls on other objects too."""
    names: set[str] = set()
    for cls in _pygithub_classes():
        names |= {n for n, v in vars(cls).items() if callable(v) and not n.startswith("_")}
    ordinary = set().union(*(dir(t) for t in (dict, list, str, set, bytes, object)))
    return names - ordinary - {"close", "read", "delete", "request", "new", "ping"}


def _pygithub_classes() -> list[type]:
    classes = []
    for info in pkgutil.iter_modules(github.__path__):
        try:
            module = importlib.import_module(f"github.{info.name}")
        except ImportError:
            continue
        classes += [
            c
            for _, c in inspect.getmembers(module, inspect.isclass)
            if c.__module__ == module.__name__
        ]
    return classes


def _operation(method: str, url: str) -> str | None:
    """The description's path template that `method url` is, or None."""
    concrete = url.split("?", 1)[0].replace(ANY, "x1")
    for template, item in rest_description().raw["paths"].items():
        # A ref or branch name spans segments (`heads/tasuku/fix/pr-7`), as GitHub's
        # router lets it (contract.MULTI_SEGMENT); every other parameter is one segment.
        pattern = (
            "^"
            + re.sub(
                r"\\\{([^}]+)\\\}",
                lambda m: ".+" if m[1] in MULTI_SEGMENT else "[^/]+",
                re.escape(template),
            )
            + "$"
        )
        if method.lower() in item and re.match(pattern, concrete):
            return template
    return None


@pytest.fixture(scope="module")
def reader() -> Reader:
    return Reader(_modules())


def test_every_rest_route_the_code_calls_is_an_operation_of_the_description(reader):
    calls = list(reader.rest_calls())
    unread = [c for c in calls if isinstance(c, str)]
    assert not unread, f"REST calls whose method and URL this test cannot read: {unread}"
    missing = [
        f"{c.where}: {c.method} {c.url.replace(ANY, '{…}')}"
        for c in calls
        if isinstance(c, Call) and _operation(c.method, c.url) is None
    ]
    assert not missing, (
        "REST routes the code calls that GitHub's description (as vendored) does not have; "
        "fix the route, or add the operation to OPERATIONS in tests/contract/vendor.py and "
        f"vendor again: {missing}"
    )
    # The reading found the calls it should (a reader that finds nothing passes nothing).
    found = {(c.method, _operation(c.method, c.url)) for c in calls if isinstance(c, Call)}
    assert ("POST", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews") in found
    assert (
        "GET",
        "/repos/{owner}/{repo}/pulls/{pull_number}/reviews/{review_id}/comments",
    ) in found
    assert ("GET", "/repos/{owner}/{repo}/actions/workflows/{workflow_id}/runs") in found
    assert ("POST", "/app-manifests/{code}/conversions") in found
    assert ("GET", "/app/hook/deliveries") in found
    assert len(found) >= 30, sorted(found)


def test_every_pygithub_method_the_code_calls_has_its_route_in_the_table(reader):
    methods = _pygithub_methods()
    untabled = sorted(
        f"{path}:{node.lineno}: {node.func.attr}"
        for path, tree in reader.modules
        if _uses_pygithub(path, tree)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in methods
        and node.func.attr not in PYGITHUB_ROUTES
        and node.func.attr not in NOT_A_ROUTE
    )
    assert not untabled, (
        "PyGithub methods the code calls whose route PYGITHUB_ROUTES does not name "
        f"(add each with the route PyGithub requests): {untabled}"
    )


@pytest.mark.parametrize("name", sorted(PYGITHUB_ROUTES))
def test_the_tables_route_is_the_one_pygithub_requests(name):
    method, route, function = PYGITHUB_ROUTES[name]
    assert _operation(method, re.sub(r"\{[^}]+\}", ANY, route)) == route
    source = inspect.getsource(function)  # type: ignore[arg-type]
    # The route's last fixed segment is spelled in the method (PyGithub builds the rest
    # from the object it is called on).
    last = [s for s in route.split("/") if s and not s.startswith("{")][-1]
    assert last in source, f"{name}: PyGithub's source does not name {last!r}"
    if method != "GET":
        assert f'"{method}"' in source, f"{name}: PyGithub's source does not send {method}"


@pytest.mark.parametrize(
    ("code", "route"),
    [
        ('def f(c, owner, name):\n    c.requester.requestJsonAndCheck("GET", f"/repos/{owner}/{name}/forks")',
         None),  # GitHub has it, but it is not vendored: the code does not list forks
        ('def f(c, owner, name):\n    c.requester.requestJsonAndCheck("GET", f"/repos/{owner}/{name}")',
         "/repos/{owner}/{repo}"),
        ('def f(c, owner, name):\n    url = f"/repos/{owner}/{name}"\n\n'
         '    def g():\n        c.requester.requestJsonAndCheck("PATCH", f"{url}/check-runs/{1}")\n',
         "/repos/{owner}/{repo}/check-runs/{check_run_id}"),
        ('def f(c, s):\n    c.requester.requestJsonAndCheck("GET", f"/repos/o/r/pulls/1/{s}")\n'
         'def g(c):\n    f(c, "reviews")\n    f(c, s="comments")\n',
         "/repos/{owner}/{repo}/pulls/{pull_number}/comments"),
        ('def f(c, s):\n    c.requester.requestJsonAndCheck("GET", f"/repos/o/r/pulls/1/{s}")\n'
         'def g(c):\n    f(c, "nonesuch")\n',
         None),
    ],
    ids=["unvendored", "f-string", "enclosing-variable", "parameter", "parameter-unknown"],
)  # fmt: skip
def test_the_reader_follows_the_url_to_the_route_or_finds_none(code, route):
    reader = Reader([("m.py", ast.parse(code))])
    calls = [c for c in reader.rest_calls() if isinstance(c, Call)]
    assert calls
    routes = {_operation(c.method, c.url) for c in calls}
    if route is None:
        assert None in routes
    else:
        assert route in routes


def test_a_url_the_reader_cannot_follow_is_named_not_passed():
    code = 'def f(c, u):\n    c.requester.requestJsonAndCheck("GET", u.strip())\n'
    assert list(Reader([("m.py", ast.parse(code))]).rest_calls()) == ["m.py:2"]
