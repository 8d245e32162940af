"""What a repository says about itself, as its base commit has it: the Python versions it
supports and the rules its ruff, flake8, shellcheck, ESLint/oxlint, hadolint and zizmor
configuration turns off (for the whole project, or for some files). The static engine honours these; the pull request's
own copies of the files are never read, so a change cannot silence its own checks by
editing them.

Pure: the configuration files' texts in (`StaticOptions.configs`, path -> text), answers
per changed file out."""

from __future__ import annotations

import configparser
import json
import re
import tomllib
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import PurePosixPath

import pathspec

CODE = re.compile(r"[A-Z]+[0-9]*")
VERSION = re.compile(r"(?:>=|~=|==|>)\s*(\d)\.(\d+)")
CLASSIFIER = re.compile(r"Programming Language :: Python :: (\d)(?:\.(\d+))?(?=\s*['\"\n]|$)")
PYTHON_REQUIRES = re.compile(r"python_requires\s*=\s*['\"]([^'\"]+)['\"]")
# The Python 3 minor versions ruff checks (pyproject.toml asks for 0.17 or newer:
# `--target-version py37` … `py315`).
OLDEST_MINOR, NEWEST_MINOR = 7, 15
FLAKE8_FILES = ("setup.cfg", "tox.ini", ".flake8")
ESLINT_FILES = (".oxlintrc.json", ".eslintrc.json", ".eslintrc")
HADOLINT_FILES = (".hadolint.yaml", ".hadolint.yml")
ZIZMOR_FILES = (".github/zizmor.yml", ".github/zizmor.yaml", "zizmor.yml", "zizmor.yaml")
RUFF_FILES = ("ruff.toml", ".ruff.toml", "pyproject.toml")


@dataclass(frozen=True)
class Ignores:
    """Rules turned off: everywhere, and per file pattern (relative to `folder`)."""

    everywhere: frozenset[str] = frozenset()
    per_file: tuple[tuple[str, str, frozenset[str]], ...] = ()  # (folder, pattern, codes)

    def covers(self, path: str, code: str) -> bool:
        if _prefixed(code, self.everywhere):
            return True
        for folder, pattern, codes in self.per_file:
            relative = path[len(folder) + 1 :] if folder else path
            if folder and not path.startswith(folder + "/"):
                continue
            if _matches(pattern, relative) and _prefixed(code, codes):
                return True
        return False


def _prefixed(code: str, codes: frozenset[str]) -> bool:
    """Whether `code` is one of `codes` or starts with one (`F4` covers `F401`; `ALL`)."""
    return "ALL" in codes or any(code.startswith(c) for c in codes)


def _matches(pattern: str, path: str) -> bool:
    if "/" not in pattern.rstrip("/"):
        return PurePosixPath(path).match(pattern) or PurePosixPath(path).name == pattern
    return pathspec.GitIgnoreSpec.from_lines([pattern]).match_file(path)


def _codes(value: object) -> frozenset[str]:
    if isinstance(value, str):
        words = re.split(r"[\s,]+", value)
    elif isinstance(value, list):
        words = [str(v) for v in value]
    else:
        return frozenset()
    return frozenset(w.strip().upper() for w in words if CODE.fullmatch(w.strip().upper()))


