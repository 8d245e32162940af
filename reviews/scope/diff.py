"""A pull request's diff as plain data: per file, its hunks and which lines are
added, removed or context — what GitHub lets a review comment anchor on.

Pure: parses `git diff` output; no database, no I/O. File names are data: git prints a
name with a quote, backslash or control character (a tab, a newline) in C-style quotes
(and, without `core.quotePath=false`, every non-ASCII byte as an octal escape); they
are read from each file's header here, unquoted, never guessed from the `diff --git`
line by unidiff (whose patterns split `a/x b/y b/x b/y` wrongly). A well-formed hunk is
read here line by line, as unidiff reads it; unidiff reads any other (and says what is
wrong with it).
"""

from __future__ import annotations

import bisect
import keyword
import re
from dataclasses import dataclass, field

from unidiff import PatchSet
from unidiff.constants import RE_HUNK_HEADER
from unidiff.errors import UnidiffParseError

from sandbox.contract import MAX_REMOVED_NAMES, ChangedFile, LineRange, Side

# Languages where a line's indentation carries no meaning (its problems move with it).
INDENTATION_FREE = (
    ".sh", ".bash", ".ksh", ".zsh", ".bats", ".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx",
    ".mts", ".cts", ".vue", ".svelte", ".go", ".java", ".c", ".h", ".cc", ".cpp", ".hpp",
    ".cs", ".rs", ".php", ".rb", ".kt", ".swift", ".scala", ".css", ".scss", ".tf",
)  # fmt: skip


def indentation_free(path: str) -> bool:
    name = path.rsplit("/", 1)[-1].lower()
    return (
        name.endswith(INDENTATION_FREE)
        or name.split(".", 1)[0] in ("dockerfile", "containerfile")
        or name.endswith(".dockerfile")
    )


def _ranges(lines: list[int]) -> tuple[LineRange, ...]:
    ranges: list[LineRange] = []
    start = previous = None
    for line in lines:
        if previous is not None and line == previous + 1:
            previous = line
            continue
        if start is not None:
            ranges.append(LineRange(start=start, end=previous))
        start = previous = line
    if start is not None:
        ranges.append(LineRange(start=start, end=previous))
    return tuple(ranges)


IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
PY_KEYWORDS = frozenset(keyword.kwlist) | {"self", "cls"}
DEFINES = (
    re.compile(r"^\s*(?:async\s+)?def\s+(\w+)"),
    re.compile(r"^\s*class\s+(\w+)"),
    re.compile(r"^\s*(\w+)\s*(?::[^=]*)?=(?!=)"),
    re.compile(r"^\s*for\s+(\w+)\s+in\b"),
    re.compile(r"\bas\s+(\w+)"),
)
IMPORTED = re.compile(r"^\s*(?:from\s+\S+\s+)?import\s+(.*)$")


def _code_part(line: str) -> str:
    """The line without a trailing comment (a `#` outside quotes, roughly)."""
    return line.split("#", 1)[0] if "'" not in line and '"' not in line else line


def _defined(line: str) -> list[str]:
    """Names a removed Python line binds: `def f`, `class C`, `x =`, `for x in`, `as x`,
    and what `import a.b` or `from m import a, b` brings in."""
    names = [m.group(1) for pattern in DEFINES if (m := pattern.search(line))]
    imported = IMPORTED.match(_code_part(line))
    if imported:
        for part in imported.group(1).strip("() \\").split(","):
            words = part.split()
            if not words:
                continue
            if len(words) >= 3 and words[1] == "as":
                names.append(words[2])
            elif line.lstrip().startswith("import"):
                names.append(words[0].split(".")[0])
            else:
                names.append(words[0])
    return names


class DiffError(ValueError):
    permanent = True


@dataclass(frozen=True)
class Hunk:
    source_start: int
    source_length: int
    target_start: int
    target_length: int
    added: frozenset[int]  # head-side line numbers
    removed: frozenset[int]  # base-side line numbers
    context_target: frozenset[int]
    context_source: frozenset[int]
    text: str = field(default="", repr=False)  # the hunk as in the diff, from its @@ line

    @property
    def header(self) -> str:
        return f"@@ -{self.source_start},{self.source_length} +{self.target_start},{self.target_length} @@"

    def lines(self, side: Side) -> frozenset[int]:
        """Lines a comment may anchor on, on one side (GitHub: a line of the hunk)."""
        if side == Side.RIGHT:
            return self.added | self.context_target
        return self.removed | self.context_source


