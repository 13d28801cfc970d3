"""A baseline measured with kernel configs an earlier run installed says so (issue 40 item 7).

Two campaigns on the doubles share one SGLang checkout: the first tunes and installs its configs into
the checkout's config folder (the install the tuning step makes); the second measures a baseline
there. Its plan, its console and its report name each config, the run that installed it and when;
the first run's own report does not list its own install."""
from __future__ import annotations

import json

from tests.campaign_fixtures import campaign_args, campaign_env
from tests.cli_helpers import run_cli


def test_a_baseline_over_another_runs_install_lists_those_configs(tmp_path, sglang_wheel_root):
    env = campaign_env(tmp_path)
    first = run_cli(*campaign_args(tmp_path, sglang_wheel_root, goal="enable MTP and tune kernels"), cwd=tmp_path,
                    env=env)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr
    (tuner,) = list((tmp_path / "runs").iterdir())
    installed = json.loads((tuner / "steps" / "tune_kernels.json").read_text())["data"]["installed"]
    names = sorted(p.rsplit("/", 1)[1] for p in installed)
    assert len(names) == 2
    assert "Kernel configs in place" not in (tuner / "report.md").read_text()  # its own install is no surprise

    second = run_cli(*campaign_args(tmp_path, sglang_wheel_root, goal="enable MTP"), cwd=tmp_path, env=env)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr
    (measured,) = [p for p in (tmp_path / "runs").iterdir() if p != tuner]
    said = [line for line in second.stdout.splitlines() if "the baseline will run with 2 kernel config(s)" in line]
    assert said and all(name in said[0] for name in names), second.stdout[-3000:]
    assert f"dsv4-agent tuning uninstall {tuner.name}" in said[0]
    plan = (measured / "plan.md").read_text()
    assert "## Kernel configs in place" in plan and all(name in plan for name in names), plan
    report = (measured / "report.md").read_text()
    section = report[report.index("Kernel configs in place"):]
    rows = [line for line in section.splitlines() if line.startswith("| N=")]
    assert len(rows) == 2, section[:2000]
    for row, name in zip(sorted(rows), names):
        assert name in row and tuner.name in row and " UTC" in row, row
    html = (measured / "report.html").read_text()
    assert "Kernel configs in place" in html and tuner.name in html

    undone = run_cli("tuning", "uninstall", str(tuner), cwd=tmp_path)  # the defaults again: nothing to say
    assert undone.returncode == 0, undone.stdout + undone.stderr
    third = run_cli(*campaign_args(tmp_path, sglang_wheel_root, goal="enable MTP"), "--plan-only", cwd=tmp_path,
                    env=env)
    assert third.returncode == 0 and "kernel config(s)" not in third.stdout, third.stdout[-3000:] + third.stderr