@dataclass
class RepositoryWord:
    """The base commit's configuration files, asked per changed file."""

    configs: dict[str, str] = field(default_factory=dict)

    @cached_property
    def _folders(self) -> dict[str, dict[str, str]]:
        by_folder: dict[str, dict[str, str]] = {}
        for path, text in self.configs.items():
            folder, _, name = path.rpartition("/")
            by_folder.setdefault(folder, {})[name] = text
        return by_folder

    def _up(self, path: str):
        """The folders from `path`'s own up to the root, each with its config files."""
        folder = path.rpartition("/")[0]
        while True:
            files = self._folders.get(folder)
            if files:
                yield folder, files
            if not folder:
                return
            folder = folder.rpartition("/")[0]

    # --- Python versions --------------------------------------------------------------

    def python(self, path: str) -> tuple[str | None, bool]:
        """(the oldest Python 3 the file's project declares, as ruff spells it — `py38` —
        or None when it declares none ruff can check; whether it declares Python 2
        support too)."""
        for _, files in self._up(path):
            minors: list[int] = []
            py2 = False
            for name, text in files.items():
                found, two = _declared(name, text)
                minors += found
                py2 = py2 or two
            if minors or py2:
                # A project that still supports a Python older than ruff knows is read
                # as the oldest ruff knows: syntax newer than that fails on both.
                oldest = min((max(m, OLDEST_MINOR) for m in minors), default=None)
                known = oldest is not None and oldest <= NEWEST_MINOR
                return (f"py3{oldest}" if known else None), py2
        return None, False

    # --- ignores ------------------------------------------------------------------------

    def ruff_ignores(self, path: str) -> Ignores:
        """What the file's nearest ruff configuration and flake8 configuration turn off."""
        everywhere: set[str] = set()
        per_file: list[tuple[str, str, frozenset[str]]] = []
        ruff_done = flake8_done = False
        for folder, files in self._up(path):
            if not ruff_done:
                for name in RUFF_FILES:
                    section = _ruff_section(name, files.get(name))
                    if section is not None:
                        ignored, patterns = _ruff_ignores(section)
                        everywhere |= ignored
                        per_file += [(folder, p, c) for p, c in patterns]
                        ruff_done = True
                        break
            if not flake8_done:
                for name in FLAKE8_FILES:
                    section = _flake8_section(files.get(name))
                    if section is not None:
                        ignored, patterns = _flake8_ignores(section)
                        everywhere |= ignored
                        per_file += [(folder, p, c) for p, c in patterns]
                        flake8_done = True
                        break
        return Ignores(frozenset(everywhere), tuple(per_file))

    def shellcheck_disabled(self, path: str) -> frozenset[str]:
        """What the nearest `.shellcheckrc` above the script turns off (`SC2034`)."""
        for _, files in self._up(path):
            text = files.get(".shellcheckrc")
            if text is None:
                continue
            codes: set[str] = set()
            for line in text.splitlines():
                key, _, value = line.split("#", 1)[0].strip().partition("=")
                if key.strip() == "disable":
                    for word in value.split(","):
                        word = word.strip().upper()
                        if word.isdigit():
                            word = f"SC{word}"
                        if re.fullmatch(r"SC\d{4}", word):
                            codes.add(word)
            return frozenset(codes)
        return frozenset()

    def eslint_disabled(self, path: str, rule: str) -> bool:
        """Whether the nearest ESLint or oxlint JSON configuration above the file turns
        `rule` (`eslint/no-unused-vars`) off, for every file or by an `overrides` entry
        whose `files` match it. A JavaScript configuration (`eslint.config.js`) is code,
        and is not run."""
        short = rule.rsplit("/", 1)[-1]
        for folder, files in self._up(path):
            for name in ESLINT_FILES:
                data = _json_or_yaml(files.get(name))
                if data is None:
                    continue
                relative = path[len(folder) + 1 :] if folder else path
                off = _off(data.get("rules"), short)
                for override in data.get("overrides") or []:
                    if not isinstance(override, dict):
                        continue
                    patterns = override.get("files")
                    patterns = [patterns] if isinstance(patterns, str) else patterns or []
                    if any(_matches(str(p), relative) for p in patterns):
                        off = _off(override.get("rules"), short, off)
                return bool(off)
        return False

    def hadolint_ignored(self, path: str) -> frozenset[str]:
        """What the nearest `.hadolint.yaml` above the Dockerfile ignores (`DL3008`)."""
        for _, files in self._up(path):
            for name in HADOLINT_FILES:
                data = _json_or_yaml(files.get(name))
                if isinstance(data, dict):
                    return _codes(data.get("ignored"))
        return frozenset()

    def zizmor_disabled(self, path: str, audit: str, line: int) -> bool:
        """Whether the repository's zizmor configuration turns `audit` off, everywhere
        or for this workflow (`ignore: [ci.yml]`, `ci.yml:12`)."""
        for name in ZIZMOR_FILES:
            data = _json_or_yaml(self.configs.get(name))
            if not isinstance(data, dict):
                continue
            rules = data.get("rules") if isinstance(data.get("rules"), dict) else {}
            settings = rules.get(audit) if isinstance(rules.get(audit), dict) else {}
            if settings.get("disable") is True:
                return True
            file_name = PurePosixPath(path).name
            for entry in settings.get("ignore") or []:
                where, _, at = str(entry).partition(":")
                number = at.split(":", 1)[0]
                if where == file_name and (not number or number == str(line)):
                    return True
            return False
        return False


def _json_or_yaml(text: str | None):
    """A configuration file's data (JSON with comments, or YAML), or None."""
    if not text:
        return None
    try:
        return json.loads(JSONC.sub(_uncomment, text))
    except ValueError:
        pass
    import yaml  # read for a YAML file only, not at every start

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    return data if isinstance(data, dict) else None


# A JSON string, a comment, or a comma before a closing bracket (JSON with comments).
JSONC = re.compile(r'("(?:\\.|[^"\\])*")|(//[^\n]*|/\*.*?\*/)|(,)(?=\s*[}\]])', re.DOTALL)


def _uncomment(match: re.Match[str]) -> str:
    return match.group(1) or ""


def _off(rules: object, short: str, already: bool = False) -> bool:
    """Whether ESLint `rules` turn the rule named `short` off (any plugin's spelling:
    `no-eval`, `eslint/no-eval`, `@typescript-eslint/no-unused-vars`); one that turns
    it on again undoes an earlier off."""
    if not isinstance(rules, dict):
        return already
    for key, value in rules.items():
        if str(key).rsplit("/", 1)[-1] != short:
            continue
        level = value[0] if isinstance(value, list) and value else value
        already = level in ("off", 0, "0")
    return already


