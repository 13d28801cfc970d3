"""The settings are one table (agent/settings/model.py:Settings): every option that sets a setting is built
from its field, each default is written once and shown in help from the field, one option name
means one thing across commands, and an old spelling gets a "did you mean" (exit 2)."""
from __future__ import annotations

import re

import pytest
from tests.messages import assert_refusal
from typer.main import get_command

from agent.commands.cli import app
from agent.commands.option_render import TABLE, render, shown_default
from agent.commands.options import OPTIONS
from agent.settings.model import Settings
from tests.cli_helpers import run_cli

BRACKETED = re.compile(r"\[([^\]]+)\]")


def _commands() -> dict:
    """Every command by its path after the program, e.g. 'tuning plan'."""
    found = {}

    def walk(command, path: str) -> None:
        found[path] = command
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}".strip())

    walk(get_command(app), "")
    return found


def _options():
    for path, command in _commands().items():
        for param in command.params:
            if param.param_type_name == "option":
                yield path, param


def test_the_generated_option_table_matches_the_fields():
    assert TABLE.read_text() == render(), "regenerate it: python -m agent.commands.option_render"


def test_every_setting_option_is_a_field_with_its_flag_and_help():
    fields = Settings.model_fields
    for name, option in OPTIONS.items():
        extra = fields[name].json_schema_extra
        assert option.flag == extra["flag"] and option.metavar == extra["metavar"] and option.panel == extra["group"]
        assert option.help.startswith(fields[name].description[:-1])
    flagged = {name for name, f in fields.items() if f.json_schema_extra["flag"]}
    assert flagged == set(OPTIONS)


def test_no_field_writes_a_default_into_its_help():
    shown = {shown_default(f) for f in Settings.model_fields.values() if f.json_schema_extra["flag"]} - {None}
    for name, field in Settings.model_fields.items():
        written = set(BRACKETED.findall(field.description)) & shown
        assert not written, f"{name}: {written} written into the help; it shows the default from the field itself"


def test_a_default_in_any_help_comes_from_the_option_that_has_it():
    defaults = {name: shown_default(f) for name, f in Settings.model_fields.items() if f.json_schema_extra["flag"]}
    defaults = {name: shown for name, shown in defaults.items() if shown}
    by_flag = {o.flag.split("/")[0]: o.field for o in OPTIONS.values()}
    for path, param in _options():
        shown = BRACKETED.findall(param.help or "")
        field = by_flag.get(param.opts[0])
        for text in shown:
            if field is not None and defaults.get(field) == text:
                continue  # its own field's default, shown from the field
            copies = [name for name, value in defaults.items() if value == text and name != field]
            assert not copies, f"{path} {param.opts[0]}: [{text}] is the default of {copies}, written again"
        if param.default not in (None, False, ()) and not isinstance(param.default, bool):
            literal = f"{param.default:g}" if isinstance(param.default, float) else str(param.default)
            assert f"[{literal}]" not in (param.help or ""), \
                f"{path} {param.opts[0]}: its default is written into its help too (typer shows it)"


def test_one_meaning_per_option_name():
    for path, param in _options():
        if "--gpus" in param.opts:
            assert param.metavar == OPTIONS["gpus"].metavar and param.help.startswith("GPU indices"), path
        if "--shape" in param.opts:
            pytest.fail(f"{path} spells it --shape; it is --shapes everywhere")


@pytest.mark.parametrize("args, new", [
    (["mtp", "--model", "m", "--gpus", "8"], "--gpu-count"),
    (["mtp", "--model", "m", "--version", "0.5.23"], "--sglang-version"),
    (["tuning", "plan", "--shape", "4096,7168"], "--shapes"),
    (["tuning", "plan", "--shapes", "4096,7168", "--gpus=4"], "--gpu-count"),
    (["tuning", "shapes", "--shape", "4096,7168"], "--shapes"),
])
def test_an_old_spelling_gets_a_did_you_mean_and_exit_2(tmp_path, args, new):
    done = run_cli(*args, cwd=tmp_path)
    old = [arg.split("=")[0] for arg in args if arg.startswith("--")][-1]
    assert_refusal(done, old, new)
    assert not list(tmp_path.iterdir())  # nothing written


def test_what_a_setting_is_is_read_off_its_field():
    """The marks on the fields (agent/settings/setting_field.py) are the only lists of what settings are."""
    from agent.settings.recorded import host_path_options

    assert host_path_options(Settings) == {"sglang_src": "--sglang DIR", "model_path": "--model-path DIR",
                                           "tokenizer": "--tokenizer DIR", "accuracy_data": "--accuracy-data FILE"}
    assert set(Settings.model_fields) - set(Settings.marked("compared")) == {"runs_dir", "llm_api_key"}
    assert {"sglang_python", "executor", "ssh_options", "llm_base_url", "llm_api_key", "allow_flags",
            "server_env"} <= set(Settings.marked("user_only"))
    ranks = list(Settings.marked("host_path").values())
    assert len(set(ranks)) == len(ranks), "two host paths share a rank: the order a refusal asks for them is unclear"
