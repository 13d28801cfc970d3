"""The report's sections that are not the measurement: plan, steps in the order they ran, the MTP
evidence with citations, the LLM's flag review and research notes, the tuning proof, the timeline,
failed points. Each reads the run folder (or takes data a tool returned) and returns a Section."""
from __future__ import annotations

import re
from pathlib import Path

from agent.report.blocks import Code, Details, Items, Markdown, Para, Section
from agent.report.table import Table
from agent.run.run_files import RunFiles, step_file
from agent.run.step_outcome import StepOutcome
from tools.tuning.prove import RunProof

MAX_TEXT_CHARS = 20000
EVIDENCE_LINES = 10


def _capped(text: str, limit: int = MAX_TEXT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n\n[cut: {len(text) - limit} more characters; limit {limit}]"


def plan_section(run_dir: Path) -> Section | None:
    path = run_dir / "plan.md"
    if not path.exists():
        return None
    text = path.read_text(errors="replace").split("\n", 1)
    body = text[1] if text[0].startswith("# ") and len(text) > 1 else "\n".join(text)  # its title is the page's
    return Section("Plan", [Markdown(_capped(body))], id="plan")


def steps_in_order(run_dir: Path) -> list[StepOutcome]:
    """Step outcomes in the order they finished (each writes steps/<kind>.json when it ends)."""
    run = RunFiles(run_dir)
    found = [((run_dir / step_file(kind)).stat().st_mtime_ns, kind, outcome)
             for kind, outcome in run.step_outcomes().items()]
    return [outcome for _t, _k, outcome in sorted(found, key=lambda f: (f[0], f[1]))]


def steps_section(run_dir: Path) -> Section | None:
    outcomes = steps_in_order(run_dir)
    if not outcomes:
        return None
    table = Table(["#", "step", "status", "summary"], id="steps")
    for number, o in enumerate(outcomes, 1):
        table.add(number, o.kind, o.status, o.summary)
    return Section("Steps (in the order they ran)", [table], id="steps-section")


def evidence_section(run_dir: Path) -> Section | None:
    path = run_dir / "evidence.md"
    if not path.exists():
        return None
    text = path.read_text(errors="replace").split("\n", 1)
    body = text[1] if len(text) > 1 else text[0]  # its title is the section's; its headings go one level down
    answer = _answer(run_dir)
    listed = _CONSTRAINTS.search(body)
    if answer is not None and listed:  # the list comes from mtp.json instead: the few that bear first
        after = body.find("\n## ", listed.end())
        body = body[:listed.start()] + (body[after + 1:] if after >= 0 else "")
    body = "\n".join("#" + line if line.startswith("#") else line for line in body.splitlines())
    blocks: list = [Markdown(_capped(body))]
    if missing := _no_evidence(run_dir):  # said first: nothing MTP was measured, what was searched, the fix
        blocks.insert(0, Para(f"No MTP evidence: {missing}"))
    return Section("MTP evidence (with citations)", blocks + (_constraints(answer) if answer else []), id="evidence")


_CONSTRAINTS = re.compile(r"^## Constraints \(\d+\)[ \t]*$", re.M)


def _no_evidence(run_dir: Path) -> str | None:
    step = RunFiles(run_dir).step_outcome("infer_mtp")
    return ((step.data if step else {}).get("settings") or {}).get("no_evidence")


def _answer(run_dir: Path) -> dict | None:
    answer = RunFiles(run_dir).mtp_answer()
    return answer.model_dump(mode="json") if answer is not None else None


def _constraints(answer: dict) -> list:
    """The constraints that bear on the recommended settings (the rules the choice passed or was made
    by: the recommendation's reasons cite them), shown; every other one in scope folded away."""
    recommended = answer.get("recommended") if isinstance(answer.get("recommended"), dict) else {}
    reasons = [str(r) for r in recommended.get("rationale") or [] if isinstance(recommended.get("rationale"), list)]
    cited = [(c, f"{c['origin'].get('path')}:{c['origin'].get('line')}") for c in answer["constraints"]
             if isinstance(c, dict) and isinstance(c.get("rule"), str) and isinstance(c.get("origin"), dict)]
    bears = [(c, where) for c, where in cited
             if any(c["rule"] in line or re.search(re.escape(where) + r"(?!\d)", line) for line in reasons)]
    rest = [pair for pair in cited if pair not in bears]
    total = len(cited)
    head = (f"### Constraints on the recommended settings ({len(bears)} of {total} in scope)" if reasons else
            f"### Constraints ({total} in scope; nothing was recommended, so none bears on a choice)")
    blocks: list = [Markdown(head)]
    if bears:
        blocks.append(Items([f"{c['rule']} ({where})" for c, where in bears]))
    if rest:
        blocks.append(Details(f"{'The other ' if bears else ''}{len(rest)} constraint(s) in scope for "
                              f"{answer.get('architecture') or 'this model'}: rules of SGLang's hooks for settings "
                              "these flags do not make", [Items([f"{c['rule']} ({where})" for c, where in rest])]))
    return blocks


def flag_review_section(run_dir: Path) -> Section | None:
    """Every server flag an LLM proposed (planner and research), with the guard's verdict."""
    verdicts = []
    run = RunFiles(run_dir)
    for source, relative in (("planner", "flag_review.json"), ("research", "llm/research.json")):
        if (data := run.json_object(relative)) is not None:
            review = data.get("flag_review", data) if source == "research" else data
            verdicts += [(source, v) for v in review.get("verdicts", [])]
    if not verdicts:
        return None
    table = Table(["from", "flag", "value", "verdict", "evidence", "why"], id="flag-review")
    for src, v in verdicts:
        table.add(src, v["flag"], v.get("value", ""), v["verdict"], v.get("origin") or "",
                  "; ".join(v.get("violates", [])) or v.get("reason", ""))
    note = "Rejected flags were not written into any script (see `--accept-unsupported-flags`)."
    return Section("Flags proposed by the LLM", [table, Para(note)], id="flags")


def research_notes_section(run_dir: Path) -> Section | None:
    path = run_dir / "research_notes.md"
    if not path.exists():
        return None
    text = path.read_text().split("\n", 1)[-1].strip()  # the file's own title is the section's
    return Section("LLM research notes", [Markdown(_capped(text))], id="research")


def proof_section(proof: RunProof, run_dir: Path) -> Section:
    """The tuning proof a tool returned, for the reader."""
    table = Table(["config file", "loaded by"], id="kernel-configs")
    for target in proof.targets:
        table.add(Path(target).name, ", ".join(proof.loaded_by[target]) or "NOT LOADED")
    cut = len(proof.evidence) - EVIDENCE_LINES
    shown = proof.evidence[:EVIDENCE_LINES] + (
        [f"... {cut} more evidence lines cut (limit {EVIDENCE_LINES})"] if cut > 0 else [])
    blocks = [Para(proof.headline()),
              Para(f"Installed into {proof.config_dir} (manifest state {proof.manifest_state}; undo: "
                   f"dsv4-agent tuning uninstall {run_dir})."), table,
              Items([s.line(len(proof.targets)) for s in proof.servers])]
    if shown:
        blocks += [Para("Evidence from the server logs:"), Code("\n".join(shown))]
    return Section("Kernel configs", blocks, id="tuning-proof")


def failures_section(failures: list[dict], problems: list[str]) -> Section | None:
    if not failures and not problems:
        return None
    items = [f"{f.get('variant')} at concurrency {f.get('concurrency')}: "
             f"{str(f.get('reason', '')).splitlines()[0] if f.get('reason') else '?'} (log: {f.get('log', '')})"
             for f in failures] + problems
    return Section("Failed points and skipped lines", [Items(items)], id="failures")
