#!/usr/bin/env python3
"""A local package index for the --template auto e2e test (PEP 503 "simple" layout).

Usage: local_pypi.py DIR PORT

Builds one pure-Python wheel, abox_fixture_dep 1.0 (shout(text) -> text.upper() + "!"), into
DIR/simple/abox-fixture-dep/ and serves DIR on 127.0.0.1:PORT. pip finds it with
--index-url http://HOST:PORT/simple/ (the directory listing is the project page).
"""
import base64
import functools
import hashlib
import http.server
import os
import sys
import zipfile

NAME = "abox_fixture_dep"
VERSION = "1.0"


def record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def build_wheel(out_dir):
    dist_info = f"{NAME}-{VERSION}.dist-info"
    files = {
        f"{NAME}/__init__.py": b'def shout(text):\n    return text.upper() + "!"\n',
        f"{dist_info}/METADATA": (
            f"Metadata-Version: 2.1\nName: abox-fixture-dep\nVersion: {VERSION}\n").encode(),
        f"{dist_info}/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: abox-e2e\nRoot-Is-Purelib: true\n"
            b"Tag: py3-none-any\n"),
    }
    record = [record_line(p, d) for p, d in files.items()] + [f"{dist_info}/RECORD,,"]
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    os.makedirs(out_dir, exist_ok=True)
    wheel = os.path.join(out_dir, f"{NAME}-{VERSION}-py3-none-any.whl")
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            z.writestr(path, data)
    return wheel


def main():
    root, port = sys.argv[1], int(sys.argv[2])
    build_wheel(os.path.join(root, "simple", "abox-fixture-dep"))
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=root)
    http.server.ThreadingHTTPServer(("127.0.0.1", port), handler).serve_forever()


if __name__ == "__main__":
    main()
