"""How the model finds its way in a checkout: `read_file` resolving an import (an
extension left out, an index file, a tsconfig alias, a Python module) without ever
leaving the checkout, and the symbol index (tree-sitter) on a multi-language checkout."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.agent.tools import ToolError, Tools
from sandbox.agent.tools import symbols as symbols_module
from sandbox.agent.tools.resolution import loose_json

TSCONFIG = """{
  // comments and trailing commas are allowed in tsconfig
  "compilerOptions": {
    "baseUrl": ".",
    /* the aliases */
    "paths": {"@/*": ["src/*"], "@evil/*": ["../outside/*"], "~config": ["config/app.ts",],},
  },
}
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    checkout = tmp_path / "checkout"
    files = {
        "tsconfig.json": TSCONFIG,
        "src/foo.ts": "export const foo = 1;\n",
        "src/lib/x.ts": "export function x() {}\n",
        "src/comp/index.tsx": "export default function Comp() { return null; }\n",
        "src/util.ts": "export const u = 1;\n",
        "src/util.js": "exports.u = 1;\n",
        "config/app.ts": "export const app = {};\n",
        "pkg/__init__.py": "",
        "pkg/mod.py": "class Thing:\n    pass\n",
    }
    for name, text in files.items():
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        (checkout / name).write_text(text)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.ts").write_text("export const secret = 'outside';\n")
    (checkout / "src" / "leak.py").symlink_to(tmp_path / "outside" / "secret.ts")
    return checkout


@pytest.mark.parametrize(
    ("asked", "read", "how"),
    [
        ("src/foo", "src/foo.ts", "without its extension"),
        ("./src/foo", "src/foo.ts", "without its extension"),
        ("src/comp", "src/comp/index.tsx", "without its extension"),
        ("@/lib/x", "src/lib/x.ts", "through the alias '@/*'"),
        ("~config", "config/app.ts", "through the alias '~config'"),
        ("pkg.mod", "pkg/mod.py", "as a Python module"),
        ("pkg.mod.Thing", "pkg/mod.py", "as a Python module"),
        ("pkg", "pkg/__init__.py", "without its extension"),
    ],
)
def test_read_file_resolves_an_import_to_the_one_file_it_names_and_says_which(
    root, asked, read, how
):
    answer = Tools(root).call("read_file", {"path": asked})
    note, header = answer.splitlines()[:2]
    assert note == f"({asked!r} resolved {how} to {read})"
    assert header.startswith(f"{read} (lines 1-")


def test_a_path_that_names_a_file_is_read_as_it_is(root):
    assert Tools(root).call("read_file", {"path": "src/foo.ts"}).startswith("src/foo.ts (lines")


def test_an_ambiguous_import_lists_its_candidates(root):
    with pytest.raises(ToolError) as refused:
        Tools(root).call("read_file", {"path": "src/util"})
    assert "'src/util' is ambiguous (without its extension): src/util.js, src/util.ts" in str(
        refused.value
    )


@pytest.mark.parametrize(
    ("asked", "message"),
    [
        ("@evil/secret", "is outside the repository"),  # an alias leading out
        ("src/leak", "is outside the repository"),  # a symlink leading out
        ("../outside/secret", "is outside the repository"),
        ("/etc/passwd", "is an absolute path"),
        ("src/nothing", "does not exist"),
    ],
)
def test_resolution_never_leaves_the_checkout(root, asked, message):
    with pytest.raises(ToolError, match=message) as refused:
        Tools(root).call("read_file", {"path": asked})
    assert "secret = 'outside'" not in str(refused.value)


def test_tsconfig_comments_and_trailing_commas_are_read_and_strings_kept():
    assert loose_json('{"a": "// not a comment", /* x */ "b": [1, 2,],}') == (
        '{"a": "// not a comment",  "b": [1, 2]}'
    )


# --- the symbol index --------------------------------------------------------------------

SOURCES = {
    "app/pay.py": (
        "def refund(amount):\n"
        "    return gateway.pay(amount)\n"
        "\n"
        "class Ledger:\n"
        "    def refund(self, entry):\n"
        "        # refund is also mentioned in this comment\n"
        "        return refund(entry.amount)\n"
    ),
    "app/call.py": "from app.pay import refund\n\nREASON = 'refund in a string'\nrefund(3)\n",
    "web/api.ts": (
        "export interface Refund { amount: number }\n"
        "export function refund(r: Refund): void {}\n"
        "export const handler = () => refund({ amount: 1 });\n"
    ),
    "web/view.tsx": "export function Button() { return <b onClick={() => refund(1)} />; }\n",
    "web/old.js": "function refund(x) { return x; }\nclass Cart { refund() {} }\n",
    "svc/pay.go": "package svc\n\ntype Refund struct{}\n\nfunc (r Refund) Refund() {}\n"
    "func refund() { refund() }\n",
    "jvm/Pay.java": "class Pay {\n  void refund() { refund(); }\n}\n",
    "rs/lib.rs": "pub fn refund() {}\npub struct Ledger;\nfn other() { refund(); }\n",
    "cs/Pay.cs": "class Pay {\n  public void Refund() {}\n}\n",
    "bin/run.sh": "refund() {\n  echo refunding\n}\nrefund\n",
    "db/schema.sql": "CREATE FUNCTION refund() RETURNS void AS $$ $$;\n",
    "Dockerfile": "FROM python:3.11\n",
}


