"""What a measurement job *is*, as opposed to how one attempt at it runs (``JobSpec.identity``).

A server is its variant (name, TP, GPUs, flags, environment); a bench point is the variant, the
concurrency and the sweep's load settings. Ports, absolute paths and the attempt number change
between attempts of one job, so they stay out and ``resume`` retries the job instead of refusing it.
"""
from __future__ import annotations

from tools.scripts.models import BenchPoint, MeasurePlan, ServeVariant


def server_identity(variant: ServeVariant) -> dict:
    return {"serve": variant.name, "tp": variant.tp, "gpus": variant.gpus, "flags": variant.flag_words(),
            "env": {e.name: e.value for e in variant.env}}


def sweep_settings(plan: MeasurePlan) -> dict:
    """The load every point of the sweep generates, apart from its concurrency."""
    return {"backend": plan.backend, "input_len": plan.input_len, "output_len": plan.output_len,
            "warmup_requests": plan.warmup_requests}


def point_identity(plan: MeasurePlan, variant: ServeVariant, point: BenchPoint) -> dict:
    return {"bench": variant.name, "concurrency": point.concurrency, "repeat": point.repeat,
            "num_prompts": point.num_prompts, "settings": sweep_settings(plan), "server": server_identity(variant)}


def point_job(variant: str, point: BenchPoint) -> str:
    """The base job key of a point (its tag names the repeat); attempts after the first add ``-a<n>``."""
    return f"bench-{point.tag(variant)}"


def server_job(variant: str) -> str:
    return f"serve-{variant}"
