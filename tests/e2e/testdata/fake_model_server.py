#!/usr/bin/env python3
"""A scripted fake model server for the agent CLI tests: plain HTTP on 127.0.0.1, stdlib only.

Prints `PORT <n>` (flushed) once listening, serves until SIGTERM (or SIGINT), then exits 0.
Threading, HTTP/1.1 keep-alive (every answer, SSE included, carries a Content-Length).

  --api anthropic   Messages API (Claude Code):
                      POST /v1/messages[?beta=true]      SSE if the body has "stream": true,
                                                          else one JSON message
                      POST /v1/messages/count_tokens      {"input_tokens": 11}
                      HEAD|GET / and /api/hello            200 (no key needed)
                    key: `x-api-key: KEY` or `Authorization: Bearer KEY`
  --api openai      Responses API (Codex):
                      POST /v1/responses                  SSE if "stream": true (Codex always
                                                          streams), else one JSON response
                      GET  /v1/models                     a one-model list
                      HEAD|GET /                          200 (no key needed)
                    key: `Authorization: Bearer KEY`
  --prefix P        the routes above live under P (`--prefix /anthropic`: POST
                    /anthropic/v1/messages); a path outside P is 404, but for HEAD|GET / and
                    /api/hello, which answer 200 with or without P.
  --expect-key KEY  any other key on a /v1 route gets 401 with the provider's error shape
                    (Anthropic: {"type":"error","error":{"type":"authentication_error",...}};
                    OpenAI: {"error":{"type":"invalid_request_error","code":"invalid_api_key"}})
  --log FILE        every request, as one JSON line: {"method","path","headers","body"} (body:
                    the parsed JSON, else the raw text, else null); appended and flushed
  --write-path PATH --write-content TEXT
                    the script of the conversation (see below)

The script. A request is the agent's main conversation when it offers tools (`tools` is
non-empty); anything else (Claude Code's title/topic/quota side requests, which carry no tools)
gets a plain text reply, SIDE_TEXT, and ends its turn.
  Claude Code: while the messages hold no tool_result yet, the reply is a tool_use of its `Write`
    tool, {"file_path": PATH, "content": TEXT}. Write refuses to overwrite a file it has not
    read ("File has not been read yet"): on that error result the reply is a `Read` of PATH,
    then the Write again. Once a Write result came back without error the reply is the text
    "done" (stop_reason end_turn). A relative PATH is resolved against the working directory
    Claude Code names in its system prompt.
  Codex: while the input holds no *_call_output item, the reply is an `apply_patch` call that
    adds PATH with TEXT ("*** Add File: PATH", every line "+"-prefixed; apply_patch overwrites an
    existing file and always ends the file with a newline: TEXT "hi" gives "hi\n"). Codex
    offers apply_patch as a freeform tool (type "custom") for some models and as a function
    for others; the call matches what was offered. If apply_patch is not offered, the call is
    a `shell`/`exec_command` function running printf (exact bytes). Once an output came back
    the reply is the text "done".
  If the conversation already went on too long (more than 6 tool calls) the reply is "done".

Usage numbers, fixed, so that a test can check accounting: every reply (main or side, stream or
not) reports INPUT_TOKENS = 11 input and OUTPUT_TOKENS = 7 output tokens.
  Anthropic SSE: message_start.message.usage = {"input_tokens": 11, "output_tokens": 0, ...},
                 message_delta.usage = {"output_tokens": 7} (cumulative, as the real API)
  Anthropic JSON: usage = {"input_tokens": 11, "output_tokens": 7}
  OpenAI: response.completed.response.usage = {"input_tokens": 11, "output_tokens": 7,
          "total_tokens": 18, ...}
  count_tokens answers {"input_tokens": 11} (not a reply: no output tokens).

usage: fake_model_server.py --api anthropic|openai [--prefix P] [--expect-key KEY]
                            [--port N] [--tls-cert PEM --tls-key PEM]
                            [--log FILE] [--write-path PATH --write-content TEXT]
"""
import argparse
import json
import os
import re
import signal
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

