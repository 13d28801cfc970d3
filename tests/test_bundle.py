"""The hand-off without SSH: a run planned on a machine without GPUs, packed by ``dsv4-agent bundle``,
unpacked and finished by ``dsv4-agent resume BUNDLE`` on "another host" — another folder with its own
SGLang checkout, checkpoint and tokenizer, the planning folder deleted first — on the doubles of
tests/campaign_fixtures.py. The record goes on (one trace, replayable). And the unpacking treats the
archive as untrusted: every crafted archive is refused with exit 2 and leaves nothing behind."""
from __future__ import annotations

import fcntl
import gzip
import hashlib
import io
import json
import shutil
import tarfile
from pathlib import Path

import jsonschema
import pytest

from agent.exit_codes import ExitCode
from agent.replay.driver import replay_run
from agent.run.trace import read_trace
from tests.campaign_fixtures import DOUBLES, campaign_args, campaign_env, make_campaign_checkout
from tests.cli_helpers import only_run, run_cli
from tests.doubles.tokenizer import build_tokenizer
from tests.messages import assert_finished_refused, assert_refusal

LAPTOP_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin"}  # no nvidia-smi: the run is planned
SCHEMA = json.loads((Path(__file__).parent.parent / "docs" / "cli-json.schema.json").read_text())
RUN_NAME = "20260101T000000Z-enable-mtp"


def test_a_bundle_made_here_finishes_on_another_host_and_its_replay_passes(tmp_path, sglang_wheel_root):
    laptop, host = tmp_path / "laptop", tmp_path / "gpu-host"
    laptop.mkdir()
    planned = run_cli(*campaign_args(laptop, sglang_wheel_root), cwd=laptop, env=LAPTOP_ENV)
    assert planned.returncode == 0, planned.stdout[-3000:] + planned.stderr
    run = only_run(laptop)
    result = json.loads((run / "result.json").read_text())
    assert result["status"] == "planned"
    # the next step works from where the user is: over SSH, or with a bundle
    assert "--executor ssh://HOST --sglang-python PATH" in result["next"]
    assert f"dsv4-agent bundle {run.relative_to(laptop)}" in result["next"]
    assert f"dsv4-agent resume {run.name}.tar.gz --sglang-python PATH" in result["next"]

    carried = tmp_path / "usb"
    carried.mkdir()
    made = run_cli("bundle", "latest", "-o", str(carried), "--json", cwd=laptop)
    assert made.returncode == 0, made.stderr
    answer = json.loads(made.stdout)
    jsonschema.validate(answer, {**SCHEMA, "$ref": "#/$defs/bundle"})
    archive = Path(answer["bundle"])
    assert archive == carried / f"{run.name}.tar.gz" and archive.is_file()
    assert answer["next"] == (f"dsv4-agent resume {run.name}.tar.gz --sglang-python PATH --sglang DIR --model-path DIR "
                              "--tokenizer DIR")  # the paths this run recorded, to be given as the host has them
    with tarfile.open(archive) as tar:
        names = {m.name.split("/", 1)[-1] for m in tar}
    assert {"config.json", "plan.md", "mtp.json", "evidence.md", "trace.jsonl", "checkpoint.sqlite",
            "run_measure.sh", "bundle.json"} <= names and ".lock" not in names

    make_campaign_checkout(host, sglang_wheel_root)  # the host's own SGLang, checkpoint and tokenizer
    tok = build_tokenizer(host / "tok")
    laptop_path = str(laptop.resolve())
    shutil.rmtree(laptop)  # the planning machine is out of reach: nothing may depend on its files
    shutil.copy(archive, host / archive.name)
    paths = ["--sglang", str(host / "sglang-checkout"), "--sglang-python", str(DOUBLES / "sglang_python"),
             "--model-path", str(tok), "--tokenizer", str(tok)]
    forgot = run_cli("resume", archive.name, "--sglang-python", str(DOUBLES / "sglang_python"), cwd=host,
                     env=campaign_env(host))
    assert_refusal(forgot, "as the run recorded it", "does not exist on this host", "--sglang DIR")
    assert not (host / "runs").exists() or not list((host / "runs").iterdir())  # refused: nothing left unpacked

    resumed = run_cli("resume", archive.name, *paths, cwd=host, env=campaign_env(host))
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr
    there = only_run(host)
    assert there.name == run.name
    result = json.loads((there / "result.json").read_text())
    assert result["status"] == "finished" and set(result["steps"].values()) == {"done"}, result
    assert json.loads((there / "result.attempt-1.json").read_text())["status"] == "planned"
    events = read_trace(there / "trace.jsonl").events
    assert [e["seq"] for e in events] == list(range(len(events)))  # one trace, continued
    # the host's attempt first makes the evidence and scripts with GPU jobs held (docs/workflow.md): the
    # same tree gives the same flags, variants and evidence, so the run goes on without a review
    assert [e["type"] for e in events if e["type"] in ("run_started", "run_resumed", "run_finished")] == \
        ["run_started", "run_finished", "run_resumed", "run_finished", "run_resumed", "run_finished"]
    assert json.loads((there / "result.attempt-2.json").read_text())["status"] == "planned"
    held_end = [i for i, e in enumerate(events) if e["type"] == "run_finished"][1]
    assert not any(e["type"] == "job_launched" for e in events[:held_end])  # no GPU job before the check
    assert "nothing the jobs will do changed on this host: going on" in resumed.stdout
    assert not (there / "changes.json").exists()
    resumed_event = next(e for e in events if e["type"] == "run_resumed")
    assert resumed_event["redone"] == ["infer_mtp", "write_scripts"]  # made again from the host's paths
    for made_here in ("serve_mtp.sh", "run_measure.sh", "measure_plan.json", "mtp.json"):
        assert laptop_path not in (there / made_here).read_text(), made_here
    assert (there / "verdict.json").exists() and (there / "report.html").exists()
    report = replay_run(there)
    assert report.exit_code == ExitCode.DONE, report.render()

    again = run_cli("resume", archive.name, *paths, cwd=host, env=campaign_env(host))
    assert_finished_refused(again, there.name)
    assert (there / "result.json").exists()  # the run the bundle unpacked earlier is kept


