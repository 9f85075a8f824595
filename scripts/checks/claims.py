#!/usr/bin/env python3
"""Claims check: every isolation claim in docs/security.md names tests that exist.

docs/security.md holds claim tables, `| claim | proof |` (more columns are read as more proof).
Every table in it must be one: a table with another header fails the check, so no claim can sit
where it is not checked. Each row's first cell is the claim; the rest is its proof, which must
cite at least one test. Citations are checked to exist everywhere in the file (tables and prose,
outside code fences), by these rules; any other backticked text (`abox exec`, `-nic none`,
`Seccomp: 2`, `.git`) is prose, not a citation:

  gtest      `Suite.Name`, `Suite.Name/*`, `Suite.*`: a CamelCase suite, a dot, a CamelCase test
             name or `*`. The test must be defined (TEST / TEST_F / TEST_P in a .cc under src/,
             tests/, fuzz/ or bench/; a DISABLED_ test does not count). A TEST_P test runs once
             per parameter and is cited `Suite.Name/*`; `/*` on any other test is an error.
             Bare CamelCase tokens inside the parentheses right after `Suite.*`
             (`AddressFilterTest.*` (`RefusesEveryKnownCloudMetadataAddress`)) are tests of that
             suite. Whether the test's file is compiled into a test binary is not checked.
  file       a relative path whose first folder is a top-level folder of the repository and whose
             name has an extension (`fuzz/host_session_fuzz.cc`): the file must exist. A *_fuzz.cc
             must also be a libFuzzer target (a SOURCES of abox_fuzz_target in its CMakeLists.txt).
  node test  a double-quoted title outside backticks after a `*.mjs` file in the same cell or
             paragraph (`tests/mcp/abox_mcp.test.mjs` ("errors say what to do next")): that file
             must have `test("title", ...)` (test.skip / test.todo do not count).
  ctest      a snake_case name ending in _test, _e2e or _short (`mcp_conformance_test`): an
             add_test(NAME ...) in a CMakeLists.txt (foreach loops expanded) or a fuzz target's
             `<target>_short` run.
  doctor     a dotted lower-case name (`host.kvm`, `sandbox.<id>.seccomp`, `images.<name>`) after
             `abox doctor` in the same cell or paragraph, and `.name` right after one of those
             (`sandbox.<id>.seccomp`, `.uid`) as shorthand for its sibling: a check name
             src/cli/doctor*.cc produces (`<...>` stands for any id or name).

A claim's proof must cite a gtest, node test, ctest, fuzz target or test file (*_test.cc,
*.test.mjs); a doctor check alone is not a test. The "## Known gaps" section must exist and list
at least one gap. Exits 1 on a problem, printing each with its line number; else prints a summary.
Usage: claims.py [--root DIR] (DIR defaults to the repository this script is in).
"""
import argparse
import os
import re
import sys

DOC = os.path.join("docs", "security.md")
GAPS_HEADING = re.compile(r"^##\s+Known gaps\b", re.IGNORECASE)
SOURCE_DIRS = ("src", "tests", "fuzz", "bench")

GTEST = re.compile(r"^([A-Z][A-Za-z0-9]*)\.(\*|[A-Z][A-Za-z0-9_]*(/\*)?)$")
BARE_TEST = re.compile(r"^[A-Z][A-Za-z0-9]*$")
PATH = re.compile(r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)+$")
CTEST = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*_(test|e2e|short)$")
DOCTOR = re.compile(r"^[a-z_]+(\.(<[^>]+>|[a-z_]+))+$")
DOCTOR_SIBLING = re.compile(r"^\.[a-z_]+$")
PLACEHOLDER = re.compile(r"<[^>]*>")

TEST_DEF = re.compile(r"\b(TEST|TEST_F|TEST_P)\s*\(\s*(\w+)\s*,\s*(\w+)\s*\)")
NODE_TEST = re.compile(r"""\btest\s*\(\s*(["'`])((?:\\.|(?!\1).)*)\1""", re.DOTALL)
CMAKE_FOREACH = re.compile(r"foreach\s*\(\s*(\w+)\s+([^)]*)\)(.*?)endforeach\s*\(\s*\)",
                           re.DOTALL)


# ---- what the tree has ------------------------------------------------------------------------

def read(path):
    with open(path, encoding="utf-8", errors="replace") as fh:
        return fh.read()


