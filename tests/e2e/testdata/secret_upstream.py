#!/usr/bin/env python3
"""The loopback upstream of SecretsE2eTest: HTTPS (the test's own CA) and plain HTTP.

  /echo        answers with the Authorization header it got (so a response that echoes a
               credential can be checked for scrubbing)
  .../info/refs, .../git-upload-pack, .../git-receive-pack: git smart HTTP, served by `git http-backend` over the repositories in ROOT
  anything     200 "ok"
Every request is appended to LOG as one JSON line {method, path, headers, body_len, body}.

usage: secret_upstream.py LOG ROOT HTTPS_PORT HTTP_PORT CERT KEY
"""
import json
import os
import ssl
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG, ROOT, HTTPS_PORT, HTTP_PORT, CERT, KEY = sys.argv[1:7]
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    self.rfile.readline()
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
            return data
        return self.rfile.read(n) if n else b""

    def record(self, body):
        with lock, open(LOG, "a") as f:
            f.write(json.dumps({"method": self.command, "path": self.path,
                                "headers": dict(self.headers.items()),
                                "body_len": len(body),
                                "body": body.decode("latin-1")}) + "\n")

    def answer(self, code, body, ctype="text/plain"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def git(self, body):
        path, _, query = self.path.partition("?")
        env = dict(os.environ, GIT_PROJECT_ROOT=ROOT, GIT_HTTP_EXPORT_ALL="1",
                   REMOTE_USER="agent", REQUEST_METHOD=self.command,
                   PATH_INFO=path, QUERY_STRING=query,
                   CONTENT_TYPE=self.headers.get("Content-Type", ""),
                   CONTENT_LENGTH=str(len(body)))
        out = subprocess.run(["git", "http-backend"], input=body, env=env,
                             capture_output=True).stdout
        head, _, rest = out.partition(b"\r\n\r\n")
        if not _:
            head, _, rest = out.partition(b"\n\n")
        code, headers = 200, []
        for line in head.decode().splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                code = int(value.split()[0])
            else:
                headers.append((name, value.strip()))
        self.send_response(code)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(rest)))
        self.end_headers()
        self.wfile.write(rest)

    def handle_any(self):
        body = self.body()
        self.record(body)
        path = self.path.partition("?")[0]
        if path.endswith(("/info/refs", "/git-upload-pack", "/git-receive-pack")):
            return self.git(body)
        if self.path.startswith("/echo"):
            auth = self.headers.get("Authorization", "")
            return self.answer(200, ("you sent: " + auth + "\n").encode())
        self.answer(200, b"ok\n")

    do_GET = do_POST = do_PUT = handle_any


def serve(port, tls):
    server = ThreadingHTTPServer(("127.0.0.1", int(port)), Handler)
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(CERT, KEY)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    server.serve_forever()


threading.Thread(target=serve, args=(HTTP_PORT, False), daemon=True).start()
serve(HTTPS_PORT, True)
