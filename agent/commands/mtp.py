"""``dsv4-agent mtp``: which speculative-decoding flags to use for a model, cited to the SGLang tree."""
from __future__ import annotations

from typing import Annotated, Optional

import typer

import sys

from agent.commands.base import EXIT_FAILED, PROG, JsonFlag, end_when_written, fail
from agent.terminal import echo, printable

Str = Optional[str]
LOOKUP_TIMEOUT_S = 10.0  # find_spec in --sglang-python: no SGLang import, so a short wait is plenty


def mtp(
    model: Annotated[str, typer.Option("--model", metavar="ID", help="HF model id (or local path) to serve.")],
    sglang: Annotated[Str, typer.Option("--sglang", metavar="DIR",
                                        help="SGLang checkout or package folder [found automatically].")] = None,
    arch: Annotated[Str, typer.Option("--arch", metavar="CLASS",
                                      help="Architecture, e.g. DeepseekV4ForCausalLM [from config.json].")] = None,
    gpu: Annotated[Str, typer.Option("--gpu", metavar="NAME", help="Target GPU name, e.g. 'NVIDIA H200'.")] = None,
    gpus: Annotated[Optional[int], typer.Option("--gpus", metavar="N", min=1,
                                                help="Number of GPUs on the target.")] = None,
    model_path: Annotated[Str, typer.Option("--model-path", metavar="DIR",
                                            help="Local checkpoint folder with config.json.")] = None,
    sglang_python: Annotated[str, typer.Option("--sglang-python", metavar="PYTHON",
                                               help="Interpreter that has SGLang.")] = "python3",
    sglang_version: Annotated[str, typer.Option("--sglang-version", metavar="VERSION",
                                                help="SGLang wheel version to download when no source is found "
                                                     "(this was --version before, which now prints "
                                                     "dsv4-agent's own version).")] = "0.5.23",
    verify: Annotated[bool, typer.Option("--verify", help=(
        "Have SGLang itself resolve the recommended flags (in --sglang-python, with --model-path's config.json; "
        "no weights loaded) and show static vs resolved. Exit 1 when it could not run."))] = False,
    verify_timeout: Annotated[float, typer.Option("--verify-timeout", metavar="SECONDS", min=1, max=3600, help=(
        "How long SGLang's resolution may take before its process group is killed (a cold import of SGLang can "
        "take minutes); finding sglang through --sglang-python gets at most 10 s of it."))] = 600,
    as_json: JsonFlag = False,
) -> None:
    """Infer --speculative-* (MTP) flags from SGLang's tests, fixtures and hooks, every value cited.

    Exit 0 answered, 1 nothing could be answered (no architecture and no recipe) or --verify could not
    run (the answer is still printed), 2 bad input.
    """
    import gc

    from tools.base import ToolError
    from tools.mtp.infer import InferMtpArgs, infer_mtp

    try:
        answer = infer_mtp(InferMtpArgs(sglang=sglang, model=model, arch=arch, gpu=gpu, gpus=gpus,
                                        model_path=model_path, sglang_python=sglang_python, version=sglang_version,
                                        lookup_timeout_s=min(LOOKUP_TIMEOUT_S, verify_timeout)))
    except ToolError as err:
        fail(str(err))
    # The parse cache holds ~100 MB of syntax trees this process is done with: keep the cyclic collector
    # from walking them again while the answer is verified and written (teardown is skipped below).
    gc.freeze()
    if verify:
        answer = _verified(answer, sglang_python, model_path, verify_timeout)
    if as_json:
        echo(answer.model_dump_json(indent=2))
    else:
        from agent.commands.mtp_table import print_answer
        print_answer(answer)
    nothing = answer.recommended is None and answer.architecture is None and not answer.candidates
    unverified = verify and answer.verification is not None and answer.verification.status == "not_verified"
    if unverified:  # asked for and not done: say so on stderr too, where a script's log keeps it
        print(f"{PROG}: --verify could not run: {printable(answer.verification.reason)}", file=sys.stderr, flush=True)
    end_when_written(EXIT_FAILED if nothing or unverified else 0)  # skips collecting the parse cache at exit


def _verified(answer, sglang_python: str, model_path: str | None, timeout: float):
    from tools.mtp.answer import Verification
    from tools.mtp.verify import VerifyArgs, apply_verification, verify_flags

    if answer.recommended is None:
        verification = Verification(status="not_verified", reason="nothing to verify: no recommendation",
                                    python=sglang_python)
    elif answer.recommended.needs:
        verification = Verification(status="not_verified", python=sglang_python, reason=(
            "the recommendation needs " + ", ".join(f"{k} (${v})" for k, v in answer.recommended.needs.items())
            + ", which only you can give; SGLang cannot resolve it without them"))
    else:
        verification = verify_flags(VerifyArgs(sglang_python=sglang_python, model_path=model_path,
                                               flags=answer.recommended.flags, timeout_s=timeout))
    return apply_verification(answer, verification)
