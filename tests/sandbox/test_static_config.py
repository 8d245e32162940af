"""The repository's own word, from its base commit: the Python versions it supports and
the rules its ruff, flake8 and shellcheck configuration turns off — and the default
rules chosen for precision."""

from __future__ import annotations

from pathlib import Path

from sandbox.contract import ChangedFile, LineRange, ReviewJob, StaticOptions
from sandbox.engines.static import review
from sandbox.engines.static.config import RepositoryWord


def test_the_python_versions_a_project_declares_come_from_its_configuration():
    word = RepositoryWord({
        "pyproject.toml": '[project]\nrequires-python = ">=3.9"\n',
        "legacy/setup.py": 'setup(python_requires=">=2.7, !=3.0.*",\n'
                           '  classifiers=["Programming Language :: Python :: 2.7",\n'
                           '               "Programming Language :: Python :: 3.6"])\n',
        "tool/.python-version": "3.11.4\n",
    })  # fmt: skip
    assert word.python("app/main.py") == ("py39", False)
    # 3.6 is older than ruff goes: read as the oldest it knows, never as the default 3.12
    assert word.python("legacy/pkg/mod.py") == ("py37", True)
    assert word.python("tool/run.py") == ("py311", False)
    assert RepositoryWord({}).python("x.py") == (None, False)
    assert RepositoryWord({"pyproject.toml": '[project]\nrequires-python = ">=3.6"\n'
                           '[tool.ruff]\ntarget-version = "py39"\n'}).python("x.py") == (
        "py37", False)  # fmt: skip
    newer = RepositoryWord({".python-version": "3.16.0\n"})  # newer than ruff knows
    assert newer.python("x.py") == (None, False)


def test_the_nearest_ruff_and_flake8_configurations_turn_rules_off():
    word = RepositoryWord({
        "pyproject.toml": '[tool.ruff.lint]\nignore = ["F841"]\n'
                          '[tool.ruff.lint.per-file-ignores]\n"scripts/*" = ["S602"]\n',
        "setup.cfg": "[flake8]\nextend-ignore = F811\nper-file-ignores =\n    tests/*:F401\n",
        "sub/pyproject.toml": "[project]\nname = 'sub'\n",  # no [tool.ruff]: ruff looks up
        "other/ruff.toml": '[lint]\nextend-ignore = ["B006"]\n',
    })  # fmt: skip
    assert word.ruff_ignores("app.py").covers("app.py", "F841")
    assert word.ruff_ignores("app.py").covers("app.py", "F811")
    assert word.ruff_ignores("scripts/x.py").covers("scripts/x.py", "S602")
    assert not word.ruff_ignores("app.py").covers("app.py", "S602")
    assert word.ruff_ignores("tests/test_x.py").covers("tests/test_x.py", "F401")
    assert word.ruff_ignores("sub/mod.py").covers("sub/mod.py", "F841")
    other = word.ruff_ignores("other/m.py")
    assert other.covers("other/m.py", "B006") and not other.covers("other/m.py", "F841")


def test_a_shellcheckrc_turns_its_codes_off():
    word = RepositoryWord({".shellcheckrc": "disable=SC2034,2086  # ours\nexternal-sources=true\n"})
    assert word.shellcheck_disabled("bin/run.sh") == frozenset({"SC2034", "SC2086"})


def _review(root: Path, files: dict[str, str], configs: dict[str, str] | None = None, **extra):
    changed = []
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
        changed.append(ChangedFile(path=path, status="added",
                                   added=(LineRange(start=1, end=text.count("\n")),)))  # fmt: skip
    job = ReviewJob(job_id="1", repository="a/b", pull_request=1, base_sha="a" * 40,
                    head_sha="b" * 40, changed_files=tuple(changed),
                    static=StaticOptions(configs=configs or {}, **extra))  # fmt: skip
    return {(f["path"], f["rule"]) for f in review(job, root).findings}


PY2_COMPAT = "import sys\n\nif sys.version_info[0] == 2:\n    text_type = unicode\nelse:\n    text_type = str\n"


def test_a_python_2_name_in_a_project_that_supports_python_2_is_no_undefined_name(tmp_path):
    py2 = {"setup.py": 'setup(classifiers=["Programming Language :: Python :: 2.7"])\n'}
    assert ("compat.py", "ruff:F821") in _review(
        tmp_path / "a", {"compat.py": PY2_COMPAT}, {"x": ""}
    )
    assert ("compat.py", "ruff:F821") not in _review(tmp_path / "b", {"compat.py": PY2_COMPAT}, py2)


def test_the_repositorys_ignores_from_its_base_are_honoured(tmp_path):
    files = {"app.py": "def f():\n    x = 1\n"}
    assert ("app.py", "ruff:F841") in _review(tmp_path / "a", files)
    configs = {"pyproject.toml": '[tool.ruff]\nextend-ignore = ["F841"]\n'}
    assert ("app.py", "ruff:F841") not in _review(tmp_path / "b", files, configs)


def test_an_unused_import_that_is_a_re_export_or_a_tests_import_is_not_reported(tmp_path):
    found = _review(tmp_path, {
        "pkg/__init__.py": "from pkg.core import run\n",
        "pkg/compat.py": "from json import loads\n",
        "pkg/user.py": "from pkg.compat import loads\n\nloads('1')\n",
        "tests/test_imports.py": "import pkg.core\n",
        "pkg/core.py": "import os\n\n\ndef run():\n    return 1\n",
    })  # fmt: skip
    unused = {path for path, rule in found if rule == "ruff:F401"}
    assert unused == {"pkg/core.py"}  # the only import nobody else relies on


def test_opinion_rules_are_off_by_default_and_a_policy_turns_them_on(tmp_path):
    code = "import requests\n\n\ndef get(u):\n    try:\n        return requests.get(u)\n    except KeyError:\n        raise ValueError(u)\n"
    assert not {r for _, r in _review(tmp_path / "a", {"net.py": code})} & {
        "ruff:S113",
        "ruff:B904",
    }
    asked = _review(tmp_path / "b", {"net.py": code}, select=("S113", "B904"))
    assert {"ruff:S113", "ruff:B904"} <= {r for _, r in asked}


def test_the_rules_digest_follows_what_decides_findings_and_nothing_else():
    """A review's rules (reviews/validation/reconcile.py: a finding the next review does
    not raise under other rules was not verified fixed) change with the policy's rule
    list and the base's linter words — a `.shellcheckrc`, `[tool.ruff]`, a declared
    Python — and not with a dependency bump in the same `pyproject.toml`."""
    from sandbox.engines.static import rules

    pyproject = '[project]\nrequires-python = ">=3.10"\ndependencies = ["a==1"]\n'
    base = StaticOptions(configs={"pyproject.toml": pyproject})
    same = rules(base)
    assert same == rules(
        StaticOptions(configs={"pyproject.toml": pyproject.replace("a==1", "a==2")})
    )
    for changed in (
        StaticOptions(configs={"pyproject.toml": pyproject.replace("3.10", "3.11")}),
        StaticOptions(
            configs={"pyproject.toml": pyproject + '[tool.ruff.lint]\nignore = ["S602"]\n'}
        ),
        StaticOptions(configs={"pyproject.toml": pyproject, ".shellcheckrc": "disable=SC2086\n"}),
        StaticOptions(configs={"pyproject.toml": pyproject}, ignore=("S602",)),
    ):
        assert rules(changed) != same, changed
