"""`importers` and `call_trace`, on the symbol index: each language the index parses,
its import syntax and its call syntax at least once, through the tools as a model
calls them."""

from __future__ import annotations

from pathlib import Path

import pytest

from sandbox.agent.tools import ToolError, Tools
from sandbox.agent.tools import traces as traces_module

SOURCES = {
    # Python: absolute, relative and aliased imports; calls of names and attributes.
    "app/__init__.py": "",
    "app/pay.py": (
        "def refund(amount):\n"
        "    return charge(amount)\n"
        "\n"
        "def charge(amount):\n"
        "    return gateway.send(amount)\n"
    ),
    "app/call.py": (
        "from app.pay import refund\n"
        "from . import pay\n"
        "import app.pay as p\n"
        "import requests\n"
        "\n"
        "def checkout():\n"
        "    # refund( in a comment is no call\n"
        "    refund(3)\n"
        "\n"
        "def outer():\n"
        "    checkout()\n"
    ),
    "app/other.py": "from .pay import charge\n\nclass Cart:\n    def pay(self):\n        p.refund(1)\n",
    # JavaScript and TypeScript/TSX: import, re-export, require, import(), a tsconfig alias.
    "tsconfig.json": '{"compilerOptions": {"baseUrl": ".", "paths": {"@/*": ["src/*"]}}}',
    "web/pay.ts": "export function refund(n: number) { audit(n); }\nfunction audit(n: number) {}\n",
    "web/api.ts": (
        "import { refund } from './pay';\n"
        "import type { X } from '@/lib/x';\n"
        "export const handler = () => refund(1);\n"
    ),
    "web/view.tsx": (
        "import React from 'react';\n"
        "export * from './pay';\n"
        "export function Button() { return <b onClick={() => refund(2)} />; }\n"
    ),
    "web/old.js": "const p = require('./pay');\nimport('./pay').then(() => {});\np.refund(4);\n",
    "src/lib/x.ts": "export type X = 1;\n",
    # Go: a package of this module (go.mod) and a standard one.
    "go.mod": "module example.com/shop\n\ngo 1.22\n",
    "svc/pay/pay.go": "package pay\n\nfunc Refund() { audit() }\n\nfunc audit() {}\n",
    "svc/run.go": (
        "package svc\n\n"
        "import (\n"
        '\t"fmt"\n'
        '\tpay "example.com/shop/svc/pay"\n'
        ")\n\n"
        "func Run() { pay.Refund(); fmt.Println() }\n"
    ),
    # Java: a class import, a wildcard import, method calls and `new`.
    "jvm/com/acme/pay/Ledger.java": (
        "package com.acme.pay;\npublic class Ledger { public static void refund() {} }\n"
    ),
    "jvm/com/acme/Shop.java": (
        "import com.acme.pay.Ledger;\nclass Shop { void buy() { Ledger.refund(); new Ledger(); } }\n"
    ),
    "jvm/com/acme/All.java": "import com.acme.pay.*;\nclass All {}\n",
    # Rust: `mod`, `use crate::`, `use super::`, another crate.
    "rs/src/main.rs": "mod pay;\nmod cart;\nuse crate::pay::refund;\nuse serde::Deserialize;\n"
    "fn main() { refund(); }\n",
    "rs/src/pay.rs": "pub fn refund() { log(); }\nfn log() {}\n",
    "rs/src/cart.rs": "use super::pay;\nfn buy() { pay::refund(); }\n",
    # C#: `using` a namespace the target declares; calls and `new`.
    "cs/Ledger.cs": "namespace Acme.Payments;\npublic class Ledger { public void Refund() {} }\n",
    "cs/Shop.cs": (
        "using Acme.Payments;\nusing System.Text;\n"
        "class Shop { void Buy() { new Ledger().Refund(); } }\n"
    ),
    # Shell: `source` and `.`; a function called as a command.
    "bin/lib.sh": "refund() {\n  echo refunding\n}\n",
    "bin/run.sh": '. "$DIR/lib.sh"\nsource ./lib.sh\nrefund\n',
}


