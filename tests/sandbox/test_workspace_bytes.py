"""The engine sees the commit's bytes: the pull request's `.gitattributes` cannot
re-encode, convert, filter or hide a file; a file that is not UTF-8 is diffed and
reviewed; what the static engine does not read is named in its limitations."""

from __future__ import annotations

import pytest

from reviews.scope.diff import diff_parse
from sandbox.contract import ChangedFile, LineRange, ReviewJob
from sandbox.engines.static import review
from sandbox.engines.static import ruff as ruff_checker
from sandbox.engines.static.common import MAX_FILE_BYTES
from sandbox.errors import CloneError
from sandbox.workspace import Workspace
from tests.fakes.github.git import GitRepo

SHELL_TRUE = "import subprocess\n\n\ndef run(cmd):\n    return subprocess.call(cmd, shell=True)\n"
SCRIPT = "#!/bin/bash\n# $Id$\nrm -rf $BUILD_DIR/\n"
ATTRIBUTES = (
    "*.py working-tree-encoding=UTF-16LE\n"
    "*.sh text eol=crlf ident\n"
    "*.txt filter=lfs diff=lfs merge=lfs -text\n"
    "*.cfg export-subst -diff\n"
    "*.rb binary\n"
)
FILES = {
    "app.py": SHELL_TRUE,
    "deploy.sh": SCRIPT,
    "notes.txt": "version: $Format:%H$\n",
    "settings.cfg": "password = hunter2\n",
    "tool.rb": "system(params[:cmd])\n",
}


def job_for(checkout, diff) -> ReviewJob:
    return ReviewJob(
        job_id="1", repository="a/b", pull_request=1, base_sha=checkout.base_sha,
        head_sha=checkout.head_sha, diff=checkout.diff,
        changed_files=tuple(f.changed_file() for f in diff.files if f.status != "deleted"),
    )  # fmt: skip


@pytest.fixture
def origin(tmp_path):
    return GitRepo.init(tmp_path / "origin.git")


@pytest.fixture
def workspace(tmp_path):
    with Workspace(str(tmp_path)) as entered:
        yield entered


def test_the_pull_requests_gitattributes_change_no_byte_and_hide_no_change(workspace, origin):
    base = origin.commit({"README.md": "# x\n"})
    # The files first, then the attributes (committed with them, git would convert them).
    files = origin.commit(FILES, parent=base)
    head = origin.commit({".gitattributes": ATTRIBUTES}, parent=files)
    checkout = workspace.checkout_local(repository=origin.git_dir, head_sha=head, base_sha=base)
    for path, text in FILES.items():
        assert (checkout.root / path).read_bytes() == text.encode(), path
    diff = diff_parse(checkout.diff)
    for path, text in FILES.items():
        file = diff.get(path)
        assert not file.binary and file.added_count == text.count("\n"), path
    result = review(job_for(checkout, diff), checkout.root)
    found = {(f["path"], f["rule"]) for f in result.findings}
    assert ("app.py", "ruff:S602") in found
    assert ("deploy.sh", "shellcheck:SC2115") in found
    # No carriage return the commit does not have (eol=crlf would add SC1017).
    assert not [f for f in result.findings if f["rule"] == "shellcheck:SC1017"]


def test_a_file_that_is_not_utf8_is_diffed_checked_out_and_reviewed(workspace, origin):
    base = origin.commit({"README.md": "# x\n"})
    latin1 = ("# Déjà vu, naïve café\n" + SHELL_TRUE).encode("latin-1")
    head = origin.commit(
        {"legacy.py": latin1, "keys.py": b'# cl\xe9\nAWS_ACCESS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"\n'},
        parent=base,
    )
    checkout = workspace.checkout_local(repository=origin.git_dir, head_sha=head, base_sha=base)
    assert (checkout.root / "legacy.py").read_bytes() == latin1
    diff = diff_parse(checkout.diff)
    assert diff.get("legacy.py").added == tuple(range(1, 7))
    result = review(job_for(checkout, diff), checkout.root)
    found = {(f["path"], f["start_line"], f["rule"]) for f in result.findings}
    assert ("legacy.py", 6, "ruff:S602") in found
    assert ("keys.py", 2, "detect-secrets:AWS Access Key") in found
    assert (
        'Not UTF-8, checked with its invalid bytes replaced: "keys.py", "legacy.py".'
        in result.summary.limitations
    )


