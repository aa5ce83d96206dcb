#!/usr/bin/env python3
"""A loopback stand-in for the model APIs of Claude Code, OpenCode and Codex.

It plays one scripted turn for the end-to-end tests in tests/tests/agents.rs: the "model"
asks for the tool calls listed in the script, one per request, and records the tool result
the agent sends back for each; once every step has a result it answers with a final text
message. Standard library only.

    model_server.py --dir DIR [--idle SECONDS] [--lifetime SECONDS]

DIR/script.json (written by the test before the server starts):

    {"steps": [{"kind": "shell", "command": "echo hi"},
               {"kind": "write", "path": "/abs/file", "content": "text\\n"}],
     "final": "All done."}

What it writes in DIR (each file replaced atomically, so a reader never sees half of it):

- `port`: the TCP port it listens on (127.0.0.1 only), written once it accepts connections;
- `log.json`: every request (method, path, API, model, what was answered) and every tool
  result received, `{"requests": [...], "tool_results": [...]}`.

APIs spoken (streaming and not):

- Anthropic Messages, `POST …/v1/messages` (Claude Code, `ANTHROPIC_BASE_URL`), plus
  `…/v1/messages/count_tokens`;
- OpenAI Chat Completions, `POST …/chat/completions` (OpenCode's openai-compatible provider);
- OpenAI Responses, `POST …/responses` (Codex's default wire API);
- `GET …/models` in both dialects. Anything else gets a 404 and is logged.

The turn is stateless: the step to play is the number of this script's tool results present
in the request's history, so a retried request gets the same answer. Requests that offer no
tools (title generation, quota probes) get a short plain answer and do not advance the
script.

It stops by itself after `--idle` seconds without a request and after `--lifetime` seconds
in all, so a test that dies cannot leave it behind for long.
"""

import argparse
import itertools
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CALL_PREFIX = "lw_call_"
LOCK = threading.Lock()
STATE = {"requests": [], "tool_results": []}
LAST_ACTIVITY = [time.monotonic()]
IDS = itertools.count(1)


def atomic_write(path, text):
    tmp = f"{path}.tmp.{os.getpid()}.{threading.get_ident()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def flatten_text(value):
    """The text of a tool result, whatever shape the API gave it."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(flatten_text(v) for v in value)
    if isinstance(value, dict):
        for key in ("text", "output", "content"):
            if key in value:
                return flatten_text(value[key])
        return json.dumps(value)
    return str(value)


def step_of(call_id):
    if isinstance(call_id, str) and call_id.startswith(CALL_PREFIX):
        try:
            return int(call_id[len(CALL_PREFIX):])
        except ValueError:
            return None
    return None


class Turn:
    """What one request carries: the tools offered and this script's tool results."""

    def __init__(self, api, tools, results):
        self.api = api
        self.tools = [name for name, _ in tools]  # tool names offered
        self.types = dict(tools)  # name -> "function", "custom", …
        self.results = results  # {step: (text, is_error)}


def tools_anthropic(body):
    return [(t.get("name", ""), "function") for t in body.get("tools") or [] if isinstance(t, dict)]


def tools_chat(body):
    out = []
    for t in body.get("tools") or []:
        if isinstance(t, dict):
            out.append(((t.get("function") or {}).get("name", t.get("name", "")), "function"))
    return out


def tools_responses(body):
    out = []
    for t in body.get("tools") or []:
        if isinstance(t, dict):
            out.append((t.get("name") or t.get("type", ""), t.get("type", "function")))
    return out


def results_anthropic(body):
    out = {}
    for msg in body.get("messages") or []:
        content = msg.get("content")
        if msg.get("role") != "user" or not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                step = step_of(block.get("tool_use_id"))
                if step is not None:
                    out[step] = (flatten_text(block.get("content")), bool(block.get("is_error")))
    return out


def results_chat(body):
    out = {}
    for msg in body.get("messages") or []:
        if msg.get("role") == "tool":
            step = step_of(msg.get("tool_call_id"))
            if step is not None:
                out[step] = (flatten_text(msg.get("content")), False)
    return out


def results_responses(body):
    out = {}
    items = body.get("input")
    if not isinstance(items, list):
        return out
    for item in items:
        if not isinstance(item, dict):
            continue
        if item.get("type") in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
            step = step_of(item.get("call_id"))
            if step is not None:
                out[step] = (flatten_text(item.get("output")), False)
    return out


