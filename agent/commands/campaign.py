"""``dsv4-agent "GOAL"`` (alias ``run``), ``resume``, ``status`` and ``jobs``."""
from __future__ import annotations

from typing import Optional

import typer

RUNS_HELP = "Folder holding run folders (default ./runs; setting runs_dir)."


def _fail(message: str, code: int = 2) -> None:
    typer.echo(f"dsv4-agent: {message}", err=True)
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    @app.command("run", help=(
        "Run a campaign for GOAL, such as \"enable MTP and tune kernels\"\n\n"
        "Settings precedence: these options > ./dsv4-agent.toml > DSV4_* environment > defaults. "
        "Output goes to runs/<UTC time>-<slug>/: config.json, plan.md, trace.jsonl, scripts, "
        "jobs/, report, and result.json (written last)."))
    def run(
        goal: str = typer.Argument(..., metavar="GOAL", help="What to do, in words: tune kernels, enable MTP, benchmark, sync."),
        model: Optional[str] = typer.Option(None, help="Model id or path [deepseek-ai/DeepSeek-V4-Flash]."),
        model_path: Optional[str] = typer.Option(None, help="Local checkpoint folder (config.json, tokenizer)."),
        sglang: Optional[str] = typer.Option(None, "--sglang", help="SGLang checkout or package folder."),
        sglang_python: Optional[str] = typer.Option(None, help="Interpreter with SGLang installed [python3]."),
        gpus: Optional[str] = typer.Option(None, help="GPU indices to use, e.g. 0,1,2,3 [all found]."),
        runs_dir: Optional[str] = typer.Option(None, help=RUNS_HELP),
        executor: Optional[str] = typer.Option(None, help="local | ssh://user@host[:port] | slurm[:partition]."),
        ssh_option: Optional[list[str]] = typer.Option(
            None, "--ssh-option", help="Extra ssh argument for ssh:// executors, e.g. --ssh-option=-F --ssh-option=cfg (repeat)."),
        nvidia_smi: Optional[str] = typer.Option(None, help="nvidia-smi on the GPU host [nvidia-smi]."),
        nodes: Optional[int] = typer.Option(None, min=1, help="Nodes one server spans; >1 also writes multi-node serve scripts [1]."),
        dist_init_addr: Optional[str] = typer.Option(None, help="HOST:PORT of node 0 for the per-node scripts (with --nodes)."),
        pull: Optional[bool] = typer.Option(None, "--pull", help="Fast-forward the SGLang checkout first."),
        remote: Optional[str] = typer.Option(None, help="Remote to pull from with --pull [origin]."),
        branch: Optional[str] = typer.Option(None, help="Branch to pull with --pull [main]."),
        allow_dirty: Optional[bool] = typer.Option(
            None, "--allow-dirty", help="Pull into a dirty checkout when upstream touches none of its changes."),
        shapes: Optional[list[str]] = typer.Option(None, "--shapes", help="FP8 GEMM shape N,K to tune (repeat)."),
        retune: Optional[bool] = typer.Option(None, "--retune", help="Tune shapes that already have configs."),
        force_tune: Optional[bool] = typer.Option(
            None, "--force-tune", help="Tune even where the evidence says the Triton FP8 path is not used."),
        tp: Optional[int] = typer.Option(None, help="Tensor-parallel size [number of GPUs]."),
        concurrency: Optional[str] = typer.Option(None, help="Benchmark concurrency levels [1,8,16]."),
        tokenizer: Optional[str] = typer.Option(None, help="Local tokenizer for offline benchmarks."),
        input_len: Optional[int] = typer.Option(None, help="Benchmark prompt tokens [1024]."),
        output_len: Optional[int] = typer.Option(None, help="Benchmark output tokens [1024]."),
        prompts_per_concurrency: Optional[int] = typer.Option(None, help="Prompts per point = this x concurrency [8]."),
        llm_base_url: Optional[str] = typer.Option(None, help="OpenAI-compatible endpoint; unset = playbook."),
        llm_model: Optional[str] = typer.Option(None, help="Model name at the LLM endpoint."),
        accept_unsupported_flags: Optional[bool] = typer.Option(
            None, "--accept-unsupported-flags", help="Write LLM-proposed flags that have no cited evidence."),
        max_llm_steps: Optional[int] = typer.Option(None, min=1, help="LLM budget: model turns [30]."),
        llm_max_tokens: Optional[int] = typer.Option(None, min=1, help="LLM budget: total tokens [400000]."),
        llm_max_seconds: Optional[float] = typer.Option(
            None, min=1, help="LLM budget: seconds in model calls and tools [900]."),
        llm_stream: Optional[bool] = typer.Option(
            None, "--llm-stream/--no-llm-stream", help="Stream the LLM's answers [no-llm-stream]."),
    ) -> None:
        from agent.campaign import CampaignError, start
        from agent.live import LiveView
        from agent.config import SettingsError, load_settings
        from agent.playbook import GoalError, plan_goal
        from agent.runfolder import RunFolderError

        cli = dict(model=model, model_path=model_path, sglang_src=sglang, sglang_python=sglang_python,
                   gpus=_ints(gpus, "--gpus"), runs_dir=runs_dir, executor=executor, ssh_options=ssh_option or None,
                   nvidia_smi=nvidia_smi, nodes=nodes, dist_init_addr=dist_init_addr, pull=pull, remote=remote,
                   branch=branch, allow_dirty=allow_dirty, shapes=shapes,
                   retune=retune, force_tune=force_tune, tp=tp, concurrency=_ints(concurrency, "--concurrency"), tokenizer=tokenizer,
                   input_len=input_len, output_len=output_len, prompts_per_concurrency=prompts_per_concurrency,
                   llm_base_url=llm_base_url, llm_model=llm_model, accept_unsupported_flags=accept_unsupported_flags,
                   max_llm_steps=max_llm_steps, llm_max_tokens=llm_max_tokens, llm_max_seconds=llm_max_seconds,
                   llm_stream=llm_stream)
        try:
            settings = load_settings(cli)
            if not settings.llm_base_url:
                plan_goal(goal, pull=settings.pull)  # refuse an unusable goal before writing anything
            code = start(settings, goal, LiveView())
        except (SettingsError, GoalError, CampaignError, RunFolderError) as err:
            _fail(str(err))
        raise typer.Exit(code)

    @app.command(help="Continue a run that crashed, was interrupted, or was only planned (no GPU where it was "
                      "made). Finished steps are reused, running jobs re-attached, nothing launched twice. "
                      "RUN is a run folder path, its name under --runs-dir, or 'latest'.")
    def resume(
        run: str = typer.Argument(..., help="Run folder, its name, or 'latest'."),
        runs_dir: str = typer.Option("runs", help=RUNS_HELP),
        sglang_python: Optional[str] = typer.Option(None, help="Interpreter with SGLang on this host."),
        sglang: Optional[str] = typer.Option(None, "--sglang", help="SGLang checkout on this host."),
        model_path: Optional[str] = typer.Option(None, help="Local checkpoint folder on this host."),
        tokenizer: Optional[str] = typer.Option(None, help="Local tokenizer on this host."),
        executor: Optional[str] = typer.Option(
            None, help="Where to run the GPU steps now (a run whose jobs already ran keeps its executor)."),
        ssh_option: Optional[list[str]] = typer.Option(None, "--ssh-option", help="Extra ssh argument (repeat)."),
        nvidia_smi: Optional[str] = typer.Option(None, help="nvidia-smi on the GPU host."),
        gpus: Optional[str] = typer.Option(None, help="GPU indices to use on this host."),
        max_llm_steps: Optional[int] = typer.Option(
            None, min=1, help="LLM budget in model turns, counting the recorded ones (after budget_exhausted)."),
        llm_max_tokens: Optional[int] = typer.Option(None, min=1, help="LLM budget: total tokens."),
        llm_max_seconds: Optional[float] = typer.Option(None, min=1, help="LLM budget: seconds."),
    ) -> None:
        from agent.campaign import CampaignError, resume as resume_run
        from agent.live import LiveView

        try:
            code = resume_run(run, runs_dir, {"sglang_python": sglang_python, "sglang_src": sglang,
                                              "model_path": model_path, "tokenizer": tokenizer, "executor": executor,
                                              "ssh_options": ssh_option or None, "nvidia_smi": nvidia_smi,
                                              "gpus": _ints(gpus, "--gpus"), "max_llm_steps": max_llm_steps,
                                              "llm_max_tokens": llm_max_tokens, "llm_max_seconds": llm_max_seconds},
                               LiveView())
        except CampaignError as err:
            _fail(str(err))
        raise typer.Exit(code)

    @app.command(help="Show a run: its goal, plan steps and their outcomes, jobs, and result.")
    def status(run: str = typer.Argument(..., help="Run folder, its name, or 'latest'."),
               runs_dir: str = typer.Option("runs", help=RUNS_HELP)) -> None:
        from agent.campaign import CampaignError, load_run
        from agent.run_status import render_status

        try:
            folder = load_run(run, runs_dir)
        except CampaignError as err:
            _fail(str(err))
        typer.echo(render_status(folder))

    @app.command(help="List a run's jobs; --logs JOB prints a job's log tail; --stop JOB stops it "
                      "(only jobs in this run's ledger can be stopped).")
    def jobs(run: str = typer.Argument(..., help="Run folder, its name, or 'latest'."),
             logs: Optional[str] = typer.Option(None, "--logs", help="Job key whose log to print."),
             stop: Optional[str] = typer.Option(None, "--stop", help="Job key to stop."),
             lines: int = typer.Option(40, help="Log lines to print with --logs."),
             runs_dir: str = typer.Option("runs", help=RUNS_HELP)) -> None:
        from agent.campaign import CampaignError, load_run
        from agent.run_status import render_jobs
        from tools.base import ToolError
        from tools.jobs.factory import make_executor

        try:
            folder = load_run(run, runs_dir)
            recorded = folder.read_json("config.json")["settings"]
            executor = make_executor(recorded.get("executor", "local"), folder.jobs_dir,
                                     ssh_options=recorded.get("ssh_options"))
            if logs:
                executor.poll(logs)
                text = executor.read_log(logs, max_chars=200_000)
                typer.echo("\n".join(text.splitlines()[-lines:]))
            elif stop:
                state = executor.stop(stop)
                typer.echo(f"{stop}: {state.status} {state.reason}".rstrip())
            else:
                typer.echo(render_jobs(executor.jobs()))
        except (CampaignError, ToolError) as err:
            _fail(str(err))


def _ints(raw: Optional[str], option: str) -> Optional[list[int]]:
    if raw is None:
        return None
    try:
        return [int(p) for p in raw.replace(",", " ").split()]
    except ValueError:
        _fail(f"{option} takes integers separated by commas, e.g. 0,1,2,3 (got {raw!r})")
