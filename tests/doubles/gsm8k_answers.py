"""TEST DOUBLE helper: the SGLang server double answers GSM8K few-shot prompts.

``DSV4_DOUBLE_GSM8K`` names a GSM8K-format JSONL file (``{"question", "answer"}`` lines, the
answer ending in ``#### <number>``) that the test wrote; the same file is SGLang's
``few_shot_gsm8k --data-path``. A prompt from that client is the few-shot examples followed by
``Question: <q>\\nAnswer:``; the double answers the last question with the file's own answer, as
a perfect model would. ``DSV4_DOUBLE_GSM8K_DEGRADED`` ("S/K/D;S/K/D", or "none" for no
speculation) lists the settings under which the "model" is degraded: every second question in
the file gets its final number off by one, so accuracy falls to about a half.
"""
from __future__ import annotations

import json
import os
import re

QUESTION = re.compile(r"Question: (?P<q>.*?)\nAnswer:\s*$", re.S)


class Gsm8kAnswers:
    def __init__(self, setting_label: str):
        self.answers: dict[str, tuple[int, str]] = {}
        path = os.environ.get("DSV4_DOUBLE_GSM8K")
        if path and os.path.exists(path):
            with open(path) as f:
                for index, line in enumerate(x for x in f if x.strip()):
                    item = json.loads(line)
                    self.answers[item["question"]] = (index, item["answer"])
        degraded = os.environ.get("DSV4_DOUBLE_GSM8K_DEGRADED", "")
        self.degraded = setting_label in [s.strip() for s in degraded.split(";") if s.strip()]

    def answer(self, prompt: str) -> str | None:
        """The answer text for a few-shot prompt whose last question is known, else None."""
        tail = prompt.rsplit("Question: ", 1)
        match = QUESTION.search("Question: " + tail[-1]) if len(tail) == 2 else None
        if match is None or match["q"] not in self.answers:
            return None
        index, text = self.answers[match["q"]]
        if self.degraded and index % 2 == 1:
            text = text.replace(",", "")
            number = re.findall(r"\d+", text)[-1]
            text = text[: text.rindex(number)] + str(int(number) + 1)
        return " " + text
