"""A run folder is data (issue 40 item 1): ``resume``, ``replay --rerun`` and a bundle's ``resume`` take
back a recorded program, host, ssh option, endpoint or environment only where it equals what the user
gives now, or the user allowed the folder (``dsv4-agent config allow RUN``). Crafted folders whose
config.json names a stand-in ``nvidia-smi`` that records being run, ssh options that write a marker, or
an LLM endpoint on a loopback listener that records ``Authorization``: nothing runs, no key is sent,
exit 2 with one line naming the setting and its option."""
from __future__ import annotations

import http.server
import json
import shutil
import threading
from pathlib import Path

import pytest

from tests.campaign_fixtures import DOUBLES, campaign_args, campaign_env
from tests.cli_helpers import only_run, run_cli
from tests.messages import assert_refusal, assert_run_setting_refused

GOLDEN = Path(__file__).parent / "golden"
KEY = "sk-" + "usersownkeyusersownkey"  # built here: no secret-shaped literal sits in the repo
pytestmark = pytest.mark.no_replay("hand-made run folders, refused before anything runs")


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: list[str | None] = []

    def _answer(self) -> None:
        self.seen.append(self.headers.get("Authorization"))
        self.send_response(500)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = _answer

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def listener():
    _Recorder.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", _Recorder.seen
    server.shutdown()
    server.server_close()


def _recording_smi(tmp_path: Path) -> tuple[Path, Path]:
    """A stand-in nvidia-smi that records being run, then answers as the GPU double does."""
    marker = tmp_path / "smi-ran"
    smi = tmp_path / "stand-in" / "nvidia-smi"
    smi.parent.mkdir(exist_ok=True)
    smi.write_text(f"#!/bin/sh\necho ran >> {marker}\nexec {DOUBLES / 'nvidia_smi'} \"$@\"\n")
    smi.chmod(0o755)
    return smi, marker


def _crafted(tmp_path: Path, settings: dict) -> Path:
    run = tmp_path / "runs" / "20260101T000000Z-crafted"
    (run / "steps").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"goal": "enable MTP", "settings": settings}))
    (run / "trace.jsonl").write_text("")
    return run


def _golden_with(tmp_path: Path, settings: dict) -> Path:
    run = tmp_path / "recorded"
    shutil.copytree(GOLDEN / "playbook-mtp-tune", run)
    config = json.loads((run / "config.json").read_text())
    config["settings"].update(settings)
    (run / "config.json").write_text(json.dumps(config))
    return run


def _ssh(marker: Path) -> dict:
    return {"executor": "ssh://gpu-box.invalid", "ssh_options": [f"-oProxyCommand=touch {marker}; exit 1"]}


@pytest.mark.parametrize("case", ["nvidia_smi", "ssh_options", "server_env", "allow_flags"])
def test_resume_takes_no_program_host_or_environment_from_a_run_folder(tmp_path, case):
    smi, marker = _recording_smi(tmp_path)
    settings, option = {"nvidia_smi": ({"nvidia_smi": str(smi)}, "--nvidia-smi="),
                        "ssh_options": (_ssh(marker), "--ssh-option="),
                        "server_env": ({"server_env": ["LD_PRELOAD=/tmp/evil.so"]}, "--server-env="),
                        "allow_flags": ({"allow_flags": ["--trust-remote-code"]}, "--allow-flag=")}[case]
    run = _crafted(tmp_path, settings)
    out = run_cli("resume", str(run), cwd=tmp_path, env=campaign_env(tmp_path))
    field = "executor" if case == "ssh_options" else case  # the host is judged first, then its options
    assert_run_setting_refused(out, field, "--executor=" if case == "ssh_options" else option)
    if case == "ssh_options":  # the user names the host: its options are still the folder's
        out = run_cli("resume", str(run), "--executor", "ssh://gpu-box.invalid", cwd=tmp_path,
                      env=campaign_env(tmp_path))
        assert_run_setting_refused(out, case, option)
    assert not marker.exists()
    assert not list((run / "steps").iterdir()) and not (run / "preflight.json").exists()


def test_resume_and_rerun_never_send_the_key_to_a_recorded_endpoint(tmp_path, listener):
    url, seen = listener
    env = {**campaign_env(tmp_path), "OPENAI_API_KEY": KEY}
    resumed = run_cli("resume", str(_crafted(tmp_path, {"llm_base_url": url})), cwd=tmp_path, env=env)
    assert_run_setting_refused(resumed, "llm_base_url", "--llm-base-url=")
    rerun = run_cli("replay", str(_golden_with(tmp_path, {"llm_base_url": url})), "--rerun", "--runs-dir",
                    str(tmp_path / "again"), cwd=tmp_path, env=env)
    assert_run_setting_refused(rerun, "llm_base_url", "--llm-base-url=")
    assert seen == [] and not (tmp_path / "again").exists()


@pytest.mark.parametrize("case", ["nvidia_smi", "ssh_options"])
def test_rerun_refuses_what_resume_refuses_before_replaying_anything(tmp_path, case):
    smi, marker = _recording_smi(tmp_path)
    ssh_marker = tmp_path / "proxy-command-ran"
    recorded = _golden_with(tmp_path, {"nvidia_smi": str(smi)} if case == "nvidia_smi" else _ssh(ssh_marker))
    host = {"DSV4_EXECUTOR": "ssh://gpu-box.invalid"} if case == "ssh_options" else {}  # the user's own host
    out = run_cli("replay", str(recorded), "--rerun", "--runs-dir", str(tmp_path / "again"), cwd=tmp_path,
                  env={**campaign_env(tmp_path), **host})
    assert_run_setting_refused(out, case, "--nvidia-smi=" if case == "nvidia_smi" else "--ssh-option=")
    assert "replay of" not in out.stdout  # refused before the replay, not after it
    assert not marker.exists() and not ssh_marker.exists() and not (tmp_path / "again").exists()


