"""Read a tree's MTP settings (``tools.mtp.settings``, as a campaign reads them), or say plainly why it could not."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from tools.base import ToolError
from tools.mtp.settings import MtpSettings, MtpSettingsArgs, mtp_settings

EvidenceStatus = Literal["ok", "failed", "skipped"]


class EvidenceRun(BaseModel):
    status: EvidenceStatus
    source: str = Field("", description="What was read: a tree at a commit, or a previous run's mtp.json")
    reason: str = ""
    answer: dict[str, Any] | None = Field(None, description="The MtpAnswer as plain data")
    settings: MtpSettings | None = Field(None, exclude=True, description="The judged settings (this process only)")


def run_evidence(args: MtpSettingsArgs, source: str) -> EvidenceRun:
    try:
        found = mtp_settings(args)
    except ToolError as err:
        return EvidenceRun(status="failed", source=source, reason=str(err))
    return EvidenceRun(status="ok", source=source, answer=found.answer.model_dump(mode="json"), settings=found)


def load_answer(path: str | Path) -> EvidenceRun:
    """A previous answer from an ``mtp.json`` (the answer itself, or wrapped under 'answer')."""
    where = Path(path)
    try:
        data = json.loads(where.read_text())
    except FileNotFoundError:
        raise ToolError(f"previous answer {where} does not exist; pass an existing mtp.json or leave it out") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ToolError(f"previous answer {where} is not JSON ({err}); pass another mtp.json or leave it out") from None
    if isinstance(data, dict) and isinstance(data.get("answer"), dict):
        data = data["answer"]
    if not isinstance(data, dict) or not ({"recommended", "constraints"} & set(data)):
        raise ToolError(f"previous answer {where} does not look like an MTP answer (no 'recommended' or "
                        "'constraints'); pass the mtp.json written by an infer_mtp step")
    return EvidenceRun(status="ok", source=str(where), answer=data)
