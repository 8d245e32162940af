"""The symbol index: where a name is defined and where it is used, from the checkout
parsed with tree-sitter (the tree-sitter project's grammar wheels, one per language).

Lazy and bounded: the definitions are indexed on the first question (at most
INDEX_MAX_FILES files of at most INDEX_MAX_FILE_BYTES, within INDEX_SECONDS) and kept
for the review; references are looked for on demand, in the indexed files that contain
the name, parsed again (nothing big is kept in memory). A language without a grammar
here is named in the answer, so the model knows to search those files itself.
"""

from __future__ import annotations

import importlib
import re
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sandbox.agent.tools.base import ToolError, ToolSpec, checkout_files, text_argument

INDEX_MAX_FILES = 20_000
INDEX_MAX_FILE_BYTES = 1_000_000
INDEX_SECONDS = 30
REFERENCES_SECONDS = 20
MAX_DEFINITIONS = 50
MAX_REFERENCES = 100
MAX_LINE = 200
NAME = re.compile(r"[A-Za-z_$][\w$]{0,199}")


@dataclass(frozen=True)
class Grammar:
    label: str
    module: str  # the grammar's wheel (`tree_sitter_python`)
    function: str  # what in it returns the language
    definitions: str  # a query whose capture names are the kinds of definition
    names: tuple[str, ...]  # the node types a use of a name can be


_JS_NAMES = (
    "identifier", "property_identifier", "shorthand_property_identifier",
    "shorthand_property_identifier_pattern",
)  # fmt: skip
_JS_VALUES = """
(variable_declarator name: (identifier) @function value: [(arrow_function) (function_expression)])
(program (lexical_declaration (variable_declarator name: (identifier) @variable)))
(program (export_statement (lexical_declaration (variable_declarator name: (identifier) @variable))))
"""
_TS = (
    """
(function_declaration name: (identifier) @function)
(generator_function_declaration name: (identifier) @function)
(class_declaration name: (type_identifier) @class)
(abstract_class_declaration name: (type_identifier) @class)
(method_definition name: (property_identifier) @method)
(method_signature name: (property_identifier) @method)
(function_signature name: (identifier) @function)
(interface_declaration name: (type_identifier) @interface)
(type_alias_declaration name: (type_identifier) @type)
(enum_declaration name: (identifier) @enum)
(internal_module name: (identifier) @module)
"""
    + _JS_VALUES
)

GRAMMARS = {
    "python": Grammar(
        "Python", "tree_sitter_python", "language",
        """
        (function_definition name: (identifier) @function)
        (class_definition name: (identifier) @class)
        (module (expression_statement (assignment left: (identifier) @variable)))
        """,
        ("identifier",),
    ),
    "javascript": Grammar(
        "JavaScript", "tree_sitter_javascript", "language",
        """
        (function_declaration name: (identifier) @function)
        (generator_function_declaration name: (identifier) @function)
        (class_declaration name: (identifier) @class)
        (method_definition name: (property_identifier) @method)
        """ + _JS_VALUES,
        _JS_NAMES,
    ),
    "typescript": Grammar(
        "TypeScript", "tree_sitter_typescript", "language_typescript", _TS,
        (*_JS_NAMES, "type_identifier"),
    ),
    "tsx": Grammar(
        "TSX", "tree_sitter_typescript", "language_tsx", _TS, (*_JS_NAMES, "type_identifier")
    ),
    "go": Grammar(
        "Go", "tree_sitter_go", "language",
        """
        (function_declaration name: (identifier) @function)
        (method_declaration name: (field_identifier) @method)
        (type_spec name: (type_identifier) @type)
        (const_spec name: (identifier) @constant)
        (source_file (var_declaration (var_spec name: (identifier) @variable)))
        """,
        ("identifier", "field_identifier", "type_identifier", "package_identifier"),
    ),
    "java": Grammar(
        "Java", "tree_sitter_java", "language",
        """
        (class_declaration name: (identifier) @class)
        (interface_declaration name: (identifier) @interface)
        (enum_declaration name: (identifier) @enum)
        (record_declaration name: (identifier) @class)
        (annotation_type_declaration name: (identifier) @interface)
        (method_declaration name: (identifier) @method)
        (constructor_declaration name: (identifier) @constructor)
        (field_declaration declarator: (variable_declarator name: (identifier) @field))
        """,
        ("identifier", "type_identifier"),
    ),
    "rust": Grammar(
        "Rust", "tree_sitter_rust", "language",
        """
        (function_item name: (identifier) @function)
        (function_signature_item name: (identifier) @function)
        (struct_item name: (type_identifier) @struct)
        (enum_item name: (type_identifier) @enum)
        (union_item name: (type_identifier) @struct)
        (trait_item name: (type_identifier) @trait)
        (type_item name: (type_identifier) @type)
        (const_item name: (identifier) @constant)
        (static_item name: (identifier) @constant)
        (mod_item name: (identifier) @module)
        (macro_definition name: (identifier) @macro)
        """,
        ("identifier", "field_identifier", "type_identifier"),
    ),
    "c_sharp": Grammar(
        "C#", "tree_sitter_c_sharp", "language",
        """
        (class_declaration name: (identifier) @class)
        (struct_declaration name: (identifier) @struct)
        (interface_declaration name: (identifier) @interface)
        (enum_declaration name: (identifier) @enum)
        (record_declaration name: (identifier) @class)
        (method_declaration name: (identifier) @method)
        (constructor_declaration name: (identifier) @constructor)
        (property_declaration name: (identifier) @property)
        (delegate_declaration name: (identifier) @type)
        """,
        ("identifier",),
    ),
    "bash": Grammar(
        "Shell", "tree_sitter_bash", "language",
        "(function_definition name: (word) @function)",
        ("word", "variable_name"),
    ),
}  # fmt: skip

