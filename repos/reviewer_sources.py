"""Reviewers repositories: a reviewer's rules, guidance and skills read from one TOML
file in a git repository the team keeps for them, at a branch or tag, with a deploy
token (docs/reviewers.md, *The reviewers repository*).

Reached only from the admin's "Sync from repository" and `manage.py reviewers_sync`
(through `repos.reviewer_sync`): never from the review path, which reads a
reviewer's instructions from the configuration its run recorded, never from a pull
request's checkout (an import-linter contract keeps `reviews` from importing this).
Imports nothing from Django's database.
"""

from __future__ import annotations

import re
import tempfile
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

from pydantic import ValidationError

from sandbox.contract import MAX_SKILLS, SkillDocument
from sandbox.errors import CloneError
from sandbox.git import Git, git_env, git_text

# A reviewer file is text of a few pages; a larger blob is refused unread.
MAX_FILE_BYTES = 1_000_000
FILE_KEYS = frozenset({"rules", "guidance", "skills"})
SKILL_KEYS = frozenset({"name", "description", "body"})
# A branch or tag as git names it, never something git could read as an option.
REF = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./-]{0,199}")


class SourceError(Exception):
    """The reviewers repository could not be read, or its file is not a reviewer: said
    in words the operator can act on. Nothing was changed."""

    permanent = True


@dataclass(frozen=True)
class Definition:
    """What a reviewer file sets."""

    rules: str
    guidance: str
    skills: tuple[SkillDocument, ...]


@dataclass(frozen=True)
class Read:
    commit: str
    definition: Definition


def source_problems(url: str, path: str, ref: str, *, allow_file: bool) -> list[str]:
    """What is wrong with a reviewers repository's address, file and ref (empty: fine)."""
    problems = []
    parts = urlsplit(url)
    schemes = ("https", "file") if allow_file else ("https",)
    if parts.scheme not in schemes:
        problems.append(
            "The reviewers repository must be an https:// git URL"
            + (" (or file://)." if allow_file else ".")
        )
    elif parts.username or parts.password:
        problems.append(
            "Put no credentials in the URL: enter the deploy token in its own field "
            "(it is stored encrypted)."
        )
    elif parts.scheme == "https" and not parts.hostname:
        problems.append("The reviewers repository's URL has no host.")
    pure = PurePosixPath(path)
    if not path or pure.is_absolute() or ".." in pure.parts or path.startswith("-"):
        problems.append(
            "The file must be a path inside the repository, e.g. `reviewers/claude.toml`."
        )
    if ref and not REF.fullmatch(ref):
        problems.append(f"Not a branch or tag name: {ref[:80]!r}.")
    return problems


def definition_parse(text: str, *, where: str) -> Definition:
    """A reviewer file's definition, or SourceError saying what is wrong with it and
    where. Unknown keys are refused rather than ignored: a misspelt `guidence` would
    otherwise silently give the reviewer no guidance."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SourceError(f"{where} is not valid TOML: {exc}.") from exc
    unknown = sorted(set(data) - FILE_KEYS)
    if unknown:
        raise SourceError(
            f"{where}: unknown key(s) {', '.join(unknown)}; a reviewer file sets only "
            "rules, guidance and [[skills]]."
        )
    for key in ("rules", "guidance"):
        if not isinstance(data.get(key, ""), str):
            raise SourceError(f"{where}: `{key}` must be a string.")
    raw_skills = data.get("skills", [])
    if not isinstance(raw_skills, list) or not all(isinstance(s, dict) for s in raw_skills):
        raise SourceError(f"{where}: `skills` must be an array of tables ([[skills]]).")
    if len(raw_skills) > MAX_SKILLS:
        raise SourceError(f"{where}: at most {MAX_SKILLS} skills a reviewer.")
    skills, seen = [], set()
    for number, raw in enumerate(raw_skills, start=1):
        label = f"{where}, skill {number} ({raw.get('name', 'no name')!s:.64})"
        unknown = sorted(set(raw) - SKILL_KEYS)
        if unknown:
            raise SourceError(
                f"{label}: unknown key(s) {', '.join(unknown)}; a skill has name, "
                "description and body."
            )
        missing = [key for key in ("description", "body") if not raw.get(key)]
        if missing:
            raise SourceError(f"{label}: a skill needs a {' and a '.join(missing)}.")
        try:
            skill = SkillDocument.model_validate(raw, strict=True)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "the skill"
            raise SourceError(f"{label}: {field}: {first['msg']}.") from exc
        if skill.name in seen:
            raise SourceError(f"{label}: a second skill named {skill.name}.")
        seen.add(skill.name)
        skills.append(skill)
    return Definition(
        rules=data.get("rules", ""),
        guidance=data.get("guidance", ""),
        skills=tuple(sorted(skills, key=lambda s: s.name)),
    )


def source_read(*, url: str, path: str, ref: str, token: str, allow_file: bool) -> Read:
    """The reviewer file at the tip of `ref` (empty: the default branch), and that
    commit, or SourceError.

    1. The address checked (`source_problems`).
    2. One shallow fetch of that ref into a bare repository of its own, in a temporary
       directory; git configured by nothing but Tasuku (no user or system config, no
       prompt, the token as an HTTP header, never in the URL or a command line), and
       allowed the URL's protocol only (no redirect to another).
    3. The file read from the fetched commit's tree: its bytes as committed.
    4. Its text parsed (`definition_parse`).
    """
    problems = source_problems(url, path, ref, allow_file=allow_file)
    if problems:
        raise SourceError(" ".join(problems))
    shown = f"{url} ({ref or 'its default branch'})"
    with tempfile.TemporaryDirectory(prefix="tasuku-reviewers-") as tmp:
        home = Path(tmp)
        env = git_env(token, home, authenticate=bool(token))
        env["GIT_ALLOW_PROTOCOL"] = "https:file" if allow_file else "https"
        repo = home / "repo.git"
        git = Git(home, env)
        try:
            git("init", "--quiet", "--bare", str(repo), what="prepare the fetch")
            git = Git(repo, env)
            fetched = git.run(
                "fetch", "--quiet", "--depth=1", "--no-tags", "--", url, ref or "HEAD",
                what="fetch the reviewers repository",
            )  # fmt: skip
            if fetched.returncode != 0:
                said = git_text(fetched.stderr).strip().splitlines()
                # git's own reason is its `fatal:` line; the lines after it are advice.
                reason = next((line for line in said if line.startswith("fatal:")), "")
                reason = (reason or (said[-1] if said else "git failed")).rstrip(".")
                raise SourceError(f"Could not fetch {shown}: {reason}.")
            commit = git("rev-parse", "--verify", "FETCH_HEAD^{commit}").strip()
        except CloneError as exc:
            raise SourceError(f"Could not fetch {shown}: {exc}") from exc
        name = f"{commit}:{path}"
        blob = git.blobs([name], limit=MAX_FILE_BYTES, what="read the reviewer file").get(name)
    if blob is None:
        raise SourceError(
            f"{path} is not a file at {commit[:12]} of {shown} (or is larger than "
            f"{MAX_FILE_BYTES:,} bytes)."
        )
    try:
        text = blob.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourceError(f"{path} at {commit[:12]} is not UTF-8 text.") from exc
    return Read(commit=commit, definition=definition_parse(text, where=f"{path} at {commit[:12]}"))
