"""The LLM client: the only module that imports ``openai``.

Chat Completions with tools (not the Responses API), so any OpenAI-compatible server works. Each call
records one ``llm_request`` and one ``llm_response`` event, so a run replays without the model.
Retries on 429/5xx/connection errors are our own bounded loop (the client's are off), so each attempt
is in the trace. The API key goes to the client only, never into an event.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from agent.settings.model import Settings
from agent.run.trace import TraceWriter
from agent.secrets import redact_text

PLACEHOLDER_KEY = "unused"  # SGLang/vLLM servers ignore the key, but the client wants one


class LLMError(Exception):
    """The LLM endpoint cannot be used; the message names the endpoint, the problem and the fix."""


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 3            # total tries per chat call
    base_delay_s: float = 0.5    # doubled per retry
    max_delay_s: float = 20.0    # also caps a server's Retry-After


def _usage(raw: Any) -> dict:
    if raw is None:
        return {"prompt": 0, "completion": 0, "total": 0}
    prompt, completion = raw.prompt_tokens or 0, raw.completion_tokens or 0
    return {"prompt": prompt, "completion": completion, "total": raw.total_tokens or prompt + completion}


class _Openai:
    """``openai`` imported on first use: it takes about a second to import, and a campaign in
    playbook mode (no LLM configured) never uses it."""

    def __getattr__(self, name: str):
        import openai as module

        return getattr(module, name)


openai = _Openai()


def _retry_after(err: openai.APIStatusError) -> float | None:
    value = err.response.headers.get("retry-after") if err.response is not None else None
    try:
        return float(value) if value else None
    except ValueError:
        return None


def new_input(messages: list[dict]) -> list[dict]:
    """The messages after the last assistant turn: what this request adds to the conversation."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "assistant":
            return messages[i + 1:]
    return messages


