"""Importers and call traces, on the symbol index (sandbox/agent/tools/symbols.py): which
files import a module, who calls a function and what it calls, one or two levels deep.

Read from the parsed source of the files the index holds, on demand, like the index's
references: only the files that contain the name are parsed again. Matched by name, as
the index matches: a call of `refund` is counted whichever `refund` it reaches, and the
answer says so. Imports are resolved the way each language writes them (a relative
path, a dotted module, a package path under `go.mod`'s module, a Rust `crate::` path, a
C# namespace, a sourced script); a name that is no file of the checkout is taken as a
package from outside it (`requests`, `react`, `net/http`) and matched as written.
"""

from __future__ import annotations

import posixpath
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sandbox.agent.tools.base import ToolError, ToolSpec

if TYPE_CHECKING:
    from sandbox.agent.tools.symbols import SymbolIndex

MAX_IMPORTERS = 100
IMPORTERS_SECONDS = 20
MAX_TRACE_LINES = 100
MAX_DEPTH = 2
# How many of the first level's functions the second level follows.
MAX_FOLLOWED = 20
TRACE_SECONDS = 20
MAX_LINE = 200

IMPORTERS = ToolSpec(
    "importers",
    "Which files import a module: a file or folder of the repository (`app/pay.py`, "
    "`src/lib`), an import as written (`app.pay`, `@/lib/x`), or a package from outside "
    "the repository (`requests`, `react`, `net/http`). Read from the parsed source "
    "(Python, JavaScript, TypeScript, Go, Java, Rust, C#, shell `source`). Up to "
    f"{MAX_IMPORTERS} imports as path:line: the line.",
    {
        "type": "object",
        "properties": {
            "module": {
                "type": "string",
                "description": "A path of the repository, an import as written, or a package name.",
            }
        },
        "required": ["module"],
    },
)
CALL_TRACE = ToolSpec(
    "call_trace",
    "Who calls a function (`callers`), or what it calls (`callees`), one or two levels "
    "deep, from the parsed source. Calls are matched by name, like symbol_references: a "
    f"call of `save` counts whichever `save` it reaches. Up to {MAX_TRACE_LINES} lines as "
    "path:line in <function>: the line; the second level is indented under the first.",
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The function's bare name, e.g. `refund`."},
            "direction": {"type": "string", "enum": ["callers", "callees"]},
            "depth": {"type": "integer", "minimum": 1, "maximum": MAX_DEPTH},
        },
        "required": ["name"],
    },
)

# What a call looks like in each language: the name called is captured as @callee.
CALLS = {
    "python": """
        (call function: (identifier) @callee)
        (call function: (attribute attribute: (identifier) @callee))
    """,
    "javascript": """
        (call_expression function: (identifier) @callee)
        (call_expression function: (member_expression property: (property_identifier) @callee))
        (new_expression constructor: (identifier) @callee)
    """,
    "go": """
        (call_expression function: (identifier) @callee)
        (call_expression function: (selector_expression field: (field_identifier) @callee))
    """,
    "java": """
        (method_invocation name: (identifier) @callee)
        (object_creation_expression type: (type_identifier) @callee)
    """,
    "rust": """
        (call_expression function: (identifier) @callee)
        (call_expression function: (field_expression field: (field_identifier) @callee))
        (call_expression function: (scoped_identifier name: (identifier) @callee))
        (macro_invocation macro: (identifier) @callee)
    """,
    "c_sharp": """
        (invocation_expression function: (identifier) @callee)
        (invocation_expression function: (member_access_expression name: (identifier) @callee))
        (object_creation_expression type: (identifier) @callee)
    """,
    "bash": "(command name: (command_name (word) @callee))",
}
CALLS["typescript"] = CALLS["tsx"] = CALLS["javascript"]

# The nodes a call can be inside of, by language: what "in <function>" names.
FUNCTIONS = {
    "python": {"function_definition"},
    "javascript": {
        "function_declaration", "generator_function_declaration", "method_definition",
        "function_expression", "arrow_function", "function",
    },
    "go": {"function_declaration", "method_declaration"},
    "java": {"method_declaration", "constructor_declaration"},
    "rust": {"function_item"},
    "c_sharp": {"method_declaration", "constructor_declaration", "local_function_statement"},
    "bash": {"function_definition"},
}  # fmt: skip
FUNCTIONS["typescript"] = FUNCTIONS["tsx"] = FUNCTIONS["javascript"]
CLASSES = {
    "class_definition", "class_declaration", "abstract_class_declaration", "impl_item",
    "interface_declaration", "struct_declaration", "record_declaration",
}  # fmt: skip

