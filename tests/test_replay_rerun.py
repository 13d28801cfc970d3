"""--rerun: the recorded plan runs again for real into a new folder; the diff names what changed."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from agent.replay.rerun import diff_runs, flatten

GOLDEN = Path(__file__).parent / "golden"
CLI = str(Path(sys.executable).parent / "dsv4-agent")


def test_flatten_and_diff_name_keys(tmp_path):
    assert flatten({"a": {"b": [1, {"c": 2}]}}) == {"a.b[0]": 1, "a.b[1].c": 2}
    old, new = tmp_path / "old", tmp_path / "new"
    for run, shapes in ((old, ["7168,2048"]), (new, ["7168,2048", "4096,7168"])):
        (run / "steps").mkdir(parents=True)
        (run / "steps" / "tune_kernels.json").write_text(json.dumps({"status": "done", "data": {"shapes": shapes}}))
    text = diff_runs(old, new)
    assert "tuned shapes: 1 changed" in text
    assert '+ tune_kernels.shapes[1]: "4096,7168" (new)' in text
    assert "evidence and recommended flags: no change" in text


def test_rerun_golden_into_new_folder_and_diff(tmp_path):
    recorded = tmp_path / "recorded"
    shutil.copytree(GOLDEN / "playbook-mtp-tune", recorded)
    mtp = json.loads((recorded / "mtp.json").read_text())
    mtp["edited_by_test"] = "old recommendation"  # the recording now differs from what the campaign makes
    (recorded / "mtp.json").write_text(json.dumps(mtp))
    runs = tmp_path / "runs"
    done = subprocess.run([CLI, "replay", str(recorded), "--rerun", "--runs-dir", str(runs)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    new_runs = [p for p in runs.iterdir() if (p / "result.json").exists()]
    assert len(new_runs) == 1
    assert f"re-run of recorded → {new_runs[0]}" in done.stdout
    assert "evidence and recommended flags: 1 changed" in done.stdout
    assert '- files.mtp.json.edited_by_test: "old recommendation" (gone)' in done.stdout
    assert "tuned shapes:" in done.stdout and "benchmark figures:" in done.stdout
    assert json.loads((new_runs[0] / "config.json").read_text())["goal"] == "enable MTP and tune kernels"
