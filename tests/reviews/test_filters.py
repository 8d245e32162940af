import pytest

from reviews.filters import paths_filter


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
    ],
)
def test_default_exclusions_by_family(path, reason):
    kept, filtered = paths_filter([path])
    assert kept == []
    assert [(f.path, f.reason) for f in filtered] == [(path, reason)]


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
    assert [(f.path, f.reason) for f in filtered] == [
        ("docs/guide.md", "excluded by the repository's policy")
    ]


def test_binary_files_from_the_diff_are_filtered():
    kept, filtered = paths_filter(["data/blob.dat"], binary=["data/blob.dat"])
    assert kept == [] and filtered[0].reason == "image or binary"
