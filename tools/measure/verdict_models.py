"""The verdict's data: a point's figures (median and spread of its repeats), ratios to the baseline,
SLOs, each concurrency level's finding and the verdict itself (``verdict.json``; docs/formats.md).
The rules that fill them are in tools/measure/verdict.py and tools/measure/verdict_overall.py."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from tools.measure.accept_floors import AcceptCheck

BASELINE = "baseline"
Percentile = Literal["p50", "p90", "p95", "p99"]


class Spread(BaseModel):
    median: float
    low: float
    high: float
    n: int

    @property
    def relative(self) -> float:
        return (self.high - self.low) / self.median if self.median else 0.0


class PointStats(BaseModel):
    variant: str
    concurrency: int
    repeats: int
    metrics: dict[str, Spread]
    accept_length: float | None = None
    accept_spread: Spread | None = Field(None, exclude=True, description="The accept lengths of the repeats "
                                                                        "(accept_length is their median)")
    tpot_ceiling: float | None = Field(None, description="1 / accept length: the TPOT ratio this point's accept length "
                                                          "would give if drafting and verifying were free")
    noisy: list[str] = Field(default_factory=list, description="Metrics whose repeats spread more than NOISY")


class Ratio(BaseModel):
    value: float
    low: float
    high: float
    one_sample: bool = Field(False, description="A point had one sample: no spread, so never measurable")

    def text(self) -> str:
        if self.one_sample:
            return f"{self.value:.2f}× (one sample)"
        return f"{self.value:.2f}× ({self.low:.2f}–{self.high:.2f})"


class Slo(BaseModel):
    max_ttft_ms: float | None = Field(None, gt=0)
    max_tpot_ms: float | None = Field(None, gt=0)
    percentile: Percentile = "p99"

    @property
    def given(self) -> bool:
        return self.max_ttft_ms is not None or self.max_tpot_ms is not None

    def text(self) -> str:
        parts = [f"TTFT {self.percentile} ≤ {self.max_ttft_ms:g} ms" if self.max_ttft_ms else "",
                 f"TPOT {self.percentile} ≤ {self.max_tpot_ms:g} ms" if self.max_tpot_ms else ""]
        return " and ".join(p for p in parts if p)


class LevelVerdict(BaseModel):
    concurrency: int
    tpot_winner: str | None = Field(description="Measurably fastest variant on TPOT; None: no measurable difference")
    tpot_ratio: Ratio | None = None
    throughput_winner: str | None = None
    throughput_ratio: Ratio | None = None
    accept_length: float | None = None
    meets_slo: list[str] = Field(default_factory=list)
    winner: str | None = Field(None, description="The variant this level picks (the baseline when none is measurably "
                                                 "better); None: no comparison, or none meets the SLO")
    why: str = Field("", description="Why it wins here, in words")
    summary: str
    baseline_measured: bool = Field(True, description="False: no baseline point here, so no verdict at this level")
    best: str | None = Field(None, description="The variant with the lowest TPOT here, measurably or not")
    tpot_ceiling: float | None = Field(None, description="1 / the best variant's accept length (free drafting)")
    deployed_ratio: Ratio | None = Field(None, description="The deployed variant's TPOT ratio to the baseline here")
    regression: bool = Field(False, description="The deployed variant is measurably slower than the baseline here")


class Verdict(BaseModel):
    recommended: str | None = Field(description="Variant to deploy; None when no variant meets the SLOs")
    reason: str
    levels: list[LevelVerdict]
    excluded: dict[str, str] = Field(default_factory=dict, description="Variants never recommended, and why")
    slo: Slo | None = None
    repeats: int = 1
    rule: str = Field("", description="The rule that picked the deployed setting across concurrencies")
    target_concurrency: int | None = Field(None, description="--target-concurrency: the level whose winner is deployed")
    headline: str = Field("", description="The deployed setting and its TPOT ratio at every level, or why none")
    disagree: bool = Field(False, description="Levels pick different settings and no target or SLO says which matters")
    accuracy: str = Field("", description="Whether the GSM8K gate ran, and why not")
    accept_checks: list[AcceptCheck] = Field(default_factory=list, description="Each variant's accept length "
                                             "against SGLang's own test floors; collapses called out")

    callouts: list[str] = Field(default_factory=list, description="What a reader must see beside the decision: "
                                "regressions of the deployed setting and collapsed drafters")