class LLMClient:
    def __init__(self, settings: Settings, trace: TraceWriter, *, stream: bool = False, timeout_s: float = 120.0,
                 retry: RetryPolicy = RetryPolicy(), sleep: Callable[[float], None] = time.sleep):
        if not settings.llm_base_url:
            raise LLMError("no LLM endpoint configured; pass --llm-base-url URL (e.g. http://127.0.0.1:30000/v1)")
        self.base_url = settings.llm_base_url
        self.shown_url = redact_text(self.base_url)  # messages end up in outcomes, state and the terminal
        self.stream = stream
        self.retry = retry
        self._sleep = sleep
        self._trace = trace
        self._calls = 0
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else PLACEHOLDER_KEY
        self._client = openai.OpenAI(base_url=self.base_url, api_key=key or PLACEHOLDER_KEY,
                                     timeout=timeout_s, max_retries=0)
        self.model = settings.llm_model or self._served_model()

    def _served_model(self) -> str:
        """No --llm-model: use the endpoint's model when it serves exactly one (an SGLang server does)."""
        try:
            ids = [m.id for m in self._client.models.list()]
        except openai.APIError as err:
            raise LLMError(f"--llm-model not given and listing models at {self.shown_url} failed "
                           f"({type(err).__name__}: {err}); pass --llm-model NAME") from None
        if len(ids) != 1:
            raise LLMError(f"--llm-model not given and {self.shown_url} serves {len(ids)} models "
                           f"({', '.join(ids[:10]) or 'none'}); pass --llm-model NAME")
        return ids[0]

    def chat(self, messages: list[dict], tools: list[dict], call: int | None = None) -> dict:
        """One model turn. ``call`` numbers it in the trace (the planner passes its turn number, so
        numbers stay unique across a resume); by default calls are counted per client."""
        self._calls += 1
        call = self._calls if call is None else call
        self._trace.emit("llm_request", "llm", call=call, model=self.model, stream=self.stream,
                         message_count=len(messages), messages=new_input(messages),
                         tools=[t["function"]["name"] for t in tools])
        started = time.monotonic()
        for attempt in range(1, self.retry.attempts + 1):
            try:
                message, usage, finish = self._stream(messages, tools) if self.stream else self._once(messages, tools)
            except (openai.RateLimitError, openai.InternalServerError, openai.APIConnectionError) as err:
                status = getattr(err, "status_code", None)
                problem = f"HTTP {status}" if status else type(err).__name__
                if attempt == self.retry.attempts:
                    gave_up = self._give_up(problem, attempt)  # recorded: a replay raises the same error
                    self._trace.emit("llm_response", "llm", call=call, status="error", attempt=attempt, error=problem,
                                     gave_up=gave_up)
                    raise LLMError(gave_up) from None
                delay = min(self.retry.base_delay_s * 2 ** (attempt - 1), self.retry.max_delay_s)
                if isinstance(err, openai.APIStatusError):
                    delay = min(_retry_after(err) or delay, self.retry.max_delay_s)
                self._trace.emit("llm_response", "llm", call=call, status="retry", attempt=attempt,
                                 error=problem, retry_in_s=delay)
                self._sleep(delay)
                continue
            except openai.APIStatusError as err:  # 4xx other than 429: retrying cannot help
                gave_up = (f"LLM endpoint {self.shown_url} refused the request: HTTP {err.status_code} "
                           f"({err.message}); check --llm-model and OPENAI_API_KEY")
                self._trace.emit("llm_response", "llm", call=call, status="error", attempt=attempt,
                                 error=f"HTTP {err.status_code}", gave_up=gave_up)
                raise LLMError(gave_up) from None
            self._trace.emit("llm_response", "llm", call=call, status="ok", attempt=attempt, message=message,
                             usage=usage, finish_reason=finish, ms=round((time.monotonic() - started) * 1000, 1))
            return {**message, "usage": usage}
        raise AssertionError("unreachable: the loop returns or raises")

    def _give_up(self, problem: str, attempts: int) -> str:
        fix = ("start the server or fix --llm-base-url" if "Connection" in problem or "Timeout" in problem
               else "the server is overloaded or failing: retry later or use another endpoint")
        return f"LLM endpoint {self.shown_url} failed {attempts} times (last: {problem}); {fix}"

    def _request(self, messages: list[dict], tools: list[dict]) -> dict:
        request: dict = {"model": self.model, "messages": messages}
        if tools:
            request["tools"] = tools
        return request

    def _once(self, messages: list[dict], tools: list[dict]) -> tuple[dict, dict, str | None]:
        response = self._client.chat.completions.create(**self._request(messages, tools))
        if not response.choices:
            raise LLMError(f"LLM endpoint {self.shown_url} answered with no choices; check the server's logs")
        choice = response.choices[0]
        calls = [{"id": c.id, "type": "function",
                  "function": {"name": c.function.name, "arguments": c.function.arguments or ""}}
                 for c in (choice.message.tool_calls or [])]
        message = {"role": "assistant", "content": choice.message.content, "tool_calls": calls}
        return message, _usage(response.usage), choice.finish_reason

    def _stream(self, messages: list[dict], tools: list[dict]) -> tuple[dict, dict, str | None]:
        """Assemble a streamed answer: content pieces, and tool calls by index (id/name once, arguments in pieces)."""
        content: list[str] = []
        calls: dict[int, dict] = {}
        usage, finish = None, None
        stream = self._client.chat.completions.create(**self._request(messages, tools), stream=True,
                                                      stream_options={"include_usage": True})
        for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                delta = choice.delta
                if delta.content:
                    content.append(delta.content)
                for piece in delta.tool_calls or []:
                    call = calls.setdefault(piece.index, {"id": "", "type": "function",
                                                          "function": {"name": "", "arguments": ""}})
                    if piece.id:
                        call["id"] = piece.id
                    if piece.function is not None:
                        call["function"]["name"] += piece.function.name or ""
                        call["function"]["arguments"] += piece.function.arguments or ""
                finish = choice.finish_reason or finish
        message = {"role": "assistant", "content": "".join(content) or None,
                   "tool_calls": [calls[i] for i in sorted(calls)]}
        return message, _usage(usage), finish
