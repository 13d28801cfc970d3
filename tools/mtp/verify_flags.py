"""Resolve SGLang server arguments with SGLang itself and print the speculative settings it arrives at.

Run by dsv4-agent in the interpreter that has SGLang (--sglang-python), never in dsv4-agent's own:

    SGLANG_PYTHON verify_flags.py '["--model-path", "/models/X", "--speculative-algorithm", "EAGLE", ...]'
    SGLANG_PYTHON verify_flags.py '[[...one argv...], [...another...]]'

For each argv it builds SGLang's ServerArgs from exactly that argv (``prepare_server_args``), runs
every argument hook once (``resolve_once``), and reads the resolved values (``resolved_view``).
Nothing is served and no weights are loaded; SGLang reads the model folder's config.json. Without a
visible GPU it adds ``--device cpu`` (SGLang refuses to resolve otherwise), and ``--device cuda`` where
SGLang refuses the settings on cpu alone (DSPARK's hook): resolving reads no device. Several argvs share one
import of SGLang (most of the time: torch); each is resolved from a fresh record, with the
environment put back as it was before the next one. Per argv, one line of output is a JSON object
after the marker ``DSV4_VERIFY``: its index, the status ("resolved", "rejected": SGLang refused the
settings, with its own message; "not_verified": resolution could not run), the version, and the
resolved speculative settings. Standard library only, besides SGLang itself.
"""
import contextlib
import io
import json
import os
import sys
import time
import traceback

FIELDS = ("speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
          "speculative_num_draft_tokens", "speculative_draft_model_path")
MARKER = "DSV4_VERIFY "


def _emit(result):
    sys.stdout.flush()
    print(MARKER + json.dumps(result), flush=True)


def _where(err):
    """Whether SGLang's own argument code raised it (a refusal), as opposed to the environment."""
    frames = traceback.extract_tb(err.__traceback__)
    return any("arg_groups" in f.filename or f.filename.endswith("server_args.py") for f in frames)


def _version(result):
    import sglang

    result["sglang_version"] = getattr(sglang, "__version__", None)
    result["sglang_location"] = os.path.dirname(os.path.abspath(sglang.__file__))
    try:
        from sglang import _version as version_module

        result["sglang_commit"] = getattr(version_module, "__commit_id__", None)
    except ImportError:
        result["sglang_commit"] = None


def _has_gpu():
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001 - no usable torch means no GPU here
        return False


def _device(argv, result, has_gpu):
    if has_gpu or "--device" in argv or any(a.startswith("--device=") for a in argv):
        return argv
    result["device"] = "cpu (no GPU visible)"
    return [*argv, "--device", "cpu"]


def _refused_cpu(result):
    """SGLang refused the settings only because of the cpu device this script added."""
    reason = result.get("reason", "").lower()
    return (result.get("status") == "rejected" and str(result.get("device", "")).startswith("cpu")
            and "device" in reason and ("cuda" in reason or "gpu" in reason))


def _resolve(argv, result, prepare_server_args, resolved_view):
    usage = io.StringIO()
    environment = dict(os.environ)  # a hook may export settings; the next argv starts from the same
    try:
        with contextlib.redirect_stderr(usage):
            server_args = prepare_server_args(argv)
        server_args.resolve_once()
        view = resolved_view(server_args)
        result["resolved"] = {name: getattr(view, name, None) for name in FIELDS}
        result["status"] = "resolved"
    except SystemExit:
        lines = [line for line in usage.getvalue().splitlines() if line.strip()]
        result["status"], result["reason"] = "rejected", (lines[-1] if lines else "argument parsing failed")
    except Exception as err:  # noqa: BLE001 - SGLang's refusal or an environment failure, told apart below
        message = f"{type(err).__name__}: {err}".strip()
        if isinstance(err, (AssertionError, ValueError)) and _where(err):
            result["status"], result["reason"] = "rejected", message
        else:
            result["reason"] = f"resolution failed outside SGLang's argument checks: {message}"
    finally:
        os.environ.clear()
        os.environ.update(environment)


def main():
    request = json.loads(sys.argv[1])
    argvs = request if request and isinstance(request[0], list) else [request]
    start = time.monotonic()
    common = {}
    try:
        _version(common)
        has_gpu = _has_gpu()
        from sglang.srt.arg_groups.model_override_base import resolved_view
        from sglang.srt.server_args import prepare_server_args
    except Exception as err:  # noqa: BLE001 - every failure to start is reported, never raised
        reason = f"SGLang's argument resolution cannot be imported here: {type(err).__name__}: {err}"
        for index, argv in enumerate(argvs):
            _emit({"index": index, "status": "not_verified", "reason": reason, "argv": argv, **common})
        return
    for index, argv in enumerate(argvs):
        result = {"index": index, "status": "not_verified", "reason": "", **common}
        result["argv"] = _device(argv, result, has_gpu)
        _resolve(result["argv"], result, prepare_server_args, resolved_view)
        if _refused_cpu(result):  # e.g. DSPARK's hook takes only CUDA/NPU/XPU; resolving touches no device
            result = {"index": index, "status": "not_verified", "reason": "", **common,
                      "device": "cuda, named without a GPU (SGLang refused cpu for these settings: "
                                + result["reason"] + ")", "argv": [*argv, "--device", "cuda"]}
            _resolve(result["argv"], result, prepare_server_args, resolved_view)
        result["seconds"] = round(time.monotonic() - start, 2)  # the first one carries SGLang's import
        start = time.monotonic()
        _emit(result)


if __name__ == "__main__":
    main()