@dataclass(frozen=True)
class FileDiff:
    path: str
    status: str  # added | modified | deleted | renamed
    previous_path: str | None = None
    binary: bool = False
    hunks: tuple[Hunk, ...] = ()
    added_count: int = 0
    removed_count: int = 0
    header: str = field(default="", repr=False)  # `diff --git` … `+++` lines
    _added_sorted: tuple[int, ...] = field(default=(), repr=False)

    @property
    def added(self) -> tuple[int, ...]:
        """Head-side line numbers this diff adds, ascending."""
        return self._added_sorted

    def is_added(self, line: int) -> bool:
        index = bisect.bisect_left(self._added_sorted, line)
        return index < len(self._added_sorted) and self._added_sorted[index] == line

    def hunk_index(self, side: Side, line: int) -> int | None:
        """The index of the hunk `line` can be commented in, or None if it is outside
        every hunk (GitHub refuses such a comment with 422)."""
        for index, hunk in enumerate(self.hunks):
            if line in hunk.lines(side):
                return index
        return None

    def added_ranges(self) -> tuple[LineRange, ...]:
        return _ranges(list(self._added_sorted))

    def line_text(self, line: int) -> str | None:
        """The text of head-side `line` (added or context), if a hunk shows it."""
        for hunk in self.hunks:
            if line in hunk.added or line in hunk.context_target:
                number = hunk.target_start
                for text in hunk.text.splitlines()[1:]:
                    if text.startswith(("+", " ")):
                        if number == line:
                            return text[1:]
                        number += 1
        return None

    @property
    def whitespace_only(self) -> bool:
        """Whether the change is nothing but whitespace that cannot change what the file
        means: line ends and spaces or tabs at the ends of lines, as `git diff
        --ignore-space-at-eol` sees it (a mode change and an empty file added or deleted
        count too). Indentation and spaces inside a line are changes: they are meaning
        in Python or YAML, and in a string anywhere. Judged hunk by hunk, each hunk's
        base side against its head side, line for line, so a real change is never
        called whitespace (where git would align an edit differently, the file is merely
        reviewed). A binary or renamed file never is (not even an empty file git paired
        with another by their content)."""
        if self.binary or self.status == "renamed":
            return False
        if self.status in ("added", "deleted"):
            return not self.hunks
        return all(_same_ignoring_space(hunk.text) for hunk in self.hunks)

    def changed_file(self) -> ChangedFile:
        return ChangedFile(
            path=self.path,
            status=self.status,
            previous_path=self.previous_path,
            added=_ranges(sorted(set(self._added_sorted) - self.reindented()))
            if self.status == "modified"
            else self.added_ranges(),
            binary=self.binary,
            removed=self.removed_names() if self.status == "modified" else (),
        )

    def reindented(self) -> frozenset[int]:
        """Head lines whose only change is their indentation, in a file whose language
        gives indentation no meaning (a shell script, JavaScript, a Dockerfile …): the
        line's problems, if any, were the base's. Python, YAML and Makefiles keep every
        re-indented line (there, indentation is meaning)."""
        if not indentation_free(self.path):
            return frozenset()
        found: set[int] = set()
        for hunk in self.hunks:
            removed: dict[str, int] = {}
            added: list[tuple[int, str]] = []
            number = hunk.target_start
            for text in hunk.text.splitlines()[1:]:
                if text.startswith("-"):
                    key = text[1:].lstrip()
                    removed[key] = removed.get(key, 0) + 1
                elif text.startswith("+"):
                    added.append((number, text[1:].lstrip()))
                    number += 1
                elif text.startswith(" "):
                    number += 1
            for line, key in added:
                if key and removed.get(key):
                    removed[key] -= 1
                    found.add(line)
        return frozenset(found)

    def removed_names(self) -> tuple[tuple[str, int, bool], ...]:
        """Python names on the lines this diff removes: (name, base line, whether the
        line defines it), a name's defining line first, else its first removed line. In
        YAML (a workflow, an action), the actions its removed `uses:` lines named by a
        tag or a branch rather than a commit (`uses:actions/checkout`): the base's own."""
        if self.path.endswith((".yml", ".yaml")):
            return self._removed_unpinned_uses()
        if not self.path.endswith((".py", ".pyi")):
            return ()
        found: dict[str, tuple[int, bool]] = {}
        for number, line in self._removed_lines():
            defined = set(_defined(line))
            for name in dict.fromkeys(IDENTIFIER.findall(_code_part(line))):
                if name in PY_KEYWORDS:
                    continue
                if name in found:
                    if name in defined and not found[name][1]:
                        found[name] = (number, True)  # its defining line comes first
                elif len(found) < MAX_REMOVED_NAMES:  # the contract's bound
                    found[name] = (number, name in defined)
        return tuple((name, line, defines) for name, (line, defines) in found.items())

    def _removed_lines(self):
        """(base-side line number, text) of each line this diff removes."""
        for hunk in self.hunks:
            number = hunk.source_start
            for text in hunk.text.splitlines()[1:]:
                if text.startswith("+") or text.startswith("\\"):
                    continue
                if text.startswith("-"):
                    yield number, text[1:]
                number += 1

    def _removed_unpinned_uses(self) -> tuple[tuple[str, int, bool], ...]:
        found: dict[str, int] = {}
        for number, line in self._removed_lines():
            used = USES.match(line)
            if used and not PINNED.fullmatch(used.group(2)) and len(found) < MAX_REMOVED_NAMES:
                found.setdefault(f"uses:{used.group(1)}", number)
        return tuple((name, line, False) for name, line in found.items())


