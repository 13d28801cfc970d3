"""The LLM tool loop: ask the model for one turn, run the tools it called once, take its answer.

The planner's graph nodes call one method per node (``turn``, ``observe``), so each model turn is its
own checkpoint; the research lane calls ``advance`` until the model answered with its submit tool,
checked against its pydantic model. The conversation file is the truth (agent/campaign/llm/conversation.py):
a recorded reply is never asked again and recorded observations never run again, so a kill at any
point resumes cleanly; the budget is counted from the recorded conversations.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from pydantic import BaseModel, ValidationError

from agent.campaign.llm.budget import Budget
from agent.campaign.llm.conversation import Conversation
from agent.campaign.llm.dispatch import bad_arguments, dispatch, traced_args
from agent.campaign.llm.registry import Registry
from agent.campaign.runtime import ChatClient, Runtime


def client(rt: Runtime) -> ChatClient:
    """The run's LLM client: ``rt.llm`` (a replay puts its client there), else built from settings."""
    if rt.llm is None:
        from agent.campaign.llm.client import LLMClient  # imports openai: only when a model is asked

        rt.llm = LLMClient(rt.settings, rt.trace, stream=rt.settings.llm_stream)
    return rt.llm


@dataclass(frozen=True)
class SubmitTool:
    """The tool the model answers with: its name, the answer's model (docstring = description)."""
    name: str
    answer: type[BaseModel]
    received: str  # the observation when the answer fits, e.g. "plan received"

    def schema(self) -> dict:
        params = self.answer.model_json_schema()
        params.pop("title", None)
        return {"type": "function", "function": {"name": self.name, "description": self.answer.__doc__.strip(),
                                                 "parameters": params}}

    def check(self, raw_text: str) -> tuple[str, dict | None]:
        """(observation text, the answer's JSON dump or None when it does not fit the schema)."""
        try:
            parsed = self.answer.model_validate_json(raw_text or "{}")
        except ValidationError as err:
            return bad_arguments(self.name, err), None
        return f"status: ok\n{self.received}", parsed.model_dump(mode="json")


@dataclass
class ToolLoop:
    rt: Runtime
    conversation: Conversation
    registry: Registry
    submit_tool: SubmitTool
    reminder: Callable[[int], str]    # what the model is told after a turn without tool calls (turns left)
    purpose: str = "a plan"           # what the turns are for, named when the budget runs out
    shares_budget_with: tuple[Conversation, ...] = field(default_factory=tuple)

    @property
    def answer(self) -> dict | None:
        return self.conversation.answer

    def budget(self) -> Budget:
        s, counted = self.rt.settings, (self.conversation, *self.shares_budget_with)
        return Budget(max_steps=s.max_llm_steps, max_tokens=s.llm_max_tokens, max_seconds=s.llm_max_seconds,
                      steps=sum(c.turns for c in counted), tokens=sum(c.tokens for c in counted),
                      seconds=sum(c.seconds for c in counted), purpose=self.purpose)

    def advance(self) -> None:
        """Observe a recorded reply, else ask for the next turn."""
        last = self.conversation.last
        if last is not None and last["kind"] == "reply":  # replied before a kill: its tools run now, once
            self.observe()
        else:
            self.turn()

    def turn(self) -> bool:
        """One model call, its reply appended; False when the reply was already recorded (not re-sent).
        Raises ``BudgetExhausted`` before a call that would go over the budget."""
        last = self.conversation.last
        if last is not None and last["kind"] == "reply":  # answered before a kill; the checkpoint lagged
            self.rt.trace.emit("progress", "llm", message=f"turn {last['turn']}: reply already recorded, not sent again")
            return False
        budget = self.budget()
        budget.before_turn()
        started = time.monotonic()
        reply = client(self.rt).chat(self.conversation.messages(), self.registry.schemas() + [self.submit_tool.schema()],
                                     call=budget.steps + 1)  # numbered across the conversations sharing the budget
        calls = reply.get("tool_calls") or []
        message = {"role": "assistant", "content": reply.get("content"), **({"tool_calls": calls} if calls else {})}
        self.conversation.append({"kind": "reply", "turn": self.conversation.turns + 1, "message": message,
                                  "usage": reply.get("usage") or {}, "seconds": round(time.monotonic() - started, 3)})
        return True

    def observe(self) -> bool:
        """Run the recorded reply's tool calls and append their observations as one line; False when
        they were already recorded (not run again)."""
        last = self.conversation.last
        if last is not None and last["kind"] == "observations":  # dispatched before a kill
            self.rt.trace.emit("progress", "llm", message=f"turn {last['turn']}: observations already recorded, "
                                                          "tools not run again")
            return False
        started = time.monotonic()
        calls = last["message"].get("tool_calls") or []
        messages: list[dict] = []
        answer = None
        for call in calls:
            if call["function"]["name"] == self.submit_tool.name:
                text, found = self.submit(call, answered=answer is not None)
                answer = answer or found
            else:
                text = dispatch(self.registry, call, self.rt.trace, submit=self.submit_tool.name).text
            messages.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": text})
        if not calls:
            messages.append({"role": "user", "content": self.reminder(self.budget().steps_left)})
        self.conversation.append({"kind": "observations", "turn": last["turn"], "messages": messages,
                                  "answer": answer, "seconds": round(time.monotonic() - started, 3)})
        return True

    def submit(self, call: dict, answered: bool) -> tuple[str, dict | None]:
        """Check one submit call: (observation text, the answer or None); only a turn's first answer counts."""
        name, raw = self.submit_tool.name, call["function"].get("arguments", "")
        self.rt.trace.emit("tool_call", "llm", tool=name, call_id=call.get("id", ""), args=traced_args(raw))
        if answered:
            text, answer = f"status: error\n{name} was already called in this turn; only the first answer counts", None
        else:
            text, answer = self.submit_tool.check(raw)
        status = text.split("\n", 1)[0].removeprefix("status: ")
        self.rt.trace.emit("tool_result", "llm", tool=name, call_id=call.get("id", ""), status=status,
                           summary=text.splitlines()[-1] if answer else status)
        return text, answer
