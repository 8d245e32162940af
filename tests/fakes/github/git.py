"""Real git repositories behind the fake GitHub.

`GitRepo` builds commits in a bare repository (tests write real files, symlinks and
history); `GitRoutes` serves those repositories over git's smart HTTP protocol as `git
http-backend` does (a fetch's requests straight to the `git upload-pack` it would run),
with GitHub's rule that an installation token is the password and
needs Contents: read on that repository. Pull request files and diffs of a git-backed
repository are computed from the commits, as GitHub does.
"""

from __future__ import annotations

import atexit
import base64
import gzip
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

from tests.fakes.github.state import (
    PERMISSION_LEVELS,
    HTTPError,
    PullFile,
    RawBody,
    Repo,
    Request,
    Response,
)

AUTHOR = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.com",
}


@dataclass(frozen=True)
class Symlink:
    target: str


class _Built:
    """What this process built once and builds again from memory (the end-to-end tests
    build the same repositories hundreds of times, each init and commit a handful of git
    processes): an initialised bare repository to copy, and each commit's SHA with the
    objects it added to its parent's, kept as loose object files. A commit built again
    from memory is the same commit (git's objects are named by their content, and the
    key holds everything that goes into it), its objects linked into the repository and
    its branch written as `git update-ref` writes it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.root: Path | None = None
        self.root_pid = 0
        self.template: Path | None = None
        # key -> (sha, the objects the commit added: "xx/yyyy…" names under root/objects)
        self.commits: dict[str, tuple[str, tuple[str, ...]]] = {}

    def _root(self) -> Path:
        if self.root is None or self.root_pid != os.getpid():
            self.root = Path(tempfile.mkdtemp(prefix="tasuku-fake-git-"))
            self.root_pid = os.getpid()
            self.template = None
            self.commits.clear()
            atexit.register(shutil.rmtree, self.root, True)
        return self.root

    def template_dir(self) -> Path:
        with self.lock:
            root = self._root()
            if self.template is None:
                template = root / "template.git"
                subprocess.run(["git", "init", "--quiet", "--bare", str(template)], check=True)  # noqa: S607
                for key, value in GitRepo.CONFIG:
                    subprocess.run(  # noqa: S603
                        ["git", "--git-dir", str(template), "config", key, value],  # noqa: S607
                        check=True,
                        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1"},
                    )
                self.template = template
            return self.template

    def remember(self, key: str, sha: str, git_dir: Path, names: list[str]) -> None:
        with self.lock:
            store = self._root() / "objects"
            for name in names:
                target = store / name
                if not target.exists():
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(git_dir / "objects" / name, target)
            self.commits[key] = (sha, tuple(names))

    def recall(self, key: str) -> tuple[str, tuple[str, ...], Path] | None:
        with self.lock:
            if self.root is None or self.root_pid != os.getpid() or key not in self.commits:
                return None
            sha, names = self.commits[key]
            return sha, names, self.root / "objects"


_built = _Built()


def _commit_key(
    parent: str | None, files: dict[str, str | bytes | Symlink | None], message: str, clock: int
) -> str:
    digest = hashlib.sha256()
    digest.update(repr((parent, message, clock)).encode())
    for path, content in files.items():  # in order: the order is the order files are written
        if content is None:
            tag, data = b"D", b""
        elif isinstance(content, Symlink):
            tag, data = b"L", content.target.encode()
        elif isinstance(content, str):
            tag, data = b"S", content.encode()
        else:
            tag, data = b"B", content
        digest.update(tag + path.encode() + b"\0" + str(len(data)).encode() + b"\0" + data)
    return digest.hexdigest()


class GitRepo:
    """Commits built with git's plumbing in a bare repository (no work tree needed)."""

    # What GitHub allows: fetching any reachable commit by its SHA, partial clones.
    CONFIG = (
        ("uploadpack.allowAnySHA1InWant", "true"),
        ("uploadpack.allowFilter", "true"),
        ("http.uploadpack", "true"),
    )

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = git_dir
        self._clock = 1_700_000_000

    @classmethod
    def init(cls, git_dir: Path) -> GitRepo:
        """A bare repository as `git init --bare` and the CONFIG make it: a copy of one
        this process made (a folder already there is initialised by git itself)."""
        if git_dir.exists() and any(git_dir.iterdir()):
            subprocess.run(["git", "init", "--quiet", "--bare", str(git_dir)], check=True)  # noqa: S607
            repo = cls(git_dir)
            for key, value in cls.CONFIG:
                repo.git("config", key, value)
            return repo
        git_dir.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(_built.template_dir(), git_dir, symlinks=True, dirs_exist_ok=True)
        return cls(git_dir)

    def git(self, *args: str, input: bytes | None = None, env: dict[str, str] | None = None) -> str:
        completed = subprocess.run(  # noqa: S603
            ["git", "--git-dir", str(self.git_dir), *args],  # noqa: S607
            input=input,
            capture_output=True,
            check=False,
            env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1", **(env or {})},
        )
        if completed.returncode != 0:
            raise RuntimeError(f"git {' '.join(args)} failed: {completed.stderr.decode()}")
        return completed.stdout.decode(errors="replace")

    def commit(
        self,
        files: dict[str, str | bytes | Symlink | None],
        *,
        parent: str | None = None,
        message: str = "change",
        branch: str | None = None,
    ) -> str:
        """A commit on top of `parent` changing `files` (None deletes a file); returns its SHA.

        Files are written to a scratch work tree and staged in batches, so a commit of
        thousands of files costs a handful of git calls. A commit this process built
        before (the same parent, files, message and clock) is built from memory
        (`_Built`): no git call at all."""
        key = _commit_key(parent, files, message, self._clock)
        sha = self._recalled(key, parent, branch)
        if sha is not None:
            self._clock += 60
            return sha
        sha = self._build(files, parent=parent, message=message, branch=branch)
        self._remember(key, sha, parent)
        return sha

    def _recalled(self, key: str, parent: str | None, branch: str | None) -> str | None:
        recalled = _built.recall(key)
        if recalled is None:
            return None
        sha, names, store = recalled
        objects = self.git_dir / "objects"
        if parent and not (objects / parent[:2] / parent[2:]).exists():
            return None  # a parent packed, or not here at all: git decides
        for name in names:
            target = objects / name
            if not target.exists():
                target.parent.mkdir(exist_ok=True)
                # Copied, not linked: a test may damage its repository's objects.
                shutil.copyfile(store / name, target)
        if branch:
            ref = self.git_dir / "refs" / "heads" / branch
            ref.parent.mkdir(parents=True, exist_ok=True)
            ref.write_text(sha + "\n")
        return sha

    def _remember(self, key: str, sha: str, parent: str | None) -> None:
        """The objects `sha` added to its parent's, if all are loose files here."""
        listed = self.git("rev-list", "--objects", "--no-object-names", sha,
                          *([f"^{parent}"] if parent else []))  # fmt: skip
        names = [f"{o[:2]}/{o[2:]}" for o in listed.split()]
        if all((self.git_dir / "objects" / name).is_file() for name in names):
            _built.remember(key, sha, self.git_dir, names)

    def _build(
        self,
        files: dict[str, str | bytes | Symlink | None],
        *,
        parent: str | None,
        message: str,
        branch: str | None,
    ) -> str:
        index = self.git_dir / f"index-{os.getpid()}"
        env = {"GIT_INDEX_FILE": str(index)}
        try:
            if parent:
                self.git("read-tree", parent, env=env)
            else:
                self.git("read-tree", "--empty", env=env)
            removed = [path for path, content in files.items() if content is None]
            with tempfile.TemporaryDirectory() as scratch:
                tree = Path(scratch)
                added = []
                for path, content in files.items():
                    if content is None:
                        continue
                    target = tree / path
                    target.parent.mkdir(parents=True, exist_ok=True)
                    if isinstance(content, Symlink):
                        os.symlink(content.target, target)
                    else:
                        target.write_bytes(
                            content.encode() if isinstance(content, str) else content
                        )
                        if isinstance(content, str) and content.startswith("#!"):
                            target.chmod(0o755)
                    added.append(path)
                for chunk in range(0, len(added), 500):
                    self.git(
                        "--work-tree",
                        scratch,
                        "update-index",
                        "--add",
                        "--",
                        *added[chunk : chunk + 500],
                        env=env,
                    )
                # update-index needs a work tree, even to remove a path from the index.
                for chunk in range(0, len(removed), 500):
                    self.git(
                        "--work-tree",
                        scratch,
                        "update-index",
                        "--force-remove",
                        "--",
                        *removed[chunk : chunk + 500],
                        env=env,
                    )
            tree_sha = self.git("write-tree", env=env).strip()
        finally:
            index.unlink(missing_ok=True)
        self._clock += 60
        stamp = {
            "GIT_AUTHOR_DATE": f"{self._clock} +0000",
            "GIT_COMMITTER_DATE": f"{self._clock} +0000",
        }
        args = ["commit-tree", tree_sha, "-m", message] + (["-p", parent] if parent else [])
        sha = self.git(*args, env={**AUTHOR, **stamp}).strip()
        if branch:
            self.git("update-ref", f"refs/heads/{branch}", sha)
        return sha

    def diff_files(self, base: str, head: str) -> list[PullFile]:
        """The pull request's files as GitHub lists them: from the merge base to the head.
        Names come from git's NUL-separated output, never a parsed (quoted) diff header;
        the patches from one diff of the whole change, cut at its `diff --git` lines (the
        same diff, in the same order, file by file), or file by file when the two do not
        count alike. One `git diff` says all three: its `--raw` list, its `--numstat`
        list, a NUL, then the patch (`-z` leaves the patch as it is)."""
        merge_base = self.git("merge-base", base, head).strip() or base
        out = self.git("diff", "-z", "--raw", "--numstat", "--patch", "--no-color",
                       "--find-renames", merge_base, head)  # fmt: skip
        entries: list[tuple[str, str | None, str, str, str]] = []
        at = 0
        while out.startswith(":", at):  # ":<modes> <ids> <status>" NUL <name> NUL [<name> NUL]
            end = out.index("\0", at)
            code, names = out[at:end].rsplit(" ", 1)[-1], []
            for _ in range(2 if code.startswith(("R", "C")) else 1):
                at, end = end + 1, out.index("\0", end + 1)
                names.append(out[at:end])
            at = end + 1
            entries.append((code, names[0] if len(names) == 2 else None, names[-1], "", ""))
        for n, (code, previous, path, _, _) in enumerate(entries):
            # "<added>\t<removed>\t" and the name NUL, or NUL <from> NUL <to> NUL (a rename)
            end = out.index("\0", at)
            added, removed, rest = out[at:end].split("\t", 2)
            if not rest:
                end = out.index("\0", out.index("\0", end + 1) + 1)
            at = end + 1
            entries[n] = (code, previous, path, added, removed)
        whole = out[at + 1 :] if entries else out[at:]  # after the NUL before the patch
        chunks = _file_diffs(whole)
        if len(chunks) != len(entries):
            chunks = [
                self.git("diff", "--no-color", "--find-renames", merge_base, head, "--",
                         *([previous, path] if previous else [path]))
                for _, previous, path, _, _ in entries
            ]  # fmt: skip
        files = []
        for (code, previous, path, added, removed), text in zip(entries, chunks, strict=True):
            status = {"A": "added", "D": "removed", "R": "renamed", "C": "copied"}.get(
                code[0], "modified"
            )
            binary = added == "-"
            patch = None
            if not binary:
                start = text.find("\n@@ ")
                patch = text[start + 1 :] if start >= 0 else None
            files.append(
                PullFile(
                    filename=path,
                    status=status,
                    additions=0 if binary else int(added),
                    deletions=0 if binary else int(removed),
                    patch=patch or None,
                    previous_filename=previous if status == "renamed" else None,
                )
            )
        return files

    def diff_text(self, base: str, head: str) -> str:
        merge_base = self.git("merge-base", base, head).strip() or base
        return self.git("diff", "--no-color", merge_base, head)