def _declared(name: str, text: str) -> tuple[list[int], bool]:
    """(Python 3 minor versions a file declares as supported or required, whether it
    declares Python 2)."""
    minors: list[int] = []
    py2 = False
    requires: list[str] = []
    classifiers: list[tuple[str, str]] = (
        CLASSIFIER.findall(text) if name != ".python-version" else []
    )
    if name == "pyproject.toml":
        data = _toml(text)
        project = data.get("project") if isinstance(data.get("project"), dict) else {}
        if isinstance(project.get("requires-python"), str):
            requires.append(project["requires-python"])
        tool = data.get("tool") if isinstance(data.get("tool"), dict) else {}
        ruff = tool.get("ruff") if isinstance(tool.get("ruff"), dict) else {}
        version = ruff.get("target-version")
        if isinstance(version, str) and re.fullmatch(r"py3\d{1,2}", version):
            minors.append(int(version[3:]))
    elif name in ("ruff.toml", ".ruff.toml"):
        version = _toml(text).get("target-version")
        if isinstance(version, str) and re.fullmatch(r"py3\d{1,2}", version):
            minors.append(int(version[3:]))
    elif name in ("setup.py", "setup.cfg"):
        requires += PYTHON_REQUIRES.findall(text)
        if name == "setup.cfg":
            section = _ini(text)
            if section is not None and section.has_option("options", "python_requires"):
                requires.append(section.get("options", "python_requires"))
    elif name == ".python-version":
        first = (text.strip().splitlines() or [""])[0]
        match = re.match(r"(\d)\.(\d+)", first)
        if match:
            py2 = py2 or match.group(1) == "2"
            if match.group(1) == "3":
                minors.append(int(match.group(2)))
    for spec in requires:
        for major, minor in VERSION.findall(spec):
            if major == "2":
                py2 = True
            elif major == "3":
                minors.append(int(minor))
    for major, minor in classifiers:
        if major == "2":
            py2 = True
        elif major == "3" and minor:
            minors.append(int(minor))
    return minors, py2


# Files whose every word is a linter's configuration; of the others (pyproject.toml,
# setup.cfg, tox.ini, setup.py, .python-version) only what the engine reads counts.
SHARED_FILES = frozenset({"pyproject.toml", "setup.cfg", "tox.ini", "setup.py", ".python-version"})


def rules_said(configs: dict[str, str]) -> str:
    """What the base branch's configuration says that decides the static engine's
    findings, in a canonical form: the dedicated linters' files as they are, and of a
    shared file only its ruff or flake8 section and the Python versions it declares (a
    dependency bump in `pyproject.toml` changes no rule)."""
    said = []
    for path in sorted(configs):
        name, text = PurePosixPath(path).name, configs[path]
        if name not in SHARED_FILES:
            said.append(f"{path}\0{text}")
            continue
        flake8 = _flake8_section(text) if name in ("setup.cfg", "tox.ini") else None
        words = {
            "ruff": _ruff_section(name, text) if name == "pyproject.toml" else None,
            "flake8": dict(flake8.items()) if flake8 is not None else None,
            "python": _declared(name, text),
        }
        said.append(f"{path}\0{json.dumps(words, sort_keys=True, default=str)}")
    return "\n".join(said)


def _toml(text: str | None) -> dict:
    if not text:
        return {}
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError):
        return {}


def _ini(text: str | None) -> configparser.ConfigParser | None:
    if not text:
        return None
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    return parser


def _ruff_section(name: str, text: str | None) -> dict | None:
    """The ruff settings a file holds (None: it holds none — a pyproject.toml without
    `[tool.ruff]` is not a ruff configuration, and ruff looks further up)."""
    if text is None:
        return None
    data = _toml(text)
    if name == "pyproject.toml":
        tool = data.get("tool") if isinstance(data.get("tool"), dict) else {}
        section = tool.get("ruff")
        return section if isinstance(section, dict) else None
    return data


def _ruff_ignores(section: dict) -> tuple[frozenset[str], list[tuple[str, frozenset[str]]]]:
    ignored: set[str] = set()
    patterns: list[tuple[str, frozenset[str]]] = []
    for part in (section, section.get("lint") if isinstance(section.get("lint"), dict) else {}):
        for key in ("ignore", "extend-ignore"):
            ignored |= _codes(part.get(key))
        for key in ("per-file-ignores", "extend-per-file-ignores"):
            table = part.get(key)
            if isinstance(table, dict):
                patterns += [(str(p), _codes(c)) for p, c in table.items()]
    return frozenset(ignored), patterns


def _flake8_section(text: str | None) -> configparser.SectionProxy | None:
    parser = _ini(text)
    if parser is None or not parser.has_section("flake8"):
        return None
    return parser["flake8"]


def _flake8_ignores(
    section: configparser.SectionProxy,
) -> tuple[frozenset[str], list[tuple[str, frozenset[str]]]]:
    ignored = _codes(section.get("ignore", "")) | _codes(section.get("extend-ignore", ""))
    patterns: list[tuple[str, frozenset[str]]] = []
    for line in re.split(r"[\n]+", section.get("per-file-ignores", "")):
        for item in re.split(r"\s+(?=\S+:)", line.strip()):
            pattern, _, codes = item.partition(":")
            if pattern.strip() and codes.strip():
                patterns.append((pattern.strip(), _codes(codes)))
    return ignored, patterns