LANGUAGE_OF = {
    ".py": "python", ".pyi": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "tsx",
    ".go": "go", ".java": "java", ".rs": "rust", ".cs": "c_sharp",
    ".sh": "bash", ".bash": "bash",
}  # fmt: skip
# Languages Tasuku has guidelines for (or that are common) with no grammar here: their
# files are named as not indexed.
NOT_PARSED = {
    ".sql": "SQL", ".tf": "Terraform", ".hcl": "HCL", ".yml": "YAML", ".yaml": "YAML",
    ".kt": "Kotlin", ".rb": "Ruby", ".php": "PHP", ".c": "C", ".h": "C", ".cpp": "C++",
    ".cc": "C++", ".hpp": "C++", ".swift": "Swift", ".scala": "Scala",
}  # fmt: skip
KIND_ORDER = (
    "class", "interface", "struct", "enum", "trait", "type", "function", "method",
    "constructor", "property", "field", "macro", "module", "constant", "variable",
)  # fmt: skip

FIND_SYMBOL = ToolSpec(
    "find_symbol",
    "Where a name (function, class, method, type, constant …) is defined in the "
    "repository, from its parsed source (Python, JavaScript, TypeScript, Go, Java, Rust, "
    f"C#, shell). Up to {MAX_DEFINITIONS} definitions as path:line kind name: the line.",
    {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The bare name, e.g. `refund`."},
            "kind": {"type": "string", "description": f"Only this kind: {', '.join(KIND_ORDER)}."},
        },
        "required": ["name"],
    },
)
SYMBOL_REFERENCES = ToolSpec(
    "symbol_references",
    "Where a name is used in the repository's parsed source: identifiers only, not text "
    f"in strings or comments. Up to {MAX_REFERENCES} uses as path:line: the line.",
    {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
)


def available() -> bool:
    """Whether tree-sitter is installed (an older engine image may not have it)."""
    try:
        importlib.import_module("tree_sitter")
    except ImportError:
        return False
    return True


@dataclass(frozen=True)
class Definition:
    path: str
    line: int
    kind: str
    text: str


def language_of(path: Path) -> str:
    name = path.name
    if name == "Dockerfile" or name.startswith("Dockerfile.") or name.endswith(".dockerfile"):
        return "!Dockerfile"
    suffix = path.suffix.lower()
    if suffix in LANGUAGE_OF:
        return LANGUAGE_OF[suffix]
    return f"!{NOT_PARSED[suffix]}" if suffix in NOT_PARSED else ""


class SymbolIndex:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._built = False
        self._languages: dict[str, Any] = {}  # name → (Language, definitions Query) or None
        self.definitions: dict[str, list[Definition]] = defaultdict(list)
        self.files: list[tuple[Path, str]] = []  # indexed files and their language
        self.skipped: Counter[str] = Counter()  # language label → files not parsed
        self.stopped = ""

    # --- building ---

    def _language(self, name: str) -> Any:
        if name not in self._languages:
            import tree_sitter

            grammar = GRAMMARS[name]
            try:
                module = importlib.import_module(grammar.module)
                language = tree_sitter.Language(getattr(module, grammar.function)())
                self._languages[name] = (language, tree_sitter.Query(language, grammar.definitions))
            except (ImportError, AttributeError, ValueError, tree_sitter.QueryError):
                self._languages[name] = None  # the grammar is missing or does not load
        return self._languages[name]

    def build(self) -> None:
        with self._lock:
            if self._built:
                return
            self._build()
            self._built = True

    def _build(self) -> None:
        import tree_sitter

        parsers: dict[str, Any] = {}
        deadline = time.monotonic() + INDEX_SECONDS
        for path in checkout_files(self.root):
            language = language_of(path)
            if not language:
                continue
            if language.startswith("!"):
                self.skipped[f"{language[1:]} (no grammar here)"] += 1
                continue
            loaded = self._language(language)
            if loaded is None:
                self.skipped[f"{GRAMMARS[language].label} (its grammar is not installed)"] += 1
                continue
            if len(self.files) >= INDEX_MAX_FILES:
                self.stopped = f"indexed the first {INDEX_MAX_FILES} source files only"
                return
            if time.monotonic() > deadline:
                self.stopped = f"indexing stopped after {INDEX_SECONDS} s ({len(self.files)} files)"
                return
            try:
                if path.stat().st_size > INDEX_MAX_FILE_BYTES:
                    self.skipped["files over 1 MB"] += 1
                    continue
                data = path.read_bytes()
            except OSError:
                continue
            relative = path.relative_to(self.root).as_posix()
            self.files.append((path, language))
            parser = parsers.setdefault(language, tree_sitter.Parser(loaded[0]))
            tree = parser.parse(data)
            lines = data.split(b"\n")
            seen: set[int] = set()
            captures = tree_sitter.QueryCursor(loaded[1]).captures(tree.root_node)
            for kind in sorted(captures, key=_kind_rank):
                for node in captures[kind]:
                    if node.start_byte in seen:
                        continue
                    seen.add(node.start_byte)
                    row = node.start_point[0]
                    text = lines[row].decode("utf-8", errors="replace").strip()[:MAX_LINE]
                    name = node.text.decode("utf-8", errors="replace")
                    self.definitions[name].append(Definition(relative, row + 1, kind, text))

    def _notes(self) -> str:
        notes = []
        if self.stopped:
            notes.append(f"The index is partial: {self.stopped}.")
        if self.skipped:
            listed = ", ".join(f"{label}: {count}" for label, count in sorted(self.skipped.items()))
            notes.append(f"Not indexed — {listed}; use search_code for those files.")
        return ("\n" + "\n".join(notes)) if notes else ""

    # --- the tools ---

    def find_symbol(self, arguments: dict[str, Any]) -> str:
        name = _name(arguments)
        kind = arguments.get("kind")
        if kind is not None and kind not in KIND_ORDER:
            raise ToolError(f"`kind` is one of: {', '.join(KIND_ORDER)}.")
        self.build()
        found = [d for d in self.definitions.get(name, []) if kind is None or d.kind == kind]
        if not found:
            lowered = name.lower()
            similar = sorted(n for n in self.definitions if lowered in n.lower())[:10]
            hint = f" Similar names: {', '.join(similar)}." if similar else ""
            return (
                f"No definition of {name!r} in {len(self.files)} indexed files.{hint}"
                + self._notes()
            )
        lines = [f"{d.path}:{d.line} {d.kind} {name}: {d.text}" for d in found[:MAX_DEFINITIONS]]
        if len(found) > MAX_DEFINITIONS:
            lines.append(f"(stopped at {MAX_DEFINITIONS} of {len(found)} definitions)")
        return "\n".join(lines) + self._notes()

    def symbol_references(self, arguments: dict[str, Any]) -> str:
        import tree_sitter

        name = _name(arguments)
        self.build()
        defined = {(d.path, d.line) for d in self.definitions.get(name, [])}
        needle = name.encode()
        parsers: dict[str, Any] = {}
        queries: dict[str, Any] = {}
        found: list[str] = []
        deadline = time.monotonic() + REFERENCES_SECONDS
        for path, language in self.files:
            if time.monotonic() > deadline:
                found.append(f"(stopped after {REFERENCES_SECONDS} s)")
                break
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if needle not in data:
                continue
            loaded = self._language(language)
            if language not in queries:
                alternatives = " ".join(f"({t})" for t in GRAMMARS[language].names)
                queries[language] = tree_sitter.Query(
                    loaded[0], f'(([{alternatives}] @use) (#eq? @use "{name}"))'
                )
            parser = parsers.setdefault(language, tree_sitter.Parser(loaded[0]))
            tree = parser.parse(data)
            relative = path.relative_to(self.root).as_posix()
            lines = data.split(b"\n")
            rows = sorted(
                {
                    n.start_point[0]
                    for n in tree_sitter.QueryCursor(queries[language])
                    .captures(tree.root_node)
                    .get("use", [])
                }
            )
            for row in rows:
                if (relative, row + 1) in defined:
                    continue
                text = lines[row].decode("utf-8", errors="replace").strip()[:MAX_LINE]
                found.append(f"{relative}:{row + 1}: {text}")
                if len(found) >= MAX_REFERENCES:
                    found.append(f"(stopped at {MAX_REFERENCES} uses)")
                    return "\n".join(found) + self._notes()
        if not found:
            return f"No use of {name!r} in {len(self.files)} indexed files." + self._notes()
        return "\n".join(found) + self._notes()


def _kind_rank(kind: str) -> int:
    return KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)


def _name(arguments: dict[str, Any]) -> str:
    text = text_argument(arguments, "name", "the name to look for", limit=300)
    # `Class.method`, `pkg::item`, `obj->field`: the last part is the name defined.
    name = re.split(r"\.|::|->|#", text)[-1].strip().removesuffix("()")
    if not NAME.fullmatch(name):
        raise ToolError(f"{text!r} is not a name; give an identifier such as `refund`.")
    return name
