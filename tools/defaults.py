"""Defaults that several layers share, written once: the CLI's settings (agent/settings/model.py) and the
tools' own Args take them from here."""
from __future__ import annotations

DEFAULT_MODEL = "deepseek-ai/DeepSeek-V4-Flash"  # the flagship campaign's model
SGLANG_VERSION = "0.5.23"  # the PyPI wheel read when no SGLang source is given or installed
SGLANG_PYTHON = "python3"  # the interpreter assumed to have SGLang when none is named
ASSUMED_TARGET_GPUS = 8  # one H100/H200 node: what DeepSeek-V4-class models are served on