def pick(tools, *candidates):
    lower = {t.lower(): t for t in tools}
    for c in candidates:
        if c.lower() in lower:
            return lower[c.lower()]
    return None


def tool_call(api, tools, types, step):
    """(tool name, arguments: a dict, or the raw input of a freeform tool, kind)."""
    kind = step["kind"]
    if kind == "shell":
        cmd = step["command"]
        if api == "anthropic":
            name = pick(tools, "Bash")
            return name, {"command": cmd, "description": "Run a command for the test"}, "function"
        if api == "chat":
            name = pick(tools, "bash", "shell")
            return name, {"command": cmd, "description": "Run a command for the test"}, "function"
        # Codex: whichever shell tool this version offers.
        name = pick(tools, "shell_command")
        if name:
            return name, {"command": cmd}, "function"
        name = pick(tools, "exec_command")
        if name:
            return name, {"cmd": cmd}, "function"
        name = pick(tools, "shell")
        return name, {"command": ["bash", "-lc", cmd]}, "function"
    if kind == "write":
        path, content = step["path"], step["content"]
        if api == "anthropic":
            return pick(tools, "Write"), {"file_path": path, "content": content}, "function"
        if api == "chat":
            return pick(tools, "write"), {"filePath": path, "content": content}, "function"
        patch = "*** Begin Patch\n*** Add File: {}\n{}*** End Patch\n".format(
            path, "".join("+" + line + "\n" for line in content.splitlines())
        )
        name = pick(tools, "apply_patch")
        if name and types.get(name) == "function":
            return name, {"input": patch}, "function"
        return name, patch, "custom"
    raise ValueError(f"unknown step kind {kind!r}")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "landwall-stand-in/1"

    def log_message(self, fmt, *args):  # quiet: the JSON log is the record
        pass

    # -- plumbing -----------------------------------------------------------------------

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raw = self.read_chunked()
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except ValueError:
            return {"_unparsed": raw[:200].decode("utf-8", "replace")}

    def read_chunked(self):
        data = b""
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                self.rfile.readline()
                return data
            data += self.rfile.read(size)
            self.rfile.readline()

    def send_json(self, obj, status=200):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def start_sse(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def sse(self, event, data):
        if event:
            self.wfile.write(f"event: {event}\n".encode())
        self.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()

    def record(self, entry):
        with LOCK:
            STATE["requests"].append(entry)
            dump()

    # -- routing ------------------------------------------------------------------------

    def do_HEAD(self):
        LAST_ACTIVITY[0] = time.monotonic()
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        LAST_ACTIVITY[0] = time.monotonic()
        path = self.path.split("?")[0]
        if path.endswith("/models"):
            self.record({"method": "GET", "path": self.path, "api": "models", "action": "list"})
            self.send_json({
                "object": "list",
                "data": [{"id": "lw-test", "object": "model", "type": "model",
                          "display_name": "landwall stand-in", "created_at": "2025-01-01T00:00:00Z",
                          "created": 1735689600, "owned_by": "landwall"}],
                "has_more": False, "first_id": "lw-test", "last_id": "lw-test",
                "models": [],
            })
            return
        self.record({"method": "GET", "path": self.path, "api": "unknown", "action": "404"})
        self.send_json({"error": {"type": "not_found", "message": f"no {path} here"}}, 404)

    def do_POST(self):
        try:
            self.post()
        except Exception as e:  # the agent only sees a dropped connection: say why in the log
            self.record({"method": "POST", "path": self.path, "api": "error",
                         "action": f"error: {type(e).__name__}: {e}"})
            raise

    def post(self):
        LAST_ACTIVITY[0] = time.monotonic()
        path = self.path.split("?")[0]
        body = self.read_body()
        if ARGS.bodies:
            with LOCK:
                n = len(STATE["requests"])
            atomic_write(os.path.join(ARGS.dir, f"body-{n:03}.json"), json.dumps(body, indent=1))
        if path.endswith("/messages/count_tokens"):
            self.record({"method": "POST", "path": self.path, "api": "anthropic", "action": "count_tokens"})
            self.send_json({"input_tokens": 42})
        elif path.endswith("/messages"):
            self.turn(Turn("anthropic", tools_anthropic(body), results_anthropic(body)), body)
        elif path.endswith("/chat/completions"):
            self.turn(Turn("chat", tools_chat(body), results_chat(body)), body)
        elif path.endswith("/responses"):
            self.turn(Turn("responses", tools_responses(body), results_responses(body)), body)
        else:
            self.record({"method": "POST", "path": self.path, "api": "unknown", "action": "404"})
            self.send_json({"error": {"type": "not_found", "message": f"no {path} here"}}, 404)

    # -- the scripted turn --------------------------------------------------------------

    def turn(self, turn, body):
        steps = SCRIPT["steps"]
        entry = {"method": "POST", "path": self.path, "api": turn.api, "model": body.get("model"),
                 "stream": bool(body.get("stream")), "tools": turn.tools}
        with LOCK:
            seen = {r["step"] for r in STATE["tool_results"]}
            for step, (text, is_error) in sorted(turn.results.items()):
                if step not in seen and step < len(steps):
                    STATE["tool_results"].append({
                        "step": step, "api": turn.api, "kind": steps[step]["kind"],
                        "call_id": f"{CALL_PREFIX}{step}", "tool": ISSUED.get(step, ""),
                        "output": text, "is_error": is_error,
                    })
        if not turn.tools:
            entry["action"] = "plain text (no tools offered)"
            self.record(entry)
            return self.reply_text(turn.api, body, "Scripted test turn")
        n = len(turn.results)
        if n < len(steps):
            name, args, kind = tool_call(turn.api, turn.tools, turn.types, steps[n])
            if not name:
                entry["action"] = f"error: no tool for step {n} ({steps[n]['kind']}) among {turn.tools}"
                self.record(entry)
                return self.send_json({"error": {"type": "invalid_request_error",
                                                 "message": entry["action"]}}, 400)
            with LOCK:
                ISSUED[n] = name
            entry["action"] = f"tool call {n}: {name}"
            self.record(entry)
            return self.reply_tool(turn.api, body, f"{CALL_PREFIX}{n}", name, args, kind)
        entry["action"] = "final"
        self.record(entry)
        return self.reply_text(turn.api, body, SCRIPT.get("final", "Done."))

    # -- Anthropic Messages -------------------------------------------------------------

    def api_anthropic(self, body, blocks, stop_reason):
        msg_id = f"msg_lw_{next(IDS)}"
        model = body.get("model") or "lw-test"
        usage = {"input_tokens": 10, "output_tokens": 5,
                 "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        if not body.get("stream"):
            return self.send_json({"id": msg_id, "type": "message", "role": "assistant", "model": model,
                                   "content": blocks, "stop_reason": stop_reason, "stop_sequence": None,
                                   "usage": usage})
        self.start_sse()
        self.sse("message_start", {"type": "message_start", "message": {
            "id": msg_id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": dict(usage, output_tokens=1)}})
        for i, block in enumerate(blocks):
            if block["type"] == "text":
                self.sse("content_block_start", {"type": "content_block_start", "index": i,
                                                 "content_block": {"type": "text", "text": ""}})
                self.sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                                 "delta": {"type": "text_delta", "text": block["text"]}})
            else:
                self.sse("content_block_start", {"type": "content_block_start", "index": i, "content_block": {
                    "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}})
                self.sse("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {
                    "type": "input_json_delta", "partial_json": json.dumps(block["input"])}})
            self.sse("content_block_stop", {"type": "content_block_stop", "index": i})
        self.sse("message_delta", {"type": "message_delta",
                                   "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                                   "usage": {"output_tokens": 5}})
        self.sse("message_stop", {"type": "message_stop"})

    # -- OpenAI Chat Completions --------------------------------------------------------

    def api_chat(self, body, text, call):
        cid = f"chatcmpl-lw-{next(IDS)}"
        model = body.get("model") or "lw-test"
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        finish = "tool_calls" if call else "stop"
        if not body.get("stream"):
            message = {"role": "assistant", "content": text}
            if call:
                message["tool_calls"] = [{"id": call[0], "type": "function",
                                          "function": {"name": call[1], "arguments": json.dumps(call[2])}}]
            return self.send_json({"id": cid, "object": "chat.completion", "created": int(time.time()),
                                   "model": model, "choices": [{"index": 0, "message": message,
                                                                "finish_reason": finish}], "usage": usage})
        self.start_sse()

        def chunk(delta, finish_reason=None, **extra):
            self.sse(None, dict({"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
                                 "model": model, "choices": [{"index": 0, "delta": delta,
                                                              "finish_reason": finish_reason}]}, **extra))

        chunk({"role": "assistant", "content": ""})
        if call:
            chunk({"tool_calls": [{"index": 0, "id": call[0], "type": "function",
                                   "function": {"name": call[1], "arguments": json.dumps(call[2])}}]})
        else:
            chunk({"content": text})
        chunk({}, finish)
        self.sse(None, {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
                        "model": model, "choices": [], "usage": usage})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    # -- OpenAI Responses ---------------------------------------------------------------

    def api_responses(self, body, items):
        rid = f"resp_lw_{next(IDS)}"
        model = body.get("model") or "lw-test"
        usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}
        base = {"id": rid, "object": "response", "created_at": int(time.time()), "model": model,
                "status": "in_progress", "output": []}
        done = dict(base, status="completed", output=items, usage=usage)
        if not body.get("stream"):
            return self.send_json(done)
        self.start_sse()
        seq = itertools.count()
        self.sse("response.created", {"type": "response.created", "sequence_number": next(seq), "response": base})
        for i, item in enumerate(items):
            self.sse("response.output_item.added", {"type": "response.output_item.added",
                                                    "sequence_number": next(seq), "output_index": i,
                                                    "item": item})
            if item["type"] == "message":
                text = item["content"][0]["text"]
                self.sse("response.output_text.delta", {"type": "response.output_text.delta",
                                                        "sequence_number": next(seq), "item_id": item["id"],
                                                        "output_index": i, "content_index": 0, "delta": text})
            self.sse("response.output_item.done", {"type": "response.output_item.done",
                                                   "sequence_number": next(seq), "output_index": i,
                                                   "item": item})
        self.sse("response.completed", {"type": "response.completed", "sequence_number": next(seq),
                                        "response": done})

    # -- dispatch -----------------------------------------------------------------------

    def reply_text(self, api, body, text):
        if api == "anthropic":
            return self.api_anthropic(body, [{"type": "text", "text": text}], "end_turn")
        if api == "chat":
            return self.api_chat(body, text, None)
        return self.api_responses(body, [{"type": "message", "id": f"msg_lw_{next(IDS)}", "role": "assistant",
                                      "status": "completed",
                                      "content": [{"type": "output_text", "text": text, "annotations": []}]}])

    def reply_tool(self, api, body, call_id, name, args, kind):
        if api == "anthropic":
            return self.api_anthropic(body, [{"type": "tool_use", "id": call_id, "name": name, "input": args}],
                                  "tool_use")
        if api == "chat":
            return self.api_chat(body, None, (call_id, name, args))
        if kind == "custom":
            item = {"type": "custom_tool_call", "id": f"ctc_lw_{next(IDS)}", "status": "completed",
                    "call_id": call_id, "name": name, "input": args}
        else:
            item = {"type": "function_call", "id": f"fc_lw_{next(IDS)}", "status": "completed",
                    "call_id": call_id, "name": name, "arguments": json.dumps(args)}
        return self.api_responses(body, [item])


ISSUED = {}
SCRIPT = {"steps": []}


def dump():
    atomic_write(os.path.join(ARGS.dir, "log.json"), json.dumps(STATE, indent=1))


def watchdog(server, idle, lifetime):
    start = time.monotonic()
    while True:
        time.sleep(0.5)
        now = time.monotonic()
        if now - LAST_ACTIVITY[0] > idle or now - start > lifetime:
            server.shutdown()
            return


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    global ARGS, SCRIPT
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", required=True, help="script.json in, port and log.json out")
    parser.add_argument("--idle", type=float, default=180, help="stop after this many idle seconds")
    parser.add_argument("--lifetime", type=float, default=900, help="stop after this many seconds")
    parser.add_argument("--bodies", action="store_true", help="keep each request body (debugging)")
    ARGS = parser.parse_args()
    with open(os.path.join(ARGS.dir, "script.json"), encoding="utf-8") as f:
        SCRIPT = json.load(f)
    with LOCK:
        dump()
    server = Server(("127.0.0.1", 0), Handler)
    port = server.server_address[1]
    threading.Thread(target=watchdog, args=(server, ARGS.idle, ARGS.lifetime), daemon=True).start()
    atomic_write(os.path.join(ARGS.dir, "port"), f"{port}\n")
    print(port, flush=True)
    server.serve_forever(poll_interval=0.2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
