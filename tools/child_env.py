"""The environment of every process the agent starts: an allow-list of its own, never the LLM key.

A child that inherited the key would hand it on: SGLang's bench client sends ``OPENAI_API_KEY`` as
``Bearer`` to the server it measures, and a ProxyCommand, hook or verify script could send it
anywhere. So children get only the variables named here (programs and libraries, locale and
temporary folders, GPU, compiler and framework knobs, proxies and certificates, ssh, git and Slurm),
plus ``DSV4_PASS_ENV`` (names or ``PREFIX*``). The key, the LLM endpoint variables (a URL may hold a
password) and any variable whose value holds the key are dropped whatever the lists say; ``JobSpec.env``
is added on top.
"""
from __future__ import annotations

import os
from collections.abc import Mapping

PASS_ENV = "DSV4_PASS_ENV"
KEY_VARIABLES = ("OPENAI_API_KEY", "DSV4_LLM_API_KEY")
NEVER = frozenset({*KEY_VARIABLES, "OPENAI_BASE_URL", "DSV4_LLM_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID",
                   PASS_ENV})
NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TZ", "TMPDIR", "TMP", "TEMP",
    "HOSTNAME", "SSH_AUTH_SOCK", "SSH_AGENT_PID", "KRB5CCNAME", "LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH",
    "VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONHASHSEED",
    "PYTHONUTF8", "PYTHONNOUSERSITE", "PYTHONPYCACHEPREFIX", "PYTHONWARNINGS", "CC", "CXX", "MODULEPATH",
    "LOADEDMODULES", "http_proxy", "https_proxy", "no_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
    "ALL_PROXY", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "OMP_NUM_THREADS",
    "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
})
PREFIXES = ("LC_", "XDG_", "CUDA", "CUDNN_", "NVIDIA_", "NCCL_", "NVSHMEM_", "NVTE_", "TORCH", "PYTORCH_", "TRITON_",
            "SGLANG_", "FLASHINFER_", "DG_", "HF_", "HUGGINGFACE_", "TRANSFORMERS_", "TOKENIZERS_", "SAFETENSORS_",
            "CONDA_", "PYENV_", "GIT_", "SLURM_", "OMPI_", "UCX_", "ROCM_", "HIP_", "DSV4_")


def _passed(raw: str) -> tuple[frozenset[str], tuple[str, ...]]:
    words = [w.strip() for w in raw.replace(" ", ",").split(",") if w.strip()]
    return frozenset(w for w in words if not w.endswith("*")), tuple(w[:-1] for w in words if w.endswith("*") and w[:-1])


def child_env(extra: Mapping[str, str] | None = None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``base`` (this process's environment) through the allow-list, then ``extra`` on top."""
    base = os.environ if base is None else base
    names, prefixes = _passed(base.get(PASS_ENV, ""))
    keys = {base[name] for name in KEY_VARIABLES if base.get(name)}
    env = {k: v for k, v in base.items() if k not in NEVER and not any(key in v for key in keys)
           and (k in NAMES or k in names or k.startswith(PREFIXES + prefixes))}
    env.update(extra or {})
    return env
