"""Refresh the vendored GitHub contract: the REST operations Tasuku uses, cut out of
GitHub's published OpenAPI description, GitHub's GraphQL schema, and the JSON schemas of
GitHub's webhook payloads.

    .venv/bin/python -m tests.contract.vendor                 # the latest published versions
    .venv/bin/python -m tests.contract.vendor --openapi 23.0.2 --graphql 15.26.1 --webhooks 7.6.1
    .venv/bin/python -m tests.contract.vendor --from DIR      # tarballs already in DIR

Needs `npm` and the npm registry (the test suite needs neither: the files written here
are committed). It runs `npm pack` for @octokit/openapi, @octokit/graphql-schema and
@octokit/webhooks-schemas, then writes, beside this file:

- `github-rest.json`: from `generated/api.github.com.json` (OpenAPI 3.0), only the
  operations in OPERATIONS, with every component they reference (`$ref`, followed
  transitively), examples dropped; `x-tasuku-vendored` records the package, its version,
  its licence and the source file's sha256.
- `github-schema.graphql.gz`: the package's `schema.graphql`, whole, under a comment
  header naming the package, version and licence.
- `github-webhooks.json.gz`: the package's `schema.json` (JSON Schema draft 7, one
  definition per event and action, e.g. `pull_request$opened`, `ping$event`), whole,
  with an `x-tasuku-vendored` member naming the package, version, licence and sha256.
- `LICENSE.octokit-openapi`, `LICENSE.octokit-graphql-schema` and
  `LICENSE.octokit-webhooks-schemas`: the packages' licences (all MIT). The webhook
  schemas' package ships no licence file (only `"license": "MIT"` in package.json and a
  README pointing at LICENSE.md in github.com/octokit/webhooks), so its file is the MIT
  text written here under a header saying so.

When the gateway (repos/github/) or the fake (tests/fakes/github/) starts using another
REST operation, add it to OPERATIONS and run this again.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import hashlib
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REST_FILE = HERE / "github-rest.json"
GRAPHQL_FILE = HERE / "github-schema.graphql.gz"
WEBHOOKS_FILE = HERE / "github-webhooks.json.gz"
OPENAPI_PACKAGE = "@octokit/openapi"
GRAPHQL_PACKAGE = "@octokit/graphql-schema"
WEBHOOKS_PACKAGE = "@octokit/webhooks-schemas"
OPENAPI_SOURCE = "generated/api.github.com.json"

# (method, path template as GitHub's description spells it), grouped by who sends it.
OPERATIONS: list[tuple[str, str]] = [
    # The gateway, as the App (JWT): repos/github/gateway.py
    ("GET", "/app"),
    ("GET", "/app/installations/{installation_id}"),
    ("POST", "/app/installations/{installation_id}/access_tokens"),
    # The author's App, after each post: its token revoked (reviews/passes/author.py)
    ("DELETE", "/installation/token"),
    ("GET", "/repos/{owner}/{repo}/installation"),
    # The gateway, as an installation: repos/github/gateway.py
    ("GET", "/repos/{owner}/{repo}"),
    ("GET", "/repos/{owner}/{repo}/pulls/{pull_number}"),
    ("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews"),
    ("POST", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews"),
    ("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews/{review_id}/comments"),
    ("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/comments"),
    ("POST", "/repos/{owner}/{repo}/check-runs"),
    ("PATCH", "/repos/{owner}/{repo}/check-runs/{check_run_id}"),
    ("GET", "/repos/{owner}/{repo}/commits/{ref}/check-runs"),
    # repos/github/conversation.py
    ("GET", "/repos/{owner}/{repo}/collaborators/{username}/permission"),
    ("POST", "/repos/{owner}/{repo}/pulls/{pull_number}/comments/{comment_id}/replies"),
    ("PUT", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews/{review_id}/dismissals"),
    ("GET", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
    ("POST", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
    # The GitHub issue connector (repos/github/issues.py; repos/connectors/)
    ("GET", "/repos/{owner}/{repo}/issues/{issue_number}"),
    # The walkthrough comment, edited in place (reviews/publication/walkthrough.py)
    ("PATCH", "/repos/{owner}/{repo}/issues/comments/{comment_id}"),
    # repos/github/checks.py
    ("GET", "/repos/{owner}/{repo}/branches/{branch}/protection/required_status_checks"),
    ("GET", "/repos/{owner}/{repo}/commits/{ref}/status"),
    # repos/github/actions.py
    ("GET", "/repos/{owner}/{repo}/actions/workflows/{workflow_id}"),
    ("POST", "/repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches"),
    ("GET", "/repos/{owner}/{repo}/actions/workflows/{workflow_id}/runs"),
    ("GET", "/repos/{owner}/{repo}/actions/runs/{run_id}"),
    # The fake's other routes, which tests call directly (tests/fakes/github/)
    ("GET", "/app/installations"),
    ("GET", "/installation/repositories"),
    ("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/files"),
    ("GET", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews/{review_id}"),
    ("GET", "/repos/{owner}/{repo}/check-runs/{check_run_id}"),
    ("POST", "/repos/{owner}/{repo}/statuses/{sha}"),
    ("DELETE", "/repos/{owner}/{repo}/pulls/{pull_number}/requested_reviewers"),
    # Merge queues (repos/github/commits.py), re-running a check suite, missed deliveries
    # (issue 15's work; vendored ahead of some of it)
    ("GET", "/repos/{owner}/{repo}/commits/{commit_sha}/pulls"),
    ("GET", "/repos/{owner}/{repo}/compare/{basehead}"),
    ("GET", "/repos/{owner}/{repo}/check-suites/{check_suite_id}/check-runs"),
    ("GET", "/app/hook/deliveries"),
    ("GET", "/app/hook/deliveries/{delivery_id}"),
    ("POST", "/app/hook/deliveries/{delivery_id}/attempts"),
    # A summary updated in place when a push brings nothing new (reviews/publication/review.py)
    ("PUT", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews/{review_id}"),
    # A probe of which review comments GitHub refuses, deleted after (reviews/publication/review.py)
    ("DELETE", "/repos/{owner}/{repo}/pulls/{pull_number}/reviews/{review_id}"),
    # Creating the App from a manifest (repos/github/manifest.py; no authentication)
    ("POST", "/app-manifests/{code}/conversions"),
    # A review's one-click fixes proposed as a pull request (repos/github/branches.py,
    # reviews/publication/fixes.py): the head's files read, a commit made on a branch of Tasuku's,
    # and the pull request into the head branch opened, edited and closed
    ("GET", "/repos/{owner}/{repo}/git/commits/{commit_sha}"),
    ("GET", "/repos/{owner}/{repo}/git/trees/{tree_sha}"),
    ("GET", "/repos/{owner}/{repo}/git/blobs/{file_sha}"),
    ("POST", "/repos/{owner}/{repo}/git/trees"),
    ("POST", "/repos/{owner}/{repo}/git/commits"),
    ("GET", "/repos/{owner}/{repo}/git/ref/{ref}"),
    ("POST", "/repos/{owner}/{repo}/git/refs"),
    ("PATCH", "/repos/{owner}/{repo}/git/refs/{ref}"),
    ("DELETE", "/repos/{owner}/{repo}/git/refs/{ref}"),
    ("GET", "/repos/{owner}/{repo}/pulls"),
    ("POST", "/repos/{owner}/{repo}/pulls"),
    ("PATCH", "/repos/{owner}/{repo}/pulls/{pull_number}"),
]

# Components every answer may need whatever the operation: GitHub's error bodies (the
# fake's 4xx/5xx answers an operation does not describe are checked against these).
EXTRA_COMPONENTS = [
    "#/components/schemas/basic-error",
    "#/components/schemas/validation-error",
    "#/components/schemas/validation-error-simple",
]

# Keys that are a map of names (a property called "example" is not an example).
NAME_MAPS = {"properties", "patternProperties", "content", "headers", "responses", "links"}
DROPPED = {"example", "examples"}


def npm_pack(package: str, version: str | None, into: Path) -> Path:
    spec = f"{package}@{version}" if version else package
    out = subprocess.run(
        ["npm", "pack", spec, "--pack-destination", str(into), "--json"],
        check=True,
        capture_output=True,
        text=True,
    )
    return into / json.loads(out.stdout)[0]["filename"]


def tarball_in(directory: Path, package: str) -> Path:
    stem = package.lstrip("@").replace("/", "-")
    found = sorted(directory.glob(f"{stem}-[0-9]*.tgz"))
    if not found:
        sys.exit(f"no {stem}-VERSION.tgz in {directory}")
    return found[-1]


def members(tarball: Path, *names: str) -> dict[str, bytes]:
    with tarfile.open(tarball) as tar:
        return {
            name: tar.extractfile(f"package/{name}").read()  # type: ignore[union-attr]
            for name in names
        }


def strip_examples(node: Any, names: bool = False) -> Any:
    """`node` without `example`/`examples` (never a property or header of that name)."""
    if isinstance(node, dict):
        return {
            key: strip_examples(value, names=not names and key in NAME_MAPS)
            for key, value in node.items()
            if names or key not in DROPPED
        }
    if isinstance(node, list):
        return [strip_examples(item) for item in node]
    return node


def refs_in(node: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str):
            found.add(ref)
        for value in node.values():
            found |= refs_in(value)
    elif isinstance(node, list):
        for item in node:
            found |= refs_in(item)
    return found


def resolve(spec: dict[str, Any], ref: str) -> Any:
    if not ref.startswith("#/"):
        raise SystemExit(f"a $ref outside the document: {ref}")
    node: Any = spec
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def cut(spec: dict[str, Any]) -> dict[str, Any]:
    """The part of `spec` that OPERATIONS and EXTRA_COMPONENTS need."""
    paths: dict[str, dict[str, Any]] = {}
    for method, template in OPERATIONS:
        item = spec["paths"].get(template)
        if item is None or method.lower() not in item:
            raise SystemExit(f"{method} {template} is not in the description")
        kept = paths.setdefault(template, {})
        if "parameters" in item:
            kept["parameters"] = item["parameters"]
        kept[method.lower()] = item[method.lower()]
    paths = strip_examples(paths)
    components: dict[str, dict[str, Any]] = {}
    pending = refs_in(paths) | set(EXTRA_COMPONENTS)
    seen: set[str] = set()
    while pending:
        ref = pending.pop()
        if ref in seen:
            continue
        seen.add(ref)
        _, _, kind, name = ref.split("/", 3)
        target = strip_examples(copy.deepcopy(resolve(spec, ref)))
        components.setdefault(kind, {})[name] = target
        pending |= refs_in(target) - seen
    return {
        "openapi": spec["openapi"],
        "info": spec["info"],
        "servers": spec.get("servers", []),
        "paths": dict(sorted(paths.items())),
        "components": {
            kind: dict(sorted(items.items())) for kind, items in sorted(components.items())
        },
    }


def write_gzip(path: Path, data: bytes) -> None:
    # mtime=0: the same input writes the same bytes (no diff on a refresh that changed nothing)
    with path.open("wb") as raw, gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as f:
        f.write(data)


def vendor_rest(tarball: Path) -> None:
    files = members(tarball, "package.json", "LICENSE", OPENAPI_SOURCE)
    package = json.loads(files["package.json"])
    source = files[OPENAPI_SOURCE]
    vendored = cut(json.loads(source))
    vendored["x-tasuku-vendored"] = {
        "package": package["name"],
        "version": package["version"],
        "license": package["license"],
        "license_file": "LICENSE.octokit-openapi",
        "source_file": OPENAPI_SOURCE,
        "source_sha256": hashlib.sha256(source).hexdigest(),
        "operations": [f"{m} {p}" for m, p in OPERATIONS],
        "refresh": "python -m tests.contract.vendor (see its docstring)",
        "note": "A cut of GitHub's description: only the operations listed, the components "
        "they reference, no examples.",
    }
    REST_FILE.write_text(json.dumps(vendored, indent=1) + "\n")
    (HERE / "LICENSE.octokit-openapi").write_bytes(files["LICENSE"])
    print(
        f"{REST_FILE.name}: {package['name']} {package['version']}, "
        f"{len(OPERATIONS)} operations, "
        f"{sum(len(v) for v in vendored['components'].values())} components, "
        f"{REST_FILE.stat().st_size} bytes"
    )


def vendor_graphql(tarball: Path) -> None:
    files = members(tarball, "package.json", "LICENSE.md", "schema.graphql")
    package = json.loads(files["package.json"])
    source = files["schema.graphql"]
    header = (
        f"# Vendored from the npm package {package['name']} {package['version']} "
        f"(schema.graphql, sha256 {hashlib.sha256(source).hexdigest()}).\n"
        f"# Licence: {package['license']}, see LICENSE.octokit-graphql-schema beside this file.\n"
        "# Refresh: python -m tests.contract.vendor (tests/contract/vendor.py).\n"
    )
    write_gzip(GRAPHQL_FILE, header.encode() + source)
    (HERE / "LICENSE.octokit-graphql-schema").write_bytes(files["LICENSE.md"])
    print(
        f"{GRAPHQL_FILE.name}: {package['name']} {package['version']}, "
        f"{GRAPHQL_FILE.stat().st_size} bytes"
    )


MIT_TEXT = """\
Permission is hereby granted, free of charge, to any person obtaining a copy of this
software and associated documentation files (the "Software"), to deal in the Software
without restriction, including without limitation the rights to use, copy, modify, merge,
publish, distribute, sublicense, and/or sell copies of the Software, and to permit persons
to whom the Software is furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all copies or
substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED,
INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY, FITNESS FOR A PARTICULAR
PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE AUTHORS OR COPYRIGHT HOLDERS BE LIABLE
FOR ANY CLAIM, DAMAGES OR OTHER LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR
OTHERWISE, ARISING FROM, OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER
DEALINGS IN THE SOFTWARE.
"""


def vendor_webhooks(tarball: Path) -> None:
    files = members(tarball, "package.json", "schema.json")
    package = json.loads(files["package.json"])
    source = files["schema.json"]
    schema = json.loads(source)
    # An unknown keyword is ignored by JSON Schema validators: the record can ride along.
    schema["x-tasuku-vendored"] = {
        "package": package["name"],
        "version": package["version"],
        "license": package["license"],
        "license_file": "LICENSE.octokit-webhooks-schemas",
        "source_file": "schema.json",
        "source_sha256": hashlib.sha256(source).hexdigest(),
        "refresh": "python -m tests.contract.vendor (see its docstring)",
    }
    write_gzip(WEBHOOKS_FILE, (json.dumps(schema, indent=1) + "\n").encode())
    if package["license"] != "MIT":
        sys.exit(f"{package['name']} is now licensed {package['license']}: look before vendoring")
    try:
        licence = members(tarball, "LICENSE.md")["LICENSE.md"].decode()
    except KeyError:
        licence = (
            f'{package["name"]} {package["version"]} declares "license": "MIT" in its '
            "package.json and ships no licence\nfile; its README links to LICENSE.md in "
            f"{package['repository']}. The MIT licence:\n\n" + MIT_TEXT
        )
    (HERE / "LICENSE.octokit-webhooks-schemas").write_text(licence)
    print(
        f"{WEBHOOKS_FILE.name}: {package['name']} {package['version']}, "
        f"{len(schema['definitions'])} definitions, {WEBHOOKS_FILE.stat().st_size} bytes"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--openapi", help=f"the {OPENAPI_PACKAGE} version (default: latest)")
    parser.add_argument("--graphql", help=f"the {GRAPHQL_PACKAGE} version (default: latest)")
    parser.add_argument("--webhooks", help=f"the {WEBHOOKS_PACKAGE} version (default: latest)")
    parser.add_argument(
        "--from", dest="source", type=Path, help="a folder holding the three packed tarballs"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        if args.source:
            openapi = tarball_in(args.source, OPENAPI_PACKAGE)
            graphql = tarball_in(args.source, GRAPHQL_PACKAGE)
            webhooks = tarball_in(args.source, WEBHOOKS_PACKAGE)
        else:
            openapi = npm_pack(OPENAPI_PACKAGE, args.openapi, Path(tmp))
            graphql = npm_pack(GRAPHQL_PACKAGE, args.graphql, Path(tmp))
            webhooks = npm_pack(WEBHOOKS_PACKAGE, args.webhooks, Path(tmp))
        vendor_rest(openapi)
        vendor_graphql(graphql)
        vendor_webhooks(webhooks)


if __name__ == "__main__":
    main()