@pytest.fixture
def tools(tmp_path: Path) -> Tools:
    checkout = tmp_path / "poly"
    for name, text in SOURCES.items():
        (checkout / name).parent.mkdir(parents=True, exist_ok=True)
        (checkout / name).write_text(text)
    return Tools(checkout)


def importers(tools: Tools, module: str) -> list[str]:
    return tools.call("importers", {"module": module}).splitlines()


def test_both_tools_are_offered_with_the_symbol_index_and_to_explorers(tools):
    assert {"importers", "call_trace"} <= set(tools.handlers)
    assert {"importers", "call_trace"} <= set(tools.explorer().handlers)


def test_python_importers_follow_absolute_relative_and_aliased_imports(tools):
    assert importers(tools, "app/pay.py") == [
        "app/call.py:1: from app.pay import refund",
        "app/call.py:2: from . import pay",
        "app/call.py:3: import app.pay as p",
        "app/other.py:1: from .pay import charge",
    ]
    # A module as written is resolved as read_file resolves it, and says so.
    assert importers(tools, "app.pay")[0] == "('app.pay' resolved as a Python module to app/pay.py)"


def test_javascript_and_typescript_importers_follow_every_form_of_import(tools):
    assert importers(tools, "web/pay.ts") == [
        "web/api.ts:1: import { refund } from './pay';",
        "web/old.js:1: const p = require('./pay');",
        "web/old.js:2: import('./pay').then(() => {});",
        "web/view.tsx:2: export * from './pay';",
    ]
    assert importers(tools, "src/lib/x.ts") == ["web/api.ts:2: import type { X } from '@/lib/x';"]


def test_go_importers_read_the_module_path_from_go_mod(tools):
    expected = ['svc/run.go:5: pay "example.com/shop/svc/pay"']
    assert importers(tools, "svc/pay") == expected  # the package's folder
    assert importers(tools, "svc/pay/pay.go") == expected  # or a file of it


def test_java_importers_follow_class_and_wildcard_imports(tools):
    assert importers(tools, "jvm/com/acme/pay/Ledger.java") == [
        "jvm/com/acme/All.java:1: import com.acme.pay.*;",
        "jvm/com/acme/Shop.java:1: import com.acme.pay.Ledger;",
    ]


def test_rust_importers_follow_mod_crate_and_super_paths(tools):
    assert importers(tools, "rs/src/pay.rs") == [
        "rs/src/cart.rs:1: use super::pay;",
        "rs/src/main.rs:1: mod pay;",
        "rs/src/main.rs:3: use crate::pay::refund;",
    ]


def test_csharp_importers_use_the_namespace_the_file_declares(tools):
    assert importers(tools, "cs/Ledger.cs") == ["cs/Shop.cs:1: using Acme.Payments;"]


def test_shell_importers_follow_source_and_dot(tools):
    assert importers(tools, "bin/lib.sh") == [
        'bin/run.sh:1: . "$DIR/lib.sh"',
        "bin/run.sh:2: source ./lib.sh",
    ]


@pytest.mark.parametrize(
    ("package", "expected"),
    [
        ("requests", "app/call.py:4: import requests"),
        ("react", "web/view.tsx:1: import React from 'react';"),
        ("fmt", 'svc/run.go:4: "fmt"'),
        ("serde", "rs/src/main.rs:4: use serde::Deserialize;"),
        ("System", "cs/Shop.cs:2: using System.Text;"),
    ],
)
def test_a_name_that_is_no_file_is_a_package_from_outside(tools, package, expected):
    lines = importers(tools, package)
    assert (
        lines[0]
        == f"({package!r} is no file of the repository: matched as a package from outside it)"
    )
    assert lines[1:] == [expected]


