"""The LLM planner's conversation, kept in the run folder (``llm/conversation.jsonl``), not in graph state.

One line per step of the loop, each one ``write`` and ``fsync``, so a kill leaves a whole line or a
torn tail (cut off by ``load``):

    {"kind": "prompt", "messages": [system, user]}                        written by llm_start
    {"kind": "reply", "turn": n, "message": {...}, "usage": {...}, "seconds": s}       llm_turn
    {"kind": "observations", "turn": n, "messages": [tool/user messages], "answer": {...}|null,
     "seconds": s}                                                                dispatch_tools

A resumed run continues from the file, even past an uncommitted checkpoint: a recorded reply is not
sent and recorded observations are not run again; the budget's counters are derived from it.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

CONVERSATION_FILE = "llm/conversation.jsonl"
KINDS = ("prompt", "reply", "observations")


class ConversationError(Exception):
    """The recorded conversation cannot be continued; the message names the file and the fix."""


@dataclass
class Conversation:
    path: Path
    entries: list[dict] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> "Conversation":
        """Read the recorded lines; a torn last line (the agent died writing it) is cut off the file."""
        if not path.exists():
            return cls(path)
        data = path.read_bytes()
        good_end = data.rfind(b"\n") + 1  # everything after the last newline is a torn write
        entries = []
        for number, raw in enumerate(data[:good_end].splitlines(), 1):
            try:
                entry = json.loads(raw)
            except json.JSONDecodeError as err:
                raise ConversationError(f"{path} line {number} is not JSON ({err.msg}); the conversation cannot be "
                                        "continued: start a new run") from None
            if not isinstance(entry, dict) or entry.get("kind") not in KINDS:
                raise ConversationError(f"{path} line {number} is not a conversation entry; start a new run")
            entries.append(entry)
        if good_end < len(data):
            with open(path, "r+b") as fh:
                fh.truncate(good_end)
        return cls(path, entries)

    def append(self, entry: dict) -> None:
        if entry.get("kind") not in KINDS:
            raise ValueError(f"conversation entry kind {entry.get('kind')!r} is not one of {KINDS}")
        line = (json.dumps(entry, ensure_ascii=False, default=str) + "\n").encode()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)  # one write: a kill leaves the whole line or a torn tail, never two halves
            os.fsync(fd)
        finally:
            os.close(fd)
        self.entries.append(entry)

    @property
    def last(self) -> dict | None:
        return self.entries[-1] if self.entries else None

    @property
    def started(self) -> bool:
        return bool(self.entries) and self.entries[0]["kind"] == "prompt"

    def messages(self) -> list[dict]:
        """The chat messages in order, as the next request sends them."""
        out: list[dict] = []
        for entry in self.entries:
            if entry["kind"] == "reply":
                out.append(entry["message"])
            else:
                out.extend(entry["messages"])
        return out

    @property
    def turns(self) -> int:
        return sum(e["kind"] == "reply" for e in self.entries)

    @property
    def tokens(self) -> int:
        return sum(int((e.get("usage") or {}).get("total", 0) or 0) for e in self.entries if e["kind"] == "reply")

    @property
    def seconds(self) -> float:
        return round(sum(float(e.get("seconds", 0) or 0) for e in self.entries), 3)

    @property
    def answer(self) -> dict | None:
        """The accepted submit_plan arguments, once the model sent a valid plan."""
        last = self.last
        return last.get("answer") if last and last["kind"] == "observations" else None
