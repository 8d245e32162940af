from reviews.scope.diff import diff_parse
from sandbox.contract import Side

DIFF = """diff --git a/app.py b/app.py
index 1111111..2222222 100644
--- a/app.py
+++ b/app.py
@@ -1,5 +1,6 @@
 import os
-import sys
+import subprocess
+import json
 
 def main():
     pass
@@ -20,3 +21,4 @@ def other():
     a = 1
     b = 2
+    c = 3
     return a
diff --git a/old.txt b/old.txt
deleted file mode 100644
index 3333333..0000000
--- a/old.txt
+++ /dev/null
@@ -1,2 +0,0 @@
-one
-two
diff --git a/new.sh b/new.sh
new file mode 100755
index 0000000..4444444
--- /dev/null
+++ b/new.sh
@@ -0,0 +1,2 @@
+#!/bin/sh
+echo $1
diff --git a/a.txt b/b.txt
similarity index 90%
rename from a.txt
rename to b.txt
index 5555555..6666666 100644
--- a/a.txt
+++ b/b.txt
@@ -1 +1 @@
-hello
+hello world
diff --git a/logo.png b/logo.png
new file mode 100644
index 0000000..7777777
Binary files /dev/null and b/logo.png differ
"""


def test_it_parses_files_statuses_and_added_lines():
    diff = diff_parse(DIFF)
    assert [(f.path, f.status) for f in diff.files] == [
        ("app.py", "modified"),
        ("old.txt", "deleted"),
        ("new.sh", "added"),
        ("b.txt", "renamed"),
        ("logo.png", "added"),
    ]
    app = diff.get("app.py")
    assert app.added == (2, 3, 23)
    assert [(r.start, r.end) for r in app.added_ranges()] == [(2, 3), (23, 23)]
    assert diff.get("b.txt").previous_path == "a.txt"
    assert diff.get("logo.png").binary
    assert diff.added_lines == 6


def test_commentable_lines_are_the_lines_of_a_hunk_on_their_side():
    app = diff_parse(DIFF).get("app.py")
    assert app.hunk_index(Side.RIGHT, 2) == 0  # added
    assert app.hunk_index(Side.RIGHT, 6) == 0  # context
    assert app.hunk_index(Side.RIGHT, 23) == 1
    assert app.hunk_index(Side.RIGHT, 10) is None  # between hunks: GitHub refuses it
    assert app.hunk_index(Side.LEFT, 2) == 0  # the removed line
    assert app.is_added(3) and not app.is_added(4)


def test_a_changed_file_lists_its_added_ranges_for_the_engine():
    changed = diff_parse(DIFF).get("new.sh").changed_file()
    assert (changed.path, changed.status, [(r.start, r.end) for r in changed.added]) == (
        "new.sh",
        "added",
        [(1, 2)],
    )


def test_an_empty_diff_has_no_files():
    assert diff_parse("").files == ()


def test_a_line_only_reindented_is_not_added_where_indentation_means_nothing():
    from reviews.scope.diff import diff_parse

    def added(path: str) -> list[tuple[int, int]]:
        text = (
            f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1,4 +1,4 @@\n"
            ' f() {\n-local x=1\n-echo $x\n+  local x=1\n+  echo "$x"\n }\n'
        )
        return [(r.start, r.end) for r in diff_parse(text).get(path).changed_file().added]

    assert added("t.sh") == [(3, 3)]  # the re-indented line is the base's
    assert added("app.js") == [(3, 3)]
    assert added("t.py") == [(2, 3)]  # in Python indentation is meaning
    assert added("ci.yml") == [(2, 3)]


def test_the_names_a_diff_removes_stay_within_the_contracts_bound():
    """A pull request that deletes thousands of names (one a line) still gives a job the
    contract accepts: at most MAX_REMOVED_NAMES, the first ones kept."""
    from sandbox.contract import MAX_REMOVED_NAMES

    count = MAX_REMOVED_NAMES + 500
    removed = "".join(f"-name_{i} = {i}\n" for i in range(count))
    text = (
        "diff --git a/big.py b/big.py\n--- a/big.py\n+++ b/big.py\n"
        f"@@ -1,{count} +0,0 @@\n{removed}"
    )
    [file] = diff_parse(text).files
    changed = file.changed_file()  # the contract's own validation
    assert len(changed.removed) == MAX_REMOVED_NAMES
    assert changed.removed[0] == ("name_0", 1, True)
