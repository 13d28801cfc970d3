"""What SGLang's own tests demand of a drafter's accept length, read from the tree, and a measured
accept length held against it.

SGLang's registered tests (``test/registered/**``) and its test kits (``python/sglang/test/**``)
state floors as ``self.assertGreater(avg_spec_accept_length, 2.5)``, as a named constant or class
attribute the assertion uses (``spec_decode_threshold = 3.6``), or as attributes such as
``gsm8k_accept_length_thres = 2.8`` / ``spec_accept_length_threshold=2.7``. Each floor is tied to the
``--speculative-algorithm`` and ``--speculative-num-steps`` written nearest to it in the same file
and cited ``path:line``. NEXTN is SGLang's alias of EAGLE, so they share floors. Those tests run
natural-language prompts (GSM8K-like); a benchmark on random token ids accepts less, so a point
under a floor is a warning, while a collapse to about one token per verify (the drafter adds
nothing) is called out as a drafter that is probably not loaded as intended.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from tools.scripts.models import Floor
from tools.source.confine import outside, read_bounded
from tools.source.layout import find_package

TEST_FOLDERS = ("test/registered", "python/sglang/test")  # a checkout's; a package's own test/ is added
MAX_FILES = 4000
COLLAPSE = 1.1  # at most one token in ten drafted is kept: the drafter adds nothing
ALIASES = {"NEXTN": "EAGLE"}

_NUMBER = r"\d+(?:\.\d+)?"
_ASSERT = re.compile(r"assertGreater(?:Equal)?\(\s*(?P<what>[\w.\[\]\"']*accept[\w.\[\]\"']*)\s*,\s*"
                     r"(?:self\.|cls\.)?(?P<value>[\w.]+)\s*[,)]")
_ATTRIBUTE = re.compile(rf"^\s*(?P<what>\w*accept\w*thres\w*)\s*[=:]\s*(?:[\w\[\]]+\s*=\s*)?(?P<value>{_NUMBER})\s*,?\s*(?:#.*)?$",
                        re.MULTILINE)
# a command-line argument ("--speculative-algorithm", "EAGLE" / "--speculative-num-steps=3") or a fixture's
# class attribute (speculative_algorithm: str = "EAGLE"; speculative_num_steps = 5)
_ALGORITHM = re.compile(r"(?:--speculative-algorithm(?:=|[\"']\s*,\s*[\"'])|\bspeculative_algorithm\s*(?::\s*\w+\s*)?"
                        r"=\s*[\"'])(?P<v>[A-Z0-9_]+)")
_STEPS = re.compile(r"(?:--speculative-num-steps(?:=|[\"']\s*,\s*[\"']?)|\bspeculative_num_steps\s*(?::\s*\w+\s*)?"
                    r"=\s*)(?P<v>\d+)")


class AcceptCheck(BaseModel):
    variant: str
    algorithm: str | None = None
    steps: int | None = None
    accept_length: float | None = Field(None, description="The lowest per-point accept length (median of repeats)")
    concurrency: int | None = Field(None, description="Where that lowest figure was measured")
    floor: Floor | None = None
    status: Literal["ok", "below-floor", "collapsed", "no-floor", "not-measured"] = "not-measured"
    text: str = ""


def _canonical(algorithm: str | None) -> str | None:
    return ALIASES.get(algorithm.upper(), algorithm.upper()) if algorithm else None


def _nearest(matches: list[tuple[int, str]], line: int) -> str | None:
    return min(matches, key=lambda m: (abs(m[0] - line), -m[0]))[1] if matches else None


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _file_floors(text: str, cite: str) -> list[Floor]:
    constants = {m["name"]: float(m["v"]) for m in re.finditer(rf"^\s*(?P<name>\w+)\s*=\s*(?P<v>{_NUMBER})\s*$",
                                                                text, re.MULTILINE)}
    found: dict[int, tuple[float, str]] = {}
    for m in _ASSERT.finditer(text):
        value = m["value"]
        number = float(value) if re.fullmatch(_NUMBER, value) else constants.get(value)
        if number is not None:
            found[_line(text, m.start())] = (number, m["what"])
    for m in _ATTRIBUTE.finditer(text):
        found.setdefault(_line(text, m.start("what")), (float(m["value"]), m["what"]))
    algorithms = [(_line(text, m.start()), m["v"]) for m in _ALGORITHM.finditer(text)]
    steps = [(_line(text, m.start()), m["v"]) for m in _STEPS.finditer(text)]
    out = []
    for line, (value, what) in sorted(found.items()):
        step = _nearest(steps, line)
        out.append(Floor(value=value, algorithm=_canonical(_nearest(algorithms, line)),
                         steps=int(step) if step else None, what=what, source=f"{cite}:{line}"))
    return out


def read_floors(root: Path | str | None) -> list[Floor]:
    """Every accept-length floor SGLang's tests under ``root`` state (empty without a tree)."""
    if root is None or not Path(root).is_dir():
        return []
    root = Path(root)
    floors: list[Floor] = []
    seen: set[Path] = set()
    package = find_package(root)
    for base in [root / f for f in TEST_FOLDERS] + ([package / "test"] if package else []):
        if not base.is_dir() or outside(root, base):
            continue
        for path in sorted(base.rglob("*.py"))[:MAX_FILES]:
            if path in seen or outside(root, path) or not path.is_file():
                continue
            seen.add(path)
            try:
                text = read_bounded(path).decode("utf-8", "replace")
            except (OSError, ValueError):
                continue  # unreadable or over the cap: no floor from it
            if "accept" in text:
                floors += _file_floors(text, path.relative_to(root).as_posix())
    return floors


def floors_for(floors: list[Floor], algorithm: str | None, steps: int | None) -> list[Floor]:
    """The floors stated for this drafter and step count (any step count when ``steps`` is unknown)."""
    want = _canonical(algorithm)
    return [f for f in floors if want and f.algorithm == want and (steps is None or f.steps == steps)]


def check_accept(variant: str, algorithm: str | None, steps: int | None, lowest: tuple[int, float] | None,
                 floors: list[Floor]) -> AcceptCheck:
    """The variant's lowest per-point accept length (concurrency, value) against SGLang's floors."""
    check = AcceptCheck(variant=variant, algorithm=_canonical(algorithm), steps=steps)
    mine = floors_for(floors, algorithm, steps)
    check.floor = min(mine, key=lambda f: f.value) if mine else None  # the most lenient test environment
    drafted = f"{steps} draft steps" if steps else "the automatic draft steps"
    if lowest is None:
        check.text = f"{variant}: accept length not measured (no isolated per-point figure)"
        return check
    check.concurrency, check.accept_length = lowest
    where = f"accept length {check.accept_length:.2f} with {drafted} (at concurrency {check.concurrency})"
    if check.accept_length < COLLAPSE:
        check.status = "collapsed"
        check.text = f"{variant}: {where}: the drafter is probably not loaded as intended"
    elif check.floor is not None and check.accept_length < check.floor.value:
        check.status = "below-floor"
        check.text = (f"{variant}: {where} is below {check.floor.value:g}, the floor SGLang's test demands "
                      f"({check.floor.source}; its prompts are GSM8K-like, random ids accept less)")
    elif check.floor is not None:
        check.status = "ok"
        check.text = f"{variant}: {where}, at or above SGLang's floor {check.floor.value:g} ({check.floor.source})"
    else:
        check.status = "no-floor"
        check.text = (f"{variant}: {where}; SGLang's tests state no floor for "
                      f"{check.algorithm or 'this algorithm'} with {drafted}")
    return check