def test_a_commit_is_named_by_its_id_never_by_something_git_reads_as_an_option(tmp_path, origin):
    base = origin.commit({"README.md": "# x\n"})
    with Workspace(str(tmp_path)) as workspace, pytest.raises(CloneError) as caught:
        workspace.checkout_local(
            repository=origin.git_dir, head_sha="--output=/tmp/x", base_sha=base
        )
    assert caught.value.permanent


# --- What the static engine did not read is named ----------------------------------------


def added(path: str, *lines: int, binary: bool = False) -> ChangedFile:
    return ChangedFile(
        path=path,
        status="added",
        added=tuple(LineRange(start=n, end=n) for n in lines),
        binary=binary,
    )


def test_every_file_the_engine_did_not_read_is_named_with_why(tmp_path):
    (tmp_path / "big.py").write_text(SHELL_TRUE + "x = 1\n" * (MAX_FILE_BYTES // 6 + 1))
    (tmp_path / "blob.py").write_bytes(b"x = 1\0\n" + SHELL_TRUE.encode())
    (tmp_path / "ok.py").write_text(SHELL_TRUE)
    (tmp_path / "link.py").symlink_to("ok.py")
    (tmp_path / "sub").mkdir()
    files = [
        added("big.py", 5), added("blob.py", 6), added("ok.py", 5), added("link.py", 1),
        added("gone.py", 1), added("sub", 1), added('logo".png', binary=True),
    ]  # fmt: skip
    result = review(
        ReviewJob(job_id="1", repository="a/b", pull_request=1, base_sha="a" * 40,
                  head_sha="b" * 40, changed_files=tuple(files)),
        tmp_path,
    )  # fmt: skip
    assert [f["path"] for f in result.findings] == ["ok.py"]
    assert result.summary.limitations[1:] == [
        'Not checked (larger than 8 MB): "big.py".',
        'Not checked (binary (a NUL byte in its first 8 KB)): "blob.py".',
        'Not checked (a symbolic link): "link.py".',
        'Not checked (not in the checkout): "gone.py".',
        'Not checked (a submodule: the change is the other repository\'s commit it names): "sub".',
        'Not checked (binary in the diff): "logo\\".png".',
    ]
    assert result.summary.validation.startswith(
        "Checked the added lines of 1 changed file: 1 file by ruff, detect-secrets and hygiene ("
    )


def test_a_file_ruff_cannot_read_is_named_not_reported_as_a_finding(tmp_path, monkeypatch):
    (tmp_path / "a.py").write_text(SHELL_TRUE)
    monkeypatch.setattr(
        ruff_checker,
        "_run",
        lambda root, paths, version, *rules: [
            (p, {"code": "E902", "message": "Permission denied (os error 13)"}) for p in paths
        ],
    )
    result = review(
        ReviewJob(job_id="1", repository="a/b", pull_request=1, base_sha="a" * 40,
                  head_sha="b" * 40, changed_files=(added("a.py", 1, 5),)),
        tmp_path,
    )  # fmt: skip
    assert result.findings == []
    assert (
        'Not fully checked (ruff could not read it: Permission denied (os error 13)): "a.py".'
        in result.summary.limitations
    )


def test_lines_are_numbered_as_git_numbers_them(tmp_path):
    # A form feed, a U+2028 and a CRLF end no line for git or GitHub.
    (tmp_path / "a.py").write_bytes("x = 1\x0c \u2028 y\r\nbreakpoint()\n".encode())
    result = review(
        ReviewJob(job_id="1", repository="a/b", pull_request=1, base_sha="a" * 40,
                  head_sha="b" * 40, changed_files=(added("a.py", 2),)),
        tmp_path,
    )  # fmt: skip
    assert [(f["rule"], f["start_line"]) for f in result.findings] == [("hygiene:debugger", 2)]
