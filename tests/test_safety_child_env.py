"""The LLM key stays in the agent's process (issue 31 item 2): every child gets an allow-listed
environment. Real processes: SGLang's real bench client (0.5.23 wheel, through the interpreter
double) launched as a job by the local executor against a loopback HTTP listener that records the
``Authorization`` header of every request; the same client started with the key in its own
environment shows what the listener catches. A stand-in ``nvidia-smi`` records the environment
the agent gave it; a stand-in ``sbatch`` records the ``--export`` the Slurm executor asks for."""
from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.cli_helpers import agent, clean_env, run_cli, wait_for
from tests.slowdown import limit
from tests.doubles.tokenizer import build_tokenizer
from tools.child_env import child_env
from tools.jobs.local import LocalExecutor
from tools.jobs.spec import JobSpec

DOUBLES = Path(__file__).parent / "doubles"
KEY = "sk-" + "agentsownkeyagentsownkey"  # built here: no secret-shaped literal sits in the repo


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: list[tuple[str, str | None]] = []

    def _answer(self) -> None:
        self.seen.append((self.path, self.headers.get("Authorization")))
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        body = b"{}"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def listener():
    _Recorder.seen = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], _Recorder.seen
    server.shutdown()
    server.server_close()


def _client_argv(port: int, tok: Path, out: Path) -> list[str]:
    return [str(DOUBLES / "sglang_python"), "-m", "sglang.bench_serving", "--backend", "sglang", "--host", "127.0.0.1",
            "--port", str(port), "--dataset-name", "random", "--random-input-len", "4", "--random-output-len", "4",
            "--num-prompts", "1", "--tokenizer", str(tok), "--model", str(tok), "--output-file", str(out)]


def test_the_bench_client_never_sends_the_agents_key(tmp_path, listener, monkeypatch, sglang_wheel_root):
    port, seen = listener
    tok = build_tokenizer(tmp_path / "tok")
    wheel = {"DSV4_SGLANG_WHEEL_ROOT": str(sglang_wheel_root)}
    direct = subprocess.run(_client_argv(port, tok, tmp_path / "direct.jsonl"), env=clean_env(
        {**wheel, "OPENAI_API_KEY": KEY}), capture_output=True, text=True, timeout=limit(300))
    assert (seen and all(auth == f"Bearer {KEY}" for _path, auth in seen)), (seen, direct.stderr[-2000:])
    seen.clear()  # the listener catches a key the client has; now the client as the agent starts it

    for name, value in {"OPENAI_API_KEY": KEY, "DSV4_LLM_API_KEY": KEY, "MY_COPY_OF_THE_KEY": KEY, **wheel}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DSV4_PASS_ENV", "MY_COPY_*")  # passing a name on does not pass the key's value
    executor = LocalExecutor(tmp_path / "jobs")
    executor.launch(JobSpec(key="bench", argv=_client_argv(port, tok, tmp_path / "job.jsonl"), kind="bench", gpus=[]))
    state = wait_for(lambda: (s := executor.poll("bench")).done and s, 300, "the bench job to end")
    assert seen, (state, executor.read_log("bench"))
    assert all(auth is None for _path, auth in seen), seen
    assert KEY not in (tmp_path / "jobs" / "bench" / "job.json").read_text()


def test_child_env_keeps_the_allow_list_and_drops_the_key_under_any_name():
    base = {"PATH": "/bin", "HOME": "/h", "CUDA_VISIBLE_DEVICES": "0", "SGLANG_X": "1", "HF_HOME": "/hf",
            "OPENAI_API_KEY": KEY, "DSV4_LLM_API_KEY": KEY, "SGLANG_API_KEY": KEY, "OPENAI_BASE_URL": "http://u:p@h",
            "AWS_SECRET_ACCESS_KEY": "aws", "RANDOM_VAR": "r", "MINE": "m", "DSV4_PASS_ENV": "MINE,EXTRA_*",
            "EXTRA_ONE": "e"}
    env = child_env({"JOB_OWN": "j"}, base=base)
    assert env == {"PATH": "/bin", "HOME": "/h", "CUDA_VISIBLE_DEVICES": "0", "SGLANG_X": "1", "HF_HOME": "/hf",
                   "MINE": "m", "EXTRA_ONE": "e", "JOB_OWN": "j"}


def test_child_env_drops_a_variable_whose_value_holds_the_key():
    base = {"PATH": "/bin", "OPENAI_API_KEY": KEY, "SGLANG_HEADERS": f"Authorization: Bearer {KEY}",
            "HF_ENDPOINT": f"https://user:{KEY}@hub.example", "NCCL_DEBUG": "INFO"}
    assert child_env(base=base) == {"PATH": "/bin", "NCCL_DEBUG": "INFO"}


def _recording_smi(tmp_path: Path) -> tuple[Path, Path]:
    record = tmp_path / "smi-env.txt"
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text(f"#!/bin/sh\nenv > {record}\nexit 9\n")
    smi.chmod(0o755)
    return smi, record