JS_EXTENSIONS = (".ts", ".tsx", ".mts", ".cts", ".d.ts", ".js", ".jsx", ".mjs", ".cjs")
JS_INDEXES = tuple(f"/index{extension}" for extension in JS_EXTENSIONS)
RUST_ROOTS = ("lib.rs", "main.rs", "mod.rs")
GO_MODULE = re.compile(r"^module\s+(\S+)", re.MULTILINE)


@dataclass(frozen=True)
class Ref:
    """Where an import leads: a file, or a folder (`folder`), by its path in the checkout
    or — when the import says only how a path ends (`suffix`: Java's packages, a sourced
    script under a variable) — by the end of its path."""

    path: str
    folder: bool = False
    suffix: bool = False

    def reaches(self, target: str, is_folder: bool) -> bool:
        def same(path: str) -> bool:
            return path == self.path or (self.suffix and path.endswith("/" + self.path))

        if self.folder:
            return same(target) if is_folder else same(posixpath.dirname(target))
        if is_folder:
            return self.path.startswith(target + "/") or (
                self.suffix and same(posixpath.dirname(self.path))
            )
        return same(target)


@dataclass(frozen=True)
class Import:
    row: int
    written: str  # the import as written (a module, a path, a namespace)
    refs: tuple[Ref, ...]


@dataclass(frozen=True)
class Target:
    """What `importers` looks for: a file or folder of the checkout, or (`path` empty) a
    package from outside it, by `name`."""

    path: str = ""
    folder: bool = False
    name: str = ""
    namespaces: frozenset[str] = frozenset()  # C#: what `using` names the target by


