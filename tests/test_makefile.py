"""The Makefile's choices on a fresh clone, read from `make -n` (what it would run): the
interpreter the venv is made with.

The interpreters here are stand-ins: a script that answers the Makefile's question "do
you run on a shared libpython?" as told and hands every other call to this interpreter.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _interpreter(path: Path, *, shared: bool, version_ok: bool = True) -> Path:
    """A stand-in interpreter at `path`: shared libpython or not, 3.11+ or not."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "#!/bin/sh\n"
        'case "$*" in\n'
        f"  *libpython*) exit {0 if shared else 1} ;;\n"
        f"  *version_info*) exit {0 if version_ok else 1} ;;\n"
        "esac\n"
        f'exec "{sys.executable}" "$@"\n'
    )
    path.chmod(0o755)
    return path


@pytest.fixture
def clone(tmp_path):
    """A folder with the Makefile and what its install target depends on, no venv."""
    folder = tmp_path / "clone"
    folder.mkdir()
    shutil.copy(ROOT / "Makefile", folder)
    shutil.copy(ROOT / "pyproject.toml", folder)
    return folder


def _venv_maker(clone: Path, on_path: Path, *args: str) -> str:
    """The interpreter `make install` would make the venv with, `on_path` first in PATH."""
    done = subprocess.run(
        ["make", "-n", "install", *args],
        cwd=clone,
        env={**os.environ, "PATH": f"{on_path}{os.pathsep}{os.environ['PATH']}"},
        capture_output=True,
        text=True,
        check=True,
    )
    made = [line for line in done.stdout.splitlines() if "-m venv" in line]
    assert len(made) == 1, done.stdout
    return made[0].split(" -m venv")[0].strip().split()[-1]


def test_a_shared_libpython_python3_gives_way_to_a_static_system_python(clone, tmp_path):
    bin_ = tmp_path / "bin"
    _interpreter(bin_ / "python3", shared=True)
    system = _interpreter(tmp_path / "system" / "python3", shared=False)
    assert _venv_maker(clone, bin_, f"SYSTEM_PYTHON={system}") == str(system)


@pytest.mark.parametrize(
    ("python3_shared", "system_shared", "system_ok", "system_there"),
    [
        pytest.param(False, False, True, True, id="python3 static"),
        pytest.param(True, True, True, True, id="the system's shared too"),
        pytest.param(True, False, False, True, id="the system's older than 3.11 or no venv"),
        pytest.param(True, False, True, False, id="no system python"),
    ],
)
def test_otherwise_python3_makes_the_venv(
    clone, tmp_path, python3_shared, system_shared, system_ok, system_there
):
    bin_ = tmp_path / "bin"
    _interpreter(bin_ / "python3", shared=python3_shared)
    system = tmp_path / "system" / "python3"
    if system_there:
        _interpreter(system, shared=system_shared, version_ok=system_ok)
    assert _venv_maker(clone, bin_, f"SYSTEM_PYTHON={system}") == "python3"


def test_python_given_is_the_one_used(clone, tmp_path):
    bin_ = tmp_path / "bin"
    _interpreter(bin_ / "python3", shared=True)
    system = _interpreter(tmp_path / "system" / "python3", shared=False)
    mine = _interpreter(tmp_path / "mine" / "python3.12", shared=True)
    assert _venv_maker(clone, bin_, f"SYSTEM_PYTHON={system}", f"PYTHON={mine}") == str(mine)


def test_an_empty_python_is_refused_and_nothing_is_made(clone):
    """`PYTHON=` once made the version check's line start with `-`, which make reads as
    "ignore this line's failure": the install went on and failed further down."""
    done = subprocess.run(
        ["make", "install", "PYTHON="], cwd=clone, capture_output=True, text=True, check=False
    )
    assert done.returncode != 0
    assert "PYTHON is empty" in done.stdout + done.stderr
    assert not (clone / ".venv").exists()


def test_an_existing_venv_is_kept_and_nothing_is_asked(clone, tmp_path):
    """With a venv there, the Makefile asks no interpreter anything (its venv line is
    the `test -x` that keeps it)."""
    bin_ = tmp_path / "bin"
    asked = tmp_path / "asked"
    (bin_).mkdir()
    (bin_ / "python3").write_text(
        f'#!/bin/sh\necho "$*" >> {asked}\nexec "{sys.executable}" "$@"\n'
    )
    (bin_ / "python3").chmod(0o755)
    venv_python = clone / ".venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.symlink_to(sys.executable)
    system = _interpreter(tmp_path / "system" / "python3", shared=False)
    assert _venv_maker(clone, bin_, f"SYSTEM_PYTHON={system}") == "python3"
    assert not asked.exists() or "libpython" not in asked.read_text()


@pytest.mark.skipif(shutil.which("ldd") is None, reason="no ldd on this system")
def test_the_question_tells_a_shared_libpython_from_a_static_interpreter():
    """The Makefile's question, asked of this interpreter, answers as `ldd` reads its
    executable: linked to a libpython or not."""
    question = re.search(r'shared\(\) \{ "\$\$1" -c "([^"]+)"', (ROOT / "Makefile").read_text())
    assert question, "the Makefile asks no question of python3"
    asked = subprocess.run([sys.executable, "-c", question.group(1)], check=False)
    linked = subprocess.run(
        ["ldd", os.path.realpath(sys.executable)], capture_output=True, text=True, check=True
    ).stdout
    assert (asked.returncode == 0) == ("libpython" in linked), linked
