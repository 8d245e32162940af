"""JavaScript and TypeScript: oxlint, with a short list of rules chosen for precision.

oxlint runs with its own configuration, never the pull request's: nested configuration
files and ignore files are off, and every rule is allowed but those listed here (the
base branch's configuration may turn one of them off). Comments that silence a rule
(`// eslint-disable-next-line`, `/* oxlint-disable */` …) are ignored: a copy of the
file whose directives no longer read as directives is checked too, and a diagnostic
only the directive hid is reported with the directive that would have hidden it (the
validation gate decides whether it counts). A file oxlint cannot parse is named as not
checked: merged code that oxlint's parser does not know (Flow, a proposal's syntax) is
common, and "Unexpected token" on it would be noise.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

from sandbox.contract import Finding, Severity, StaticOptions, Suppression
from sandbox.engines.static.common import (
    Skipped,
    Target,
    argument,
    finding,
    interpreter,
    parsed_json,
    quote_line,
    run_checker,
    shown,
    version_of,
)
from sandbox.engines.static.config import RepositoryWord
from sandbox.engines.static.tools import tool

EXTENSIONS = (
    ".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts", ".cts", ".vue", ".svelte", ".astro",
)  # fmt: skip
# A `#!` line's runtime -> the extension its script is checked under (oxlint reads a file
# by its extension: `bin/cli` with `#!/usr/bin/env node` is checked as a copy, `cli.js`).
RUNTIMES = {
    "node": ".js", "nodejs": ".js", "bun": ".js", "deno": ".js", "ts-node": ".ts", "tsx": ".ts",
}  # fmt: skip

_BUG, _SEC, _KEEP = "bug", "security", "maintainability"
H, M, L = Severity.HIGH, Severity.MEDIUM, Severity.LOW
# rule -> (severity, category, what goes wrong). docs/reviewers.md says why each is here:
# each is a mistake whatever the project's style, and none needs type information.
RULES: dict[str, tuple[Severity, str, str]] = {
    # Throws when the line runs.
    "eslint/no-const-assign": (H, _BUG, "Assigning to a `const` throws a TypeError when this line runs."),
    "eslint/no-this-before-super": (H, _BUG, "`this` or `super.x` before `super()` in a derived constructor throws a ReferenceError."),
    "eslint/constructor-super": (H, _BUG, "A derived class's constructor must call `super()` (and a base class's must not): constructing it throws."),
    "eslint/no-class-assign": (M, _BUG, "The class binding is overwritten: later uses of the class get the new value."),
    "eslint/no-func-assign": (M, _BUG, "The function declaration is overwritten: later calls get the new value, or throw if it is not a function."),
    "eslint/no-import-assign": (H, _BUG, "Imported bindings are read-only: assigning to one throws a TypeError in a module."),
    "eslint/no-obj-calls": (H, _BUG, "`Math`, `JSON`, `Reflect`, `Atomics` and `Intl` are not functions: calling one throws a TypeError."),
    "eslint/no-new-native-nonconstructor": (H, _BUG, "`Symbol` and `BigInt` are not constructors: `new` on them throws a TypeError."),
    "eslint/no-unsafe-optional-chaining": (H, _BUG, "The optional chain can short-circuit to `undefined`, which this use of it (a call, `new`, destructuring, arithmetic) turns into a TypeError or NaN."),
    "eslint/getter-return": (M, _BUG, "The getter does not return a value on every path: reading the property gives `undefined`."),
    "eslint/no-setter-return": (L, _BUG, "A setter's return value is ignored: the value returned here goes nowhere."),
    # Silently wrong.
    "eslint/no-cond-assign": (M, _BUG, "An assignment where a comparison was likely meant: the condition is the assigned value, and the variable is overwritten."),
    "eslint/no-dupe-keys": (M, _BUG, "The key appears twice in the object literal: the first value is silently lost."),
    "eslint/no-duplicate-case": (M, _BUG, "The same `case` test twice: the second one can never be reached."),
    "eslint/no-dupe-else-if": (M, _BUG, "The same condition as an earlier branch of this chain: this branch can never run."),
    "eslint/no-dupe-class-members": (M, _BUG, "The class member is defined twice: the first definition is silently replaced."),
    "eslint/no-redeclare": (M, _BUG, "The variable is declared again in the same scope: the two declarations are one variable, which is rarely what was meant."),
    "eslint/no-self-assign": (M, _BUG, "The variable is assigned to itself: this does nothing, and another target was likely meant."),
    "eslint/no-self-compare": (M, _BUG, "The value is compared with itself: the result is always the same (except for NaN)."),
    "eslint/no-unsafe-finally": (M, _BUG, "A `return`, `throw`, `break` or `continue` in `finally` overrides the `try`'s own: an exception or a result is silently lost."),
    "eslint/no-unsafe-negation": (M, _BUG, "`!` binds tighter than `in`/`instanceof`: the left operand is negated, not the test."),
    "eslint/use-isnan": (M, _BUG, "Nothing equals NaN, NaN included: this comparison is always false (or always true). Use `Number.isNaN`."),
    "eslint/valid-typeof": (M, _BUG, "`typeof` never returns this string: the comparison is always false."),
    "eslint/for-direction": (M, _BUG, "The loop's counter moves away from its end condition: the loop runs forever or never."),
    "eslint/no-compare-neg-zero": (M, _BUG, "`x === -0` is also true for `+0`: use `Object.is(x, -0)` to test for negative zero."),
    "eslint/no-constant-binary-expression": (M, _BUG, "One side of this expression decides its result whatever the other is: the condition or default never does what it says."),
    "eslint/no-empty-character-class": (M, _BUG, "`[]` in a regular expression matches nothing: the whole pattern can never match."),
    "eslint/no-ex-assign": (M, _BUG, "The caught exception is overwritten: the original error is lost."),
    "eslint/no-global-assign": (M, _BUG, "A read-only global (`undefined`, `window`, `Object` …) is assigned: it throws in strict mode and corrupts other code otherwise."),
    "eslint/no-invalid-regexp": (H, _BUG, "The regular expression is invalid: constructing it throws a SyntaxError."),
    "eslint/no-loss-of-precision": (M, _BUG, "The number literal cannot be represented exactly: at run time it is a different number."),
    "eslint/no-async-promise-executor": (M, _BUG, "An `async` Promise executor: an error it throws is lost instead of rejecting the promise."),
    "eslint/require-yield": (M, _BUG, "A generator function without `yield`: it returns an empty iterator, which is rarely what was meant."),
    "eslint/no-shadow-restricted-names": (M, _BUG, "The name shadows `undefined`, `NaN`, `Infinity`, `eval` or `arguments`: code below reads the new value."),
    "eslint/no-sparse-arrays": (L, _BUG, "Two commas in a row make a hole in the array: its length and iteration include an `undefined` that was likely a typo."),
    "eslint/no-unreachable": (L, _BUG, "This code comes after a `return`, `throw`, `break` or `continue`: it never runs."),
    "oxc/bad-array-method-on-arguments": (M, _BUG, "`arguments` is not an array: calling an array method on it throws a TypeError."),
    "oxc/bad-char-at-comparison": (M, _BUG, "`charAt` returns one character: comparing it with a longer string is always false."),
    "oxc/bad-comparison-sequence": (M, _BUG, "`a < b < c` compares a boolean with `c`: it does not test that `b` is between them."),
    "oxc/bad-min-max-func": (M, _BUG, "The `Math.min`/`Math.max` calls are nested the wrong way round: the result is always the same bound."),
    "oxc/bad-object-literal-comparison": (M, _BUG, "A comparison with a new object or array literal is always false: literals are compared by identity."),
    "oxc/bad-replace-all-arg": (H, _BUG, "`replaceAll` with a regular expression without the `g` flag throws a TypeError."),
    "oxc/const-comparisons": (M, _BUG, "The comparison's result is fixed by its constants: the condition is always true or always false."),
    "oxc/double-comparisons": (L, _BUG, "Two comparisons of the same operands joined: one comparison says the same, or the condition is always false."),
    "oxc/erasing-op": (M, _BUG, "Multiplying by zero or `& 0`: the result is always zero."),
    "oxc/missing-throw": (M, _BUG, "An error is constructed but not thrown: the failure this line means to signal never happens."),
    "oxc/number-arg-out-of-range": (H, _BUG, "The radix or digits argument is out of range: the call throws a RangeError."),
    "oxc/uninvoked-array-callback": (M, _BUG, "`new Array(n).map(...)` never calls the callback: the array's slots are empty, not undefined."),
    "typescript/no-misused-new": (M, _BUG, "A `new` or `constructor` member where TypeScript reads it as an ordinary method: the type does not describe a constructor."),
    "typescript/no-non-null-asserted-optional-chain": (M, _BUG, "`!` after an optional chain asserts that something the chain allows to be `undefined` is not: a TypeError is one refactor away."),
    "typescript/no-extra-non-null-assertion": (L, _BUG, "`!!` or `?.!`: the extra assertion does nothing and hides what was meant."),
    "typescript/no-duplicate-enum-values": (M, _BUG, "Two members of the enum have the same value: they cannot be told apart."),
    "typescript/no-unsafe-declaration-merging": (M, _BUG, "An interface and a class of the same name merge: the class appears to have members it never defines."),
    "unicorn/no-invalid-fetch-options": (H, _BUG, "A GET or HEAD request with a body: `fetch` throws a TypeError."),
    "unicorn/no-invalid-remove-event-listener": (M, _BUG, "The listener removed is a new function: it was never added, and the real listener stays."),
    "unicorn/no-thenable": (M, _BUG, "An object with a `then` member is treated as a promise by `await`: awaiting it calls `then`."),
    "unicorn/no-await-in-promise-methods": (M, _BUG, "`await` inside `Promise.all([...])` waits for each promise in turn: they no longer run together."),
    # Security.
    "eslint/no-eval": (M, _SEC, "`eval` runs a string as code: any untrusted text that reaches it runs with the page's or the process's rights."),
    "eslint/no-implied-eval": (M, _SEC, "A string given to `setTimeout`/`setInterval`/`execScript` is evaluated as code, like `eval`."),
    "eslint/no-new-func": (M, _SEC, "`new Function(string)` evaluates the string as code, like `eval`."),
    # Dead code the change adds.
    "eslint/no-unused-vars": (L, _KEEP, "Declared but never used: either it is dead or the code meant to use it."),
    "eslint/no-unused-labels": (L, _KEEP, "The label is never used by a `break` or `continue`."),
    "eslint/no-unused-private-class-members": (L, _KEEP, "The private member is never read: either it is dead or the code meant to use it."),
}  # fmt: skip
# Options of the rules above: unused names that say they are meant to be unused (`_x`),
# parameters, caught errors and the siblings of a rest pattern are a team's style or a
# signature's, not dead code.
OPTIONS: dict[str, dict] = {
    "eslint/no-unused-vars": {
        # A parameter is the caller's contract (a callback, a mock of a real signature,
        # an interface): unused, it is rarely dead code.
        "args": "none",
        "caughtErrors": "none",
        "ignoreRestSiblings": True,
        "argsIgnorePattern": "^_",
        "varsIgnorePattern": "^_",
        "destructuredArrayIgnorePattern": "^_",
    },
}
# A rule that fires on every file oxlint parses (more than 0 lines): its word is how a
# review knows a file was read, since oxlint skips some it cannot parse in silence.
CANARY = "eslint/max-lines"
CODE = re.compile(r"^([\w-]+)\(([\w/-]+)\)$")
# Directives oxlint obeys (and ESLint's, which it obeys too).
# A placeholder a build step replaces (rollup's replace plugin, Vite's `define`):
# `'__COLLECT_API_HOST__' || location.origin` is constant in the source only.
BUILD_TOKEN = re.compile(r"""(['"`])__[A-Z][A-Z0-9_]*__\1\s*(?:\|\||\?\?|&&)""")
DIRECTIVE = re.compile(r"\b(eslint|oxlint)-(disable|enable)(-next-line|-line)?\b([^\n*]*)")


def applies(target: Target) -> bool:
    """Whether oxlint reads this file: JavaScript or TypeScript by its extension, or a
    script without one whose `#!` line names a JavaScript or TypeScript runtime."""
    return target.path.lower().endswith(EXTENSIONS) or bool(_runtime_suffix(target))


def _runtime_suffix(target: Target) -> str:
    """The extension a script without one is checked under, by the runtime its `#!`
    line names (`#!/usr/bin/env node`: `.js`); "" for a file whose name says it."""
    if target.path.lower().endswith(EXTENSIONS):
        return ""
    return RUNTIMES.get(interpreter(target).rstrip("0123456789."), "")


def _directed(target: Target) -> bool:
    return "lint-disable" in target.text or "lint-enable" in target.text


def rule_of(code: str) -> str:
    """`eslint(no-eval)` -> `eslint/no-eval`; `typescript-eslint(x)` -> `typescript/x`."""
    found = CODE.match(code or "")
    if not found:
        return ""
    plugin = {"typescript-eslint": "typescript", "eslint-plugin-unicorn": "unicorn"}.get(
        found.group(1), found.group(1)
    )
    return f"{plugin}/{found.group(2).rsplit('/', 1)[-1]}"


def _wanted(options: StaticOptions) -> dict[str, tuple[Severity, str, str]]:
    """The rules this review runs: the default list, less what a policy turns off, plus
    any rule a policy asks for by name (`oxlint:eslint/no-console`)."""
    turned_off = {r.removeprefix("oxlint:") for r in options.ignore if r.startswith("oxlint:")}
    wanted = {name: meaning for name, meaning in RULES.items() if name not in turned_off}
    for asked in options.select:
        if asked.startswith("oxlint:"):
            name = asked.removeprefix("oxlint:")
            wanted.setdefault(name, (L, _KEEP, ""))
    return wanted


def check(
    root: Path, files: list[Target], options: StaticOptions | None = None
) -> tuple[list[Finding], str, list[Skipped]]:
    scripts = sorted((t for t in files if applies(t)), key=lambda t: t.path)
    if not scripts:
        return [], "", []
    options = options or StaticOptions()
    word = RepositoryWord(options.configs)
    wanted = _wanted(options)
    by_path = {t.path: t for t in scripts}
    with tempfile.TemporaryDirectory(prefix="tasuku-oxlint-") as scratch:
        config = Path(scratch) / "oxlintrc.json"
        config.write_text(json.dumps(_config(wanted)))
        # Sorted in one pass (`t not in plain` compared each file with every other).
        plain: list[Target] = []
        copies: list[Target] = []
        renamed: list[Target] = []
        for target in scripts:
            if _runtime_suffix(target):
                renamed.append(target)
            elif _directed(target) or not target.utf8:
                copies.append(target)
            else:
                plain.append(target)
        diagnostics = _run(root, [t.path for t in plain], config)
        # Files with directives, files that are not UTF-8 and scripts named without an
        # extension are checked as copies, in folders of their own (a copy named
        # `bin/cli.js` never meets the pull request's own `bin/cli.js`).
        hidden: set[tuple] = set()
        for group, folder in ((copies, "copies"), (renamed, "renamed")):
            found, hid = _copied(Path(scratch) / folder, group, config)
            diagnostics += found
            hidden |= hid
    findings: list[Finding] = []
    skipped: list[Skipped] = []
    unparsed: set[str] = set()
    parsed = {path for path, item in diagnostics if rule_of(item.get("code", "")) == CANARY}
    failed = {path for path, item in diagnostics if not rule_of(item.get("code", ""))}
    for target in scripts:
        if target.path not in parsed and target.path not in failed and target.lines:
            # oxlint says nothing of a file it skips (a Flow file it cannot parse, say):
            # without the canary's word, silence is no verdict.
            skipped.append(Skipped(target.path, "oxlint skipped it (it could not parse it)"))
    for path, item in diagnostics:
        target = by_path.get(path)
        if target is None:
            continue
        # The last label is where the problem is (the re-assignment, the second key);
        # the first ones say where it comes from.
        label = (item.get("labels") or [{}])[-1].get("span") or {}
        line = int(label.get("line") or 1)
        rule = rule_of(item.get("code", ""))
        if not rule:
            if path not in unparsed:
                unparsed.add(path)
                message = str(item.get("message", ""))[:120]
                skipped.append(Skipped(path, f"oxlint could not parse it (line {line}: {message})"))
            continue
        if rule not in wanted or word.eslint_disabled(path, rule):
            continue
        end = line + _newlines(target, label)
        if not target.touches(line, end):
            continue  # a problem the base already had is not the author's
        if rule == "eslint/no-constant-binary-expression" and BUILD_TOKEN.search(
            quote_line(target, line)
        ):
            continue  # the build replaces the constant
        severity, category, explanation = wanted[rule]
        message = str(item.get("message", "")).strip()
        body = explanation or message
        helped = str(item.get("help") or "").strip()
        if helped:
            body += f" {helped.rstrip('.')}."
        url = item.get("url")
        if url:
            body += f"\n\nRule: [{rule}]({url})"
        findings.append(
            finding(
                target=target,
                start=line,
                end=line,  # the diagnostic's first line: where the reader looks
                severity=severity,
                category=category,
                title=message,
                body=body,
                evidence=f"oxlint {rule} at {path}:{line}: `{quote_line(target, line)}`",
                rule=f"oxlint:{rule}",
                suppressed_by=(
                    _directive(target, line, rule) if _key((path, item)) in hidden else None
                ),
            )
        )
    for path in unparsed:
        findings = [f for f in findings if f.path != path]  # a partial parse says little
    version = version_of("oxlint", tool("oxlint"), root).strip().removeprefix("Version: ")
    return findings, f"oxlint {version}".strip(), skipped


def _config(wanted: dict[str, tuple[Severity, str, str]]) -> dict:
    rules: dict[str, object] = {}
    for name in wanted:
        rules[name] = ["error", OPTIONS[name]] if name in OPTIONS else "error"
    rules[CANARY] = ["error", {"max": 0, "skipBlankLines": False, "skipComments": False}]
    # The default plugins (eslint, typescript, unicorn, oxc) are what the rules need.
    return {"categories": {"correctness": "off"}, "rules": rules}


def _run(root: Path, paths: list[str], config: Path) -> list[tuple[str, dict]]:
    """oxlint over `paths` (relative to `root`), with Tasuku's configuration alone."""
    if not paths:
        return []
    command = [
        tool("oxlint"), "--format", "json", "--config", str(config), "--disable-nested-config",
        "--no-ignore", "--threads", "1",
        "--", *(argument(p) for p in sorted(paths)),
    ]  # fmt: skip
    on = shown(paths[0]) if len(paths) == 1 else f"{len(paths)} files"
    # 1: diagnostics were reported (every rule here is an error).
    completed = run_checker("oxlint", command, cwd=root, on=on, ok=(0, 1))
    report = parsed_json("oxlint", completed.stdout, on, "{}")
    found = []
    for item in report.get("diagnostics", []):
        name = str(item.get("filename", ""))
        found.append((name.removeprefix("./"), item))
    return found


def _copied(
    folder: Path, targets: list[Target], config: Path
) -> tuple[list[tuple[str, dict]], set[tuple]]:
    """oxlint over copies of `targets` in `folder`, each with its directives made inert
    (and invalid bytes replaced) and named with the extension its runtime implies when
    it has none; a file with directives also as it is, to tell which diagnostics its
    directives hide. The diagnostics (under the files' own paths), and the keys of those
    the directives hide."""
    if not targets:
        return [], set()
    by_name = {t.path + _runtime_suffix(t): t for t in targets}

    def run(where: Path, names: list[str]) -> list[tuple[str, dict]]:
        return [
            (by_name[name].path if name in by_name else name, item)
            for name, item in _run(where, names, config)
        ]

    inert, asis = folder / "inert", folder / "as-is"
    for name, target in by_name.items():
        _write(inert / name, _inert(target.text))
    everything = run(inert, list(by_name))
    directed = [name for name, target in by_name.items() if _directed(target)]
    if not directed:
        return everything, set()
    for name in directed:
        _write(asis / name, by_name[name].text)
    obeyed = {_key(d) for d in run(asis, directed)}
    named = {by_name[name].path for name in directed}
    return everything, {_key(d) for d in everything if d[0] in named} - obeyed


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8", errors="surrogateescape"))


def _key(diagnostic: tuple[str, dict]) -> tuple:
    path, item = diagnostic
    span = (item.get("labels") or [{}])[-1].get("span") or {}
    return (path, item.get("code"), span.get("offset"), span.get("length"))


def _newlines(target: Target, span: dict) -> int:
    try:
        start, length = int(span["offset"]), int(span["length"])
    except (KeyError, TypeError, ValueError):
        return 0
    return target.text.encode("utf-8", errors="surrogateescape")[start : start + length].count(
        b"\n"
    )


def _inert(text: str) -> str:
    """The text with every lint directive made an ordinary comment (same length, so
    every offset and line stays where it was)."""
    return DIRECTIVE.sub(lambda m: m.group(0).replace("-disable", "-disabl_").replace(
        "-enable", "-enabl_"), text)  # fmt: skip


def _directive(target: Target, line: int, rule: str) -> Suppression | None:
    """The directive that hid the diagnostic on `line`: one on the line itself
    (`-disable-line`), on the line before (`-disable-next-line`), or a block `disable`
    above it that names the rule or no rule."""
    short = rule.rsplit("/", 1)[-1]
    lines = target.lines

    def names(words: str) -> bool:
        listed = [w.strip() for w in re.split(r"[,\s]+", words.split("--", 1)[0]) if w.strip()]
        return not listed or any(w.rsplit("/", 1)[-1] == short for w in listed)

    for number in (line, line - 1):
        if 1 <= number <= len(lines):
            for m in DIRECTIVE.finditer(lines[number - 1]):
                scope = m.group(3) or ""
                if m.group(2) != "disable" or not names(m.group(4)):
                    continue
                if scope == "-line" and number == line:
                    return Suppression(pragma=m.group(0).strip()[:300], line=number, scope="line")
                if scope == "-next-line" and number == line - 1:
                    return Suppression(pragma=m.group(0).strip()[:300], line=number, scope="next")
    for number in range(line - 1, 0, -1):
        for m in DIRECTIVE.finditer(lines[number - 1]):
            if not m.group(3) and m.group(2) == "disable" and names(m.group(4)):
                return Suppression(pragma=m.group(0).strip()[:300], line=number, scope="file")
    return None
