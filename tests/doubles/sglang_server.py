"""TEST DOUBLE of an SGLang server (``python -m sglang.launch_server``) on loopback.

It is a double, not SGLang: no model, no GPU. It speaks the parts of SGLang's HTTP protocol that
our server lifecycle and SGLang's own bench client (``sglang.bench_serving``) use:

  GET  /health                 200 once ready (503 before)
  GET  /v1/models              {"object": "list", "data": [{"id": <served model name>, ...}]}
  GET  /model_info             {"model_path", "tokenizer_path", "is_generation"} (also /get_model_info,
                               the older name SGLang's own ``RuntimeEndpoint`` still asks for)
  GET  /server_info            as SGLang 0.5.23 (srt/entrypoints/http_server.py: server_info): the resolved
                               ServerArgs fields this double knows (model_path, tp_size, host, port,
                               speculative_algorithm / _num_steps / _eagle_topk / _num_draft_tokens /
                               _draft_model_path; unset ones are null), "launch_command" (the arguments
                               joined by spaces, as srt/server_args.py records them), "internal_states"
                               ([{"avg_spec_accept_length": ...}]) and "version"
  GET  /get_server_info        the same (SGLang's deprecated alias)
  GET  /metrics                with --enable-metrics only (404 otherwise, as in SGLang): Prometheus
                               text with SGLang's counters sglang:generation_tokens_total and
                               sglang:spec_verify_calls_total (per finished request)
  POST /flush_cache            200
  POST /generate               SGLang native; streaming as ``data: {"text": <cumulative>,
                               "meta_info": {...}}`` lines ending with ``data: [DONE]``
  POST /v1/chat/completions    OpenAI chat, streaming chunks with ``delta.content`` and usage

Tokens are the words ``w<i>`` separated by spaces, which the WordLevel test tokenizer counts one
to one. Decoding runs in steps; with a speculative algorithm each step yields ``accept length``
tokens (as MTP does). Accept length and step time are functions of the speculative setting
(``--speculative-num-steps``, ``--speculative-eagle-topk``, ``--speculative-num-draft-tokens``) and
of the number of requests decoding at once: tests/doubles/speculative_profile.py says how. The
accept length reported by /server_info is cumulative since start, as in SGLang. GSM8K few-shot
prompts (SGLang's ``sglang.test.few_shot_gsm8k``) are answered from a dataset the test wrote,
correctly or degraded per setting: tests/doubles/gsm8k_answers.py.

Held to the real server: tests/real_sglang/test_real_server.py sends the same requests to this double
and to SGLang 0.5.23 serving a tiny model on the CPU, and fails when a field this double answers is
missing there or of another kind (every GET above, /generate, /v1/chat/completions, the /metrics
counters, the bench client's and GSM8K check's own requests). What it cannot be held to, because
speculative decoding does not run on a CPU build, and what real field each stands for:
  speculative_algorithm / _num_steps / _eagle_topk / _num_draft_tokens with values
                             SGLang's resolved ServerArgs fields of those names (null without one)
  internal_states[0].avg_spec_accept_length
                             the scheduler's spec_total_num_accept_tokens / spec_total_num_forward_ct
  sglang:spec_verify_calls_total samples
                             the tokenizer manager's counter of verify calls per finished request
Nor does it start like the real one: one process (the real server is a launcher, a scheduler and a
detokenizer, ending after the launcher), ready in DSV4_DOUBLE_STARTUP_S (the real one imports for
minutes), and its /server_info lists only the fields above (the real one lists every ServerArgs field).

Configuration (flags SGLang does not know are ignored, like the real parser would not):
  --model-path, --host, --port, --tp-size, --served-model-name, --speculative-algorithm, --speculative-num-steps,
  --speculative-eagle-topk, --speculative-num-draft-tokens, --speculative-draft-model-path,
  --speculative-dspark-block-size  (SGLang's flags; DSPARK takes its block from config.json when not given)
  DSV4_DOUBLE_STEP_MS        decode step time in ms (default 2)
  DSV4_DOUBLE_ACCEPT_LENGTH  tokens per step with an algorithm but no steps given (default 3)
  DSV4_DOUBLE_SPEC_P, DSV4_DOUBLE_DRAFT_COST, DSV4_DOUBLE_SPEC_PROFILE, DSV4_DOUBLE_NOISE(_SEED)
                             per-setting behaviour and reproducible noise (speculative_profile.py)
  DSV4_DOUBLE_GSM8K, DSV4_DOUBLE_GSM8K_DEGRADED  GSM8K answers (gsm8k_answers.py)
  DSV4_DOUBLE_ACCEPT_LENGTH_FILE  (double-only knob) a file whose number, when it exists, replaces
                             the accept length for requests starting after it was written
  DSV4_DOUBLE_HOLD_FILE      (double-only knob) while this file exists, every request waits before its
                             first token, as on a server busy elsewhere: a test holds a point open
                             until it has crashed what it wanted to crash inside it, then removes the file
  --dp-size N with --enable-dp-attention  data-parallel attention, as the DeepSeek-V4 recipes run it: requests
                             go to the N ranks in turn and internal_states has one entry per rank, each with
                             that rank's own cumulative avg_spec_accept_length (SGLang's scheduler per DP rank);
                             the /metrics counters count every request, as SGLang's tokenizer manager does
  DSV4_DOUBLE_DP_ACCEPT      (double-only knob) "a,b,...": rank i decodes a_i tokens per step (ranks serving
                             different requests accept differently), so one rank's average is not the pool's
  DSV4_DOUBLE_IDENTITY_FILE  (double-only knob) a path: a server started before that file was written reports
                             the file's text as its model_path (and in its launch_command) (a server left running that is no longer the
                             one the run launched fails the identity check); one started after it is unaffected
  DSV4_DOUBLE_STARTUP_S      seconds before /health answers 200 (default 0.2)
  DSV4_DOUBLE_BIND_AFTER_FILE  a path: the HTTP port is bound only once it exists (at most 120 s). SGLang
                             binds it only after loading the model, so a port free at launch can be
                             taken meanwhile; the file lets a test take it first, however slow the machine
  DSV4_DOUBLE_NEVER_READY    "1": never becomes ready (readiness-timeout tests)
  DSV4_DOUBLE_EXIT_AT_START  exit code: log a fatal error and exit at start (crash tests)
  DSV4_DOUBLE_FP8_SHAPES     "N,K;N,K;...": block-FP8 GEMM shapes the "model" runs. At model load the
                             double logs, per shape, SGLang 0.5.23's own lines (kernels/ops/gemm/
                             fp8_kernel.py): "Using configuration from <path> for W8A8 Block FP8
                             kernel." when <path> exists, else the "Using default W8A8 Block FP8
                             kernel config. ... Config file not found at <path>" warning
  DSV4_DOUBLE_FP8_CONFIG_DIR the configs/ folder those paths are in (the real server reads the one
                             next to its kernel module); required with DSV4_DOUBLE_FP8_SHAPES
  DSV4_DOUBLE_DEVICE_NAME    GPU name in the file names (default "NVIDIA H200")
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from gsm8k_answers import Gsm8kAnswers  # siblings: this file runs as a script from tests/doubles/
from speculative_profile import Profile, TokenClock, label, resolve


def _checkpoint_block(model_path: str) -> int | None:
    """The checkpoint's dspark_block_size, which SGLang reads when no flag gives the block size."""
    try:
        config = json.loads((Path(model_path) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    value = (config.get("text_config") or config).get("dspark_block_size") if isinstance(config, dict) else None
    return value if isinstance(value, int) else None


class State:
    def __init__(self, args: argparse.Namespace, argv: list[str]):
        self.args = args
        self.launch_command = " ".join(argv)
        self.model_path = args.model_path
        self.served_name = args.served_model_name or args.model_path
        self.spec = args.speculative_algorithm
        self.setting = resolve(self.spec, args.speculative_num_steps, args.speculative_eagle_topk,
                               args.speculative_num_draft_tokens, args.speculative_dspark_block_size
                               or _checkpoint_block(args.model_path))
        dspark = self.spec == "DSPARK"
        self.profile = Profile(self.setting, float(os.environ.get("DSV4_DOUBLE_STEP_MS", "2")),
                               explicit=args.speculative_num_steps is not None or dspark, block=dspark)
        self.step_s = self.profile.step_ms / 1000.0  # prefill
        self.accept = self.profile.accept
        self.gsm8k = Gsm8kAnswers(label(self.setting))
        self.ready_at = time.monotonic() + float(os.environ.get("DSV4_DOUBLE_STARTUP_S", "0.2"))
        self.never_ready = os.environ.get("DSV4_DOUBLE_NEVER_READY") == "1"
        self.lock = threading.Lock()
        self.tokens = 0
        self.steps = 0
        self.enable_metrics = bool(getattr(args, "enable_metrics", False))
        self.accept_file = os.environ.get("DSV4_DOUBLE_ACCEPT_LENGTH_FILE")
        self.hold_file = os.environ.get("DSV4_DOUBLE_HOLD_FILE")
        self.verify_calls = 0  # Prometheus counters of finished requests, as SGLang's tokenizer manager
        self.generation_tokens = 0
        self.dp = max(1, args.dp_size) if args.enable_dp_attention else 1
        rank_accept = [float(a) for a in os.environ.get("DSV4_DOUBLE_DP_ACCEPT", "").split(",") if a.strip()]
        self.rank_accept = (rank_accept + [self.accept] * self.dp)[:self.dp]
        self.rank_tokens, self.rank_steps = [0] * self.dp, [0] * self.dp
        self.arrivals = 0
        self.started = time.time()
        self.identity_file = os.environ.get("DSV4_DOUBLE_IDENTITY_FILE")

    def reported_model_path(self) -> str:
        path = self.identity_file
        if path and os.path.exists(path) and os.path.getmtime(path) > self.started:
            return Path(path).read_text().strip()
        return self.model_path

    def next_rank(self) -> int:
        """The DP rank the next request goes to (in turn)."""
        with self.lock:
            self.arrivals += 1
            return (self.arrivals - 1) % self.dp

    def accept_now(self, rank: int = 0) -> float:
        if self.spec and self.accept_file and os.path.exists(self.accept_file):
            return max(1, int(float(Path(self.accept_file).read_text().strip() or "1")))
        return self.rank_accept[rank] if self.spec and self.dp > 1 else self.accept

    def finish_request(self, tokens: int, steps: int) -> None:
        with self.lock:
            self.generation_tokens += tokens
            if self.spec:
                self.verify_calls += steps

    def metrics_text(self) -> str:
        name = self.served_name.replace("\\", "\\\\").replace('"', '\\"')
        with self.lock:
            lines = ["# HELP sglang:generation_tokens_total Number of generation tokens processed.",
                     "# TYPE sglang:generation_tokens_total counter",
                     f'sglang:generation_tokens_total{{model_name="{name}",is_streaming="true"}} '
                     f"{float(self.generation_tokens)}",
                     "# HELP sglang:spec_verify_calls_total Number of speculative decoding verification calls.",
                     "# TYPE sglang:spec_verify_calls_total counter"]
            if self.verify_calls:  # a labelled counter never incremented has no sample line
                lines.append(f'sglang:spec_verify_calls_total{{model_name="{name}"}} {float(self.verify_calls)}')
        return "\n".join(lines) + "\n"

    @property
    def ready(self) -> bool:
        return not self.never_ready and time.monotonic() >= self.ready_at

    def record(self, tokens: int, steps: int, rank: int = 0) -> None:
        with self.lock:
            self.tokens += tokens
            self.steps += steps
            self.rank_tokens[rank] += tokens
            self.rank_steps[rank] += steps

    def server_info(self) -> dict:
        states: list[dict] = [{"last_gen_throughput": 0.0} for _rank in range(self.dp)]
        if self.spec:
            with self.lock:
                for rank, internal in enumerate(states):  # each scheduler knows only its own requests
                    steps = self.rank_steps[rank]
                    internal["avg_spec_accept_length"] = (self.rank_tokens[rank] / steps) if steps else 0.0
        steps, topk, draft = self.setting or (None, None, None)  # resolved, as SGLang's resolved_dict reports them
        fields = {"model_path": self.reported_model_path(), "tokenizer_path": self.model_path, "tp_size": self.args.tp_size,
                  "host": self.args.host, "port": self.args.port, "speculative_algorithm": self.spec,
                  "speculative_num_steps": steps, "speculative_eagle_topk": topk,
                  "speculative_num_draft_tokens": draft,
                  "speculative_draft_model_path": self.args.speculative_draft_model_path}
        command = self.launch_command.replace(self.model_path, fields["model_path"])  # as launched, per the knob
        return {**fields, "launch_command": command, "internal_states": states,
                "version": "0.5.23-double", "frontend": "python"}


def log_fp8_config_lookups() -> None:
    """SGLang's get_w8a8_block_fp8_configs lines, one per shape, as at the first forward of each GEMM."""
    shapes = [s for s in os.environ.get("DSV4_DOUBLE_FP8_SHAPES", "").split(";") if s.strip()]
    if not shapes:
        return
    folder = os.path.realpath(os.environ["DSV4_DOUBLE_FP8_CONFIG_DIR"])
    device = os.environ.get("DSV4_DOUBLE_DEVICE_NAME", "NVIDIA H200").replace(" ", "_")
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    for shape in shapes:
        n, k = (int(p) for p in shape.split(","))
        name = f"N={n},K={k},device_name={device},dtype=fp8_w8a8,block_shape=[128, 128].json"
        path = os.path.join(folder, name)
        if os.path.exists(path):
            print(f"[{stamp} TP0] Using configuration from {path} for W8A8 Block FP8 kernel.", flush=True)
        else:
            print(f"[{stamp} TP0] Using default W8A8 Block FP8 kernel config. Performance might be sub-optimal! "
                  f"Config file not found at {path}", flush=True)


def _prompt_tokens(body: dict) -> int:
    if isinstance(body.get("input_ids"), list):
        return len(body["input_ids"])
    if "messages" in body:
        return sum(len(str(m.get("content", "")).split()) for m in body["messages"])
    return len(str(body.get("text", "")).split())


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: State  # set on the class by main()

    def log_message(self, fmt, *args):  # SGLang-like access log on stderr
        sys.stderr.write("[double] %s\n" % (fmt % args))

    def _json(self, code: int, data: dict) -> None:
        raw = json.dumps(data).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def do_GET(self):
        st = self.state
        if self.path == "/health":
            return self._json(200 if st.ready else 503, {})
        if not st.ready:
            return self._json(503, {"error": "server is starting"})
        if self.path == "/v1/models":
            return self._json(200, {"object": "list", "data": [
                {"id": st.served_name, "object": "model", "owned_by": "sglang", "root": st.model_path}]})
        if self.path in ("/model_info", "/get_model_info"):
            return self._json(200, {"model_path": st.model_path, "tokenizer_path": st.model_path,
                                    "is_generation": True})
        if self.path in ("/server_info", "/get_server_info"):
            return self._json(200, st.server_info())
        if self.path == "/metrics" and st.enable_metrics:
            raw = st.metrics_text().encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)
            return None
        return self._json(404, {"error": f"no route {self.path}"})

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        path = self.path.split("?")[0]
        if not self.state.ready:
            return self._json(503, {"error": "server is starting"})
        if path == "/flush_cache":
            return self._json(200, {})
        if path == "/generate":
            n = int((body.get("sampling_params") or {}).get("max_new_tokens") or 16)
            return self._decode(body, n, chat=False)
        if path == "/v1/chat/completions":
            n = int(body.get("max_completion_tokens") or body.get("max_tokens") or 16)
            return self._decode(body, n, chat=True)
        return self._json(404, {"error": f"no route {path}"})

    def _decode(self, body: dict, n: int, chat: bool) -> None:
        st = self.state
        prompt = _prompt_tokens(body)
        words: list[str] = []
        steps = 0
        stream = bool(body.get("stream"))
        if stream:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
        while st.hold_file and os.path.exists(st.hold_file):
            time.sleep(0.02)
        time.sleep(st.step_s)  # prefill
        rank = st.next_rank()
        clock, factor = TokenClock(st.accept_now(rank)), st.profile.request_factor()
        answer = st.gsm8k.answer(str(body.get("text", ""))) if not chat else None
        if answer is not None:  # a GSM8K question from the test's dataset: the whole answer in one piece
            words, n = [answer], 1
        st.profile.enter()
        try:
            while len(words) < n:
                time.sleep(st.profile.step_s(factor))
                new = [f"w{(len(words) + i) % 1000}" for i in range(min(clock.next_step(), n - len(words)))]
                words.extend(new)
                steps += 1
                if stream:
                    self._chunk(b"data: " + json.dumps(self._piece(words, new, prompt, chat)).encode() + b"\n\n")
        finally:
            st.profile.leave()
        st.record(len(words), steps, rank)
        st.finish_request(len(words), steps)
        if stream:
            if chat:
                usage = {"prompt_tokens": prompt, "completion_tokens": len(words),
                         "total_tokens": prompt + len(words)}
                self._chunk(b"data: " + json.dumps({"choices": [], "usage": usage}).encode() + b"\n\n")
            self._chunk(b"data: [DONE]\n\n")
            self._chunk(b"")
            return
        text = " ".join(words)
        if chat:
            return self._json(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                                 "finish_reason": "length"}],
                                    "usage": {"prompt_tokens": prompt, "completion_tokens": len(words)}})
        return self._json(200, {"text": text, "meta_info": self._meta(words, prompt)})

    def _meta(self, words: list[str], prompt: int) -> dict:
        meta = {"id": "double", "prompt_tokens": prompt, "completion_tokens": len(words), "finish_reason": None}
        if self.state.spec:
            meta["spec_accept_length"] = float(self.state.accept)
        return meta

    def _piece(self, words: list[str], new: list[str], prompt: int, chat: bool) -> dict:
        if chat:
            content = (" " if len(words) > len(new) else "") + " ".join(new)
            return {"id": "double", "object": "chat.completion.chunk",
                    "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}]}
        return {"text": " ".join(words), "meta_info": self._meta(words, prompt)}


def _wait_for_bind_file() -> None:
    path = os.environ.get("DSV4_DOUBLE_BIND_AFTER_FILE")
    deadline = time.monotonic() + 120
    while path and not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="sglang.launch_server (double)")
    parser.add_argument("--model-path", "--model", dest="model_path", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--served-model-name", default=None)
    parser.add_argument("--tp-size", "--tp", dest="tp_size", type=int, default=1)
    parser.add_argument("--speculative-algorithm", default=None)
    parser.add_argument("--speculative-num-steps", type=int, default=None)
    parser.add_argument("--speculative-eagle-topk", type=int, default=None)
    parser.add_argument("--speculative-num-draft-tokens", type=int, default=None)
    parser.add_argument("--speculative-draft-model-path", default=None)
    parser.add_argument("--speculative-dspark-block-size", type=int, default=None)
    parser.add_argument("--enable-metrics", action="store_true")
    parser.add_argument("--dp-size", "--dp", dest="dp_size", type=int, default=1)
    parser.add_argument("--enable-dp-attention", action="store_true")
    args, unknown = parser.parse_known_args(argv)
    print(f"[double] launch_server args={argv!r} ignored={unknown!r}", flush=True)
    crash = os.environ.get("DSV4_DOUBLE_EXIT_AT_START")
    if crash:
        print("[double] RuntimeError: CUDA out of memory (simulated crash at start)", flush=True)
        return int(crash)
    log_fp8_config_lookups()
    Handler.state = State(args, argv)
    _wait_for_bind_file()
    try:
        server = ThreadingHTTPServer((args.host, args.port), Handler)
    except OSError as err:
        print(f"[double] cannot bind {args.host}:{args.port}: {err}", flush=True)
        return 1
    server.daemon_threads = True
    print(f"[double] Uvicorn running on http://{args.host}:{args.port}", flush=True)
    print("[double] The server is fired up and ready to roll!", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
