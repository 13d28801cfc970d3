"""TEST DOUBLE helper: how the SGLang server double behaves per speculative setting.

Part of ``tests/doubles/sglang_server.py`` (no model, no GPU). The setting is resolved the way
SGLang's hooks resolve it for an MTP architecture: an algorithm with no steps gets the automatic
3/1/4, and topk 1 forces draft tokens = steps + 1. From it:

- accept length (tokens per decode step): ``1 + p + p^2 + ... + p^k`` with ``k = min(steps,
  draft tokens - 1)`` (DSPARK, a block drafter: ``k = draft tokens - 1``) and ``p`` the per-token draft acceptance (``DSV4_DOUBLE_SPEC_P``, default
  0.7; topk above 1 raises it a little), as a linear draft chain accepts;
- step time: the base step (``DSV4_DOUBLE_STEP_MS``) times ``1 + cost * (draft tokens - 1) *
  active requests`` (``DSV4_DOUBLE_DRAFT_COST``, default 0.1): verifying more draft tokens costs
  more as the batch grows, so the best setting moves with concurrency, as on a real GPU.

``DSV4_DOUBLE_SPEC_PROFILE`` (JSON ``{"S/K/D": {"accept": a, "step_ms": ms, "cost": c}}``, "none" for
no speculation) replaces any of the figures for a setting. A server given an algorithm but no steps (the
hooks choose) decodes ``DSV4_DOUBLE_ACCEPT_LENGTH`` tokens per step (default 3), as the double
always did.

``DSV4_DOUBLE_NOISE`` (e.g. 0.3): every request's step time is multiplied by a factor in
``[1 - noise, 1 + noise]``; ``A|B`` (e.g. ``0.4|2.5``): by A or B, even odds (a host whose speed
jumps, so the repeats of one point spread widely). The factors come from a sequence seeded by
``DSV4_DOUBLE_NOISE_SEED`` (default 0) and indexed by arrival order, so two servers given the same
requests get the same factors: repeats of one point spread, two servers with the same setting still
agree (a noisy host, reproducibly).
"""
from __future__ import annotations

import json
import os
import random
import threading


def resolve(algorithm: str | None, steps: int | None, topk: int | None, draft: int | None,
            block: int | None = None) -> tuple[int, int, int] | None:
    """(steps, topk, draft tokens) as the server would run them; None without speculation. DSPARK
    drafts one block per step: steps and topk 1, draft tokens = block size + 1 (the block from the flag,
    else the checkpoint's, else SGLang's default 7), as SGLang's hook resolves it."""
    if not algorithm:
        return None
    if algorithm == "DSPARK":
        return 1, 1, (block or 7) + 1
    if steps is None:
        steps, topk, draft = 3, 1, 4
    topk = topk or 1
    if topk == 1:
        draft = steps + 1
    return steps, topk, draft or steps + 1


def label(setting: tuple[int, int, int] | None) -> str:
    return "none" if setting is None else "/".join(map(str, setting))


class Profile:
    def __init__(self, setting: tuple[int, int, int] | None, base_step_ms: float, explicit: bool,
                 block: bool = False):
        self.setting = setting
        override = json.loads(os.environ.get("DSV4_DOUBLE_SPEC_PROFILE") or "{}").get(label(setting), {})
        self.step_ms = float(override.get("step_ms", base_step_ms))
        self.cost = float(override.get("cost", os.environ.get("DSV4_DOUBLE_DRAFT_COST", "0.1")))
        if "accept" in override:
            self.accept = float(override["accept"])
        elif setting is not None and not explicit:
            self.accept = max(1.0, float(os.environ.get("DSV4_DOUBLE_ACCEPT_LENGTH", "3")))
        elif setting is not None:
            steps, topk, draft = setting
            p = min(0.95, float(os.environ.get("DSV4_DOUBLE_SPEC_P", "0.7")) + 0.05 * (topk - 1))
            chain = draft - 1 if block else min(steps, draft - 1)  # a block drafter proposes all its tokens at once
            self.accept = sum(p ** i for i in range(chain + 1))
        else:
            self.accept = 1.0
        noise = os.environ.get("DSV4_DOUBLE_NOISE", "0")
        self.two_point = [float(x) for x in noise.split("|")] if "|" in noise else None
        self.noise = 0.0 if self.two_point else float(noise)
        self._noise = random.Random(int(os.environ.get("DSV4_DOUBLE_NOISE_SEED", "0")))
        self._lock = threading.Lock()
        self.active = 0

    def draft_tokens(self) -> int:
        return self.setting[2] if self.setting else 1

    def request_factor(self) -> float:
        """The next arrival's noise factor (1.0 without DSV4_DOUBLE_NOISE)."""
        with self._lock:
            if self.two_point:
                return self.two_point[0] if self._noise.random() < 0.5 else self.two_point[1]
            draw = self._noise.uniform(1 - self.noise, 1 + self.noise)
        return draw if self.noise else 1.0

    def step_s(self, factor: float) -> float:
        load = 1 + self.cost * (self.draft_tokens() - 1) * max(1, self.active)
        return self.step_ms * load * factor / 1000.0

    def enter(self) -> None:
        with self._lock:
            self.active += 1

    def leave(self) -> None:
        with self._lock:
            self.active -= 1


class TokenClock:
    """Whole tokens per step whose average is the (fractional) accept length."""

    def __init__(self, accept: float):
        self.accept = accept
        self.total = 0.0

    def next_step(self) -> int:
        before = int(self.total)
        self.total += self.accept
        return max(1, int(self.total) - before)
