"""The one sglang-package finder (tools/source/layout.py), on real folders of each layout."""
from __future__ import annotations

from tools.measure.client import package_dir
from tools.source.fields import read_fields_at
from tools.source.layout import find_package
from tools.recipes.model import same_model
from tools.tuning.configs import package_parent


def _package(at):
    at.mkdir(parents=True)
    (at / "__init__.py").write_text("")
    return at


def test_each_layout_finds_its_package(tmp_path):
    checkout = _package(tmp_path / "co" / "python" / "sglang")
    wheel = _package(tmp_path / "whl" / "sglang")
    assert find_package(tmp_path / "co") == checkout
    assert find_package(tmp_path / "whl") == wheel
    assert find_package(wheel) == wheel  # the package folder itself
    assert find_package(tmp_path) is None
    (tmp_path / "bare" / "sglang").mkdir(parents=True)  # no __init__.py: not a package
    assert find_package(tmp_path / "bare") is None


def test_the_callers_agree(tmp_path):
    checkout = _package(tmp_path / "co" / "python" / "sglang")
    assert package_dir(tmp_path / "co") == checkout
    assert package_parent(tmp_path / "co") == checkout.parent
    assert package_parent(checkout) == checkout.parent
    assert not read_fields_at(tmp_path / "nothing").fields


def test_the_same_model_rule():
    assert same_model("deepseek-ai/DeepSeek-V4-Flash", "/models/deepseek-v4-flash/")
    assert not same_model("deepseek-ai/DeepSeek-V4-Flash", "deepseek-ai/DeepSeek-V4")
    assert not same_model(None, "x") and not same_model("x", "")
