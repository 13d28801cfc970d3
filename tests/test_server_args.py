"""``--server-arg`` / ``--server-env`` (and their config-file keys): added to every serve script and to
every server the agent launches, through the same trust review as a recipe's flags; bad entries are
refused before a run folder exists. Through the CLI, on the doubles of tests/campaign_fixtures.py."""
from __future__ import annotations

import json
import shlex

import pytest

from tests.campaign_fixtures import campaign_args, campaign_env
from tests.cli_helpers import only_run, run_cli
from tests.messages import assert_refusal
from tools.scripts.models import EnvChoice, FlagChoice, ServeVariant


@pytest.mark.parametrize("option, entry, named", [
    ("--server-arg", "--trust-remote-code", "--allow-flag --trust-remote-code"),
    ("--server-arg", "--host 0.0.0.0", "--host is set by the scripts themselves"),
    ("--server-arg", "--forward-hooks my.mod", "--allow-flag --forward-hooks"),
    ("--server-arg", "--port 1", "--port is set by the scripts themselves"),
    ("--server-arg", "--enable-metrics", "--enable-metrics is set by the scripts themselves"),
    ("--server-arg", "--speculative-num-steps 2", "--mtp-steps"),
    ("--server-arg", "mem-fraction 0.8", "must start with a flag"),
    ("--server-arg", "--a 'b", "not valid shell words"),
    ("--server-arg", "--x 1\n--y 2", "holds a line break"),
    ("--server-env", "1BAD=x", "'1BAD' is not a valid environment variable name"),
    ("--server-env", "A-B=x", "'A-B' is not a valid environment variable name"),
    ("--server-env", "NOEQUALS", "must be NAME=VALUE"),
    ("--server-env", "A=b\nc", "holds a line break"),
])
def test_bad_entries_are_refused_before_a_run_exists(tmp_path, option, entry, named):
    out = run_cli("benchmark", "--plan-only", f"{option}={entry}", cwd=tmp_path)
    assert_refusal(out, option, named)
    assert not (tmp_path / "runs").exists()


def test_config_file_entries_get_the_same_review(tmp_path):
    (tmp_path / "mine.toml").write_text('server-args = ["--mem-fraction-static 0.8", "--trust-remote-code"]\n')
    out = run_cli("benchmark", "--plan-only", "--config", "mine.toml", cwd=tmp_path)
    assert_refusal(out, "mine.toml", "--allow-flag --trust-remote-code")
    assert not (tmp_path / "runs").exists()


def test_every_serve_script_and_the_plan_carry_them(tmp_path, sglang_wheel_root):
    env = campaign_env(tmp_path)
    out = run_cli(*campaign_args(tmp_path, sglang_wheel_root), "--plan-only",
                  "--server-arg", "--mem-fraction-static 0.8 --chunked-prefill-size 4096",
                  "--server-arg=--trust-remote-code", "--allow-flag=--trust-remote-code",
                  "--server-env", "NCCL_DEBUG=INFO", "--server-env", "LD_LIBRARY_PATH=/opt/my libs", cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    run = only_run(tmp_path)
    scripts = sorted(run.glob("serve_*.sh"))
    assert {p.name for p in scripts} >= {"serve_baseline.sh", "serve_mtp.sh"}
    for script in scripts:
        text = script.read_text()
        for words in ("--mem-fraction-static 0.8", "--chunked-prefill-size 4096", "--trust-remote-code"):
            assert f"args+=({words})" in text, (script.name, words)
        assert f"export LD_LIBRARY_PATH={shlex.quote('/opt/my libs')}" in text
        assert "export NCCL_DEBUG=INFO" in text and text.count("# user choice (--server-arg)") == 3
    plan = json.loads((run / "measure_plan.json").read_text())
    for variant in plan["variants"]:
        flags = {f["flag"]: f["value"] for f in variant["flags"]}
        assert flags["--mem-fraction-static"] == "0.8" and flags["--trust-remote-code"] == ""
        assert {e["name"]: e["value"] for e in variant["env"]}["LD_LIBRARY_PATH"] == "/opt/my libs"
    mtp = next(v for v in plan["variants"] if v["name"] == "mtp")
    assert any(f["flag"] == "--speculative-algorithm" for f in mtp["flags"])  # the recipe's flags stay
    plan_md = (run / "plan.md").read_text()
    assert "| --mem-fraction-static 0.8 --chunked-prefill-size 4096 | --server-arg |" in plan_md
    assert "| LD_LIBRARY_PATH=/opt/my libs | --server-env |" in plan_md


def test_the_users_value_replaces_a_recipes_value_of_the_same_flag():
    from agent.steps.measure_plan import with_user_additions

    recipe = ServeVariant(name="mtp", model_path="m", flags=[FlagChoice(flag="--mem-fraction-static", value="0.7",
                                                                        source="test_x.py:3")],
                          env=[EnvChoice(name="A", value="recipe", source="test_x.py:2")])
    (tuned,) = with_user_additions([recipe], [FlagChoice(flag="--mem-fraction-static", value="0.9")],
                                   [EnvChoice(name="A", value="mine")])
    assert [(f.flag, f.value) for f in tuned.flags] == [("--mem-fraction-static", "0.9")]
    assert [(e.name, e.value) for e in tuned.env] == [("A", "mine")]