def _fake_run(root: Path, name: str = RUN_NAME) -> Path:
    run = root / "runs" / name
    (run / "steps").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"goal": "enable MTP", "settings": {}}))
    (run / "plan.md").write_text("# plan\n")
    (run / "run_measure.sh").write_text("#!/bin/bash\n")
    (run / "run_measure.sh").chmod(0o755)
    return run


@pytest.mark.no_replay("hand-made run folders, bundled and refused")
def test_a_run_with_jobs_or_being_driven_is_not_bundled(tmp_path):
    run = _fake_run(tmp_path)
    (run / "jobs" / "tune-gpu0").mkdir(parents=True)
    refused = run_cli("bundle", run.name, cwd=tmp_path)
    assert_refusal(refused, "tune-gpu0", "dsv4-agent resume")
    shutil.rmtree(run / "jobs")
    with open(run / ".lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write("pid 4242")
        held.flush()
        driven = run_cli("bundle", run.name, cwd=tmp_path)
    assert_refusal(driven, "pid 4242")
    assert not list(tmp_path.glob("*.tar.gz")) and not list(tmp_path.glob(".*.tmp*"))
    made = run_cli("bundle", run.name, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    with tarfile.open(tmp_path / f"{RUN_NAME}.tar.gz") as tar:
        modes = {m.name: m.mode for m in tar}
    assert modes[f"{RUN_NAME}/run_measure.sh"] == 0o755 and modes[f"{RUN_NAME}/plan.md"] == 0o644
    assert f"{RUN_NAME}/.lock" not in modes


def _member(name: str, data: bytes | None = None, kind: bytes = tarfile.REGTYPE, link: str = "") -> tuple:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.mode = kind, link, 0o644
    if data is not None:
        info.size = len(data)
    return info, data


def _manifest(files: dict[str, bytes], name: str = RUN_NAME) -> tuple:
    listed = {k: {"size": len(v), "sha256": hashlib.sha256(v).hexdigest()} for k, v in files.items()}
    body = json.dumps({"format": 1, "run": name, "made_at": 1.0, "made_on": "x", "files": listed}).encode()
    return _member(f"{name}/bundle.json", body)


def _archive(path: Path, members: list[tuple]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


CONFIG = json.dumps({"goal": "enable MTP", "settings": {}}).encode()
GOOD = {"config.json": CONFIG}


def _good(*extra: tuple, files: dict[str, bytes] | None = None) -> list[tuple]:
    files = GOOD if files is None else files
    return [_member(RUN_NAME, kind=tarfile.DIRTYPE), _manifest(files),
            *[_member(f"{RUN_NAME}/{k}", v) for k, v in GOOD.items()], *extra]


CRAFTED = {  # the member the line names, and what is wrong with it
    "parent": (_good(_member(f"{RUN_NAME}/../escape", b"x")), [f"{RUN_NAME}/../escape", "relative path"]),
    "absolute": ([_member("/tmp/escape-abs", b"x")], ["/tmp/escape-abs", "relative path"]),
    "outside": (_good(_member("20260101T000000Z-other/config.json", CONFIG)),
                ["20260101T000000Z-other/config.json", "outside the run folder"]),
    "symlink": (_good(_member(f"{RUN_NAME}/link", kind=tarfile.SYMTYPE, link="/etc/passwd")),
                [f"{RUN_NAME}/link", "symbolic link"]),
    "hardlink": (_good(_member(f"{RUN_NAME}/hard", kind=tarfile.LNKTYPE, link=f"{RUN_NAME}/config.json")),
                 [f"{RUN_NAME}/hard", "hard link"]),
    "device": (_good(_member(f"{RUN_NAME}/null", kind=tarfile.CHRTYPE)), [f"{RUN_NAME}/null", "device"]),
    "fifo": (_good(_member(f"{RUN_NAME}/pipe", kind=tarfile.FIFOTYPE)), [f"{RUN_NAME}/pipe", "FIFO"]),
    "not-a-run": ([_member("home", kind=tarfile.DIRTYPE), _member("home/.bashrc", b"x")],
                  ["home", "run folder's name"]),
    "no-manifest": ([_member(RUN_NAME, kind=tarfile.DIRTYPE), _member(f"{RUN_NAME}/config.json", CONFIG)],
                    [f"{RUN_NAME}/bundle.json"]),
    "unlisted": (_good(_member(f"{RUN_NAME}/extra.sh", b"rm -rf ~\n")), ["'extra.sh'", "manifest"]),
    "changed": (_good(files={"config.json": b"{}"}), ["config.json", "manifest"]),
    "twice": (_good(_member(f"{RUN_NAME}/config.json", CONFIG)), [f"{RUN_NAME}/config.json", "twice"]),
}


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_a_crafted_archive_is_refused_and_leaves_nothing(tmp_path, case):
    members, names = CRAFTED[case]
    archive = _archive(tmp_path / "crafted.tar.gz", members)
    assert_refusal(run_cli("resume", str(archive), cwd=tmp_path), *names)
    assert not (tmp_path / "escape").exists() and not Path("/tmp/escape-abs").exists()
    left = sorted(p.name for p in (tmp_path / "runs").iterdir()) if (tmp_path / "runs").exists() else []
    assert left == [], left  # neither the run nor the folder it was being unpacked into


@pytest.mark.no_replay("hand-made run folders")
def test_a_sound_archive_unpacks_and_another_run_of_its_name_is_left_alone(tmp_path):
    garbage = tmp_path / "garbage.tar.gz"
    garbage.write_bytes(b"not gzip at all")
    bad = run_cli("resume", str(garbage), cwd=tmp_path)
    assert_refusal(bad, garbage, "`dsv4-agent bundle`")
    from agent.run.bundle import unpack_bundle

    archive = _archive(tmp_path / "sound.tar.gz", _good())
    run, fresh = unpack_bundle(archive, tmp_path / "runs")
    assert fresh and run == tmp_path / "runs" / RUN_NAME and (run / "config.json").read_bytes() == CONFIG
    assert unpack_bundle(archive, tmp_path / "runs") == (run, False)  # the same bundle again: its own run
    other = _fake_run(tmp_path / "elsewhere")
    shutil.rmtree(run)
    shutil.move(other, run)  # a different run of the same name
    clash = run_cli("resume", str(archive), cwd=tmp_path)
    assert_refusal(clash, RUN_NAME, archive, "already exists", "--runs-dir DIR")
    assert (run / "plan.md").exists()  # untouched


def test_an_archive_with_a_huge_extended_header_is_refused_before_it_is_read(tmp_path):
    """tarfile reads a PAX header whole, whatever size it claims (a crafted one took 2.4 GB): the headers
    are walked first, and one larger than a bundle's ever are is refused with what it claims."""
    header = tarfile.TarInfo(f"{RUN_NAME}/pax")
    header.type, header.size = tarfile.XHDTYPE, 2 << 20
    archive = tmp_path / "crafted.tar.gz"
    with gzip.open(archive, "wb") as out:
        out.write(header.tobuf(tarfile.USTAR_FORMAT))
        out.write(b"9 a=b\n" * ((2 << 20) // 6) + b"\n" * ((2 << 20) % 6))
        out.write(bytes(1024))
    refused = run_cli("resume", str(archive), cwd=tmp_path)
    assert_refusal(refused, archive, "tar header", f"{2 << 20} bytes")
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())
