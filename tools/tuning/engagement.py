"""Will the server run the Triton block-FP8 GEMM (the only path these configs affect)?

Evidence, strongest first: the server's own log (it logs the config lookup only on the Triton
path), an explicit ``--fp8-gemm-backend``, the DeepGEMM switch in the environment (its name and
default read from the SGLang source, not assumed), then the GPU architecture (DeepGEMM needs
SM90+; SGLang's auto dispatch prefers it there).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from tools.base import Tool
from tools.tuning.configs import package_parent

Verdict = Literal["engaged", "not_engaged", "unknown"]
_LOADED = "for W8A8 Block FP8 kernel"
_DEFAULT = "Using default W8A8 Block FP8 kernel config"
_ENV_DEFAULT = re.compile(r"^\s*(?P<name>SGLANG_ENABLE_JIT_DEEPGEMM)\s*=\s*EnvBool\((?P<default>True|False)\)")
_OLD_ENV = re.compile(r"get_bool_env_var\(\s*\"(?P<name>SGL_ENABLE_JIT_DEEPGEMM|SGLANG_ENABLE_JIT_DEEPGEMM)\"\s*,"
                      r"\s*default=\"(?P<default>true|false)\"")
# Compute capability by product name; only the generation matters here.
_ARCH = [("B300", 100), ("GB300", 100), ("B200", 100), ("GB200", 100), ("H100", 90), ("H200", 90),
         ("H800", 90), ("H20", 90), ("GH200", 90), ("RTX PRO 6000", 120), ("RTX 50", 120),
         ("A100", 80), ("A800", 80), ("A10", 86), ("A40", 86), ("L40", 89), ("L4", 89), ("RTX 40", 89)]


class DeepGemmSwitch(BaseModel):
    name: str
    default: bool
    where: str = Field(description="file:line in the SGLang source")


def read_deepgemm_switch(sglang_root: Path | None) -> DeepGemmSwitch | None:
    """The env var that turns DeepGEMM off, and its default, as this SGLang version defines it."""
    if sglang_root is None:
        return None
    base = package_parent(sglang_root)
    for relative, pattern in (("sglang/srt/environ.py", _ENV_DEFAULT),
                              ("sglang/srt/layers/quantization/deep_gemm.py", _OLD_ENV),
                              ("sglang/srt/layers/deep_gemm_wrapper/configurer.py", _OLD_ENV)):
        path = base / relative
        if not path.exists():
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
            match = pattern.search(line)
            if match:
                return DeepGemmSwitch(name=match["name"], default=match["default"].lower() == "true",
                                      where=f"{relative}:{number}")
    return None


def compute_capability(gpu_name: str) -> int | None:
    upper = gpu_name.upper()
    for marker, sm in _ARCH:
        if marker.upper() in upper:
            return sm
    return None


def _flag_value(args: list[str], flag: str) -> str | None:
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


class EngagementArgs(BaseModel):
    """Decide from evidence whether SGLang will run the Triton block-FP8 GEMM that kernel tuning improves."""

    log_text: str = Field("", description="Server log text (may be empty)")
    server_args: list[str] = Field(default_factory=list, description="Server flags the benchmark uses")
    env: dict[str, str] = Field(default_factory=dict, description="Environment the server starts with")
    gpu_name: str = Field("", description="GPU name from nvidia-smi; empty when there is no GPU here")
    sglang_root: str | None = Field(None, description="SGLang source root, to read the DeepGEMM switch")
    block_k: int = Field(128, description="Weight block size along K of the model's FP8 weights")
    block_n: int = Field(128, description="Weight block size along N of the model's FP8 weights")


# What decided the verdict. "log", "weight_block" and "flag" hold wherever the server runs; "gpu"
# and "no_gpu" rest on this machine's GPU and environment, so the GPU host may decide otherwise.
Basis = Literal["log", "weight_block", "flag", "gpu", "no_gpu"]
FINAL_BASES = ("log", "weight_block", "flag")


class EngagementResult(BaseModel):
    verdict: Verdict
    evidence: list[str]
    basis: Basis = Field("gpu", description="Which evidence decided: log | weight_block | flag | gpu | no_gpu")


# SGLang 0.5.23's dispatch of the block-FP8 linear by weight block, GPU and backend.
_DISPATCH = "srt/layers/quantization/fp8_utils.py:704 dispatch_w8a8_block_fp8_linear"


def _block32_verdict(sm: int, deepgemm_on: bool, backend: str | None, evidence: list[str]) -> EngagementResult:
    """[32, 32] blocks: DeepGEMM natively on SM90 (auto or deep_gemm backend, DeepGEMM on); on SM100
    only on request with UE8M0 activation scales; Triton everywhere else."""
    if sm == 90 and deepgemm_on:
        return EngagementResult(verdict="not_engaged", evidence=evidence + [
            f"[32, 32] weight blocks on SM90 with DeepGEMM on: SGLang runs DeepGEMM's native block-32 GEMM ({_DISPATCH}); "
            "the Triton configs would be read only where it falls back: --fp8-gemm-backend triton to use them, "
            "or --force-tune"])
    if sm >= 100 and backend == "deep_gemm":
        return EngagementResult(verdict="unknown", evidence=evidence + [
            f"[32, 32] weight blocks on SM100+ with --fp8-gemm-backend deep_gemm: DeepGEMM with UE8M0 activation "
            f"scales, else Triton ({_DISPATCH}); read the server log"])
    return EngagementResult(verdict="engaged", evidence=evidence + [
        f"[32, 32] weight blocks on SM{sm}{'' if deepgemm_on else ' with DeepGEMM off'}: Triton ({_DISPATCH})"])


def check_engagement(args: EngagementArgs) -> EngagementResult:
    evidence: list[str] = []
    lines = args.log_text.splitlines()
    loaded = [l.strip() for l in lines if _LOADED in l and "Using configuration from" in l]
    defaulted = [l.strip() for l in lines if _DEFAULT in l]
    if loaded or defaulted:
        sample = (loaded or defaulted)[0][:300]
        return EngagementResult(verdict="engaged", evidence=[
            f"server log: {len(loaded)} config loads and {len(defaulted)} default-config warnings of the "
            f"Triton block-FP8 kernel (logged only on that path), e.g. {sample!r}"], basis="log")
    if args.log_text.strip():
        evidence.append("server log given but it has no W8A8 Block FP8 config line: the Triton path did not "
                        "look up a config while the log was written")
    block32 = (args.block_n, args.block_k) == (32, 32)
    if args.block_k != 128 and not block32:
        return EngagementResult(verdict="engaged", evidence=evidence + [
            f"weight block [{args.block_n}, {args.block_k}]: SGLang serves blocks other than [128, 128] and [32, 32] "
            f"with Triton ({_DISPATCH})"], basis="weight_block")
    backend = _flag_value(args.server_args, "--fp8-gemm-backend")
    if block32 and backend is not None and backend not in ("auto", "deep_gemm"):
        return EngagementResult(verdict="engaged", evidence=evidence + [
            f"server flag --fp8-gemm-backend {backend} with [32, 32] weight blocks: Triton ({_DISPATCH})"], basis="flag")
    if backend is not None and backend != "auto" and not block32:
        verdict: Verdict = "engaged" if backend == "triton" else "not_engaged"
        return EngagementResult(verdict=verdict, evidence=evidence + [f"server flag --fp8-gemm-backend {backend}"],
                                 basis="flag")
    switch = read_deepgemm_switch(Path(args.sglang_root)) if args.sglang_root else None
    deepgemm_on = True
    if switch is not None:
        raw = args.env.get(switch.name)
        deepgemm_on = switch.default if raw is None else raw.strip().lower() in ("1", "true", "yes", "on")
        evidence.append(f"{switch.name}={'unset' if raw is None else raw} (default {switch.default}, "
                        f"{switch.where}) -> DeepGEMM {'enabled' if deepgemm_on else 'disabled'}")
    else:
        evidence.append("DeepGEMM switch not found in the SGLang source; assuming enabled (the default since 0.4)")
    if not args.gpu_name:
        return EngagementResult(verdict="unknown", evidence=evidence + [
            "no GPU here: the architecture decides (SM90/SM100 with DeepGEMM -> not engaged; SM80/SM89 -> engaged)"],
            basis="no_gpu")
    sm = compute_capability(args.gpu_name)
    if sm is None:
        return EngagementResult(verdict="unknown", evidence=evidence + [
            f"GPU {args.gpu_name!r}: architecture not known here; boot the server once and read its log"])
    evidence.append(f"GPU {args.gpu_name} -> SM{sm}")
    if block32:
        return _block32_verdict(sm, deepgemm_on, backend, evidence)
    if sm < 90:
        return EngagementResult(verdict="engaged", evidence=evidence + ["DeepGEMM needs SM90+: auto dispatch uses Triton"])
    if not deepgemm_on:
        if sm >= 100:
            return EngagementResult(verdict="unknown", evidence=evidence + [
                "SM100+ without DeepGEMM: auto dispatch tries FlashInfer before Triton; read the server log"])
        return EngagementResult(verdict="engaged", evidence=evidence + ["SM90 with DeepGEMM off: auto dispatch uses Triton"])
    return EngagementResult(verdict="not_engaged", evidence=evidence + [
        "auto dispatch picks DeepGEMM first on SM90+ (bf16 output): the Triton configs would not be read; "
        f"set {switch.name if switch else 'SGLANG_ENABLE_JIT_DEEPGEMM'}=0 or --fp8-gemm-backend triton to use them, "
        "or --force-tune"])


CHECK_ENGAGEMENT = Tool(name="check_triton_fp8_engagement", args=EngagementArgs, run=check_engagement)
