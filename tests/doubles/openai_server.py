"""TEST DOUBLE of an OpenAI-compatible Chat Completions endpoint on loopback.

It is a double, not a model: every ``POST /v1/chat/completions`` answers with the next *turn*
of a script written by the test. It speaks the protocol the real ``openai`` client expects:

  POST /v1/chat/completions   non-streaming: a ``chat.completion`` object with ``usage``;
                              ``"stream": true``: Server-Sent Events of ``chat.completion.chunk``
                              objects (content and tool-call arguments split over several
                              deltas, as real servers send them), a usage chunk when
                              ``stream_options.include_usage`` is set, then ``data: [DONE]``
  GET  /v1/models             the served model

A turn is one of:
  ``Reply(content=..., tool_calls=[ToolCall(name, arguments)])``  an assistant message
  ``Fail(status=429|500, ...)``                                    an HTTP error with an OpenAI error body
  a callable ``(request_body) -> Reply | Fail``                    decided from what was sent
When the script is used up, ``after`` (a turn, default ``Fail(500)``) answers every request.
A ``Reply`` with ``delay_s`` is held that long before it is sent; leaving the ``with`` block
releases held answers at once.

Every request body and its headers are kept in ``requests`` for assertions.
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Union


@dataclass
class ToolCall:
    name: str
    arguments: str | dict  # a dict is JSON-encoded; a str is sent as is (malformed JSON tests)
    id: str = ""


@dataclass
class Reply:
    content: str | None = None
    tool_calls: list[ToolCall] = field(default_factory=list)
    prompt_tokens: int = 100
    completion_tokens: int = 20
    delay_s: float = 0.0  # hold the answer this long (a slow model; a window to kill the agent in)


@dataclass
class Fail:
    status: int = 500
    message: str = "scripted failure"
    retry_after: str | None = None


Turn = Union[Reply, Fail, Callable[[dict], Union[Reply, Fail]]]


def _chunks(text: str, size: int) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


class ScriptedOpenAI:
    """Start with ``with ScriptedOpenAI([...]) as server:``; ``server.base_url`` ends in /v1."""

    def __init__(self, turns: list[Turn], model: str = "scripted-model", after: Turn | None = None):
        self.turns = list(turns)
        self.after = after if after is not None else Fail(500, "script exhausted")
        self.model = model
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self._lock = threading.Lock()
        self._released = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> "ScriptedOpenAI":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._released.set()
        self._httpd.shutdown()
        self._httpd.server_close()

    def _next(self, body: dict) -> Reply | Fail:
        with self._lock:
            self.requests.append(body)
            turn = self.turns.pop(0) if self.turns else self.after
        return turn(body) if callable(turn) else turn

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def _json(self, status: int, payload: dict, extra: dict | None = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (extra or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self._json(200, {"object": "list", "data": [{"id": server.model, "object": "model"}]})
                else:
                    self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

            def do_POST(self) -> None:
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                    return
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                with server._lock:
                    server.headers.append(dict(self.headers))
                turn = server._next(body)
                if isinstance(turn, Reply) and turn.delay_s:
                    server._released.wait(turn.delay_s)
                if isinstance(turn, Fail):
                    extra = {"Retry-After": turn.retry_after} if turn.retry_after else {}
                    kind = "rate_limit_exceeded" if turn.status == 429 else "server_error"
                    self._json(turn.status, {"error": {"message": turn.message, "type": kind, "code": kind}}, extra)
                elif body.get("stream"):
                    self._stream(body, turn)
                else:
                    self._json(200, self._completion(body, turn))

            def _calls(self, turn: Reply) -> list[dict]:
                return [{"id": c.id or f"call_{i}", "type": "function",
                         "function": {"name": c.name, "arguments": c.arguments if isinstance(c.arguments, str)
                                      else json.dumps(c.arguments)}} for i, c in enumerate(turn.tool_calls)]

            def _usage(self, turn: Reply) -> dict:
                return {"prompt_tokens": turn.prompt_tokens, "completion_tokens": turn.completion_tokens,
                        "total_tokens": turn.prompt_tokens + turn.completion_tokens}

            def _completion(self, body: dict, turn: Reply) -> dict:
                calls = self._calls(turn)
                message = {"role": "assistant", "content": turn.content}
                if calls:
                    message["tool_calls"] = calls
                return {"id": "chatcmpl-double", "object": "chat.completion", "created": int(time.time()),
                        "model": body.get("model", server.model),
                        "choices": [{"index": 0, "message": message,
                                     "finish_reason": "tool_calls" if calls else "stop"}],
                        "usage": self._usage(turn)}

            def _stream(self, body: dict, turn: Reply) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                base = {"id": "chatcmpl-double", "object": "chat.completion.chunk", "created": int(time.time()),
                        "model": body.get("model", server.model)}

                def send(delta: dict, finish: str | None = None, usage: dict | None = None) -> None:
                    chunk = {**base, "choices": [] if usage else [{"index": 0, "delta": delta,
                                                                    "finish_reason": finish}]}
                    if usage:
                        chunk["usage"] = usage
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()

                send({"role": "assistant", "content": ""})
                if turn.content:
                    for piece in _chunks(turn.content, 7):
                        send({"content": piece})
                for index, call in enumerate(self._calls(turn)):
                    # first delta names the call; the arguments follow in pieces, as real servers do
                    send({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                          "function": {"name": call["function"]["name"], "arguments": ""}}]})
                    for piece in _chunks(call["function"]["arguments"], 5):
                        send({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
                send({}, finish="tool_calls" if turn.tool_calls else "stop")
                if (body.get("stream_options") or {}).get("include_usage"):
                    send({}, usage=self._usage(turn))
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

        return Handler