class Traces:
    """The importers and call-trace tools over one symbol index."""

    def __init__(self, index: SymbolIndex) -> None:
        self.index = index
        self._queries: dict[str, Any] = {}
        self._parsers: dict[str, Any] = {}
        self._go_module: str | None = None

    # --- parsing ---

    def _parse(self, language: str, data: bytes) -> Any:
        import tree_sitter

        loaded = self.index._language(language)
        parser = self._parsers.setdefault(language, tree_sitter.Parser(loaded[0]))
        return parser.parse(data)

    def _calls(self, language: str, node: Any) -> list[Any]:
        import tree_sitter

        if language not in self._queries:
            loaded = self.index._language(language)
            self._queries[language] = tree_sitter.Query(loaded[0], CALLS[language])
        captured = tree_sitter.QueryCursor(self._queries[language]).captures(node)
        return sorted(captured.get("callee", []), key=lambda n: n.start_byte)

    def _sources(self, needles: tuple[bytes, ...]) -> Iterator[tuple[str, str, bytes]]:
        """The indexed files holding one of `needles` (all of them when none is given):
        their path in the checkout, language and bytes."""
        self.index.build()
        for path, language in self.index.files:
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if needles and not any(needle in data for needle in needles):
                continue
            yield path.relative_to(self.index.root).as_posix(), language, data

    # --- importers ---

    def target(self, path: str, *, folder: bool) -> Target:
        namespaces: set[str] = set()
        for relative, language, data in self._sources(()):
            inside = posixpath.dirname(relative) == path if folder else relative == path
            if language == "c_sharp" and inside:
                namespaces |= set(_namespaces(self._parse(language, data).root_node))
        return Target(path=path, folder=folder, namespaces=frozenset(namespaces))

    def importers(self, target: Target, how: str) -> str:
        needles = _needles(target)
        found: list[str] = []
        deadline = time.monotonic() + IMPORTERS_SECONDS
        for relative, language, data in self._sources(needles):
            if time.monotonic() > deadline:
                found.append(f"(stopped after {IMPORTERS_SECONDS} s)")
                break
            if relative == target.path:
                continue
            lines = data.split(b"\n")
            for item in self._imports(relative, language, data, target):
                if not self._imported(item, target):
                    continue
                text = lines[item.row].decode("utf-8", errors="replace").strip()[:MAX_LINE]
                found.append(f"{relative}:{item.row + 1}: {text}")
                if len(found) >= MAX_IMPORTERS:
                    found.append(f"(stopped at {MAX_IMPORTERS} imports)")
                    return how + "\n".join(found) + self.index._notes()
        if not found:
            return (
                f"{how}No file imports it in {len(self.index.files)} indexed files."
                + self.index._notes()
            )
        return how + "\n".join(dict.fromkeys(found)) + self.index._notes()

    def _imported(self, item: Import, target: Target) -> bool:
        if not target.path:
            return _names_package(item.written, target.name)
        if target.namespaces and item.written in target.namespaces:
            return True
        return any(ref.reaches(target.path, target.folder) for ref in item.refs)

    def _imports(self, relative: str, language: str, data: bytes, target: Target) -> list[Import]:
        root = self._parse(language, data).root_node
        here = posixpath.dirname(relative)
        found: list[Import] = []
        for node in _walk(root):
            kind = node.type
            row = node.start_point[0]
            if language == "python" and kind in ("import_statement", "import_from_statement"):
                found += [Import(row, w, _python_refs(w, here)) for w in _python_imports(node)]
            elif language in ("javascript", "typescript", "tsx"):
                written = _js_import(node)
                if written is not None:
                    found.append(Import(row, written, _js_refs(written, here, self.index)))
            elif language == "go" and kind == "import_spec":
                path = node.child_by_field_name("path")
                written = _text(path).strip('"`') if path is not None else ""
                found.append(Import(row, written, self._go_refs(written)))
            elif language == "java" and kind == "import_declaration":
                written = _java_import(node)
                found.append(Import(row, written, _java_refs(written)))
            elif language == "rust" and kind in ("use_declaration", "mod_item"):
                written = _rust_import(node)
                if written:
                    found.append(Import(row, written, _rust_refs(written, relative, self.index)))
            elif language == "c_sharp" and kind == "using_directive":
                names = [
                    c for c in node.named_children if c.type in ("qualified_name", "identifier")
                ]
                if names:
                    found.append(Import(row, _text(names[-1]), ()))
            elif language == "bash" and kind == "command":
                written = _sourced(node)
                if written is not None:
                    found.append(Import(row, written, _bash_refs(written, here)))
        return found

    def _go_refs(self, written: str) -> tuple[Ref, ...]:
        if self._go_module is None:
            try:
                text = (self.index.root / "go.mod").read_text(errors="replace")
            except OSError:
                text = ""
            match = GO_MODULE.search(text)
            self._go_module = match.group(1) if match else ""
        module = self._go_module
        if module and (written == module or written.startswith(module + "/")):
            return (Ref(written[len(module) :].strip("/"), folder=True),)
        # Without go.mod (or a package of another module): the folder its path ends with.
        return (Ref(written, folder=True, suffix=True),) if "/" in written else ()

    # --- call traces ---

    def call_trace(self, name: str, direction: str, depth: int) -> str:
        self.index.build()
        deadline = time.monotonic() + TRACE_SECONDS
        budget = [MAX_TRACE_LINES]
        if direction == "callers":
            lines = self._callers_tree(name, depth, deadline, budget)
            empty = f"No call of {name!r} in {len(self.index.files)} indexed files."
        else:
            lines = self._callees_tree(name, depth, deadline, budget)
            empty = (
                f"No function {name!r} with calls in it in {len(self.index.files)} "
                "indexed files (find_symbol says where a name is defined)."
            )
        if not lines:
            return empty + self.index._notes()
        if budget[0] <= 0:
            lines.append(f"(stopped at {MAX_TRACE_LINES} lines)")
        if time.monotonic() > deadline:
            lines.append(f"(stopped after {TRACE_SECONDS} s)")
        return "\n".join(lines) + self.index._notes()

    def _callers_tree(self, name: str, depth: int, deadline: float, budget: list[int]) -> list[str]:
        lines: list[str] = []
        followed: list[str] = []
        for relative, row, caller, text in self.callers(name, deadline):
            if budget[0] <= 0:
                break
            lines.append(f"{relative}:{row + 1} in {caller or '(top level)'}: {text}")
            budget[0] -= 1
            if depth < 2 or not caller:
                continue
            bare = caller.rsplit(".", 1)[-1]
            if bare == name or bare in followed or len(followed) >= MAX_FOLLOWED:
                continue
            followed.append(bare)
            for relative2, row2, caller2, text2 in self.callers(bare, deadline):
                if budget[0] <= 0:
                    break
                where = caller2 or "(top level)"
                lines.append(f"  {relative2}:{row2 + 1} in {where} (calls {bare}): {text2}")
                budget[0] -= 1
        return lines

    def callers(self, name: str, deadline: float) -> Iterator[tuple[str, int, str, str]]:
        """Each call of `name`: its file, row, the function it is in ("" at top level)
        and the line."""
        for relative, language, data in self._sources((name.encode(),)):
            if time.monotonic() > deadline:
                return
            tree = self._parse(language, data)
            lines = data.split(b"\n")
            for node in self._calls(language, tree.root_node):
                if _text(node) != name:
                    continue
                row = node.start_point[0]
                text = lines[row].decode("utf-8", errors="replace").strip()[:MAX_LINE]
                yield relative, row, _enclosing(node, language), text

    def _callees_tree(self, name: str, depth: int, deadline: float, budget: list[int]) -> list[str]:
        lines: list[str] = []
        followed: set[str] = set()
        for definition, calls in self.callees(name, deadline):
            if budget[0] <= 0:
                break
            lines.append(
                f"{name} ({definition}) calls:"
                if calls
                else f"{name} ({definition}) calls nothing."
            )
            budget[0] -= 1
            for relative, row, callee, text in calls:
                if budget[0] <= 0:
                    break
                lines.append(f"{relative}:{row + 1} {callee}{self._defined(callee)}: {text}")
                budget[0] -= 1
                if depth < 2 or callee == name or callee in followed:
                    continue
                if len(followed) >= MAX_FOLLOWED or not self._functions(callee):
                    continue
                followed.add(callee)
                for definition2, calls2 in self.callees(callee, deadline):
                    names = list(dict.fromkeys(c[2] for c in calls2))
                    lines.append(
                        f"  {callee} ({definition2}) calls: {', '.join(names[:30])}"
                        + (f" … and {len(names) - 30} more" if len(names) > 30 else "")
                        if names
                        else f"  {callee} ({definition2}) calls nothing."
                    )
                    budget[0] -= 1
        return lines

    def callees(
        self, name: str, deadline: float
    ) -> Iterator[tuple[str, list[tuple[str, int, str, str]]]]:
        """Each definition of the function `name` ("path:line") and the calls in its
        body, in order: file, row, the name called, the line."""
        for definition in self._functions(name):
            if time.monotonic() > deadline:
                return
            path = self.index.root / definition.path
            language = next((lang for p, lang in self.index.files if p == path), "")
            try:
                data = path.read_bytes()
            except OSError:
                continue
            tree = self._parse(language, data)
            function = _function_at(tree.root_node, definition.line - 1, name, language)
            if function is None:
                continue
            lines = data.split(b"\n")
            calls = []
            for node in self._calls(language, function):
                row = node.start_point[0]
                text = lines[row].decode("utf-8", errors="replace").strip()[:MAX_LINE]
                calls.append((definition.path, row, _text(node), text))
            yield f"{definition.path}:{definition.line}", calls

    def _functions(self, name: str) -> list[Any]:
        kinds = ("function", "method", "constructor")
        return [d for d in self.index.definitions.get(name, []) if d.kind in kinds]

    def _defined(self, name: str) -> str:
        found = self._functions(name)
        if not found:
            return ""
        more = f" and {len(found) - 1} more" if len(found) > 1 else ""
        return f" (defined at {found[0].path}:{found[0].line}{more})"


