"""tests/warm.py: what it writes before the processes start is what pytest reads."""

from __future__ import annotations

import importlib.machinery
import importlib.util

import pytest

from tests import warm


def test_a_rewritten_file_is_found_by_pytest_and_fails_with_pytests_message(
    tmp_path, pytestconfig, monkeypatch
):
    if not warm._HAVE:
        pytest.skip("this pytest's rewriter is not where tests/warm.py looks")
    source = tmp_path / "test_sample.py"
    source.write_text("def test_one():\n    left = 1\n    assert left == 2\n")
    assert warm._stale(source)
    monkeypatch.setattr(warm, "_config", pytestconfig)
    warm._rewrite(source)
    assert not warm._stale(source)
    pyc = warm.rewrite.get_cache_dir(source) / ("test_sample" + warm.rewrite.PYC_TAIL)
    # Loaded as Python loads any compiled module: the file is a whole, valid pyc.
    loader = importlib.machinery.SourcelessFileLoader("test_sample", str(pyc))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("test_sample", loader))
    loader.exec_module(module)
    with pytest.raises(AssertionError) as failed:
        module.test_one()
    assert "assert 1 == 2" in str(failed.value)  # pytest's rewritten message, not a bare one
    source.write_text("def test_one():\n    assert True\n")
    assert warm._stale(source)  # an edited file is rewritten again