def test_importers_never_leave_the_checkout(tools):
    with pytest.raises(ToolError, match="outside the repository"):
        tools.call("importers", {"module": "../etc/passwd"})
    assert importers(tools, "nothing_imports_this") == [
        "('nothing_imports_this' is no file of the repository: matched as a package from outside it)",
        "No file imports it in 21 indexed files.",
    ]


def test_callers_in_every_language_name_the_function_they_are_in(tools):
    lines = tools.call("call_trace", {"name": "refund"}).splitlines()
    assert lines == [
        "app/call.py:8 in checkout: refund(3)",
        "app/other.py:5 in Cart.pay: p.refund(1)",
        "bin/run.sh:3 in (top level): refund",
        "jvm/com/acme/Shop.java:2 in Shop.buy: class Shop { void buy() { Ledger.refund(); new Ledger(); } }",
        "rs/src/cart.rs:2 in buy: fn buy() { pay::refund(); }",
        "rs/src/main.rs:5 in main: fn main() { refund(); }",
        "web/api.ts:3 in handler: export const handler = () => refund(1);",
        "web/old.js:3 in (top level): p.refund(4);",
        "web/view.tsx:3 in Button: export function Button() { return <b onClick={() => refund(2)} />; }",
    ]
    go_and_csharp = tools.call("call_trace", {"name": "Refund", "direction": "callers"})
    assert go_and_csharp.splitlines() == [
        "cs/Shop.cs:3 in Shop.Buy: class Shop { void Buy() { new Ledger().Refund(); } }",
        "svc/run.go:8 in Run: func Run() { pay.Refund(); fmt.Println() }",
    ]


def test_callers_two_levels_deep_are_indented_under_the_first(tools):
    lines = tools.call("call_trace", {"name": "refund", "depth": 2}).splitlines()
    at = lines.index("app/call.py:8 in checkout: refund(3)")
    assert lines[at + 1] == "  app/call.py:11 in outer (calls checkout): checkout()"


def test_callees_list_what_a_function_calls_and_where_it_is_defined(tools):
    answer = tools.call("call_trace", {"name": "refund", "direction": "callees", "depth": 2})
    lines = answer.splitlines()
    assert lines[:3] == [
        "refund (app/pay.py:1) calls:",
        "app/pay.py:2 charge (defined at app/pay.py:4): return charge(amount)",
        "  charge (app/pay.py:4) calls: send",
    ]
    assert (
        "web/pay.ts:1 audit (defined at svc/pay/pay.go:5 and 1 more): export function refund(n: number) { audit(n); }"
        in lines
    )
    assert "rs/src/pay.rs:1 log (defined at rs/src/pay.rs:2): pub fn refund() { log(); }" in lines
    go = tools.call("call_trace", {"name": "Refund", "direction": "callees"}).splitlines()
    assert (
        "svc/pay/pay.go:3 audit (defined at svc/pay/pay.go:5 and 1 more): func Refund() { audit() }"
        in go
    )


def test_traces_are_bounded_and_say_where_they_stopped(tools, monkeypatch):
    monkeypatch.setattr(traces_module, "MAX_TRACE_LINES", 2)
    lines = tools.call("call_trace", {"name": "refund"}).splitlines()
    assert lines == [
        "app/call.py:8 in checkout: refund(3)",
        "app/other.py:5 in Cart.pay: p.refund(1)",
        "(stopped at 2 lines)",
    ]
    monkeypatch.setattr(traces_module, "MAX_IMPORTERS", 1)
    assert importers(tools, "app/pay.py")[-1] == "(stopped at 1 imports)"
    for bad in ({"name": "refund", "depth": 3}, {"name": "refund", "direction": "up"}):
        with pytest.raises(ToolError):
            tools.call("call_trace", bad)
    assert tools.call("call_trace", {"name": "nobody"}).startswith("No call of 'nobody'")