# --- helpers ---


def _walk(node: Any) -> Iterator[Any]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


def _text(node: Any) -> str:
    return node.text.decode("utf-8", errors="replace")


def _needles(target: Target) -> tuple[bytes, ...]:
    """What a file importing the target must contain (a cheap test before parsing)."""
    if not target.path:
        return (re.split(r"[./:]", target.name.strip("./"))[-1].encode(),)
    stem = posixpath.basename(target.path)
    if target.folder:
        return (stem.encode(),) if stem else ()
    # A package's own file (`pkg/__init__.py`, `lib/index.ts`, `pay/mod.rs`) is imported
    # by its folder's name; Go imports a folder: the file's name or its folder's.
    folder = posixpath.basename(posixpath.dirname(target.path))
    stems = [stem.split(".", 1)[0], folder]
    stems += [n.rsplit(".", 1)[-1] for n in target.namespaces]
    return tuple(s.encode() for s in stems if s)


def _names_package(written: str, name: str) -> bool:
    """Whether an import as written names the outside package `name` (or a module in it)."""
    if written == name:
        return True
    return any(written.startswith(name + separator) for separator in ("/", ".", "::"))


def _namespaces(root: Any) -> Iterator[str]:
    for node in _walk(root):
        if node.type in ("namespace_declaration", "file_scoped_namespace_declaration"):
            name = node.child_by_field_name("name")
            if name is not None:
                yield _text(name)


