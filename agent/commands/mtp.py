"""``dsv4-agent mtp``: which speculative-decoding flags to use for a model, cited to the SGLang tree."""
from __future__ import annotations

import sys

import typer


def register(app: typer.Typer) -> None:
    @app.command("mtp")
    def mtp(
        model: str = typer.Option(..., "--model", help="HF model id (or local path) to serve"),
        sglang: str = typer.Option(None, "--sglang", help="SGLang checkout or package dir (default: auto-resolve)"),
        arch: str = typer.Option(None, "--arch", help="Architecture, e.g. DeepseekV4ForCausalLM"),
        gpu: str = typer.Option(None, "--gpu", help="Target GPU name, e.g. 'NVIDIA H200'"),
        gpus: int = typer.Option(None, "--gpus", min=1, help="Number of GPUs on the target"),
        model_path: str = typer.Option(None, "--model-path", help="Local checkpoint folder with config.json"),
        sglang_python: str = typer.Option("python3", "--sglang-python", help="Interpreter that has SGLang"),
        version: str = typer.Option("0.5.23", "--version", help="SGLang wheel version when downloading"),
        as_json: bool = typer.Option(False, "--json", help="Print the answer as JSON (docs/mtp-answer.schema.json)"),
    ) -> None:
        """Infer --speculative-* (MTP) flags from SGLang's tests, fixtures and hooks, every value cited."""
        from tools.base import ToolError
        from tools.mtp.infer import InferMtpArgs, infer_mtp

        try:
            answer = infer_mtp(InferMtpArgs(sglang=sglang, model=model, arch=arch, gpu=gpu, gpus=gpus,
                                            model_path=model_path, sglang_python=sglang_python, version=version))
        except ToolError as err:
            print(f"error: {err}", file=sys.stderr)
            raise typer.Exit(2) from None
        if as_json:
            print(answer.model_dump_json(indent=2))
        else:
            from agent.commands.mtp_table import print_answer
            print_answer(answer)
        # Nothing could be answered: no architecture and no recipe at all.
        if answer.recommended is None and answer.architecture is None and not answer.candidates:
            raise typer.Exit(1)
