"""An example of every command, shown under ``Examples:`` in its ``-h`` (tests/test_cli_help.py parses
each one with the command line itself, so none can drift from the options it names)."""
from __future__ import annotations

# command path after the tool's name -> example command lines
EXAMPLES: dict[str, list[str]] = {
    "": ['dsv4-agent "enable MTP and tune kernels"', "dsv4-agent status latest"],
    "run": ['dsv4-agent run "enable MTP" --model deepseek-ai/DeepSeek-V4-Flash --concurrency 1,8,16',
            'dsv4-agent "tune kernels" --gpus 0,1 --plan-only'],
    "resume": ["dsv4-agent resume latest",
               "dsv4-agent resume latest --executor ssh://gpu-host --sglang-python /opt/sglang/bin/python"],
    "bundle": ["dsv4-agent bundle latest -o /tmp/"],
    "status": ["dsv4-agent status latest", "dsv4-agent status latest --json"],
    "jobs": ["dsv4-agent jobs latest", "dsv4-agent jobs latest --logs serve-mtp --lines 100",
             "dsv4-agent jobs latest --stop all"],
    "runs": ["dsv4-agent runs", "dsv4-agent runs --clean --older-than 14d --dry-run"],
    "report": ["dsv4-agent report latest", "dsv4-agent report latest --compare 20261201T090000Z-enable-mtp"],
    "compare": ["dsv4-agent compare 20261201T090000Z-enable-mtp latest"],
    "replay": ["dsv4-agent replay latest --timeline", "dsv4-agent replay latest --rerun --tolerance 3"],
    "mtp": ["dsv4-agent mtp --model deepseek-ai/DeepSeek-V4-Flash --sglang ~/sglang"],
    "sync": ["dsv4-agent sync --sglang ~/sglang --previous runs/20261201T090000Z-enable-mtp/mtp.json"],
    "tuning": ["dsv4-agent tuning shapes --model-path /models/DeepSeek-V4-Flash --tp 8"],
    "tuning shapes": ["dsv4-agent tuning shapes --model-path /models/DeepSeek-V4-Flash --tp 8"],
    "tuning plan": ["dsv4-agent tuning plan --shapes 4096,7168 --gpu-count 8"],
    "tuning prove": ["dsv4-agent tuning prove latest"],
    "tuning uninstall": ["dsv4-agent tuning uninstall latest"],
    "config": ["dsv4-agent config allow ./dsv4-agent.toml"],
    "config allow": ["dsv4-agent config allow ./dsv4-agent.toml"],
    "config deny": ["dsv4-agent config deny ./dsv4-agent.toml"],
}


def format_examples(ctx, formatter, prog: str) -> None:
    """The command's ``Examples:`` section, each line as written (never re-wrapped)."""
    lines = EXAMPLES.get(ctx.command_path.removeprefix(prog).strip())
    if not lines:
        return
    with formatter.section("Examples"):
        for line in lines:
            formatter.write(f"{'':>{formatter.current_indent}}{line}\n")