def _python_imports(node: Any) -> list[str]:
    """The modules a Python import names: `import a.b` → a.b; `from .x import y` → .x
    and .x.y (y may be a module of the package)."""
    if node.type == "import_statement":
        names = []
        for child in node.children_by_field_name("name"):
            dotted = child.child_by_field_name("name") if child.type == "aliased_import" else child
            names.append(_text(dotted))
        return names
    module = node.child_by_field_name("module_name")
    base = _text(module) if module is not None else ""
    found = [base]
    for child in node.children_by_field_name("name"):
        dotted = child.child_by_field_name("name") if child.type == "aliased_import" else child
        part = _text(dotted)
        found.append(f"{base}{part}" if base.endswith(".") else f"{base}.{part}")
    return found


def _python_refs(written: str, here: str) -> tuple[Ref, ...]:
    dots = len(written) - len(written.lstrip("."))
    rest = written[dots:].replace(".", "/")
    if dots:
        base = here
        for _ in range(dots - 1):
            base = posixpath.dirname(base)
        roots = [posixpath.join(base, rest) if rest else base]
    else:
        roots = [rest, f"src/{rest}"]
    return tuple(
        Ref(posixpath.normpath(f"{root}{suffix}"))
        for root in roots
        for suffix in (".py", ".pyi", "/__init__.py")
    )


def _js_import(node: Any) -> str | None:
    """The specifier of an import, a re-export, `require(…)` or `import(…)`."""
    if node.type in ("import_statement", "export_statement"):
        source = node.child_by_field_name("source")
        return _unquote(source) if source is not None else None
    if node.type == "call_expression":
        function = node.child_by_field_name("function")
        arguments = node.child_by_field_name("arguments")
        if function is None or arguments is None or not arguments.named_children:
            return None
        if function.type == "import" or (
            function.type == "identifier" and _text(function) == "require"
        ):
            first = arguments.named_children[0]
            return _unquote(first) if first.type == "string" else None
    return None


def _unquote(node: Any) -> str:
    return _text(node).strip("'\"`")


def _js_refs(written: str, here: str, index: SymbolIndex) -> tuple[Ref, ...]:
    if written.startswith("."):
        bases = [posixpath.normpath(posixpath.join(here, written))]
    else:
        from sandbox.agent.tools.resolution import PathResolver

        resolver = PathResolver(index.root)
        bases = [
            posixpath.normpath(candidate)
            for strategy in resolver.strategies(written)[1:]  # aliases and baseUrl only
            for candidate in strategy.candidates[:1]
        ]
    return tuple(
        Ref(f"{base}{suffix}") for base in bases for suffix in ("", *JS_EXTENSIONS, *JS_INDEXES)
    )


def _java_import(node: Any) -> str:
    names = [c for c in node.named_children if c.type in ("scoped_identifier", "identifier")]
    written = _text(names[0]) if names else ""
    if any(c.type == "asterisk" for c in node.children):
        written += ".*"
    return written


def _java_refs(written: str) -> tuple[Ref, ...]:
    parts = written.split(".")
    if parts[-1] == "*":
        return (Ref("/".join(parts[:-1]), folder=True, suffix=True),)
    # `a.b.C`, or a static import `a.b.C.member`: the class's file either way.
    refs = [Ref("/".join(parts) + ".java", suffix=True)]
    if len(parts) > 2:
        refs.append(Ref("/".join(parts[:-1]) + ".java", suffix=True))
    return tuple(refs)


def _rust_import(node: Any) -> str:
    if node.type == "mod_item":
        # `mod name;` declares a module kept in its own file; `mod name { … }` does not.
        if node.child_by_field_name("body") is not None:
            return ""
        name = node.child_by_field_name("name")
        return f"mod {_text(name)}" if name is not None else ""
    argument = node.child_by_field_name("argument")
    while argument is not None and argument.type in (
        "scoped_use_list",
        "use_as_clause",
        "use_wildcard",
    ):
        inner = argument.child_by_field_name("path")
        if inner is None:
            inner = next((c for c in argument.named_children), None)
        if inner is None or inner == argument:
            break
        argument = inner
    return _text(argument) if argument is not None else ""