# A workflow step's or job's `uses: owner/repo[/path]@ref` (quoted or not); a local
# action (`./path`) or a container (`docker://…`) names no ref to pin.
USES = re.compile(r"""^\s*(?:-\s+)?uses:\s*["']?([A-Za-z0-9_.-]+/[^@\s"']+)@([^\s"'#]+)""")
PINNED = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


@dataclass(frozen=True)
class Diff:
    files: tuple[FileDiff, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_path", {f.path: f for f in self.files})

    def get(self, path: str) -> FileDiff | None:
        return self._by_path.get(path)  # type: ignore[attr-defined]

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(f.path for f in self.files)

    @property
    def added_lines(self) -> int:
        return sum(f.added_count for f in self.files)

    @property
    def touched_paths(self) -> tuple[str, ...]:
        """Every path the diff touches, sorted, a renamed file's old name and new name
        both: what `git diff --name-only --no-renames` lists, read from the same diff."""
        paths = {f.path for f in self.files} | {f.previous_path for f in self.files}
        return tuple(sorted(path for path in paths if path))


# What `git diff --ignore-space-at-eol` ignores at a line's end: git's own isspace.
GIT_SPACE = " \t\r"


def _same_ignoring_space(hunk_text: str) -> bool:
    """Whether a hunk's base side and head side are the same lines, but for whitespace
    at their ends."""
    base: list[str] = []
    head: list[str] = []
    for line in hunk_text.split("\n")[1:]:  # after the @@ line
        if not line or line[0] == "\\":  # the end, or "\\ No newline at end of file"
            continue
        text = line[1:].rstrip(GIT_SPACE)
        if line[0] in " -":
            base.append(text)
        if line[0] in " +":
            head.append(text)
    return base == head


def _strip_prefix(path: str | None) -> str | None:
    if path is None or path == "/dev/null":
        return None
    if path.startswith(("a/", "b/")):
        return path[2:]
    return path


# git's C-style escapes (quote.c, `sq_lookup`): the byte each one stands for.
ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


def _unquote(text: str, start: int = 0) -> tuple[str, int]:
    """The name in git's C-style quotes at `text[start]` (a `"`), and where it ends.

    Escaped bytes are collected and decoded as UTF-8 (an invalid sequence becomes
    U+FFFD, as git's output is decoded)."""
    out = bytearray()
    index = start + 1
    while index < len(text):
        char = text[index]
        if char == '"':
            return out.decode("utf-8", errors="replace"), index + 1
        if char == "\\" and index + 1 < len(text):
            code = text[index + 1]
            if code in ESCAPES:
                out.append(ESCAPES[code])
                index += 2
                continue
            digits = text[index + 1 : index + 4]
            if len(digits) == 3 and all(d in "01234567" for d in digits):
                out.append(int(digits, 8) & 0xFF)
                index += 4
                continue
            raise DiffError(f"The diff could not be parsed: a bad escape in {text!r}")
        out += char.encode("utf-8", errors="surrogateescape")
        index += 1
    raise DiffError(f"The diff could not be parsed: an unterminated name in {text!r}")


def _name(text: str) -> str:
    """A name as git prints it after `--- `, `+++ `, `rename from ` …: quoted or raw;
    git ends it with a tab when it contains a space."""
    if text.startswith('"'):
        name, end = _unquote(text)
        if text[end:] not in ("", "\t"):
            raise DiffError(f"The diff could not be parsed: text after the name {text!r}")
        return name
    return text[:-1] if text.endswith("\t") else text


def _git_pair(rest: str) -> tuple[str, str] | None:
    """The two names of `diff --git <a> <b>` when they can be told apart: both quoted,
    or the same name twice (what git prints unless the file is renamed or copied, and
    then `rename from`/`rename to` say the names)."""
    if rest.startswith('"'):
        first, end = _unquote(rest)
        if rest[end : end + 2] != ' "':
            return None
        second, finish = _unquote(rest, end + 1)
        return (first, second) if finish == len(rest) else None
    if (len(rest) - 1) % 2:
        return None
    half = (len(rest) - 1) // 2
    first, second = rest[:half], rest[half + 1 :]
    if rest[half] != " " or first[2:] != second[2:]:
        return None
    return first, second


@dataclass(frozen=True)
class _Header:
    source: str | None  # None: /dev/null (an added file)
    target: str | None  # None: /dev/null (a deleted file)
    status: str
    binary: bool


def _header_parse(header: str) -> _Header | None:
    """Names, status and binary-ness from one file's `diff --git` header (the text
    before its first hunk); None when it is not one."""
    lines = header.split("\n")
    if not lines[0].startswith("diff --git "):
        return None
    pair = _git_pair(lines[0][len("diff --git ") :])
    source = target = None
    if pair is not None:
        source, target = (_strip_prefix(name) for name in pair)
    renamed_from = renamed_to = minus = plus = None
    added = deleted = binary = False
    for line in lines[1:]:
        if line.startswith("--- "):
            minus = _name(line[4:])
        elif line.startswith("+++ "):
            plus = _name(line[4:])
        elif line.startswith(("rename from ", "copy from ")):
            renamed_from = _name(line.split(" ", 2)[2])
        elif line.startswith(("rename to ", "copy to ")):
            renamed_to = _name(line.split(" ", 2)[2])
        elif line.startswith("new file mode "):
            added = True
        elif line.startswith("deleted file mode "):
            deleted = True
        elif line.startswith(("Binary files ", "GIT binary patch")):
            binary = True
    if renamed_from is not None and renamed_to is not None:
        source, target = renamed_from, renamed_to
    if minus is not None:
        source = _strip_prefix(minus) if minus != "/dev/null" else source
    if plus is not None:
        target = _strip_prefix(plus) if plus != "/dev/null" else target
    if source is None and target is None:
        return None
    source, target = source or target, target or source
    if added:
        return _Header(None, target, "added", binary)
    if deleted:
        return _Header(source, None, "deleted", binary)
    status = "renamed" if source != target else "modified"
    return _Header(source, target, status, binary)


def _hunks_parse(hunk_texts: list[str]) -> PatchSet:
    """unidiff over one file's hunks under neutral names (the names are parsed apart)."""
    text = "--- a/file\n+++ b/file\n" + "".join(hunk_texts)
    try:
        return PatchSet(text)
    except UnidiffParseError as exc:
        raise DiffError(f"The diff could not be parsed: {exc}") from exc


FILE_START = re.compile(r"^diff --git ", re.MULTILINE)
HUNK_START = re.compile(r"^@@ ", re.MULTILINE)


def _file_texts(text: str) -> list[str]:
    starts = [m.start() for m in FILE_START.finditer(text)]
    if not starts:
        return []
    return [text[a:b] for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]


def _hunk_texts(file_text: str) -> tuple[str, list[str]]:
    """(header, [hunk text, …]) of one file's part of the diff."""
    starts = [m.start() for m in HUNK_START.finditer(file_text)]
    if not starts:
        return file_text, []
    ends = [*starts[1:], len(file_text)]
    return file_text[: starts[0]], [file_text[a:b] for a, b in zip(starts, ends, strict=True)]


def diff_parse(text: str) -> Diff:
    """Parse unified diff text (as `git diff` prints it) into a `Diff`."""
    texts = _file_texts(text)
    if texts:
        return Diff(files=tuple(_git_file(file_text) for file_text in texts))
    # Not `git diff` output (a plain unified diff): unidiff reads the names too.
    try:
        patch = PatchSet(text)
    except UnidiffParseError as exc:
        raise DiffError(f"The diff could not be parsed: {exc}") from exc
    files = []
    for patched in patch:
        source = _strip_prefix(patched.source_file)
        target = _strip_prefix(patched.target_file)
        if patched.is_added_file:
            status = "added"
        elif patched.is_removed_file:
            status = "deleted"
        elif patched.is_rename or (source and target and source != target):
            status = "renamed"
        else:
            status = "modified"
        files.append(
            _file_diff(
                _hunks_of(patched, [str(hunk) for hunk in patched]),
                path=target or source or patched.path,
                status=status,
                previous_path=source if status == "renamed" else None,
                binary=bool(patched.is_binary_file),
                header="",
            )
        )
    return Diff(files=tuple(files))


def _git_file(file_text: str) -> FileDiff:
    """One file's part of `git diff` output: names from its header, hunks read here when
    each is well formed (`_hunk_read`), else by unidiff."""
    header, hunk_texts = _hunk_texts(file_text)
    parsed = _header_parse(header)
    if parsed is None:
        first = header.split("\n", 1)[0]
        raise DiffError(f"The diff could not be parsed: no file names in {first!r}")
    read = [_hunk_read(text) for text in hunk_texts]
    hunks: list[Hunk] = [hunk for hunk in read if hunk is not None]
    if len(hunks) != len(read):
        patch = _hunks_parse(hunk_texts)
        patched = patch[0] if len(patch) else None
        if patched is not None and len(hunk_texts) != len(patched):
            hunk_texts = [str(hunk) for hunk in patched]
        hunks = _hunks_of(patched, hunk_texts)
    return _file_diff(
        hunks,
        path=parsed.target or parsed.source or "",
        status=parsed.status,
        previous_path=parsed.source if parsed.status == "renamed" else None,
        binary=parsed.binary,
        header=header,
    )


NO_NEWLINE = "\\ No newline at end of file"


def _hunk_read(text: str) -> Hunk | None:
    """One hunk of `git diff` output (from its `@@` line), read line by line as unidiff
    reads it, without an object per line: a 9 MB file's hunk took unidiff 5 CPU seconds.
    Only a hunk whose every line is what `git diff` writes (` `, `+`, `-`, an empty
    context line, git's no-newline note) and whose lines add up to its header's counts;
    for any other, None: unidiff reads it, and says what is wrong with it."""
    if not text.endswith("\n"):
        return None
    lines = text[:-1].split("\n")
    found = RE_HUNK_HEADER.match(lines[0])
    if found is None:
        return None
    source_start, source_length, target_start, target_length, _ = found.groups()
    hunk_start = (int(source_start), 1 if source_length is None else int(source_length),
                  int(target_start), 1 if target_length is None else int(target_length))  # fmt: skip
    source, target = hunk_start[0], hunk_start[2]
    source_end, target_end = source + hunk_start[1], target + hunk_start[3]
    added: list[int] = []
    removed: list[int] = []
    context_target: list[int] = []
    context_source: list[int] = []
    body = lines[1:]
    for index, line in enumerate(body):
        if source == source_end and target == target_end:
            # Complete: only git's note may follow (unidiff adds it to the hunk).
            if all(rest.startswith(NO_NEWLINE) for rest in body[index:]):
                break
            return None
        kind = line[:1]
        if kind == "+":
            added.append(target)
            target += 1
        elif kind == "-":
            removed.append(source)
            source += 1
        elif kind == " " or line == "":
            context_target.append(target)
            context_source.append(source)
            target += 1
            source += 1
        elif not line.startswith(NO_NEWLINE):
            return None
        if source > source_end or target > target_end:
            return None
    if source != source_end or target != target_end:
        return None
    return Hunk(
        source_start=hunk_start[0],
        source_length=hunk_start[1],
        target_start=hunk_start[2],
        target_length=hunk_start[3],
        added=frozenset(added),
        removed=frozenset(removed),
        context_target=frozenset(context_target),
        context_source=frozenset(context_source),
        text=text,
    )


def _hunks_of(patched, hunk_texts: list[str]) -> list[Hunk]:
    """The hunks unidiff parsed (`patched`: one file of its PatchSet, or None)."""
    hunks = []
    for hunk, hunk_text in zip(patched or (), hunk_texts, strict=True):
        added, removed, context_t, context_s = [], [], [], []
        for line in hunk:
            if line.is_added:
                added.append(line.target_line_no)
            elif line.is_removed:
                removed.append(line.source_line_no)
            elif line.is_context:
                context_t.append(line.target_line_no)
                context_s.append(line.source_line_no)
        hunks.append(
            Hunk(
                source_start=hunk.source_start,
                source_length=hunk.source_length,
                target_start=hunk.target_start,
                target_length=hunk.target_length,
                added=frozenset(added),
                removed=frozenset(removed),
                context_target=frozenset(context_t),
                context_source=frozenset(context_s),
                text=hunk_text,
            )
        )
    return hunks


def _file_diff(
    hunks: list[Hunk],
    *,
    path: str,
    status: str,
    previous_path: str | None,
    binary: bool,
    header: str,
) -> FileDiff:
    added_all = [line for hunk in hunks for line in hunk.added]
    return FileDiff(
        path=path,
        status=status,
        previous_path=previous_path,
        binary=binary,
        hunks=tuple(hunks),
        added_count=len(added_all),
        removed_count=sum(len(hunk.removed) for hunk in hunks),
        header=header,
        _added_sorted=tuple(sorted(added_all)),
    )