def test_a_bundle_naming_a_program_is_refused_and_leaves_nothing(tmp_path):
    smi, marker = _recording_smi(tmp_path)
    laptop, host = tmp_path / "laptop", tmp_path / "host"
    run = _crafted(laptop, {"nvidia_smi": str(smi)})
    (run / "trace.jsonl").unlink()
    (run / "plan.md").write_text("# plan\n")
    made = run_cli("bundle", str(run), "-o", str(tmp_path / "carried.tar.gz"), cwd=laptop)
    assert made.returncode == 0, made.stdout + made.stderr
    host.mkdir()
    out = run_cli("resume", str(tmp_path / "carried.tar.gz"), cwd=host, env=campaign_env(host))
    assert_run_setting_refused(out, "nvidia_smi", "--nvidia-smi=")
    assert not marker.exists() and not list((host / "runs").glob("*"))


@pytest.mark.no_replay("resumed from another user's state folder")
def test_a_run_resumed_by_a_user_who_gives_the_same_settings_goes_on(tmp_path, sglang_wheel_root):
    """A run made elsewhere (another state folder: not allowed here) is taken back when the user passes
    the programs it names; an allowance is keyed by config.json's content."""
    smi, marker = _recording_smi(tmp_path)
    env, args = campaign_env(tmp_path), campaign_args(tmp_path, sglang_wheel_root, "enable MTP")
    planned = run_cli(*args, "--nvidia-smi", str(smi), "--plan-only", cwd=tmp_path, env=env)
    assert planned.returncode == 0, planned.stdout[-2000:] + planned.stderr
    run, ran = only_run(tmp_path), marker.read_text().count("ran")
    stranger = {**env, "DSV4_STATE_DIR": str(tmp_path / "another-users-state")}
    sglang = [word for i, word in enumerate(args) if word in ("--sglang", "--sglang-python") or
              args[i - 1] in ("--sglang", "--sglang-python")]  # the host's SGLang, as the user gives it
    assert_run_setting_refused(run_cli("resume", str(run), cwd=tmp_path, env=stranger), "sglang_src", "--sglang=")
    with_sglang = run_cli("resume", str(run), *sglang, cwd=tmp_path, env=stranger)
    assert_run_setting_refused(with_sglang, "nvidia_smi", "--nvidia-smi=")
    assert marker.read_text().count("ran") == ran and (run / "result.json").exists()
    allowed = run_cli("config", "allow", str(run), cwd=tmp_path, env=stranger)
    assert allowed.returncode == 0 and f'nvidia-smi = "{smi}"' in allowed.stdout, allowed.stdout + allowed.stderr
    original = (run / "config.json").read_bytes()
    config = json.loads(original)
    (run / "config.json").write_text(json.dumps({**config, "settings": {**config["settings"], "nvidia_smi": "/x"}}))
    assert_run_setting_refused(run_cli("resume", str(run), *sglang, cwd=tmp_path, env=stranger), "nvidia_smi",
                               "--nvidia-smi=/x")  # the folder changed since it was allowed
    (run / "config.json").write_bytes(original)
    denied = run_cli("config", "deny", str(run), cwd=tmp_path, env=stranger)  # the option alone decides now
    assert denied.returncode == 0 and "forgot run folder" in denied.stdout, denied.stdout + denied.stderr
    resumed = run_cli("resume", str(run), *sglang, "--nvidia-smi", str(smi), cwd=tmp_path, env=stranger)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr
    assert marker.read_text().count("ran") > ran
    assert json.loads((run / "result.json").read_text())["status"] == "finished"


def test_an_allowed_run_folder_gives_its_program_back(tmp_path):
    smi, marker = _recording_smi(tmp_path)
    recorded = _golden_with(tmp_path, {"nvidia_smi": str(smi)})
    allowed = run_cli("config", "allow", str(recorded), cwd=tmp_path)
    assert allowed.returncode == 0 and f'nvidia-smi = "{smi}"' in allowed.stdout, allowed.stdout + allowed.stderr
    again = run_cli("replay", str(recorded), "--rerun", "--runs-dir", str(tmp_path / "again"), cwd=tmp_path,
                    env={"DSV4_FAKE_GPUS": "0"})  # no GPU: the re-run plans, and stops there
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr
    assert marker.exists() and "re-run of recorded" in again.stdout


def test_jobs_takes_a_folders_ssh_options_only_once_it_is_allowed(tmp_path):
    marker = tmp_path / "proxy-command-ran"
    run = _crafted(tmp_path, _ssh(marker))
    (run / "jobs").mkdir()
    refused = run_cli("jobs", str(run), cwd=tmp_path)
    assert_refusal(refused, "dsv4-agent config allow", run)
    assert not marker.exists()
    assert run_cli("config", "allow", str(run), cwd=tmp_path).returncode == 0
    run_cli("jobs", str(run), cwd=tmp_path)  # the user vouched for the folder: its ProxyCommand is theirs
    assert marker.exists()