def _rust_module_dir(relative: str) -> str:
    """The folder a Rust file's child modules live in: beside lib.rs, main.rs and mod.rs,
    in `name/` for `name.rs`."""
    if posixpath.basename(relative) in RUST_ROOTS:
        return posixpath.dirname(relative)
    return relative.removesuffix(".rs")


def _rust_refs(written: str, relative: str, index: SymbolIndex) -> tuple[Ref, ...]:
    if written.startswith("mod "):
        base = posixpath.join(_rust_module_dir(relative), written[4:])
        return (Ref(base + ".rs"), Ref(base + "/mod.rs"))
    parts = written.split("::")
    if parts[0] == "crate":
        base = relative
        while posixpath.basename(base) != "src" and base:
            base = posixpath.dirname(base)
        base = base or posixpath.dirname(relative)
    elif parts[0] == "self":
        base = _rust_module_dir(relative)
    elif parts[0] == "super":
        base = posixpath.dirname(_rust_module_dir(relative))
        while len(parts) > 1 and parts[1] == "super":
            base = posixpath.dirname(base)
            parts = parts[1:]
    else:
        return ()  # another crate: matched by name when it is what was asked
    # The deepest module of the path that is a file: `crate::pay::refund` is pay.rs.
    refs: list[Ref] = []
    for end in range(len(parts), 1, -1):
        path = posixpath.join(base, *parts[1:end])
        for candidate in (path + ".rs", path + "/mod.rs"):
            if (index.root / candidate).is_file():
                refs.append(Ref(candidate))
        if refs:
            break
    return tuple(refs)


def _sourced(node: Any) -> str | None:
    name = node.child_by_field_name("name")
    if name is None or _text(name) not in ("source", "."):
        return None
    arguments = node.children_by_field_name("argument")
    return _text(arguments[0]).strip("'\"") if arguments else None


def _bash_refs(written: str, here: str) -> tuple[Ref, ...]:
    if "$" in written:
        # `"$DIR/lib.sh"`: only how the path ends is known.
        tail = re.split(r"\$\{?\w+\}?/?", written)[-1].lstrip("/")
        return (Ref(tail, suffix=True),) if tail else ()
    return (
        Ref(posixpath.normpath(posixpath.join(here, written))),
        Ref(posixpath.normpath(written)),
    )


def _enclosing(node: Any, language: str) -> str:
    """The function a node is in (`Ledger.refund` for a method), or ""."""
    kinds = FUNCTIONS[language]
    current = node.parent
    name = ""
    while current is not None:
        if current.type in kinds and not name:
            name = _function_name(current)
        elif current.type in CLASSES and name:
            owner = current.child_by_field_name("name") or current.child_by_field_name("type")
            if owner is not None:
                return f"{_text(owner)}.{name}"
        current = current.parent
    return name


def _function_name(node: Any) -> str:
    named = node.child_by_field_name("name")
    if named is not None:
        return _text(named)
    # An anonymous function takes the name it is given: `const handler = () => …`.
    parent = node.parent
    if parent is not None and parent.type in (
        "variable_declarator",
        "pair",
        "assignment_expression",
    ):
        target = (
            parent.child_by_field_name("name")
            or parent.child_by_field_name("key")
            or parent.child_by_field_name("left")
        )
        if target is not None:
            return _text(target)
    return ""


def _function_at(root: Any, row: int, name: str, language: str) -> Any:
    """The function defined at `row` under `name`."""
    kinds = FUNCTIONS[language]
    for node in _walk(root):
        if node.start_point[0] > row or node.end_point[0] < row:
            continue
        if node.type in kinds and _function_name(node) == name:
            named = node.child_by_field_name("name")
            anchor = named if named is not None else node
            if anchor.start_point[0] == row or node.start_point[0] == row:
                return node
    return None


def direction_argument(arguments: dict[str, Any]) -> tuple[str, int]:
    direction = arguments.get("direction") or "callers"
    if direction not in ("callers", "callees"):
        raise ToolError("`direction` is `callers` or `callees`.")
    depth = arguments.get("depth", 1)
    if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= MAX_DEPTH:
        raise ToolError(f"`depth` is 1 or {MAX_DEPTH}.")
    return direction, depth
