"""docs/architecture.md and the README stay true where a claim can be checked: the modules and names
the architecture page cites exist, the README links every docs/*.md and stays small enough to read."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text()
README = (ROOT / "README.md").read_text()
README_MAX_BYTES = 12_288

# `agent/steps/step_table.py`, `tools/jobs/{local,ssh,slurm}`, `agent/run/trace.py:TraceWriter`, `agent/report/`
CITED = re.compile(r"\b((?:agent|tools|tests|prompts|docs)/[\w/.*<>-]*(?:\{[\w,]+\}[\w/.*<>-]*)?)(?::(\w+))?")


def _expand(path: str) -> list[str]:
    """`tools/jobs/{local,ssh,slurm}` names three paths; `agent/commands/*` and `<kind>` placeholders name a folder."""
    if match := re.search(r"\{([^}]*)\}", path):
        return [p for part in match.group(1).split(",") for p in _expand(path[:match.start()] + part + path[match.end():])]
    for wildcard in ("*", "<"):
        if wildcard in path:
            return [path[:path.index(wildcard)].rsplit("/", 1)[0]]
    return [path.rstrip(".")]


def cited() -> list[tuple[str, str | None]]:
    return [(p, name or None) for path, name in CITED.findall(ARCHITECTURE) for p in _expand(path)]


def _defines(module: Path, name: str) -> bool:
    tree = ast.parse(module.read_text())
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            return True
    return False


def test_the_architecture_page_cites_paths_and_names_that_exist():
    claims = cited()
    assert len(claims) > 40, "the pattern no longer finds the page's citations"
    missing = [p for p, _ in claims if not (ROOT / p).exists()]
    assert not missing, f"docs/architecture.md cites paths that do not exist: {sorted(set(missing))}"
    undefined = [f"{p}:{n}" for p, n in claims if n and p.endswith(".py") and not _defines(ROOT / p, n)]
    assert not undefined, f"docs/architecture.md cites names their modules do not define: {undefined}"


def test_the_architecture_page_names_no_document_outside_the_repository():
    for doc in re.findall(r"\b([A-Z][A-Z_]+\.md)\b", ARCHITECTURE):
        assert (ROOT / doc).exists() or (ROOT / "docs" / doc).exists(), f"{doc} is not in the repository"


def test_the_readme_links_every_doc():
    linked = set(re.findall(r"\]\((docs/[\w.-]+\.md)\)", README))
    docs = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert docs - linked == set(), f"README.md does not link {sorted(docs - linked)}"
    assert linked - docs == set(), f"README.md links docs that do not exist: {sorted(linked - docs)}"


def test_the_readme_is_short():
    size = len(README.encode())
    assert size <= README_MAX_BYTES, f"README.md is {size} bytes; move detail into docs/ (at most {README_MAX_BYTES})"


def test_the_readme_starts_with_the_two_commands_ci_runs():
    first_block = README.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    ci = (ROOT / ".ci" / "run").read_text()
    assert first_block[0].startswith("python3 -m venv .venv && .venv/bin/pip install")
    assert first_block[1] == ".venv/bin/python -m pytest"
    assert first_block[1] in ci


def test_the_things_that_touch_the_world_are_counted_right():
    """The page's count of what ``rt.source`` is asked is the number of methods ``RecordSource`` has."""
    words = {"three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8}
    said = re.search(r"the (\w+) things that touch the world", ARCHITECTURE)
    assert said, "docs/architecture.md no longer counts the things that touch the world"
    tree = ast.parse((ROOT / "agent" / "campaign" / "record_source.py").read_text())
    protocol = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "RecordSource")
    methods = [n.name for n in protocol.body if isinstance(n, ast.FunctionDef)]
    assert words.get(said.group(1)) == len(methods), f"RecordSource has {len(methods)} methods: {methods}"