def _slurm_stand_ins(tmp_path: Path) -> tuple[Path, Path]:
    """sbatch, squeue, scontrol, scancel, sinfo: sbatch records its argv and environment and says job 7."""
    bin_dir, record = tmp_path / "slurm-bin", tmp_path / "sbatch.json"
    bin_dir.mkdir()
    script = (f"#!{sys.executable}\nimport json, os, sys\n"
              f"json.dump({{'argv': sys.argv[1:], 'env': dict(os.environ)}}, open({str(record)!r}, 'w'))\nprint('7')\n")
    for name in ("sbatch", "squeue", "scontrol", "scancel", "sinfo"):
        (bin_dir / name).write_text(script if name == "sbatch" else "#!/bin/sh\nexit 0\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir, record


def test_slurm_jobs_export_only_the_allowed_names(tmp_path, monkeypatch):
    from tools.jobs.slurm.executor import SlurmExecutor

    bin_dir, record = _slurm_stand_ins(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("UNRELATED_SETTING", "x")
    executor = SlurmExecutor(tmp_path / "jobs")
    executor.launch(JobSpec(key="tune-gpu0", argv=["true"], kind="tune", gpus=[0], env={"JOB_KNOB": "1"}))
    sent = json.loads(record.read_text())
    export = next(a for a in sent["argv"] if a.startswith("--export="))
    names = export.removeprefix("--export=").split(",")
    assert "PATH" in names and "OPENAI_API_KEY" not in names and "UNRELATED_SETTING" not in names, names
    assert KEY not in json.dumps(sent["env"]) and "UNRELATED_SETTING" not in sent["env"]
    job = json.loads((tmp_path / "jobs" / "tune-gpu0" / "job.json").read_text())
    assert job["env"] == {"JOB_KNOB": "1"}  # the job's own variables travel in its ledger, set by its leader


def test_an_allowed_repo_config_s_programs_get_no_key(tmp_path):
    smi, record = _recording_smi(tmp_path)
    (tmp_path / "dsv4-agent.toml").write_text(f'nvidia-smi = "{smi}"\n')
    assert run_cli("config", "allow", cwd=tmp_path).returncode == 0
    done = agent("enable MTP", cwd=tmp_path, env={"OPENAI_API_KEY": KEY})
    assert done.returncode == 0 and record.exists(), done.stderr
    assert KEY not in record.read_text()


def _recording_git(tmp_path: Path) -> tuple[Path, Path]:
    """A stand-in ``git`` first on PATH: it records its arguments and its environment (NUL-separated,
    one file per process) and then runs the real git, so the sync works as it would."""
    real = shutil.which("git")
    assert real, "git is not installed"
    bin_dir, records = tmp_path / "git-bin", tmp_path / "git-envs"
    bin_dir.mkdir()
    records.mkdir()
    stand_in = bin_dir / "git"
    stand_in.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" > {records}/$$.argv\nenv -0 > {records}/$$.env\n"
                        f"exec {real} \"$@\"\n")
    stand_in.chmod(0o755)
    return bin_dir, records


def test_sync_s_git_processes_get_no_key(tmp_path):
    """Both ways sync starts git (GitPython's ``git.Repo`` commands, and its own fetch through
    ``run_git``) give git the allow-listed environment: no key, no unlisted variable, while what git
    needs for authentication (``GIT_SSH_COMMAND``, the ssh agent's socket, ``HOME``) is there."""
    from tests.sync_gitrepos import PYPROJECT, Upstream

    upstream = Upstream(tmp_path)
    clone = upstream.clone(tmp_path / "sglang")
    upstream.commit({"python/pyproject.toml": PYPROJECT.replace("sgl-kernel==0.3.21", "sgl-kernel==0.3.22")},
                    "Bump sgl-kernel")
    bin_dir, records = _recording_git(tmp_path)
    other_key = "sk-" + "secondkeysecondkeysecond"
    done = agent("sync", "--sglang", str(clone), "--sglang-python", "/envs/sgl/bin/python", "--json", cwd=tmp_path,
                 env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "OPENAI_API_KEY": KEY,
                      "DSV4_LLM_API_KEY": other_key, "UNRELATED_SECRET": "hunter2",
                      "GIT_SSH_COMMAND": "ssh -o BatchMode=yes", "SSH_AUTH_SOCK": str(tmp_path / "agent.sock")})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["pull"]["status"] == "fast_forwarded"
    argvs = [p.read_text() for p in sorted(records.glob("*.argv"))]
    assert any(a.startswith("fetch") or " fetch " in a for a in argvs), argvs  # sync's own git
    assert any(a.startswith(("cat-file", "rev-parse", "version")) for a in argvs), argvs  # GitPython's
    envs = [p.read_bytes() for p in sorted(records.glob("*.env"))]
    assert len(envs) == len(argvs)
    for raw in envs:
        env = dict(item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
        assert KEY.encode() not in raw and other_key.encode() not in raw and b"hunter2" not in raw
        assert not {b"OPENAI_API_KEY", b"DSV4_LLM_API_KEY", b"UNRELATED_SECRET"} & set(env), sorted(env)
        assert env[b"GIT_SSH_COMMAND"] == b"ssh -o BatchMode=yes" and b"SSH_AUTH_SOCK" in env and b"HOME" in env