def walk(root, dirs, suffixes):
    for top in dirs:
        for dirpath, dirnames, files in os.walk(os.path.join(root, top)):
            dirnames[:] = [d for d in dirnames if d not in ("node_modules", "build", ".git")]
            for f in sorted(files):
                if f.endswith(suffixes):
                    yield os.path.join(dirpath, f)


def gtests(root):
    """{suite: {name: macro}} of every gtest defined in the tree."""
    suites = {}
    for path in walk(root, SOURCE_DIRS, (".cc",)):
        for macro, suite, name in TEST_DEF.findall(read(path)):
            suites.setdefault(suite, {})[name] = macro
    return suites


def node_tests(root, rel):
    """Titles of the node:test tests in the .mjs file at rel."""
    text = read(os.path.join(root, rel))
    return {re.sub(r"\\(.)", r"\1", m.group(2)) for m in NODE_TEST.finditer(text)}


def expanded_cmake(text):
    """CMake text with each foreach(var a b c) body repeated once per item, ${var} substituted."""
    def expand(m):
        var, items, body = m.group(1), m.group(2).split(), m.group(3)
        return "\n".join(body.replace("${%s}" % var, item) for item in items)
    return CMAKE_FOREACH.sub(expand, text)


def calls(text, command):
    """Argument lists (as word lists) of each `command(...)` in CMake text."""
    out = []
    for m in re.finditer(r"\b%s\s*\(" % re.escape(command), text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        out.append(text[m.end():i - 1].split())
    return out


def cmake_facts(root):
    """(ctest names, {dir: fuzz target sources}) from every CMakeLists.txt in the tree."""
    ctests, fuzz_sources = set(), {}
    for path in walk(root, (".",), ("CMakeLists.txt",)):
        text = expanded_cmake(re.sub(r"(?m)#.*$", "", read(path)))
        for args in calls(text, "add_test"):
            if len(args) >= 2 and args[0] == "NAME" and "${" not in args[1]:
                ctests.add(args[1])
        for args in calls(text, "abox_fuzz_target"):
            if not args or "${" in args[0]:
                continue
            ctests.add(args[0] + "_short")
            sources = []
            if "SOURCES" in args:
                for word in args[args.index("SOURCES") + 1:]:
                    if word.isupper():
                        break
                    sources.append(word)
            rel_dir = os.path.relpath(os.path.dirname(path), root)
            fuzz_sources.setdefault(os.path.normpath(rel_dir), set()).update(sources)
    return ctests, fuzz_sources


def doctor_checks(root):
    """Templates of the check names src/cli/doctor*.cc produces; `<>` stands for an id."""
    names = set()
    cli = os.path.join(root, "src", "cli")
    if not os.path.isdir(cli):
        return names
    for f in sorted(os.listdir(cli)):
        if not (f.startswith("doctor") and f.endswith(".cc")) or f.endswith("_test.cc"):
            continue
        text = read(os.path.join(cli, f))
        # Fixed names: Make("host.kvm", ...) and Check{"images", "images", ...}.
        names.update(re.findall(r'\bMake\(\s*"([a-z_]+(?:\.[a-z_]+)+)"', text))
        names.update(re.findall(r'\{\s*"[a-z_]+"\s*,\s*"([a-z_]+(?:\.[a-z_]+)*)"\s*,', text))
        # Names with an id: StrCat("egress.", f.id, ".mode"), StrCat("images.", i.name).
        for prefix, suffix in re.findall(
                r'StrCat\(\s*"([a-z_]+)\.",\s*[\w.>-]+\s*(?:,\s*"(\.[a-z_]+)"\s*)?\)', text):
            names.add(f"{prefix}.<>{suffix}")
        # A helper that names its checks StrCat("sandbox.", c.f.id, ".", what): the names are
        # the string literals its callers pass as `what`.
        for m in re.finditer(r'StrCat\(\s*"([a-z_]+)\.",\s*[\w.>-]+\s*,\s*"\.",\s*(\w+)\s*\)',
                             text):
            prefix, var = m.groups()
            head = list(re.finditer(r"(?m)^[A-Za-z][\w:<>]*\s+(\w+)\(([^)]*)\)", text[:m.start()]))
            if not head:
                continue
            fn, params = head[-1].group(1), head[-1].group(2).split(",")
            idx = [i for i, p in enumerate(params) if re.search(r"\b%s\b" % var, p)]
            if not idx:
                continue
            call = r"\b%s\(\s*%s\"([a-z_]+)\"" % (fn, r"[^,()\"]+,\s*" * idx[0])
            for what in re.findall(call, text):
                names.add(f"{prefix}.<>.{what}")
    return names


# ---- what the document says -------------------------------------------------------------------

class Unit:
    """A table cell or a paragraph / list item: the scope of the `abox doctor` and .mjs rules."""

    def __init__(self, lineno, text):
        self.lineno = lineno
        self.text = text


def split_row(line):
    cells = re.split(r"(?<!\\)\|", line.strip())
    return [c.strip() for c in cells[1:-1]] if line.strip().endswith("|") else cells[1:]


def parse(doc_text):
    """(claim rows [(lineno, claim, proof)], other table lines, prose units, gaps heading line,
    gaps item count)."""
    rows, bad_tables, prose = [], [], []
    gaps_line, gaps_items, in_gaps = None, 0, False
    lines = doc_text.splitlines()
    i, fence = 0, False
    para = None
    while i < len(lines):
        line, lineno = lines[i], i + 1
        if line.lstrip().startswith("```"):
            fence = not fence
            i += 1
            continue
        if fence:
            i += 1
            continue
        if line.startswith("#"):
            para = None
            if re.match(r"#{1,2}\s", line):  # a ### heading stays inside its section
                in_gaps = bool(GAPS_HEADING.match(line))
                if in_gaps:
                    gaps_line = lineno
            i += 1
            continue
        if line.lstrip().startswith("|"):
            para = None
            header = [c.lower() for c in split_row(line)]
            is_claims = header[:2] == ["claim", "proof"]
            if not is_claims:
                bad_tables.append((lineno, line.strip()))
            i += 1
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                cells = split_row(lines[i])
                if is_claims and not re.fullmatch(r"[\s:|-]*", lines[i]):
                    rows.append((i + 1, cells[0] if cells else "", " ".join(cells[1:])))
                i += 1
            continue
        if not line.strip():
            para = None
        elif re.match(r"\s*([-*]|\d+\.)\s", line) or para is None:
            para = Unit(lineno, line)
            prose.append(para)
            if in_gaps and re.match(r"\s*([-*]|\d+\.)\s", line):
                gaps_items += 1
        else:
            para.text += " " + line.strip()
        i += 1
    return rows, bad_tables, prose, gaps_line, gaps_items


def citations(text, top_dirs):
    """[(kind, value, context)] of the citations in a cell or paragraph, by the module's rules;
    top_dirs: the folders a cited path may start with."""
    out = []
    tokens = list(re.finditer(r"`([^`]+)`", text))
    doctor_from = text.find("`abox doctor")
    mjs = None
    last_doctor = None
    prev_end = 0
    for m in tokens:
        tok = m.group(1).strip()
        between = text[prev_end:m.start()]
        if mjs is not None:
            for title in re.findall(r'"([^"]+)"', between):
                out.append(("node", title, mjs))
        prev_end = m.end()
        if GTEST.match(tok):
            out.append(("gtest", tok, None))
            last_doctor = None
            continue
        if (PATH.match(tok) and tok.split("/", 1)[0] in top_dirs
                and "." in tok.rsplit("/", 1)[1].lstrip(".")):
            out.append(("file", tok, None))
            if tok.endswith(".mjs"):
                mjs = tok
            last_doctor = None
            continue
        if CTEST.match(tok):
            out.append(("ctest", tok, None))
            last_doctor = None
            continue
        if doctor_from != -1 and m.start() > doctor_from and DOCTOR.match(tok):
            out.append(("doctor", tok, None))
            last_doctor = tok
            continue
        if (last_doctor and DOCTOR_SIBLING.match(tok)
                and re.fullmatch(r"[\s,]*(and|or)?[\s,]*", between)):
            out.append(("doctor", last_doctor.rsplit(".", 1)[0] + tok, None))
            continue
        last_doctor = None
    if mjs is not None:
        for title in re.findall(r'"([^"]+)"', text[prev_end:]):
            out.append(("node", title, mjs))
    # Bare test names in the parentheses right after `Suite.*`.
    for m in re.finditer(r"`([A-Z][A-Za-z0-9]*)\.\*`\s*\(([^()]*)\)", text):
        for name in re.findall(r"`([^`]+)`", m.group(2)):
            if BARE_TEST.match(name):
                out.append(("gtest", f"{m.group(1)}.{name}", None))
    return out


# ---- the check --------------------------------------------------------------------------------

def check(root):
    """(problems [(lineno, message)], claim count, citation count)."""
    problems = []
    doc = os.path.join(root, DOC)
    if not os.path.isfile(doc):
        return [(0, f"{DOC} does not exist")], 0, 0
    rows, bad_tables, prose, gaps_line, gaps_items = parse(read(doc))
    suites = gtests(root)
    ctests, fuzz_sources = cmake_facts(root)
    doctor = doctor_checks(root)
    top_dirs = set(SOURCE_DIRS + ("scripts", "docs")) | {
        d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d))}
    node_cache = {}
    checked = 0

    def verify(kind, value, ctx):
        nonlocal checked
        checked += 1
        if kind == "gtest":
            suite, name = value.split(".", 1)
            if suite not in suites:
                return f"`{value}`: no test suite {suite} (TEST/TEST_F/TEST_P) in the tree"
            if name == "*":
                return None
            param = name.endswith("/*")
            name = name[:-2] if param else name
            macro = suites[suite].get(name)
            if macro is None:
                return f"`{value}`: {suite} has no test {name}"
            if param and macro != "TEST_P":
                return f"`{value}`: {suite}.{name} is a {macro}, not parameterized: drop the /*"
            if macro == "TEST_P" and not param:
                return f"`{value}`: {suite}.{name} is a TEST_P: cite it as `{suite}.{name}/*`"
            return None
        if kind == "file":
            if not os.path.isfile(os.path.join(root, value)):
                return f"`{value}`: no such file"
            if value.endswith("_fuzz.cc"):
                d, base = os.path.split(os.path.normpath(value))
                if base not in fuzz_sources.get(d, set()):
                    return f"`{value}`: not a fuzz target (abox_fuzz_target in {d}/CMakeLists.txt)"
            return None
        if kind == "node":
            if ctx not in node_cache:
                path = os.path.join(root, ctx)
                node_cache[ctx] = node_tests(root, ctx) if os.path.isfile(path) else set()
            if value not in node_cache[ctx]:
                return f'"{value}": no test("{value}", ...) in {ctx}'
            return None
        if kind == "ctest":
            if value not in ctests:
                return f"`{value}`: no ctest of that name (add_test or a fuzz target's _short)"
            return None
        if kind == "doctor":
            if PLACEHOLDER.sub("<>", value) not in doctor:
                return f"`{value}`: abox doctor has no such check (src/cli/doctor*.cc)"
            return None
        raise AssertionError(kind)

    for lineno, line in bad_tables:
        problems.append((lineno, f"a table that is not `| claim | proof |`: {line[:60]}: every "
                                 "table here is a claim table"))
    for lineno, claim, proof in rows:
        if not claim:
            problems.append((lineno, "a row with an empty claim"))
        cites = citations(proof, top_dirs) + citations(claim, top_dirs)
        tests = [c for c in cites if c[0] in ("gtest", "node", "ctest")
                 or (c[0] == "file" and re.search(r"(_test\.cc|_fuzz\.cc|\.test\.mjs)$", c[1]))]
        if not tests:
            problems.append((lineno, f"claim cites no test: {claim[:70]}"))
        for kind, value, ctx in cites:
            why = verify(kind, value, ctx)
            if why:
                problems.append((lineno, why))
    for unit in prose:
        for kind, value, ctx in citations(unit.text, top_dirs):
            why = verify(kind, value, ctx)
            if why:
                problems.append((unit.lineno, why))
    if gaps_line is None:
        problems.append((0, 'no "## Known gaps" section: what is not claimed must be said'))
    elif gaps_items == 0:
        problems.append((gaps_line, "the known gaps section lists no gap"))
    if not rows:
        problems.append((0, "no claim table (`| claim | proof |`) found"))
    return sorted(problems), len(rows), checked


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                       "..", ".."))
    args = parser.parse_args(argv)
    problems, claims, checked = check(os.path.abspath(args.root))
    for lineno, why in problems:
        print(f"claims: {DOC}:{lineno}: {why}")
    print(f"claims: {claims} claims, {checked} citations checked, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