class GitRoutes:
    def _git_repo(self, request: Request) -> Repo:
        full_name = f"{request.params['owner']}/{request.params['repo']}"
        repo = self.repos.get(full_name)  # type: ignore[attr-defined]
        if repo is None or repo.git_dir is None:
            raise HTTPError(404, "Repository not found.")
        scheme, _, credential = request.headers.get("authorization", "").partition(" ")
        token = None
        if scheme.lower() == "basic":
            try:
                _, _, password = base64.b64decode(credential).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                password = ""
            token = self.tokens.get(password)  # type: ignore[attr-defined]
        if token is None or token.expires_at <= time.time():
            raise HTTPError(
                401,
                "Invalid username or token.",
                headers={"WWW-Authenticate": 'Basic realm="GitHub"'},
            )
        if token.login is not None:
            # A person's token clones what its user may read.
            if repo.private and token.login not in repo.collaborators:
                raise HTTPError(404, "Repository not found.")
            return repo
        granted = token.permissions.get("contents")
        if (
            token.installation_id not in repo.installation_ids
            or (token.repository_ids is not None and repo.id not in token.repository_ids)
            or not granted
            or PERMISSION_LEVELS[granted] < PERMISSION_LEVELS["read"]
        ):
            raise HTTPError(404, "Repository not found.")
        return repo

    def _git_http(self, request: Request) -> Response:
        repo = self._git_repo(request)
        if (
            request.params["service_path"].endswith("git-receive-pack")
            or request.arg("service") == "git-receive-pack"
        ):
            raise HTTPError(403, "Write access to repository not granted.")
        answered = _upload_pack(request, repo.git_dir)
        if answered is not None:
            return answered
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": str(repo.git_dir.parent),
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": f"/{repo.git_dir.name}/{request.params['service_path']}",
            "REQUEST_METHOD": request.method,
            "QUERY_STRING": "&".join(f"{k}={v[0]}" for k, v in request.query.items()),
            "CONTENT_TYPE": request.headers.get("content-type", ""),
            "CONTENT_LENGTH": str(len(request.raw)),
            "REMOTE_USER": "x-access-token",
            "REMOTE_ADDR": "127.0.0.1",
            "GIT_PROTOCOL": request.headers.get("git-protocol", ""),
            "HTTP_CONTENT_ENCODING": request.headers.get("content-encoding", ""),
        }
        completed = subprocess.run(  # noqa: S603
            ["git", "http-backend"],  # noqa: S607
            input=request.raw,
            capture_output=True,
            env=env,
            check=False,
        )
        head, _, body = completed.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, body = completed.stdout.partition(b"\n\n")
        status, headers, content_type = 200, {}, "application/octet-stream"
        for line in head.decode(errors="replace").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name.lower() == "content-type":
                content_type = value.strip()
            elif name:
                headers[name.strip()] = value.strip()
        return status, RawBody(body, content_type), headers


