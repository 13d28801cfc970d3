"""``dsv4-agent mtp``: which speculative-decoding flags to use for a model, cited to the SGLang tree."""
from __future__ import annotations

import gc
import sys
from typing import Annotated, Optional

from agent.exit_codes import ExitCode
from agent.commands.mtp_table import print_answer
from agent.commands.options import pick, with_options
from agent.commands.params import PROG, JsonFlag, Opt, fail
from agent.commands.shared import end_when_written
from agent.terminal.printable import echo, printable
from tools.base import ToolError
from tools.mtp.answer import Verification
from tools.mtp.infer import InferMtpArgs, infer_mtp
from tools.mtp.verify import VerifyArgs, apply_verification, verify_flags

Str = Optional[str]
LOOKUP_TIMEOUT_S = 10.0  # find_spec in --sglang-python: no SGLang import, so a short wait is plenty
MTP_OPTIONS = pick("model", "model_path", "arch", "sglang_src", "sglang_python", "sglang_version", required=("model",),
                   model="HF model id (or local path) to serve.",
                   model_path="Local checkpoint folder with config.json.",
                   arch="Architecture, e.g. DeepseekV4ForCausalLM [from config.json].")
# InferMtpArgs' names for the settings the options set; a setting left out keeps the tool's default
_ARGS = {"model": "model", "model_path": "model_path", "arch": "arch", "sglang_src": "sglang",
         "sglang_python": "sglang_python", "sglang_version": "version"}


@with_options(MTP_OPTIONS)
def mtp(
    gpu: Annotated[Str, Opt("--gpu", metavar="NAME", help="Target GPU name, e.g. 'NVIDIA H200'.")] = None,
    gpu_count: Annotated[Optional[int], Opt("--gpu-count", metavar="N", min=1, max=4096,
                                                     help="Number of GPUs on the target.")] = None,
    verify: Annotated[bool, Opt("--verify", help=(
        "Have SGLang itself resolve the recommended flags (in --sglang-python, with --model-path's config.json; "
        "no weights loaded) and show static vs resolved. Exit 1 when it could not run."))] = False,
    verify_timeout: Annotated[float, Opt("--verify-timeout", metavar="SECONDS", min=1, max=3600, help=(
        "How long SGLang's resolution may take before its process group is killed (a cold import of SGLang can "
        f"take minutes); finding sglang through --sglang-python gets at most {LOOKUP_TIMEOUT_S:g} s of it."))] = 600,
    as_json: JsonFlag = False,
    **settings,
) -> None:
    """Infer --speculative-* (MTP) flags from SGLang's tests, fixtures and hooks, every value cited.

    Exit 0 answered, 1 nothing could be answered (no architecture and no recipe) or --verify could not
    run (the answer is still printed), 2 bad input.
    """
    given = {_ARGS[k]: v for k, v in settings.items() if v is not None}
    try:
        args = InferMtpArgs(**given, gpu=gpu, gpus=gpu_count, lookup_timeout_s=min(LOOKUP_TIMEOUT_S, verify_timeout))
        answer = infer_mtp(args)
    except ToolError as err:
        fail(str(err))
    # The parse cache holds many syntax trees this process is done with: keep the cyclic collector from
    # walking them again while the answer is verified and written (teardown is skipped below).
    gc.freeze()
    if verify:
        answer = _verified(answer, args.sglang_python, args.model_path, verify_timeout)
    if as_json:
        echo(answer.model_dump_json(indent=2))
    else:
        print_answer(answer)
    nothing = answer.recommended is None and answer.architecture is None and not answer.candidates
    unverified = verify and answer.verification is not None and answer.verification.status == "not_verified"
    if unverified:  # asked for and not done: say so on stderr too, where a script's log keeps it
        print(f"{PROG}: --verify could not run: {printable(answer.verification.reason)}", file=sys.stderr, flush=True)
    end_when_written(ExitCode.FAILED if nothing or unverified else 0)  # skips collecting the parse cache at exit


def _verified(answer, sglang_python: str, model_path: str | None, timeout: float):
    if answer.recommended is None:
        verification = Verification(status="not_verified", reason="nothing to verify: no recommendation",
                                    python=sglang_python)
    elif answer.recommended.needs:
        verification = Verification(status="not_verified", python=sglang_python, reason=(
            "the recommendation needs " + ", ".join(f"{k} (${v})" for k, v in answer.recommended.needs.items())
            + ", which only you can give; SGLang cannot resolve it without them"))
    else:
        verification = verify_flags(VerifyArgs(sglang_python=sglang_python, model_path=model_path,
                                               flags=answer.recommended.flags, timeout_s=timeout,
                                               checkpoint=answer.checkpoint))
    return apply_verification(answer, verification)
