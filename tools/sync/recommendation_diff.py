"""Diff two evidence-engine answers (``MtpAnswer`` dumps): what the pull changed in our advice.

Works on plain dicts of the ``MtpAnswer`` shape (model, architecture, constraints
[{rule, origin{path,line}}], recommended {flags, env, rationale, origin, flag_origins} | None,
unknowns), so a previous run's ``mtp.json`` and a fresh answer compare the same way. A
constraint is identified by its rule text: the same rule cited at a moved line is not a change.
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

DiffStatus = Literal["changed", "unchanged", "no_previous", "not_available"]


class ValueChange(BaseModel):
    name: str = Field(description="Flag (e.g. --speculative-algorithm) or environment variable")
    change: Literal["added", "removed", "changed"]
    old: str | None = None
    new: str | None = None
    cite: str | None = Field(None, description="path:line of the evidence (new tree; old tree for removals)")


class ConstraintChange(BaseModel):
    rule: str
    change: Literal["added", "removed"]
    cite: str | None = None


class RecommendationDiff(BaseModel):
    status: DiffStatus
    note: str = ""
    recommended_before: bool = False
    recommended_after: bool = False
    flags: list[ValueChange] = Field(default_factory=list)
    env: list[ValueChange] = Field(default_factory=list)
    constraints: list[ConstraintChange] = Field(default_factory=list)
    unknowns_added: list[str] = Field(default_factory=list)
    unknowns_removed: list[str] = Field(default_factory=list)


def cite(origin: Any) -> str | None:
    if isinstance(origin, dict) and origin.get("path"):
        return f"{origin['path']}:{origin['line']}" if origin.get("line") else str(origin["path"])
    if isinstance(origin, str) and origin:
        return origin
    return None


def _recommended(answer: dict) -> dict:
    return answer.get("recommended") or {}


def _values(rec: dict, key: str) -> dict[str, str]:
    raw = rec.get(key) or {}
    if isinstance(raw, list):  # env may be a list of NAME=VALUE strings
        raw = dict(item.split("=", 1) if "=" in item else (item, "") for item in raw)
    return {str(k): ("" if v is None else str(v)) for k, v in raw.items()}


def _value_changes(old_rec: dict, new_rec: dict, key: str) -> list[ValueChange]:
    before, after = _values(old_rec, key), _values(new_rec, key)
    old_origins = old_rec.get("flag_origins") or {}
    new_origins = new_rec.get("flag_origins") or {}
    changes: list[ValueChange] = []
    for name in sorted(set(before) | set(after)):
        was, now = before.get(name), after.get(name)
        if was == now:
            continue
        if was is None:
            kind, where = "added", cite(new_origins.get(name)) or cite(new_rec.get("origin"))
        elif now is None:
            kind, where = "removed", cite(old_origins.get(name)) or cite(old_rec.get("origin"))
        else:
            kind, where = "changed", cite(new_origins.get(name)) or cite(new_rec.get("origin"))
        changes.append(ValueChange(name=name, change=kind, old=was, new=now, cite=where))
    return changes


def _rules(answer: dict) -> dict[str, str | None]:
    return {str(c.get("rule")): cite(c.get("origin")) for c in answer.get("constraints") or [] if c.get("rule")}


def diff_recommendations(old: dict | None, new: dict | None) -> RecommendationDiff:
    if new is None:
        return RecommendationDiff(status="not_available", note="no answer from the evidence engine on the new tree")
    if old is None:
        return RecommendationDiff(status="no_previous", recommended_after=bool(new.get("recommended")),
                                  note="no previous recommendation to compare with")
    old_rec, new_rec = _recommended(old), _recommended(new)
    old_rules, new_rules = _rules(old), _rules(new)
    constraints = ([ConstraintChange(rule=r, change="added", cite=new_rules[r]) for r in new_rules if r not in old_rules]
                   + [ConstraintChange(rule=r, change="removed", cite=old_rules[r]) for r in old_rules
                      if r not in new_rules])
    old_unknowns, new_unknowns = [str(u) for u in old.get("unknowns") or []], [str(u) for u in new.get("unknowns") or []]
    diff = RecommendationDiff(
        status="unchanged", recommended_before=bool(old_rec), recommended_after=bool(new_rec),
        flags=_value_changes(old_rec, new_rec, "flags"), env=_value_changes(old_rec, new_rec, "env"),
        constraints=constraints,
        unknowns_added=[u for u in new_unknowns if u not in old_unknowns],
        unknowns_removed=[u for u in old_unknowns if u not in new_unknowns])
    if old.get("model") and new.get("model") and old["model"] != new["model"]:
        diff.note = f"the previous answer was for {old['model']}, the new one for {new['model']}"
    if (diff.flags or diff.env or diff.constraints or diff.unknowns_added or diff.unknowns_removed
            or diff.recommended_before != diff.recommended_after):
        diff.status = "changed"
    return diff
