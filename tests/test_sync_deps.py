"""Dependency pins between two commits of a real git repository."""
from __future__ import annotations

import shlex
from pathlib import Path

from tests.sync_gitrepos import PYPROJECT, Upstream, git
from tools.sync.deps import dependency_report, is_packaging_file
from tools.sync.pull import pull
from tools.sync.repo import open_checkout


def test_packaging_file_names():
    assert is_packaging_file("python/pyproject.toml")
    assert is_packaging_file("python/pyproject_other.toml")
    assert is_packaging_file("sgl-kernel/requirements-dev.txt")
    assert not is_packaging_file("python/sglang/srt/server_args.py")
    assert not is_packaging_file("docs/pyproject.md")


def test_commit_bumping_pins_gives_exact_reinstall_command(tmp_path: Path):
    upstream = Upstream(tmp_path)
    clone = upstream.clone(tmp_path / "sglang")
    bumped = (PYPROJECT.replace("sgl-kernel==0.3.21", "sgl-kernel==0.3.22")
              .replace("torch==2.9.1", "torch==2.10.0")
              .replace('    "aiohttp",\n', '    "aiohttp",\n    "xgrammar==0.1.30",\n')
              .replace('    "transformers==4.57.1",\n', "")
              .replace('test = ["pytest"]', 'test = ["pytest==9.0"]'))
    upstream.commit({"python/pyproject.toml": bumped, "python/sglang/x.py": "pass\n"}, "Bump kernels")
    result = pull(open_checkout(clone))

    report = dependency_report(open_checkout(clone),
                               result.old_head, result.new_head, result.changed_files,
                               sglang_python="/opt/sgl env/bin/python")

    assert report.files == ["python/pyproject.toml"]
    by_name = {c.package: c for c in report.changes}
    assert set(by_name) == {"sgl-kernel", "torch", "xgrammar", "transformers", "pytest"}
    assert (by_name["sgl-kernel"].change, by_name["sgl-kernel"].old, by_name["sgl-kernel"].new) == (
        "changed", "sgl-kernel==0.3.21", "sgl-kernel==0.3.22")
    assert by_name["transformers"].change == "removed" and by_name["xgrammar"].change == "added"
    assert by_name["torch"].key and not by_name["pytest"].key
    assert by_name["pytest"].group == "optional:test"
    assert report.reinstall == ("'/opt/sgl env/bin/python' -m pip install "
                                "sgl-kernel==0.3.22 torch==2.10.0 xgrammar==0.1.30")
    assert shlex.split(report.reinstall)[0] == "/opt/sgl env/bin/python"
    assert "pytest==9.0" in report.extras_note


def test_marker_pins_are_kept_apart_and_quoted(tmp_path: Path):
    text = ('[project]\nname = "sglang"\ndependencies = [\n'
            '  "torch==2.9.1; platform_machine == \'x86_64\'",\n'
            '  "torch==2.9.0; platform_machine == \'aarch64\'",\n]\n')
    upstream = Upstream(tmp_path, {"python/pyproject.toml": text})
    clone = upstream.clone(tmp_path / "sglang")
    upstream.commit({"python/pyproject.toml": text.replace("2.9.1", "2.10.0")}, "torch x86")
    result = pull(open_checkout(clone))
    report = dependency_report(open_checkout(clone), result.old_head, result.new_head,
                               result.changed_files, "python3")
    assert len(report.changes) == 1
    assert report.changes[0].new == "torch==2.10.0; platform_machine == 'x86_64'"
    assert shlex.split(report.reinstall) == ["python3", "-m", "pip", "install",
                                             "torch==2.10.0; platform_machine == 'x86_64'"]


def test_requirements_txt_and_unchanged_spacing(tmp_path: Path):
    upstream = Upstream(tmp_path, {"sgl-kernel/requirements.txt": "# build\nninja\ntriton==3.4.0\n-e .\n"})
    clone = upstream.clone(tmp_path / "sglang")
    upstream.commit({"sgl-kernel/requirements.txt": "# build\nninja\ntriton == 3.5.0  # new\n-e .\n",
                     "python/pyproject.toml": PYPROJECT.replace('"aiohttp"', '"aiohttp" ')},
                    "Triton 3.5")
    result = pull(open_checkout(clone))
    report = dependency_report(open_checkout(clone), result.old_head, result.new_head,
                               result.changed_files, "python3")
    assert [(c.package, c.file, c.new) for c in report.changes] == [
        ("triton", "sgl-kernel/requirements.txt", "triton == 3.5.0")]
    assert report.reinstall == "python3 -m pip install 'triton == 3.5.0'"


def test_broken_toml_is_reported_not_fatal(tmp_path: Path):
    upstream = Upstream(tmp_path)
    clone = upstream.clone(tmp_path / "sglang")
    upstream.commit({"python/pyproject.toml": "[project\nbroken"}, "Oops")
    result = pull(open_checkout(clone))
    report = dependency_report(open_checkout(clone), result.old_head, result.new_head,
                               result.changed_files, "python3")
    assert report.changes == [] and report.reinstall is None
    assert report.unreadable and "not valid TOML" in report.unreadable[0]
    assert git(clone, "rev-parse", "HEAD") == result.new_head
