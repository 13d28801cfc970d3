"""A bundle carries the GSM8K data so the GPU host can run the accuracy gate offline (issue 41 item 3).

The planning machine fetches the user's ``--accuracy-data`` URL from a loopback HTTP server (or takes
their setting) when the bundle is made; ``resume BUNDLE`` on the "host" (another folder, the server
gone, a local tokenizer so the benchmark runs offline) gates accuracy with the bundled copy. A URL a
run folder records is never fetched; a bad source is one line, exit 2, no bundle written."""
from __future__ import annotations

import http.server
import json
import shutil
import tarfile
import threading
from pathlib import Path

import pytest

from agent.run.bundle_data import BUNDLED_GSM8K
from tests.campaign_fixtures import DOUBLES, campaign_args, campaign_env, make_campaign_checkout
from tests.cli_helpers import only_run, run_cli
from tests.decision_fixtures import write_gsm8k
from tests.doubles.tokenizer import build_tokenizer
from tests.messages import assert_refusal

LAPTOP_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin"}  # no nvidia-smi: the run is planned


class _Files(http.server.BaseHTTPRequestHandler):
    served: dict[str, bytes] = {}
    asked: list[str] = []

    def do_GET(self) -> None:
        self.asked.append(self.path)
        body = self.served.get(self.path)
        self.send_response(200 if body is not None else 404)
        self.send_header("Content-Length", str(len(body or b"")))
        self.end_headers()
        self.wfile.write(body or b"")

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def files(tmp_path):
    _Files.served, _Files.asked = {"/test.jsonl": write_gsm8k(tmp_path / "served.jsonl").read_bytes()}, []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Files)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", _Files
    server.shutdown()
    server.server_close()


def _carried(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive) as tar:
        return {m.name.split("/", 1)[1]: tar.extractfile(m).read() for m in tar if m.isreg()}


def _planned(root: Path, wheel: Path) -> Path:
    root.mkdir()
    planned = run_cli(*campaign_args(root, wheel, goal="enable MTP"), "--accuracy-questions", "12", cwd=root,
                      env=LAPTOP_ENV)
    assert planned.returncode == 0, planned.stdout[-3000:] + planned.stderr
    return only_run(root)


def test_the_bundled_gsm8k_copy_gates_accuracy_offline_on_the_host(tmp_path, sglang_wheel_root, files):
    url, server = files
    laptop, host = tmp_path / "laptop", tmp_path / "gpu-host"
    run = _planned(laptop, sglang_wheel_root)
    archive = tmp_path / f"{run.name}.tar.gz"
    made = run_cli("bundle", "latest", "-o", str(archive), "--accuracy-data", f"{url}/test.jsonl", cwd=laptop)
    assert made.returncode == 0, made.stdout + made.stderr
    assert "with GSM8K data for the accuracy gate (12 questions" in made.stdout, made.stdout
    assert _carried(archive)[BUNDLED_GSM8K] == server.served["/test.jsonl"] and server.asked == ["/test.jsonl"]
    assert not (run / "accuracy").exists()  # the run folder here is left as it was

    make_campaign_checkout(host, sglang_wheel_root)
    tok = build_tokenizer(host / "tok")
    shutil.rmtree(laptop)
    shutil.copy(archive, host / archive.name)
    knows = host / "what-the-model-knows.jsonl"  # the server double answers these questions right
    knows.write_bytes(server.served["/test.jsonl"])
    resumed = run_cli("resume", archive.name, "--sglang", str(host / "sglang-checkout"), "--sglang-python",
                      str(DOUBLES / "sglang_python"), "--model-path", str(tok), "--tokenizer", str(tok),
                      cwd=host, env={**campaign_env(host), "DSV4_DOUBLE_GSM8K": str(knows)})
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr
    there = only_run(host)
    copy = (there / BUNDLED_GSM8K).resolve()
    assert f"GSM8K accuracy gate: SGLang's few_shot_gsm8k, 12 questions of {copy}" in resumed.stdout
    gated = {p.stem: json.loads(p.read_text()) for p in (there / "bench" / "accuracy").glob("*.json")}
    assert "baseline" in gated and len(gated) >= 2 and all(g["accuracy"] == 1.0 for g in gated.values()), gated
    assert "Accuracy gate skipped" not in (there / "report.md").read_text()
    assert server.asked == ["/test.jsonl"]  # fetched once, on the planning machine


def _crafted(tmp_path: Path, settings: dict) -> Path:
    run = tmp_path / "runs" / "20260101T000000Z-crafted"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"goal": "enable MTP", "settings": settings}))
    (run / "plan.md").write_text("# plan\n")
    return run


def test_a_url_a_run_folder_records_is_never_fetched_and_the_users_setting_is(tmp_path, files):
    url, server = files
    run = _crafted(tmp_path, {"accuracy_data": f"{url}/test.jsonl"})
    made = run_cli("bundle", str(run), "-o", str(tmp_path / "a.tar.gz"), cwd=tmp_path)
    assert made.returncode == 0 and "GSM8K" not in made.stdout, made.stdout + made.stderr
    assert server.asked == [] and BUNDLED_GSM8K not in _carried(tmp_path / "a.tar.gz")
    mine = run_cli("bundle", str(run), "-o", str(tmp_path / "b.tar.gz"), cwd=tmp_path,
                   env={"DSV4_ACCURACY_DATA": f"{url}/test.jsonl"})  # the user's own setting
    assert mine.returncode == 0, mine.stdout + mine.stderr
    assert server.asked == ["/test.jsonl"] and BUNDLED_GSM8K in _carried(tmp_path / "b.tar.gz")
    local = write_gsm8k(tmp_path / "mine.jsonl", n=3)
    copied = run_cli("bundle", str(run), "-o", str(tmp_path / "c.tar.gz"), "--accuracy-data", str(local), "--json",
                     cwd=tmp_path)
    assert copied.returncode == 0, copied.stdout + copied.stderr
    assert json.loads(copied.stdout)["accuracy_data"] == {"source": str(local), "questions": 3, "file": BUNDLED_GSM8K}
    assert _carried(tmp_path / "c.tar.gz")[BUNDLED_GSM8K] == local.read_bytes()


@pytest.mark.parametrize("case", ["404", "not-gsm8k", "no-file", "ftp", "no-server"])
def test_a_bad_accuracy_source_is_one_line_and_no_bundle(tmp_path, files, case):
    url, server = files
    server.served["/other.jsonl"] = b'{"text": "no question here"}\n'
    (tmp_path / "binary.jsonl").write_bytes(b"\xff\xfe\x00")
    source, said = {"404": (f"{url}/missing.jsonl", "answered 404"),
                    "not-gsm8k": (f"{url}/other.jsonl", "line 1 is no GSM8K record"),
                    "no-file": (str(tmp_path / "absent.jsonl"), "No such file"),
                    "ftp": ("ftp://example.invalid/test.jsonl", "only an http(s) URL or a file"),
                    "no-server": ("http://127.0.0.1:1/test.jsonl", "cannot fetch it")}[case]
    run = _crafted(tmp_path, {})
    out = run_cli("bundle", str(run), "-o", str(tmp_path / "x.tar.gz"), "--accuracy-data", source, cwd=tmp_path)
    assert_refusal(out, "--accuracy-data", said)
    assert not (tmp_path / "x.tar.gz").exists() and not list(tmp_path.glob(".x.tar.gz.tmp*"))
