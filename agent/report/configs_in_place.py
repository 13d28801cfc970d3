"""The report's "Kernel configs in place" section: configs another run installed into the folder this
run's servers read (found by preflight, tools/tuning/in_place.py), so its baseline was not SGLang's
defaults. Kernel configs in preflight.json that do not validate give no section."""
from __future__ import annotations

import time
from pathlib import Path

from pydantic import ValidationError

from agent.report.blocks import Para, Section
from agent.report.table import Table
from agent.run.run_files import RunFiles
from tools.tuning.in_place import InPlaceResult


def configs_in_place_section(run_dir: Path) -> Section | None:
    preflight = RunFiles(run_dir).preflight() or {}  # a damaged preflight.json is named (agent/run/run_files.py)
    try:
        found = InPlaceResult.model_validate(preflight.get("kernel_configs") or {})
    except ValidationError:
        return None
    others = found.by_others(run_dir.name)
    if not others:
        return None
    table = Table(["file", "installed by run", "when"], id="configs-in-place")
    for config in others:
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(config.installed_at)) if config.installed_at else "?"
        table.add(config.name, config.run, when)
    runs = sorted({c.run for c in others})
    said = Para(f"This run's baseline ran with {len(others)} kernel config(s) that earlier runs installed into "
                f"{found.config_dir}, not SGLang's defaults. To measure the defaults, undo them first: "
                + "; ".join(f"`dsv4-agent tuning uninstall {r}`" for r in runs) + ".")
    return Section("Kernel configs in place", [said, table], id="configs-in-place-section")
