#!/usr/bin/env python3
"""Tests of claims.py: a small fake tree and security.md in a temp dir, one broken thing each.

Each case writes the fake tree, changes one thing in the document or the tree, runs claims.py
on it as CI does (`claims.py --root DIR`) and asserts the exit code and the problem it names.
Run: python3 scripts/checks/claims_test.py
"""
import os
import subprocess
import sys
import tempfile
import unittest

CLAIMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "claims.py")

TREE = {
    "src/foo/foo_test.cc": """
TEST(FooTest, Works) {}
TEST_F(FooFixtureTest,
       WorksWithAFixture) {}
TEST_P(FooParamTest, RunsPerParameter) {}
INSTANTIATE_TEST_SUITE_P(Both, FooParamTest, ::testing::Values(true, false));
TEST(FooTest, DISABLED_Off) {}
""",
    "src/foo/bar_fuzz.cc": "// a fuzz target\n",
    "src/foo/stray_fuzz.cc": "// not registered in CMakeLists.txt\n",
    "src/foo/CMakeLists.txt": """
# abox_fuzz_target(commented_fuzz SOURCES commented_fuzz.cc)
foreach(target bar_fuzz)
  abox_fuzz_target(${target} SOURCES ${target}.cc LIBS abox_foo)
endforeach()
foreach(agent one two)
  add_test(NAME agents_${agent}_e2e COMMAND run.sh ${agent})
endforeach()
add_test(NAME foo_sdk_test COMMAND run.sh)
""",
    "tests/node/a.test.mjs": """
test("does the thing, and says so", async () => {});
test('keeps the person\\'s files', async () => {});
test.skip("is skipped", async () => {});
""",
    "src/cli/doctor_host_checks.cc": """
Check HostKvm() { return Make("host.kvm", CheckStatus::kPass, "ok"); }
Check Images() { return {"images", absl::StrCat("images.", i.name), CheckStatus::kPass, "", ""}; }
""",
    "src/cli/doctor_sandbox_checks.cc": """
Check Make(const Ctx& c, const std::string& what, CheckStatus status) {
  return Check{"sandbox", absl::StrCat("sandbox.", c.f.id, ".", what), status, "", ""};
}
std::vector<Check> StatusChecks(const Ctx& c) {
  out.push_back(Make(c, "seccomp", CheckStatus::kPass));
  out.push_back(Make(
      c, "uid", CheckStatus::kWarn));
}
""",
}

GOOD = """# Claims

Checked in CI; `abox doctor --json` for machines.

## Things

| claim | proof |
|---|---|
| A plain test proves it (`abox exec`, `-nic none`, `Seccomp: 2`, `.git`, `kill_on_disconnect`) | `FooTest.Works` |
| Fixtures and parameters | `FooFixtureTest.WorksWithAFixture`, `FooParamTest.RunsPerParameter/*`, `FooTest.*` (`Works`) |
| Node titles | `tests/node/a.test.mjs` (`foo_sdk_test`: "does the thing, and says so", "keeps the person's files") |
| Fuzzing and ctest | `src/foo/bar_fuzz.cc` (`ctest -L fuzz`), `agents_two_e2e`, `bar_fuzz_short` |
| Doctor checks | `FooTest.Works`; on your host, `abox doctor` checks `sandbox.<id>.seccomp`, `.uid` and `host.kvm`, images: `images.<name>` |

Prose cites too: `FooTest.Works`.

## Known gaps (not claimed)

- Nothing is perfect; `abox doctor` shows `sandbox.<id>.uid`.
"""


