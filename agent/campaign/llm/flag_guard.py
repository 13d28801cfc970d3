"""Injection defence for server flags the model proposes.

The model reads repository text, and repository text can say "add --foo". So no proposed flag
is trusted because the model cites something: each one is looked up in the SGLang source's own
server-argument definitions, read statically by ``tools/source/fields.py`` (the same reader the
Spec catalog uses: typed fields in ``srt/arg_groups/fields/*.py`` and ``add_argument`` calls in
``srt/server_args.py`` for older trees). A flag defined there is *supported*, cited to its definition
(``path:line``). Anything else is reported in ``flag_review.json`` and plan.md and is NOT
passed on, unless the user gave ``--accept-unsupported-flags`` (origin ``user-accepted``).

A defined flag can still be wrong for the model: the evidence engine's constraints
(``tools/constraints/extract.py``, read from SGLang's argument hooks, e.g. "DeepSeek-V4: only EAGLE or
DSPARK, topk 1") are checked against the proposed values for the model's architecture as preflight decided
it (``tools/checkpoint/architecture.py``: config.json, else --arch, else the SGLang tree), with SGLang's algorithm
aliases resolved first. The proposal is checked as one set, as written, by the same judge the
evidence engine uses (``tools/mtp/pick.py``): a rule applies only where its condition holds. A
flag that breaks an applicable rule is rejected with the rule's citation, under the same
acceptance option.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from tools.checkpoint.facts import CheckpointFacts
from tools.base import ToolError
from tools.markdown import markdown_table
from tools.constraints.extract import Rule
from tools.checkpoint.architecture import Architecture, DecidedBy, decide_architecture
from tools.mtp.pick import ALGO, Judge
from tools.mtp.settings import hook_rules
from tools.source.fields import FieldCatalog, field_flag, read_fields
from tools.scripts.trust import held_back

_FLAG = re.compile(r"^--[a-z0-9][a-z0-9-]*$")
# The scripts set these themselves (see tools/scripts/models.RESERVED_FLAGS).
RESERVED = frozenset({"--model-path", "--model", "--host", "--port", "--tp", "--tp-size"})


class FlagProposal(BaseModel):
    flag: str = Field(description="Server flag, e.g. '--mem-fraction-static'")
    value: str = Field("", description="Its value as a string; '' for a switch")
    evidence: str = Field("", description="Where the SGLang source defines or uses it, as 'path:line'")
    why: str = Field("", description="Why this flag serves the goal")


class FlagVerdict(BaseModel):
    flag: str
    value: str
    claimed_evidence: str = Field(description="What the model cited (not trusted)")
    verdict: Literal["supported", "accepted_by_user", "rejected"]
    origin: str | None = Field(description="Verified 'path:line' of the definition, 'user-accepted', or None")
    reason: str
    violates: list[str] = Field(default_factory=list,
                                description="Constraints from SGLang's hooks this value breaks, each with 'path:line'")


class FlagReview(BaseModel):
    verdicts: list[FlagVerdict] = Field(default_factory=list)
    catalog_size: int = Field(0, description="Server flags found in the SGLang source")
    catalog_from: list[str] = Field(default_factory=list, description="Files the flags were read from")
    architecture: str | None = Field(None, description="Architecture the constraints were checked for")
    architecture_decided_by: DecidedBy | None = Field(None, description="Which source decided it (tools/checkpoint/architecture.py)")
    constraints: str = Field("", description="How the values were checked against SGLang's hook constraints")

    @property
    def accepted(self) -> dict[str, dict[str, str]]:
        """flag → {value, origin}: what the write_scripts step receives as ``extra_flags``."""
        return {v.flag: {"value": v.value, "origin": v.origin or ""} for v in self.verdicts
                if v.verdict != "rejected"}

    @property
    def rejected(self) -> list[FlagVerdict]:
        return [v for v in self.verdicts if v.verdict == "rejected"]


def server_flag_catalog(package_dir: Path | None, root: Path | None) -> tuple[dict[str, str], list[str]]:
    """flag → 'path:line' of its definition, and the files read. Empty when there is no source."""
    if package_dir is None or root is None:
        return {}, []
    fields = read_fields(package_dir, root)
    return {flag: f.origin.cite() for flag, f in fields.by_flag().items()}, fields.files


def _verdict(p: FlagProposal, catalog: dict[str, str], accept_unsupported: bool, seen: set[str]) -> FlagVerdict:
    def rejected(reason: str) -> FlagVerdict:
        return FlagVerdict(flag=p.flag, value=p.value, claimed_evidence=p.evidence, verdict="rejected",
                           origin=None, reason=reason)

    if not _FLAG.match(p.flag):
        return rejected("not a server flag name (expected --lower-case-words)")
    if p.flag in RESERVED:
        return rejected("set by the scripts themselves; the campaign decides it")
    if any(c in p.value for c in "\x00\n\r"):
        return rejected("the value contains a line break or NUL byte")
    if p.flag in seen:
        return rejected("proposed twice; the first proposal stands")
    seen.add(p.flag)
    origin = catalog.get(p.flag)
    if origin is not None:
        return FlagVerdict(flag=p.flag, value=p.value, claimed_evidence=p.evidence, verdict="supported",
                           origin=origin, reason=f"defined by SGLang at {origin}")
    if accept_unsupported:
        return FlagVerdict(flag=p.flag, value=p.value, claimed_evidence=p.evidence, verdict="accepted_by_user",
                           origin="user-accepted", reason="no definition found in the SGLang source; "
                           "passed on because --accept-unsupported-flags was given")
    cited = f"; the cited {p.evidence[:120]!r} is not a definition" if p.evidence else ""
    return rejected(f"no definition of {p.flag} in the SGLang source's server arguments{cited}; not written "
                    "into scripts (pass --accept-unsupported-flags to override)")


def _violations(flags: dict[str, str], rules: list[Rule], arch: str | None, fields: FieldCatalog,
                checkpoint: CheckpointFacts | None = None) -> dict[str, list[str]]:
    """flag → the applicable rules its value breaks ('what (rule at path:line)'); SGLang's aliases are
    resolved first (each only where its condition holds), as the server would."""
    judge = Judge(rules, arch, fields, checkpoint)
    checked = dict(flags)
    judge.resolve_alias(checked, {}, [], [])
    found: dict[str, list[str]] = {}
    drafter = judge.drafter_problem(checked)
    if drafter:  # a drafter the checkpoint in hand does not carry
        found.setdefault(ALGO, []).append(drafter)
    for problem, rule in judge.check(checked).problems:
        if rule.kind == "allowed_algorithms":
            named = [ALGO]
        elif rule.kind == "all_or_none":
            named = [field_flag(f) for f in rule.values if field_flag(f) in flags]
        else:
            named = [field_flag(rule.field)] if rule.field else [f for f in flags if f.startswith("--speculative-")]
        for name in named:
            found.setdefault(name, []).append(f"{problem}: {rule.rule} ({rule.origin.cite()})")
    return found


def _constraints(root: Path, decided: Architecture) -> tuple[list[Rule], str]:
    """The hook rules, and a line saying how (or why not) values were checked."""
    try:
        rules = hook_rules(root)  # read as the campaign's MTP settings read them (tools/mtp/settings.py)
    except ToolError as err:
        return [], f"values not checked against constraints: {err}"
    if not rules:
        return [], "values not checked against constraints: SGLang's argument hooks hold no rule we can read"
    scope = f"architecture {decided.name} ({decided.how()})" if decided.name else \
        "no known architecture (only general rules apply)"
    return rules, f"values checked against {len(rules)} rules from SGLang's argument hooks for {scope}"


def _constrained(v: FlagVerdict, problems: list[str], accept_unsupported: bool) -> FlagVerdict:
    if not problems or v.verdict == "rejected":
        return v
    if accept_unsupported:
        return v.model_copy(update={"verdict": "accepted_by_user", "violates": problems, "reason": (
            f"breaks {'; '.join(problems)}; passed on because --accept-unsupported-flags was given")})
    return v.model_copy(update={"verdict": "rejected", "origin": None, "violates": problems, "reason": (
        f"{v.value!r} breaks {'; '.join(problems)}; not written into scripts "
        "(pass --accept-unsupported-flags to override)")})


def _trusted(v: FlagVerdict, allowed: list[str]) -> FlagVerdict:
    """A flag that widens trust (tools/scripts/trust.py) passes only with the user's --allow-flag,
    whatever the evidence or --accept-unsupported-flags say."""
    why = held_back(v.flag, v.value, allowed) if v.verdict != "rejected" else ""
    return v.model_copy(update={"verdict": "rejected", "origin": None, "reason": why}) if why else v


def review_flags(proposals: list[FlagProposal], package_dir: Path | None, root: Path | None,
                 accept_unsupported: bool, model: str = "", architecture: Architecture | None = None,
                 allowed_trust: list[str] = (), checkpoint: CheckpointFacts | None = None) -> FlagReview:
    """``architecture`` is the campaign's decision (preflight); None: decided here by the same order, from
    the model id alone (the guard used on its own)."""
    fields = read_fields(package_dir, root) if package_dir is not None and root is not None else FieldCatalog()
    catalog = {flag: f.origin.cite() for flag, f in fields.by_flag().items()}
    read = fields.files
    seen: set[str] = set()
    verdicts = [_trusted(_verdict(p, catalog, accept_unsupported, seen), list(allowed_trust)) for p in proposals]
    review = FlagReview(verdicts=verdicts, catalog_size=len(catalog), catalog_from=read,
                        architecture=architecture.name if architecture else None,
                        architecture_decided_by=architecture.decided_by if architecture else None)
    proposed = {v.flag: v.value for v in verdicts if v.verdict != "rejected"}
    if not proposed:
        return review
    if package_dir is None or root is None:
        review.constraints = "values not checked against constraints: no SGLang source"
        return review
    decided = architecture or decide_architecture(model, None, None, str(root), str(package_dir))
    review.architecture, review.architecture_decided_by = decided.name, decided.decided_by
    rules, review.constraints = _constraints(root, decided)
    problems = _violations(proposed, rules, review.architecture, fields, checkpoint)
    review.verdicts = [_constrained(v, problems.get(v.flag, []), accept_unsupported) for v in verdicts]
    return review


def review_markdown(review: FlagReview) -> str:
    if not review.verdicts:
        return "## Extra flags\n\nThe model proposed no extra server flags.\n"
    lines = ["## Extra flags proposed by the model", "",
             f"Checked against {review.catalog_size} server flags defined in the SGLang source"
             + (f"; {review.constraints}." if review.constraints else "."), "",
             markdown_table(["flag", "value", "verdict", "evidence", "reason"],
                            [[v.flag, v.value, v.verdict, v.origin or "none", v.reason] for v in review.verdicts])]
    if review.rejected:
        lines += ["", f"{len(review.rejected)} flag(s) rejected and NOT written into any script."]
    return "\n".join(lines) + "\n"