@pytest.fixture
def polyglot(tmp_path: Path) -> Path:
    checkout = tmp_path / "poly"
    for name, text in SOURCES.items():
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        (checkout / name).write_text(text)
    return checkout


def test_find_symbol_finds_definitions_in_every_language_with_a_grammar(polyglot):
    tools = Tools(polyglot)
    assert tools.index is not None and not tools.index._built  # lazy: nothing indexed yet
    answer = tools.call("find_symbol", {"name": "refund"})
    assert tools.index._built
    lines = answer.splitlines()
    for expected in (
        "app/pay.py:1 function refund: def refund(amount):",
        "app/pay.py:5 function refund: def refund(self, entry):",
        "web/api.ts:2 function refund: export function refund(r: Refund): void {}",
        "web/old.js:1 function refund: function refund(x) { return x; }",
        "web/old.js:2 method refund: class Cart { refund() {} }",
        "svc/pay.go:6 function refund: func refund() { refund() }",
        "jvm/Pay.java:2 method refund: void refund() { refund(); }",
        "rs/lib.rs:1 function refund: pub fn refund() {}",
        "bin/run.sh:1 function refund: refund() {",
    ):
        assert expected in lines, answer
    # Languages without a grammar here are named, so the model searches them itself.
    assert "Not indexed — Dockerfile (no grammar here): 1, SQL (no grammar here): 1" in answer
    assert "use search_code for those files" in answer


def test_find_symbol_filters_by_kind_and_suggests_similar_names(polyglot):
    tools = Tools(polyglot)
    assert tools.call("find_symbol", {"name": "Refund", "kind": "interface"}).splitlines()[0] == (
        "web/api.ts:1 interface Refund: export interface Refund { amount: number }"
    )
    assert "svc/pay.go:5 method Refund" in tools.call("find_symbol", {"name": "Refund"})
    assert "cs/Pay.cs:2 method Refund" in tools.call("find_symbol", {"name": "Pay.Refund"})
    missing = tools.call("find_symbol", {"name": "Ledge"})
    assert missing.startswith("No definition of 'Ledge'") and "Similar names: Ledger" in missing
    with pytest.raises(ToolError, match="is not a name"):
        tools.call("find_symbol", {"name": "refund; rm -rf /"})


def test_symbol_references_are_identifiers_not_strings_or_comments(polyglot):
    answer = Tools(polyglot).call("symbol_references", {"name": "refund"})
    lines = answer.splitlines()
    assert "app/call.py:1: from app.pay import refund" in lines
    assert "app/call.py:4: refund(3)" in lines
    assert "app/pay.py:7: return refund(entry.amount)" in lines
    assert (
        "web/view.tsx:1: export function Button() { return <b onClick={() => refund(1)} />; }"
        in lines
    )
    assert "rs/lib.rs:3: fn other() { refund(); }" in lines
    assert "bin/run.sh:4: refund" in lines
    assert not any("app/call.py:3" in line or "app/pay.py:6" in line for line in lines)
    assert "app/pay.py:1:" not in answer  # its definition is not a use


def test_a_missing_grammar_is_named_in_the_answer(polyglot, monkeypatch):
    grammar = symbols_module.GRAMMARS["go"]
    monkeypatch.setitem(
        symbols_module.GRAMMARS, "go", grammar.__class__(**{**grammar.__dict__, "module": "nope"})
    )
    answer = Tools(polyglot).call("find_symbol", {"name": "refund"})
    assert "svc/pay.go" not in answer
    assert "Go (its grammar is not installed): 1" in answer


def test_the_index_is_bounded_and_says_it_is_partial(polyglot, monkeypatch):
    monkeypatch.setattr(symbols_module, "INDEX_MAX_FILES", 2)
    answer = Tools(polyglot).call("find_symbol", {"name": "refund"})
    assert "The index is partial: indexed the first 2 source files only." in answer


def test_explorers_share_the_reviewers_index(polyglot):
    tools = Tools(polyglot)
    tools.call("find_symbol", {"name": "refund"})
    explorer = tools.explorer()
    assert explorer.index is tools.index
    assert "load_skill" not in explorer.handlers and "submit_review" not in explorer.handlers