INPUT_TOKENS = 11
OUTPUT_TOKENS = 7
SIDE_TEXT = "ok"
DONE_TEXT = "done"
MODEL_ID = "fake-model"
MAX_TOOL_CALLS = 6
# GET|HEAD: 200 without a key. Claude Code sends `HEAD /api/hello` (a connectivity check) unless
# CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1.
LIVENESS = ("/", "/api/hello")

args = None
log_lock = threading.Lock()
counter_lock = threading.Lock()
counter = [0]


def next_id(kind):
    with counter_lock:
        counter[0] += 1
        return f"{kind}_fake{counter[0]:04d}"


def sse_body(events):
    out = []
    for name, data in events:
        out.append(f"event: {name}\ndata: {json.dumps(data)}\n\n")
    return "".join(out).encode()


# ----------------------------------------------------------------------------------------------
# Anthropic Messages API


def anthropic_usage_start():
    return {"input_tokens": INPUT_TOKENS, "output_tokens": 0,
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}


def anthropic_message(model, block, stop_reason):
    return {"id": next_id("msg"), "type": "message", "role": "assistant", "model": model,
            "content": [block], "stop_reason": stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": OUTPUT_TOKENS,
                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}


def anthropic_events(model, block, stop_reason):
    if block["type"] == "tool_use":
        start = dict(block, input={})
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    else:
        start = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": block["text"]}
    message = {"id": next_id("msg"), "type": "message", "role": "assistant", "model": model,
               "content": [], "stop_reason": None, "stop_sequence": None,
               "usage": anthropic_usage_start()}
    return [
        ("message_start", {"type": "message_start", "message": message}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": start}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                           "usage": {"output_tokens": OUTPUT_TOKENS}}),
        ("message_stop", {"type": "message_stop"}),
    ]


def blocks(messages):
    for m in messages or []:
        content = m.get("content")
        if isinstance(content, list):
            for c in content:
                if isinstance(c, dict):
                    yield m.get("role"), c


def text_of(content):
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(c.get("text", json.dumps(c)) if isinstance(c, dict) else str(c)
                         for c in content)
    return json.dumps(content)


def claude_write_path(body):
    path = args.write_path
    if os.path.isabs(path):
        return path
    system = body.get("system")
    hay = system if isinstance(system, str) else json.dumps(system)
    hay += json.dumps(body.get("messages"))
    m = re.search(r"[Ww]orking directory:\s*(/[^\s\"\\]*)", hay)
    return os.path.join(m.group(1), path) if m else path


def anthropic_turn(body):
    """Returns (block, stop_reason) for a main-conversation request."""
    uses = []  # [(id, name)] in order
    results = {}  # tool_use_id -> (is_error, text)
    for _, c in blocks(body.get("messages")):
        if c.get("type") == "tool_use":
            uses.append((c.get("id"), c.get("name")))
        elif c.get("type") == "tool_result":
            results[c.get("tool_use_id")] = (c.get("is_error") is True, text_of(c.get("content")))
    path = claude_write_path(body)
    write = {"type": "tool_use", "id": next_id("toolu"), "name": "Write",
             "input": {"file_path": path, "content": args.write_content}}
    if not uses:
        return write, "tool_use"
    if len(uses) >= MAX_TOOL_CALLS:
        return {"type": "text", "text": DONE_TEXT}, "end_turn"
    last_id, last_name = uses[-1]
    if last_id not in results:  # a call without its result: nothing sensible to add
        return {"type": "text", "text": DONE_TEXT}, "end_turn"
    is_error, text = results[last_id]
    if last_name == "Write" and is_error and "read" in text.lower() and \
            "Read" not in [n for _, n in uses]:
        return {"type": "tool_use", "id": next_id("toolu"), "name": "Read",
                "input": {"file_path": path}}, "tool_use"
    if last_name == "Read":
        return write, "tool_use"
    return {"type": "text", "text": DONE_TEXT}, "end_turn"


# ----------------------------------------------------------------------------------------------
# OpenAI Responses API


def openai_usage():
    return {"input_tokens": INPUT_TOKENS, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": OUTPUT_TOKENS, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS}


def openai_message_item(text):
    return {"type": "message", "id": next_id("msg"), "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def apply_patch_text(path, content):
    lines = content.split("\n")
    if content.endswith("\n"):
        lines = lines[:-1]
    return "*** Begin Patch\n*** Add File: " + path + "\n" + \
        "".join("+" + line + "\n" for line in lines) + "*** End Patch\n"


def sh_quote(s):
    return "'" + s.replace("'", "'\"'\"'") + "'"


def codex_call_item(tools):
    """The item that makes Codex write the file with one of the tools it offered."""
    by_name = {t.get("name"): t for t in tools if isinstance(t, dict)}
    call_id = next_id("call")
    patch = apply_patch_text(args.write_path, args.write_content)
    tool = by_name.get("apply_patch")
    if tool is not None and tool.get("type") == "custom":
        return {"type": "custom_tool_call", "id": next_id("ctc"), "status": "completed",
                "call_id": call_id, "name": "apply_patch", "input": patch}
    if tool is not None:
        return {"type": "function_call", "id": next_id("fc"), "status": "completed",
                "call_id": call_id, "name": "apply_patch",
                "arguments": json.dumps({"input": patch})}
    script = f"printf %s {sh_quote(args.write_content)} > {sh_quote(args.write_path)}"
    if "exec_command" in by_name:
        return {"type": "function_call", "id": next_id("fc"), "status": "completed",
                "call_id": call_id, "name": "exec_command",
                "arguments": json.dumps({"cmd": script})}
    name = "shell_command" if "shell_command" in by_name else "shell"
    arguments = {"command": script} if name == "shell_command" else \
        {"command": ["bash", "-lc", script]}
    return {"type": "function_call", "id": next_id("fc"), "status": "completed",
            "call_id": call_id, "name": name, "arguments": json.dumps(arguments)}


def openai_turn(body):
    items = body.get("input")
    items = items if isinstance(items, list) else []
    calls = [i for i in items if isinstance(i, dict) and i.get("type", "").endswith("_call")]
    outputs = [i for i in items
               if isinstance(i, dict) and i.get("type", "").endswith("_call_output")]
    if not outputs and not calls:
        return codex_call_item(body.get("tools") or [])
    return openai_message_item(DONE_TEXT)


def openai_response(body, item):
    rid = next_id("resp")
    base = {"id": rid, "object": "response", "created_at": int(time.time()),
            "model": body.get("model") or MODEL_ID}
    done = dict(base, status="completed", output=[item], usage=openai_usage())
    if not body.get("stream"):
        return None, done
    events = [("response.created", {"type": "response.created",
                                    "response": dict(base, status="in_progress", output=[])}),
              ("response.output_item.added", {"type": "response.output_item.added",
                                              "output_index": 0, "item": item})]
    if item["type"] == "message":
        events.append(("response.output_text.delta",
                       {"type": "response.output_text.delta", "item_id": item["id"],
                        "output_index": 0, "content_index": 0,
                        "delta": item["content"][0]["text"]}))
    events += [("response.output_item.done", {"type": "response.output_item.done",
                                              "output_index": 0, "item": item}),
               ("response.completed", {"type": "response.completed", "response": done})]
    return events, None


# ----------------------------------------------------------------------------------------------
# HTTP


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-model-server"

    def log_message(self, *a):
        pass

    def read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def record(self, raw):
        body = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")
        if args.log:
            line = json.dumps({"method": self.command, "path": self.path,
                               "headers": dict(self.headers.items()), "body": body})
            with log_lock, open(args.log, "a") as f:
                f.write(line + "\n")
        return body

    def send(self, code, data, ctype="application/json", extra=None):
        if not isinstance(data, bytes):
            data = json.dumps(data).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def send_sse(self, events):
        self.send(200, sse_body(events), "text/event-stream", {"Cache-Control": "no-cache"})

    def error(self, code, kind, message):
        if args.api == "anthropic":
            self.send(code, {"type": "error", "error": {"type": kind, "message": message}},
                      extra={"request-id": next_id("req"), "x-should-retry": "false"})
        else:
            self.send(code, {"error": {"message": message, "type": kind, "param": None,
                                       "code": None}}, extra={"x-should-retry": "false"})

    def key(self):
        auth = self.headers.get("Authorization", "")
        bearer = auth[7:].strip() if auth.lower().startswith("bearer ") else None
        if args.api == "anthropic":
            return self.headers.get("x-api-key") or bearer
        return bearer

    def route(self):
        """The path without the prefix and query, or None when outside the prefix (the
        liveness paths, "/" and "/api/hello", answer inside and outside it)."""
        path = self.path.split("?", 1)[0]
        if args.prefix:
            if path == args.prefix:
                return "/"
            if path.startswith(args.prefix + "/"):
                return path[len(args.prefix):]
            return path if path in LIVENESS else None
        return path

    def handle_any(self):
        raw = self.read_body() if self.command in ("POST", "PUT", "PATCH") else b""
        body = self.record(raw)
        route = self.route()
        if route in LIVENESS and self.command in ("GET", "HEAD"):
            self.send(200, b"ok\n", "text/plain")
            return
        if route is None or not route.startswith("/v1/"):
            self.error(404, "not_found_error", f"no route {self.command} {self.path}")
            return
        if args.expect_key is not None and self.key() != args.expect_key:
            if args.api == "anthropic":
                self.error(401, "authentication_error", "invalid x-api-key")
            else:
                self.send(401, {"error": {"message": "Incorrect API key provided.",
                                          "type": "invalid_request_error", "param": None,
                                          "code": "invalid_api_key"}},
                          extra={"x-should-retry": "false"})
            return
        body = body if isinstance(body, dict) else {}
        if args.api == "anthropic":
            self.anthropic(route, body)
        else:
            self.openai(route, body)

    def anthropic(self, route, body):
        if self.command == "POST" and route == "/v1/messages/count_tokens":
            self.send(200, {"input_tokens": INPUT_TOKENS})
            return
        if self.command != "POST" or route != "/v1/messages":
            self.error(404, "not_found_error", f"no route {self.command} {self.path}")
            return
        model = body.get("model") or MODEL_ID
        if body.get("tools"):
            block, stop = anthropic_turn(body)
        else:
            block, stop = {"type": "text", "text": SIDE_TEXT}, "end_turn"
        if body.get("stream"):
            self.send_sse(anthropic_events(model, block, stop))
        else:
            self.send(200, anthropic_message(model, block, stop))

    def openai(self, route, body):
        if self.command in ("GET", "HEAD") and route == "/v1/models":
            self.send(200, {"object": "list",
                            "data": [{"id": MODEL_ID, "object": "model", "created": 0,
                                      "owned_by": "fake"}]})
            return
        if self.command != "POST" or route != "/v1/responses":
            self.error(404, "invalid_request_error", f"no route {self.command} {self.path}")
            return
        if body.get("tools"):
            item = openai_turn(body)
        else:
            item = openai_message_item(SIDE_TEXT)
        events, whole = openai_response(body, item)
        if events is not None:
            self.send_sse(events)
        else:
            self.send(200, whole)

    do_GET = do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = handle_any


def main():
    global args
    p = argparse.ArgumentParser(description="scripted fake model server")
    p.add_argument("--api", choices=["anthropic", "openai"], required=True)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--tls-cert", help="serve HTTPS with this certificate (PEM)")
    p.add_argument("--tls-key", help="and this key (PEM)")
    p.add_argument("--prefix", default="")
    p.add_argument("--expect-key")
    p.add_argument("--log")
    p.add_argument("--write-path", default="hello.txt")
    p.add_argument("--write-content", default="hello\n")
    args = p.parse_args()
    args.prefix = args.prefix.rstrip("/")
    if args.prefix and not args.prefix.startswith("/"):
        args.prefix = "/" + args.prefix

    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    if args.tls_cert:
        # HTTPS, as a real provider: the broker must verify this certificate (a test CA's).
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls_cert, args.tls_key)
        server.socket = context.wrap_socket(server.socket, server_side=True)

    def stop(*_):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"PORT {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
