"""The research notes' contract and their checks: which citations a tool result really showed.

The model answers the research lane with ``submit_notes``: claims, each citing ``path:line``,
flag proposals, and open questions. A citation counts only when (a) a tool result recorded in
the research conversation (or the quoted evidence answer in its prompt) showed that line — a
``{"path", "line"}`` object, a ``{"path", "start", "end"}`` range (search hits, evidence origins, file reads) — and (b) the file exists in the SGLang source with that many lines. A claim left
without a counted citation is dropped, and the notes say so and why: the model's prose is never
evidence by itself.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from agent.campaign.llm.flag_guard import FlagProposal, FlagReview, review_markdown
from agent.campaign.llm.loop import SubmitTool

_CITE = re.compile(r"^\s*`?(?P<path>[^\s:`]+):(?P<start>\d+)(?:-(?P<end>\d+))?`?\s*$")
_PATH = r'"path": "(?P<path>(?:[^"\\\n]|\\.)+)",\n\s*'
_PATH_LINE = re.compile(_PATH + r'"line": (?P<line>\d+)')
_PATH_RANGE = re.compile(_PATH + r'"start": (?P<start>\d+),\n\s*"end": (?P<end>\d+)')


class Claim(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str = Field(description="One finding, in one or two sentences")
    citations: list[str] = Field(default_factory=list, description=(
        "Where a tool result showed it, as 'path:line' (path relative to the SGLang source root, "
        "exactly as the tool result wrote it)"))


class ResearchAnswer(BaseModel):
    """Submit your research notes. Call exactly once, when done."""

    model_config = ConfigDict(extra="forbid")
    claims: list[Claim] = Field(default_factory=list, description="Findings, each with citations")
    flag_proposals: list[FlagProposal] = Field(default_factory=list, description=(
        "Optional server flags you suggest, each with cited evidence; the agent checks them"))
    open_questions: list[str] = Field(default_factory=list, description="What the evidence does not settle")


SUBMIT_NOTES = SubmitTool("submit_notes", ResearchAnswer, received="notes received")


@dataclass
class Seen:
    """Lines that tool results showed: path → list of (first, last) ranges."""
    ranges: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    def add(self, path: str, start: int, end: int | None = None) -> None:
        if start >= 1:
            self.ranges.setdefault(_norm(path), []).append((start, max(start, end or start)))

    def showed(self, path: str, start: int, end: int) -> bool:
        return any(a <= start and end <= b for a, b in self.ranges.get(_norm(path), []))

    def take_text(self, text: str) -> None:
        """The ``path``/``line`` and ``path``/``start``/``end`` objects of a tool result's JSON.

        Read from the JSON's layout (one key per line, as ``render_result`` writes it), so a capped
        result still counts up to its cut; a JSON string cannot hold a raw newline, so text quoted
        from a file can never fake such an object."""
        for m in _PATH_LINE.finditer(text):
            self.add(json.loads(f'"{m["path"]}"'), int(m["line"]))
        for m in _PATH_RANGE.finditer(text):
            self.add(json.loads(f'"{m["path"]}"'), int(m["start"]), int(m["end"]))


def _norm(path: str) -> str:
    return path.strip().removeprefix("./")


def seen_in(messages: list[dict]) -> Seen:
    """What the research conversation showed: successful tool results and the prompt's quoted evidence."""
    seen = Seen()
    for message in messages:
        content = message.get("content") or ""
        role = message.get("role")
        if (role == "tool" and content.startswith("status: ok")) or (role == "user" and "untrusted data from" in content):
            seen.take_text(content)
    return seen


def _line_count(root: Path | None, path: str) -> int | None:
    if root is None:
        return None
    target = (root / path).resolve()
    if not target.is_relative_to(root.resolve()) or not target.is_file():
        return None
    return len(target.read_text(errors="replace").splitlines())


@dataclass
class CheckedClaim:
    text: str
    kept: list[str]                 # citations that a tool result showed and the source confirms
    refused: list[tuple[str, str]]  # (citation, why it does not count)


def check_claims(claims: list[Claim], seen: Seen, root: Path | None) -> list[CheckedClaim]:
    checked = []
    for claim in claims:
        kept, refused = [], []
        for cite in claim.citations:
            m = _CITE.match(cite)
            if m is None:
                refused.append((cite, "not a 'path:line' citation"))
                continue
            path, start = _norm(m["path"]), int(m["start"])
            end = int(m["end"]) if m["end"] else start
            lines = _line_count(root, path)
            if lines is None or end > lines or start > end or start < 1:
                refused.append((cite, "the SGLang source has no such file or line"))
            elif not seen.showed(path, start, end):
                refused.append((cite, "no tool result in this conversation showed that line"))
            else:
                kept.append(f"{path}:{start}" + (f"-{end}" if end != start else ""))
        checked.append(CheckedClaim(claim.text.strip(), kept, refused))
    return checked


def _one_line(text: str) -> str:
    return " ".join(text.split())


def notes_markdown(who: str, checked: list[CheckedClaim], review: FlagReview, questions: list[str],
                   ended: str) -> str:
    kept = [c for c in checked if c.kept]
    dropped = [c for c in checked if not c.kept]
    lines = ["# Research notes", "", f"Written by {who} in the research lane ({ended}). Every claim cites "
             "`path:line` that a tool result in `llm/research.jsonl` showed and the SGLang source confirms; "
             "claims without such a citation are dropped below. The model changed no flag itself: its "
             "proposals went through the flag guard, and only accepted ones were passed to write_scripts.", "", "## Findings", ""]
    lines += [f"- {_one_line(c.text)} ({', '.join(f'`{k}`' for k in c.kept)})" for c in kept] or ["- none"]
    partly = [(c, r) for c in kept for r in c.refused]
    if partly:
        lines += ["", "Citations not counted on kept claims:", ""]
        lines += [f"- `{cite[:120]}` on \"{_one_line(c.text)[:80]}\": {why}" for c, (cite, why) in partly]
    lines += ["", "## Dropped claims", ""]
    if dropped:
        lines.append(f"{len(dropped)} claim(s) dropped: no citation that a tool result showed.")
        lines.append("")
        for c in dropped:
            why = "; ".join(f"`{cite[:120]}`: {reason}" for cite, reason in c.refused) or "no citation given"
            lines.append(f"- \"{_one_line(c.text)[:200]}\" — {why}")
    else:
        lines.append("- none")
    lines += ["", "## Open questions", ""] + ([f"- {_one_line(q)}" for q in questions] or ["- none"])
    lines += ["", review_markdown(review).replace("## Extra flags", "## Flags", 1)]
    return "\n".join(lines).rstrip() + "\n"
