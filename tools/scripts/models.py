"""What a generated script says: serve variants (flags with their evidence) and the measure plan.

The same models produce the argv our own server lifecycle launches (``ServeVariant.launch_args``,
``bench_args``) and the argv the rendered scripts run, so a reviewed script and an agent run
never disagree about a flag.
"""
from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, Field, field_validator


MAX_CONCURRENCY = 100_000  # requests in flight at once; more is a typo, and a point that never ends


def _positive_levels(values: list[int]) -> list[int]:
    if not values:
        raise ValueError("takes concurrency levels separated by commas, e.g. 1,8,16; none was given")
    if any(v < 1 for v in values):
        raise ValueError(f"takes concurrency levels of 1 or more, e.g. 1,8,16; {min(values)} is not one")
    if any(v > MAX_CONCURRENCY for v in values):
        raise ValueError(f"takes concurrency levels up to {MAX_CONCURRENCY}; {max(values)} is not one")
    return values


ConcurrencyLevels = Annotated[list[int], AfterValidator(_positive_levels)]


class AccuracyPlan(BaseModel):
    """How the gate runs (part of the measure plan)."""

    questions: int = Field(50, ge=1, description="--num-questions (the first N of the data file)")
    data_path: str | None = Field(None, description="--data-path: a GSM8K test.jsonl; None = SGLang downloads it")
    shots: int = Field(5, ge=0, description="--num-shots")
    parallel: int = Field(64, ge=1, description="--parallel")
    max_new_tokens: int = Field(512, ge=1, description="--max-new-tokens")
    tolerance: float | None = Field(None, ge=0, le=1, description="Largest accuracy drop allowed; None = 95 % interval")
    skip_reason: str | None = Field(None, description="Why the gate does not run (then nothing is gated)")


class Floor(BaseModel):
    value: float
    algorithm: str | None = Field(None, description="--speculative-algorithm nearest the floor; None: not stated")
    steps: int | None = Field(None, description="--speculative-num-steps nearest the floor; None: not stated")
    what: str = Field("", description="The asserted expression or attribute")
    source: str = Field(description="path:line in the SGLang tree")


_FLAG = re.compile(r"^--[A-Za-z0-9][A-Za-z0-9_.-]*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_VARIANT = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
USER_CHOICE = "user choice"
# Flags our templates set themselves; a variant giving them again would make two values disagree.
# Set on every server we launch: /metrics token and verify-call counters, which give each sweep
# point its own accept length (SGLang's /server_info average is cumulative since start).
MEASURE_FLAGS = ("--enable-metrics",)
RESERVED_FLAGS = frozenset({"--model-path", "--model", "--host", "--port", "--tp", "--tp-size"})


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("contains a NUL byte, which no program argument or environment value can hold")
    return value


class FlagChoice(BaseModel):
    """One server flag, with where the evidence for it is."""

    flag: str = Field(description="Server flag, e.g. '--speculative-algorithm'")
    value: str = Field("", description="Its value; '' for a switch")
    source: str = Field(USER_CHOICE, description="Evidence as 'path:line', or 'user choice'")

    @field_validator("flag")
    @classmethod
    def _flag_shape(cls, flag: str) -> str:
        if not _FLAG.match(flag):
            raise ValueError(f"flag {flag!r} must look like --name (letters, digits, '-', '_', '.')")
        return flag

    @field_validator("value")
    @classmethod
    def _value_ok(cls, value: str) -> str:
        if "<unresolved" in value:  # the static reader's marker for an expression it could not resolve
            raise ValueError(f"value {value!r} is an expression static reading could not resolve, not a value")
        return _no_nul(value)


class EnvChoice(BaseModel):
    name: str = Field(description="Environment variable name")
    value: str = Field(description="Its value")
    source: str = Field(USER_CHOICE, description="Evidence as 'path:line', or 'user choice'")

    @field_validator("name")
    @classmethod
    def _name_shape(cls, name: str) -> str:
        if not _ENV_NAME.match(name):
            raise ValueError(f"environment variable name {name!r} must match {_ENV_NAME.pattern}")
        return name

    @field_validator("value")
    @classmethod
    def _value_ok(cls, value: str) -> str:
        return _no_nul(value)


class ServeVariant(BaseModel):
    """One server configuration to measure (baseline, mtp, ...)."""

    name: str = Field(description="Variant name: lower-case letters, digits, '-', '_' (names files)")
    model_path: str = Field(description="--model-path value")
    tp: int = Field(1, ge=1, description="Tensor parallel size")
    gpus: list[int] | None = Field(None, description="CUDA_VISIBLE_DEVICES; None leaves it unset")
    host: str = Field("127.0.0.1", description="Address the server binds")
    flags: list[FlagChoice] = Field(default_factory=list)
    env: list[EnvChoice] = Field(default_factory=list)
    rationale: list[str] = Field(default_factory=list, description="Why this variant, for the reader")

    @field_validator("name")
    @classmethod
    def _name_shape(cls, name: str) -> str:
        if not _VARIANT.match(name):
            raise ValueError(f"variant name {name!r} must match {_VARIANT.pattern}")
        return name

    @field_validator("model_path")
    @classmethod
    def _model_ok(cls, value: str) -> str:
        if not value:
            raise ValueError("model path is empty; pass --model-path or --model")
        return _no_nul(value)

    @field_validator("flags")
    @classmethod
    def _no_reserved(cls, flags: list[FlagChoice]) -> list[FlagChoice]:
        for choice in flags:
            if choice.flag in RESERVED_FLAGS:
                raise ValueError(f"{choice.flag} is set by the script itself; drop it from the variant's flags")
        return flags

    def flag_words(self) -> list[str]:
        words: list[str] = []
        for choice in self.flags:
            words.append(choice.flag)
            if choice.value != "":
                words.append(choice.value)
        return words

    def launch_args(self, port: int | str) -> list[str]:
        """Arguments after the interpreter: ``-m sglang.launch_server ...``."""
        return ["-m", "sglang.launch_server", "--model-path", self.model_path, "--tp-size", str(self.tp),
                "--host", self.host, "--port", str(port), *MEASURE_FLAGS, *self.flag_words()]

    def child_env(self) -> dict[str, str]:
        env = {e.name: e.value for e in self.env}
        if self.gpus is not None:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in self.gpus)
        return env


