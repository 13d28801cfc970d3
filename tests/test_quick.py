"""agent/commands/quick.py answers the read-only questions without the command-line framework: the same output,
errors and exit codes as the whole command line (agent/commands/main.py), and only what they read imported."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_helpers import AGENT, clean_env
from tests.slowdown import limit

GOLDEN = Path(__file__).parent / "golden" / "playbook-mtp-tune"
WHOLE = [sys.executable, "-c", "import sys; from agent.commands.main import main; sys.argv[0] = 'dsv4-agent'; main()"]
FORMS = [["--version"], ["-V"], ["-h"], ["--help"], ["status", "golden"], ["status", "golden", "--json"],
         ["status", "--runs-dir=runs", "latest"], ["runs"], ["runs", "--json"], ["jobs", "golden"],
         ["jobs", "golden", "--json"], ["status", "ghost"], ["jobs", "ghost", "--runs-dir", "runs"],
         ["runs", "--runs-dir", "nowhere"], ["run", "-h"], ["tuning", "plan", "-h"],
         ["runs", "--clean", "--dry-run", "--older-than", "1s"], ["jobs", "golden", "--stop", "nojob"],
         ["jobs", "golden", "--lines", "0", "--logs", "x"], ["status", "golden", "--bogus"], ["jobs", "--", "golden"]]


@pytest.fixture
def work(tmp_path: Path) -> Path:
    shutil.copytree(GOLDEN, tmp_path / "runs" / "golden")
    return tmp_path


def _run(argv: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=limit(60))


@pytest.mark.parametrize("form", FORMS, ids=" ".join)
def test_a_quick_answer_is_the_whole_command_lines(work, tmp_path, form):
    env = clean_env({"DSV4_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "90"})
    quick, whole = _run([AGENT, *form], work, env), _run([*WHOLE, *form], work, env)
    if form == ["runs", "--json"]:  # a run's age goes on between the two
        quick.stdout, whole.stdout = ([{**r, "age_s": None} for r in json.loads(o)] for o in (quick.stdout, whole.stdout))
    assert (quick.returncode, quick.stdout, quick.stderr) == (whole.returncode, whole.stdout, whole.stderr)
    assert "Traceback" not in quick.stderr


def _command_paths(command, ctx, path=()):
    yield path
    for name in command.list_commands(ctx) if hasattr(command, "list_commands") else []:
        yield from _command_paths(command.get_command(ctx, name), ctx, (*path, name))


def test_every_command_of_the_whole_command_line_has_its_help_answered_quickly():
    import typer

    from agent.commands.main import app
    from agent.commands.command_table import HELP_PATHS

    command = typer.main.get_command(app)
    with command.make_context("dsv4-agent", [], resilient_parsing=True) as ctx:
        assert set(_command_paths(command, ctx)) == HELP_PATHS


@pytest.mark.parametrize("path", sorted(__import__("agent.commands.command_table").commands.command_table.HELP_PATHS), ids=" ".join)
def test_each_commands_help_is_the_whole_command_lines(work, tmp_path, path):
    env = clean_env({"DSV4_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "90"})
    for _first_and_kept in range(2):
        quick, whole = _run([AGENT, *path, "--help"], work, env), _run([*WHOLE, *path, "--help"], work, env)
        assert (quick.returncode, quick.stdout, quick.stderr) == (whole.returncode, whole.stdout, whole.stderr)
        assert quick.returncode == 0 and "Usage: dsv4-agent" in quick.stdout


def test_help_is_rendered_from_no_source_the_cache_does_not_watch(tmp_path):
    probe = ("import json, sys\nfrom agent.commands import command_table, quick\n"
             "for path in sorted(command_table.HELP_PATHS):\n    quick._render_help(path)\n"
             "print(json.dumps(sorted(m.__file__ for m in list(sys.modules.values()) if (getattr(m, '__file__', None) "
             "or '').startswith(tuple(sys.argv[1:])))))\n")
    repo = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", probe, str(repo / "agent" / ""), str(repo / "tools" / "")], cwd=tmp_path, capture_output=True, text=True,
                          timeout=limit(120))
    assert done.returncode == 0, done.stderr
    from agent.commands import quick

    watched = {Path(source).resolve() for source in quick.help_sources()}
    read = {Path(f).resolve() for f in json.loads(done.stdout)}
    assert read and read <= watched, sorted(map(str, read - watched))


def test_help_is_kept_per_terminal_width_and_matches_each(work, tmp_path):
    cache = tmp_path / "cache"
    for columns in ("60", "120", "60"):
        env = clean_env({"DSV4_CACHE_DIR": str(cache), "COLUMNS": columns})
        assert _run([AGENT, "-h"], work, env).stdout == _run([*WHOLE, "-h"], work, env).stdout
    assert len(list((cache / "help").glob("*.txt"))) == 2


def test_a_changed_command_source_renders_help_anew(tmp_path, monkeypatch):
    from agent.commands import quick

    monkeypatch.setenv("DSV4_CACHE_DIR", str(tmp_path))
    first = quick.tool_help()
    (kept,) = (tmp_path / "help").glob("*.txt")
    kept.write_text("stale\n")
    assert quick.tool_help() == "stale\n"  # the same sources: the kept text
    source = Path(quick.__file__).parent / "__init__.py"
    stat = source.stat()
    try:
        import os

        os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
        assert quick.tool_help() == first
    finally:
        os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))


@pytest.mark.parametrize("form", [["--version"], ["-h"], ["status", "golden"], ["runs"], ["jobs", "golden"],
                                  ["run", "--help"], ["tuning", "prove", "-h"]], ids=" ".join)
def test_a_read_only_answer_imports_neither_typer_nor_pydantic(work, tmp_path, form):
    env = clean_env({"DSV4_CACHE_DIR": str(tmp_path / "cache")})
    _run([AGENT, *form], work, env)  # a help is kept now
    probe = ("import atexit, json, sys\n"
             "atexit.register(lambda: print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('typer', 'pydantic', 'langgraph', 'openai', 'matplotlib', 'rich'))), file=sys.stderr))\n"
             f"sys.argv = ['dsv4-agent', *{form!r}]\nfrom agent.commands.cli import main\nmain()\n")
    done = _run([sys.executable, "-c", probe], work, env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stderr.strip().splitlines()[-1]) == []


@pytest.mark.no_replay("a line that is no event is put in the trace by hand")
def test_status_reads_a_trace_without_the_schema_and_names_what_is_wrong(work, tmp_path):
    trace = work / "runs" / "golden" / "trace.jsonl"
    lines = trace.read_text().splitlines(keepends=True)
    trace.write_text("".join([*lines[:3], '{"a": 1}\n', *lines[3:]]))
    env = clean_env({"DSV4_CACHE_DIR": str(tmp_path / "cache")})
    done = _run([AGENT, "status", "golden"], work, env)
    assert done.returncode == 0 and "trace: unreadable:" in done.stdout and "line 4" in done.stdout, done.stdout
    assert "not a trace event (no v, seq, type)" in done.stdout


@pytest.mark.parametrize("words", sorted(__import__("agent.commands.command_table").commands.command_table.WITHOUT_TYPER),
                         ids=" ".join)
def test_a_quick_commands_options_are_read_from_its_function(words):
    # Adding an option to status, runs or jobs is one parameter on the function: the quick parser reads it
    # there (or, for a number, leaves the words to the whole command line).
    from agent.commands.command_table import command_function
    from agent.commands.params import Arg, Opt, declared
    from agent.commands.quick import parse

    params = declared(command_function(words))
    argv, expected = [], {}
    for param, kind, mark in params:
        if isinstance(mark, Arg):
            argv.append(f"given-{param.name}")
            expected[param.name] = f"given-{param.name}"
        elif isinstance(mark, Opt) and kind is bool:
            argv.append(mark.decls[0])
            expected[param.name] = True
        elif isinstance(mark, Opt) and kind in (str, list[str]):
            argv += [mark.decls[0], "v"]
            expected[param.name] = "v" if kind is str else ["v"]
        elif isinstance(mark, Opt):
            assert parse([*argv, mark.decls[0], "1"], params) is None  # a number: click checks it
    assert len(expected) > 2 and parse(argv, params) == expected
