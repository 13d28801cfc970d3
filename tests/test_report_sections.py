"""The campaign report's own sections: the LLM's flag verdicts and research notes."""
from __future__ import annotations

import json
from pathlib import Path

from agent.report.build import build_report


def test_flag_verdicts_and_research_notes_reach_the_report(tmp_path: Path):
    (tmp_path / "flag_review.json").write_text(json.dumps({"verdicts": [
        {"flag": "--foo", "value": "1", "claimed_evidence": "README.md:3", "verdict": "rejected", "origin": None,
         "reason": "SGLang defines no such flag", "violates": []},
        {"flag": "--mem-fraction-static", "value": "0.85", "claimed_evidence": "", "verdict": "supported",
         "origin": "sglang/srt/arg_groups/fields/memory.py:12", "reason": "defined by SGLang", "violates": []}]}))
    (tmp_path / "llm").mkdir()
    (tmp_path / "llm" / "research.json").write_text(json.dumps({"flag_review": {"verdicts": [
        {"flag": "--speculative-eagle-topk", "value": "4", "claimed_evidence": "", "verdict": "rejected",
         "origin": "sglang/srt/arg_groups/fields/spec.py:30", "reason": "breaks a hook rule",
         "violates": ["topk must be 1 (sglang/srt/arg_groups/deepseek_v4_hook.py:156)"]}]}}))
    (tmp_path / "research_notes.md").write_text("# Research notes\n\n## Findings\n\n- <b>x</b> (`a.py:1`)\n")
    build_report(tmp_path)
    page = (tmp_path / "report.html").read_text()
    md = (tmp_path / "report.md").read_text()
    assert "Flags proposed by the LLM" in md and "| planner | --foo | 1 | rejected |" in md
    assert "| research | --speculative-eagle-topk | 4 | rejected |" in md and "deepseek_v4_hook.py:156" in md
    assert "<td>--mem-fraction-static</td>" in page and "<td>supported</td>" in page
    assert "LLM research notes" in page and "&lt;b&gt;x&lt;/b&gt;" in page  # notes are escaped, never markup
    assert "# Research notes" not in md


def test_a_playbook_run_has_no_llm_sections(tmp_path: Path):
    build_report(tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "LLM" not in md


def test_plan_md_escapes_an_llm_planners_reasons(tmp_path: Path):
    from agent.settings.model import Settings
    from agent.campaign.planner import render_plan_md
    from agent.campaign.preflight import Preflight
    from agent.steps.base import PlanStep

    preflight = Preflight.model_validate(json.loads((Path(__file__).parent / "golden" / "playbook-mtp-tune"
                                                     / "preflight.json").read_text()))
    why = "measure | then <script>alert(1)</script>\n| 9 | injected | row |"
    md = render_plan_md("goal\nwith a newline", [PlanStep(kind="benchmark", lane="gpu", why=why)], [], preflight, "LLM",
                        Settings())
    rows = [line for line in md.splitlines() if line.startswith("| 1 ")]
    assert len(rows) == 1 and "\\| then" in rows[0] and "| 9 |" not in md.replace("\\|", "")
    assert md.startswith("# Plan: goal with a newline\n")
    (tmp_path / "plan.md").write_text(md)
    build_report(tmp_path)
    page = (tmp_path / "report.html").read_text()
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_constraints_that_bear_on_the_recommendation_are_shown_and_the_rest_folded(tmp_path: Path):
    """On the golden run's own evidence: each constraint shown is cited by the recommendation's reasons;
    every other one is in a <details> (report.html) below them; none is lost."""
    import shutil

    golden = Path(__file__).parent / "golden" / "playbook-mtp-tune"
    for name in ("mtp.json", "evidence.md"):
        shutil.copy(golden / name, tmp_path / name)
    answer = json.loads((tmp_path / "mtp.json").read_text())
    reasons = "\n".join(answer["recommended"]["rationale"])
    build_report(tmp_path)
    page = (tmp_path / "report.html").read_text()
    shown, folded = page[page.index('id="evidence"'):].split("<details>", 1)
    shown = shown.split("Constraints on the recommended settings (", 1)[1]
    bearing = [li.split("</li>")[0] for li in shown.split("<li>")[1:]]
    assert bearing and len(bearing) == int(shown.split(" of ")[0])
    assert all(line.rsplit(" (", 1)[1].rstrip(")") in reasons for line in bearing)  # each one's citation
    assert len(bearing) + folded.split("</details>")[0].count("<li>") == len(answer["constraints"])
    assert "## Constraints (" not in (tmp_path / "report.md").read_text()  # evidence.md's own list: replaced


def test_a_damaged_mtp_json_is_named_not_shown_in_part(tmp_path: Path):
    """mtp.json is read from a run folder: one that is no MTP answer stops the report, naming the file and
    the fix (agent/run/run_files.py), and nothing is written; it is never shown in part."""
    import shutil

    import pytest

    from agent.run.run_files import RunFolderError

    shutil.copy(Path(__file__).parent / "golden" / "playbook-mtp-tune" / "evidence.md", tmp_path / "evidence.md")
    for recommended in ({"rationale": ["holds: y (a.py:3)"]}, "not an object", {"rationale": "not a list"}):
        (tmp_path / "mtp.json").write_text(json.dumps({"constraints": [
            {"rule": "x"}, 5, {"rule": "y", "origin": {"path": "a.py", "line": 3}}], "recommended": recommended}))
        with pytest.raises(RunFolderError) as raised:
            build_report(tmp_path)
        said = str(raised.value)
        assert said.startswith(f"{tmp_path / 'mtp.json'} is not an MTP answer (") and "\n" not in said
        assert f"mv {tmp_path / 'mtp.json'} {tmp_path / 'mtp.json'}.bad" in said
        assert not (tmp_path / "report.md").exists()