class BenchPoint(BaseModel):
    """One run of the bench client; a point measured K times is K of these (repeat 1..K)."""

    concurrency: int = Field(ge=1)
    num_prompts: int = Field(ge=1)
    repeat: int = Field(1, ge=1, description="Which repeat; part of the point's identity (its tag and job)")

    def tag(self, variant: str) -> str:
        """``<variant>-c<k>``, with ``-r<i>`` from the second repeat on (a first run keeps its old name)."""
        return f"{variant}-c{self.concurrency}" + (f"-r{self.repeat}" if self.repeat > 1 else "")


class MeasurePlan(BaseModel):
    """The sweep: every variant at every concurrency, with SGLang's own bench client."""

    variants: list[ServeVariant] = Field(min_length=1)
    concurrency: ConcurrencyLevels = Field(default_factory=lambda: [1, 8, 16], description="--max-concurrency levels")
    tokenizer: str | None = Field(None, description="Local tokenizer folder (offline benchmarks)")
    backend: str = Field("sglang", description="bench_serving --backend")
    input_len: int = Field(1024, ge=1, description="--random-input-len")
    output_len: int = Field(1024, ge=1, description="--random-output-len")
    prompts_per_concurrency: int = Field(8, ge=1, description="Prompts per concurrency slot")
    min_prompts: int = Field(16, ge=1, description="Fewest prompts of any point")
    warmup_requests: int = Field(2, ge=0)
    ready_timeout_s: int = Field(1800, ge=1, description="How long a server may take to become ready")
    port: int = Field(30000, ge=1, le=65535, description="Default port of the scripts")
    repeats: int = Field(1, ge=1, description="Runs of every point on the same server (median and spread)")
    client_module: str = Field("sglang.bench_serving", description="The bench client: sglang.benchmark.serving "
                               "where the SGLang version has it, else the older sglang.bench_serving")
    accuracy: AccuracyPlan | None = Field(None, description="GSM8K accuracy gate per variant; None = not run")
    accept_floors: list[Floor] = Field(default_factory=list, description="Accept-length floors SGLang's own tests "
                                       "state, read from the tree (tools/measure/accept_floors.py)")

    def points(self) -> list[BenchPoint]:
        """Prompt counts scale with concurrency so every slot sees several requests; repeats follow each other."""
        return [BenchPoint(concurrency=c, num_prompts=max(self.min_prompts, c * self.prompts_per_concurrency),
                           repeat=r) for c in self.concurrency for r in range(1, self.repeats + 1)]


def bench_args(plan: MeasurePlan) -> list[tuple[str, str, str]]:
    """Bench client flags shared by every point, as (flag, value, why) triples.

    Host, port, concurrency, prompt count, tag and output file are added per point.
    """
    args = [("--backend", plan.backend, "SGLang's native /generate API"),
            ("--dataset-name", "random-ids", "random token ids: needs no dataset download"),
            ("--random-input-len", str(plan.input_len), USER_CHOICE),
            ("--random-output-len", str(plan.output_len), USER_CHOICE),
            ("--random-range-ratio", "1.0", "fixed lengths, so variants see the same work"),
            ("--warmup-requests", str(plan.warmup_requests), USER_CHOICE)]
    if plan.tokenizer:
        args.append(("--tokenizer", plan.tokenizer, "local tokenizer: works offline"))
    return args


def point_args(plan: MeasurePlan, variant: str, point: BenchPoint, host: str, port: int | str,
               output_file: str) -> list[str]:
    """The full bench_serving argument list for one point (after the interpreter)."""
    words = ["-m", plan.client_module]
    for flag, value, _why in bench_args(plan):
        words += [flag, value]
    return words + ["--host", host, "--port", str(port), "--max-concurrency", str(point.concurrency),
                    "--num-prompts", str(point.num_prompts), "--tag", point.tag(variant),
                    "--output-file", output_file]
