#!/usr/bin/env python3
"""Layering check: which src/ folders each folder's code may include.

Every `#include "src/..."` or `#include "tests/..."` in src/ is checked against LAYERS (for
library code) and, for test code (*_test.cc, *_fuzz.cc and files under a testing/ folder),
against LAYERS plus the test helpers of any folder. Production code never includes test code.
An include the table does not allow fails the check unless EXCEPTIONS names the including file
and the folder it reaches, with the reason. Exits 1 on a violation, printing each.
"""
import os
import re
import sys

# Folder (relative to src/) -> folders its library code may include. http is its own layer: the
# HTTP server core (it knows only base and the API's error codes), which the daemon serves its API
# with and the client's fakes and tests (and later the MCP server) use too.
LAYERS = {
    "base": [],
    "proto": ["base"],
    "store": ["base"],
    "net": ["base"],
    # Secret specs, placeholders, value stores and sources: values never leave through here
    # except by SecretValue::Reveal(), so it depends on nothing but base.
    "secrets": ["base"],
    "image": ["base"],
    # Per-project templates (.abox.toml, --template auto): untrusted text in, plain values out.
    "template": ["base", "api"],
    "workspace": ["base"],
    "api": ["base"],
    "http": ["base", "api"],
    "vmm": ["base"],
    "runtime": ["base", "proto", "net", "vmm", "image", "workspace"],
    "guest": ["base", "proto", "workspace"],
    "client": ["base", "api", "http"],
    "daemon": ["base", "api", "http", "store", "runtime", "vmm", "image", "net", "proto",
               "workspace", "secrets", "template"],
    # The CLI is a client of the API: it fills and reads the api types (src/api/<resource>.h)
    # that the client sends and decodes.
    "cli": ["base", "api", "client", "runtime", "image", "vmm", "proto", "workspace", "template"],
    # abox-mcp is a client of the API like the CLI, and nothing more: no VM, image or guest code.
    # It serves MCP over Streamable HTTP with the same HTTP server as aboxd (src/http).
    "mcp": ["base", "api", "client", "http", "template"],
}

# (including file, folder it may reach anyway): reason. Each is a debt with its way out.
EXCEPTIONS = {
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"((?:src|tests)/[^"]+)"')


def module_of(rel):
    """The LAYERS key a path under src/ belongs to (longest prefix wins)."""
    best = None
    for m in LAYERS:
        if rel == m or rel.startswith(m + "/"):
            if best is None or len(m) > len(best):
                best = m
    return best


def is_test_code(path):
    name = os.path.basename(path)
    return (name.endswith("_test.cc") or name.endswith("_fuzz.cc") or "/testing/" in path
            or name == "fake_host.h" or name == "fake_guest.h")


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    os.chdir(root)
    violations = []
    unknown = set()
    used = set()
    checked = 0
    for dirpath, _, files in os.walk("src"):
        for f in sorted(files):
            if not f.endswith((".cc", ".h", ".c")):
                continue
            path = os.path.join(dirpath, f)
            src_mod = module_of(os.path.relpath(path, "src"))
            if src_mod is None:
                unknown.add(os.path.dirname(path))
                continue
            test = is_test_code(path)
            with open(path, encoding="utf-8", errors="replace") as fh:
                for lineno, line in enumerate(fh, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    checked += 1
                    target = m.group(1)
                    if target.startswith("tests/"):
                        if test and target.startswith("tests/testing/"):
                            continue
                        violations.append((path, lineno, target,
                                           "only test code may include tests/testing/"))
                        continue
                    dst_mod = module_of(target[len("src/"):])
                    if dst_mod is None:
                        violations.append((path, lineno, target, "not in any known folder"))
                        continue
                    target_is_test = is_test_code(target)
                    if target_is_test and not test:
                        violations.append((path, lineno, target,
                                           "production code includes test code"))
                        continue
                    if dst_mod == src_mod or dst_mod in LAYERS[src_mod]:
                        continue
                    if test and target_is_test:
                        continue  # a test may use any folder's fakes and fixtures
                    if test and (dst_mod in LAYERS.get(src_mod, []) or dst_mod == "http"
                                 or dst_mod in ("image", "store")):
                        # Tests build their fixtures with the image builder, the HTTP test
                        # server and the store directly.
                        continue
                    if (path, dst_mod) in EXCEPTIONS:
                        used.add((path, dst_mod))
                        continue
                    violations.append((path, lineno, target,
                                       f"{src_mod} may include only {LAYERS[src_mod] or 'itself'}"))
    for path, dst_mod in sorted(set(EXCEPTIONS) - used):
        violations.append((path, 0, "src/" + dst_mod, "recorded exception no longer needed: "
                           "remove it from EXCEPTIONS"))
    for d in sorted(unknown):
        violations.append((d, 0, "", "folder missing from the LAYERS table"))
    for path, lineno, target, why in violations:
        print(f"layering: {path}:{lineno}: includes {target}: {why}")
    print(f"layering: {checked} includes checked, {len(violations)} violations, "
          f"{len(EXCEPTIONS)} recorded exceptions")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