class ClaimsCheckTest(unittest.TestCase):

    def run_check(self, doc=GOOD, tree=None):
        """Writes the fake tree and doc, runs claims.py on them: (exit code, output)."""
        tree = dict(TREE if tree is None else tree)
        with tempfile.TemporaryDirectory() as root:
            tree["docs/security.md"] = doc
            for rel, text in tree.items():
                path = os.path.join(root, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8") as fh:
                    fh.write(text)
            p = subprocess.run([sys.executable, CLAIMS, "--root", root], capture_output=True,
                               text=True, check=False)
            return p.returncode, p.stdout + p.stderr

    def assert_fails(self, doc, *expected, tree=None):
        rc, out = self.run_check(doc, tree)
        self.assertEqual(rc, 1, out)
        for text in expected:
            self.assertIn(text, out)

    def test_a_good_document_passes_with_a_summary(self):
        rc, out = self.run_check()
        self.assertEqual(rc, 0, out)
        self.assertIn("claims: 5 claims, ", out)
        self.assertIn(" 0 problems", out)

    def test_commands_and_code_are_not_citations(self):
        rc, out = self.run_check()
        for token in ("abox exec", "-nic none", "Seccomp: 2", ".git", "kill_on_disconnect"):
            self.assertNotIn(f"`{token}`", out)

    def test_a_missing_test_fails_naming_its_line(self):
        doc = GOOD.replace("| `FooTest.Works` |", "| `FooTest.Gone` |")
        self.assert_fails(doc, "docs/security.md:9: `FooTest.Gone`: FooTest has no test Gone")

    def test_a_missing_suite_fails(self):
        self.assert_fails(GOOD.replace("`FooTest.*`", "`BarTest.*`"),
                          ":10: `BarTest.*`: no test suite BarTest")

    def test_a_bare_name_after_a_wildcard_is_a_test_of_that_suite(self):
        self.assert_fails(GOOD.replace("(`Works`)", "(`Gone`)"), ":10: `FooTest.Gone`")

    def test_a_disabled_test_does_not_count(self):
        self.assert_fails(GOOD.replace("| `FooTest.Works` |", "| `FooTest.Off` |"),
                          "FooTest has no test Off")

    def test_parameterized_tests_are_cited_with_a_star(self):
        self.assert_fails(GOOD.replace("RunsPerParameter/*", "RunsPerParameter"),
                          "is a TEST_P: cite it as `FooParamTest.RunsPerParameter/*`")
        self.assert_fails(GOOD.replace("| `FooTest.Works` |", "| `FooTest.Works/*` |"),
                          "is a TEST, not parameterized")

    def test_a_claim_that_cites_no_test_fails(self):
        doc = GOOD.replace("| `FooTest.Works` |", "| checked by hand, see `abox exec` |")
        self.assert_fails(doc, ":9: claim cites no test: A plain test proves it")

    def test_a_doctor_check_alone_is_not_a_test(self):
        doc = GOOD.replace("| `FooTest.Works`; on your host,", "| on your host,")
        self.assert_fails(doc, ":13: claim cites no test: Doctor checks")

    def test_a_missing_gaps_section_fails(self):
        doc = GOOD.split("## Known gaps")[0]
        self.assert_fails(doc, 'no "## Known gaps" section')

    def test_an_empty_gaps_section_fails(self):
        doc = GOOD.split("- Nothing is perfect")[0]
        self.assert_fails(doc, ":17: the known gaps section lists no gap")

    def test_a_missing_node_title_fails(self):
        self.assert_fails(GOOD.replace('"does the thing, and says so"', '"does another thing"'),
                          '"does another thing": no test("does another thing", ...) in '
                          "tests/node/a.test.mjs")

    def test_a_skipped_node_test_does_not_count(self):
        self.assert_fails(GOOD.replace('"does the thing, and says so"', '"is skipped"'),
                          '"is skipped": no test(')

    def test_a_missing_file_fails(self):
        self.assert_fails(GOOD.replace("src/foo/bar_fuzz.cc", "src/foo/baz_fuzz.cc"),
                          "`src/foo/baz_fuzz.cc`: no such file")

    def test_a_fuzz_file_must_be_a_fuzz_target(self):
        self.assert_fails(GOOD.replace("src/foo/bar_fuzz.cc", "src/foo/stray_fuzz.cc"),
                          "`src/foo/stray_fuzz.cc`: not a fuzz target")

    def test_a_missing_ctest_fails(self):
        self.assert_fails(GOOD.replace("agents_two_e2e", "agents_three_e2e"),
                          "`agents_three_e2e`: no ctest of that name")

    def test_a_missing_doctor_check_fails_also_as_a_sibling_and_in_prose(self):
        self.assert_fails(GOOD.replace("`host.kvm`", "`host.jail`"),
                          "`host.jail`: abox doctor has no such check")
        self.assert_fails(GOOD.replace("`.uid` and", "`.gid` and"),
                          "`sandbox.<id>.gid`: abox doctor has no such check")
        self.assert_fails(GOOD.replace("shows `sandbox.<id>.uid`", "shows `sandbox.<id>.jail`"),
                          ":19: `sandbox.<id>.jail`")

    def test_a_table_that_is_not_a_claim_table_fails(self):
        doc = GOOD.replace("## Things\n", "## Things\n\n| what | why |\n|---|---|\n| a | b |\n")
        self.assert_fails(doc, "a table that is not `| claim | proof |`")

    def test_a_removed_test_in_the_tree_fails_the_unchanged_document(self):
        tree = dict(TREE)
        tree["src/foo/foo_test.cc"] = tree["src/foo/foo_test.cc"].replace(
            "TEST(FooTest, Works) {}", "TEST(FooTest, WorksRenamed) {}")
        self.assert_fails(GOOD, "`FooTest.Works`: FooTest has no test Works", tree=tree)


if __name__ == "__main__":
    unittest.main()