# What `git http-backend` answers every smart request with (its `hdr_nocache`).
_NO_CACHE = {
    "Expires": "Fri, 01 Jan 1980 00:00:00 GMT",
    "Pragma": "no-cache",
    "Cache-Control": "no-cache, max-age=0, must-revalidate",
}


# Protocol v2's advertisement (`info/refs`): its capabilities, which name no ref and
# depend only on the program and the repository's configuration, as upload-pack printed
# them, by (the client's protocol, the repository's config file). A fetch asks for it
# first; the same bytes again cost no process.
_V2_ADVERTISED: dict[tuple[str, bytes], bytes] = {}


def _upload_pack(request: Request, git_dir: Path) -> Response | None:
    """A fetch's request answered as `git http-backend` answers it, with the one process
    it would start in its turn: `git upload-pack --stateless-rpc`, its advertisement
    (`info/refs?service=git-upload-pack`) headed by `# service=git-upload-pack` and a
    flush unless the client asked for protocol v2 (http-backend's `get_info_refs`), or
    its answer to a POST (`service_rpc`, a gzipped body inflated first). None: a request
    a git client does not send for a fetch (dumb HTTP, a wrong content type, a body that
    does not inflate), left to http-backend itself, which answers it as it does."""
    protocol = request.headers.get("git-protocol", "")
    path = request.params["service_path"]
    if request.method == "GET" and path == "info/refs":
        if request.arg("service") != "git-upload-pack":
            return None
        body = b"" if _protocol_v2(protocol) else b"001e# service=git-upload-pack\n0000"
        args, given = ["--advertise-refs"], b""
        content_type = "application/x-git-upload-pack-advertisement"
        if _protocol_v2(protocol):
            advertised = (protocol, _config_of(git_dir))
            known = _V2_ADVERTISED.get(advertised)
            if known is not None:
                return 200, RawBody(known, content_type), dict(_NO_CACHE)
    elif request.method == "POST" and path == "git-upload-pack":
        if request.headers.get("content-type", "") != "application/x-git-upload-pack-request":
            return None
        given = request.raw
        if request.headers.get("content-encoding", "") in ("gzip", "x-gzip"):
            try:
                given = gzip.decompress(given)
            except (OSError, EOFError, zlib.error):
                return None
        body, args = b"", []
        content_type = "application/x-git-upload-pack-result"
    else:
        return None
    completed = subprocess.run(  # noqa: S603
        ["git", "upload-pack", "--stateless-rpc", *args, str(git_dir)],  # noqa: S607
        input=given,
        capture_output=True,
        # http-backend's environment, as the fake gives it: the client's protocol
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_PROTOCOL": protocol},
        check=False,
    )
    if args and _protocol_v2(protocol) and completed.returncode == 0:
        _V2_ADVERTISED[(protocol, _config_of(git_dir))] = completed.stdout
    # Its status is sent before upload-pack runs: a failure is in the body (an ERR line).
    return 200, RawBody(body + completed.stdout, content_type), dict(_NO_CACHE)


def _config_of(git_dir: Path) -> bytes:
    try:
        return (git_dir / "config").read_bytes()
    except OSError:
        return b""


def _protocol_v2(protocol: str) -> bool:
    """Whether the client's `Git-Protocol` header asks for version 2 (git's
    `determine_protocol_version_server`: the highest `version=N` of its `:` list, and 2
    is the highest there is)."""
    return "version=2" in protocol.split(":")


def _file_diffs(text: str) -> list[str]:
    """A whole `git diff` cut into its files' diffs, each as `git diff -- <file>` prints
    it. Every line of a file's diff after its header starts with a prefix of its own
    (`+`, `-`, a space, `@@`, a backslash, `index`, `similarity`…), so a line starting
    `diff --git ` begins the next file's."""
    if not text:
        return []
    parts = text.split("\ndiff --git ")
    chunks = [parts[0]] + ["diff --git " + part for part in parts[1:]]
    # the split took the newline that ended each file's diff but the last
    return [chunk + "\n" for chunk in chunks[:-1]] + [chunks[-1]]
