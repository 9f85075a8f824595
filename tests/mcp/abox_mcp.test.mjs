// abox-mcp driven by the official MCP TypeScript SDK client over stdio, against the real daemon
// over a fake VMM (aboxd-fake-vmm: its "VMs" run the real guest agent as host processes, and a
// sandbox's workspace is a host directory). Run by run.sh: ABOX_MCP and ABOXD_FAKE_VMM name the
// binaries.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const ABOX_MCP = process.env.ABOX_MCP;
const FAKE_VMM = process.env.ABOXD_FAKE_VMM;
assert.ok(ABOX_MCP && FAKE_VMM, "ABOX_MCP and ABOXD_FAKE_VMM must name the binaries");

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "abox-mcp-sdk-"));
const project = path.join(tmp, "project");
const guest = path.join(tmp, "guest");  // the fake VM's /workspace
const socket = path.join(tmp, "run", "aboxd.sock");
fs.mkdirSync(project);
fs.mkdirSync(guest);
fs.writeFileSync(path.join(project, "hello.txt"), "hello from the host\n");

const env = {
  ...process.env,
  ABOX_HOME: path.join(tmp, "home"),
  ABOX_CACHE_DIR: path.join(tmp, "cache"),
  ABOX_SOCKET: socket,
  ABOXD_BIN: FAKE_VMM,
  XDG_CONFIG_HOME: path.join(tmp, "config"),
};
delete env.ABOX_NO_AUTOSTART;

let client;
let transport;
let sandbox;

function connect(args = [], extraEnv = {}) {
  const t = new StdioClientTransport({ command: ABOX_MCP, args, env: { ...env, ...extraEnv },
                                       cwd: project,
                                       stderr: "inherit" });
  const c = new Client({ name: "abox-mcp-sdk-test", version: "1.0.0" });
  return { t, c };
}

async function call(name, args, options) {
  return client.callTool({ name, arguments: args }, undefined, options);
}

// Polls `check` until it returns true (up to `ms`).
async function eventually(check, ms = 15000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code !== "ESRCH";
  }
}

async function readPid(file) {
  assert.ok(await eventually(() => fs.existsSync(file) && fs.readFileSync(file, "utf8").trim()),
            `the command wrote ${file}`);
  return Number(fs.readFileSync(file, "utf8").trim());
}

before(async () => {
  ({ t: transport, c: client } = connect());
  await client.connect(transport);
});

after(async () => {
  await client?.close();
  // abox-mcp started aboxd-fake-vmm detached: stop it (its fake VMs end with it).
  try {
    const pid = Number(fs.readFileSync(`${socket}.lock`, "utf8").trim());
    if (pid > 0) process.kill(pid, "SIGTERM");
    await eventually(() => !alive(pid), 10000);
  } catch {}
  fs.rmSync(tmp, { recursive: true, force: true });
});

test("initialize names the server and lists every tool with schemas", async () => {
  assert.equal(client.getServerVersion().name, "abox");
  assert.match(client.getInstructions(), /sandbox/);
  const { tools } = await client.listTools();
  const names = tools.map((t) => t.name).sort();
  for (const want of ["sandbox_create", "sandbox_list", "sandbox_inspect", "sandbox_stop",
                      "sandbox_remove", "exec", "exec_start", "exec_read", "exec_write_stdin",
                      "exec_signal", "exec_wait", "read_file", "write_file", "list_files",
                      "workspace_sync", "workspace_diff", "egress_log", "apply_changes",
                      "egress_request"]) {
    assert.ok(names.includes(want), `tools/list has ${want}`);
  }
  for (const t of tools) {
    assert.equal(t.inputSchema.type, "object", t.name);
    assert.equal(t.outputSchema?.type, "object", t.name);
  }
  assert.equal(await client.ping().then(() => "pong"), "pong");
});

test("creates a sandbox on the directory abox-mcp runs in, with progress", async () => {
  const progress = [];
  const r = await call("sandbox_create", { name: "sdk", workspace_guest_path: guest },
                       { onprogress: (p) => progress.push(p.progress), timeout: 120000 });
  assert.equal(r.isError, false, JSON.stringify(r));
  sandbox = r.structuredContent.id;
  assert.equal(r.structuredContent.state, "ready");
  assert.equal(r.structuredContent.created_here, true);
  assert.deepEqual(JSON.parse(r.content[0].text), r.structuredContent);
  for (let i = 1; i < progress.length; i++) assert.ok(progress[i] > progress[i - 1]);
  const list = await call("sandbox_list", {});
  assert.ok(list.structuredContent.sandboxes.some((s) => s.id === sandbox && s.name === "sdk"));
});

test("exit codes are data: a failing and a passing command", async () => {
  const failing = await call("exec", { sandbox, shell: "echo out; echo err >&2; exit 3" });
  assert.equal(failing.isError, false);
  assert.equal(failing.structuredContent.exit_code, 3);
  assert.equal(failing.structuredContent.stdout, "out\n");
  assert.equal(failing.structuredContent.stderr, "err\n");
  assert.equal(failing.structuredContent.timed_out, false);

  const passing = await call("exec", { sandbox, argv: ["cat", "hello.txt"], cwd: guest });
  assert.equal(passing.isError, false);
  assert.equal(passing.structuredContent.exit_code, 0);
  assert.equal(passing.structuredContent.stdout, "hello from the host\n");

  const input = await call("exec", { sandbox, argv: ["tr", "a-z", "A-Z"], stdin: "shout\n" });
  assert.equal(input.structuredContent.stdout, "SHOUT\n");
});

test("a long exec reports increasing progress and does not block other requests", async () => {
  const progress = [];
  const go = path.join(tmp, "go");
  // It runs until the test creates `go`: no timing in the test.
  const pending = call("exec", { sandbox, shell: `while [ ! -f ${go} ]; do sleep 0.05; done; echo done` },
                       { onprogress: (p) => progress.push(p.progress) });
  let execEnded = false;
  pending.then(() => { execEnded = true; }, () => { execEnded = true; });
  await client.ping();
  const list = await call("sandbox_list", {});
  assert.equal(list.isError, false);
  assert.equal(execEnded, false, "ping and sandbox_list were answered while exec ran");
  assert.ok(await eventually(() => progress.length >= 2), "notifications/progress while it runs");
  fs.writeFileSync(go, "");
  const r = await pending;
  assert.equal(r.structuredContent.exit_code, 0);
  assert.equal(r.structuredContent.stdout, "done\n");
  for (let i = 1; i < progress.length; i++) assert.ok(progress[i] > progress[i - 1]);
});

test("a command past its timeout is killed and says so", async () => {
  const r = await call("exec", { sandbox, shell: "echo begun; sleep 30", timeout_seconds: 1 });
  assert.equal(r.isError, false, JSON.stringify(r));
  assert.equal(r.structuredContent.timed_out, true);
  assert.equal(r.structuredContent.stdout, "begun\n");
});

test("reads, writes and lists files in the sandbox", async () => {
  const read = await call("read_file", { sandbox, path: path.join(guest, "hello.txt") });
  assert.equal(read.isError, false, JSON.stringify(read));
  assert.equal(read.structuredContent.content, "hello from the host\n");
  assert.equal(read.structuredContent.size, 20);
  assert.equal(read.structuredContent.truncated, false);

  const missing = await call("read_file", { sandbox, path: path.join(guest, "nope.txt") });
  assert.equal(missing.isError, true);
  assert.match(missing.content[0].text, /does not exist/);

  const wrote = await call("write_file", { sandbox, path: path.join(guest, "src", "new.txt"),
                                           content: "made in the sandbox\n" });
  assert.equal(wrote.isError, false, JSON.stringify(wrote));
  assert.equal(wrote.structuredContent.bytes, 20);
  const list = await call("list_files", { sandbox, path: guest, depth: 2 });
  const paths = list.structuredContent.entries.map((e) => e.path);
  assert.ok(paths.includes("hello.txt") && paths.includes("src/new.txt"), paths.join(","));
  // The host directory is untouched.
  assert.equal(fs.existsSync(path.join(project, "src", "new.txt")), false);
});

test("diffs the sandbox's changes; applying is the person's", async () => {
  const diff = await call("workspace_diff", { sandbox });
  assert.equal(diff.isError, false, JSON.stringify(diff));
  const file = diff.structuredContent.files.find((f) => f.path === "src/new.txt");
  assert.ok(file, JSON.stringify(diff.structuredContent));
  assert.equal(file.status, "added");
  assert.match(file.patch, /\+made in the sandbox/);
  const stat = await call("workspace_diff", { sandbox, stat: true });
  assert.equal(stat.structuredContent.files.find((f) => f.path === "src/new.txt").patch,
               undefined);

  // A change on the host reaches the sandbox with a sync.
  fs.writeFileSync(path.join(project, "later.txt"), "written on the host later\n");
  const sync = await call("workspace_sync", { sandbox });
  assert.equal(sync.isError, false, JSON.stringify(sync));
  assert.equal(sync.structuredContent.changed, true);
  assert.ok(fs.existsSync(path.join(guest, "later.txt")));

  const log = await call("egress_log", { sandbox, limit: 10 });
  assert.equal(log.isError, false, JSON.stringify(log));
  assert.ok(Array.isArray(log.structuredContent.connections));
  assert.ok(Array.isArray(log.structuredContent.dns));

  const apply = await call("apply_changes", { sandbox });
  assert.equal(apply.isError, true);
  assert.match(apply.content[0].text, new RegExp(`abox apply ${sandbox}`));
  assert.ok(!fs.existsSync(path.join(project, "src", "new.txt")),
            "the model applied to the host without the person's --allow-apply");
});

test("a background command is read with a cursor", async () => {
  const started = await call("exec_start", {
    sandbox, shell: "for i in 1 2 3; do echo line$i; sleep 0.3; done; exit 4" });
  assert.equal(started.isError, false, JSON.stringify(started));
  const handle = started.structuredContent.handle;
  let cursor = 0;
  let out = "";
  let last;
  const cursors = [];
  for (let i = 0; i < 100; i++) {
    const r = await call("exec_read", { handle, cursor, wait_seconds: 2 });
    assert.equal(r.isError, false, JSON.stringify(r));
    last = r.structuredContent;
    out += last.stdout;
    assert.ok(last.next_cursor >= cursor);
    cursor = last.next_cursor;
    cursors.push(cursor);
    if (last.ended && !last.more) break;
  }
  assert.equal(out, "line1\nline2\nline3\n");
  assert.equal(cursor, out.length);
  assert.equal(last.exit_code, 4);
  const waited = await call("exec_wait", { handle, timeout_seconds: 5 });
  assert.equal(waited.structuredContent.ended, true);
  assert.equal(waited.structuredContent.exit_code, 4);
});

test("stdin and signals reach a background command", async () => {
  const started = await call("exec_start", { sandbox, argv: ["cat"], keep_stdin_open: true });
  const handle = started.structuredContent.handle;
  const wrote = await call("exec_write_stdin", { handle, data: "ping\n" });
  assert.equal(wrote.isError, false, JSON.stringify(wrote));
  const r = await call("exec_read", { handle, cursor: 0, wait_seconds: 10 });
  assert.equal(r.structuredContent.stdout, "ping\n");
  const signalled = await call("exec_signal", { handle, signal: "KILL" });
  assert.equal(signalled.isError, false, JSON.stringify(signalled));
  const waited = await call("exec_wait", { handle, timeout_seconds: 20 });
  assert.equal(waited.structuredContent.ended, true);
  assert.notEqual(waited.structuredContent.exit_code, 0);
});

test("cancelling a call kills its command in the guest", async () => {
  const pidFile = path.join(tmp, "cancel.pid");
  const controller = new AbortController();
  const pending = call("exec", { sandbox, shell: `echo $$ > ${pidFile}; exec sleep 300` },
                       { signal: controller.signal });
  const pid = await readPid(pidFile);
  assert.ok(alive(pid));
  controller.abort("the user changed their mind");
  await assert.rejects(pending);
  assert.ok(await eventually(() => !alive(pid)), `process ${pid} is gone`);
  // The server still answers.
  await client.ping();
});

// One request to aboxd's API over its unix socket, as the person's abox CLI would make it.
function api(method, target, body) {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: socket, method, path: target,
                               headers: { "content-type": "application/json" } }, (res) => {
      let data = "";
      res.on("data", (d) => (data += d));
      res.on("end", () => resolve({ status: res.statusCode, json: data ? JSON.parse(data) : null }));
    });
    req.on("error", reject);
    req.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

test("asking to allow a name waits for the person's approval on the host", async () => {
  const progress = [];
  const asking = call("egress_request",
                      { sandbox, name: "files.example.org", reason: "download the fixtures",
                        wait_seconds: 30 },
                      { onprogress: (p) => progress.push(p), timeout: 60000 });
  // The person sees it in the review queue, with the reason, and approves it.
  let queued;
  assert.ok(await eventually(async () => {
    const q = await api("GET", `/v1/egress/queue?sandbox=${sandbox}`);
    queued = q.json.requests.find((r) => r.name === "files.example.org");
    return queued !== undefined;
  }), "the ask reached the review queue");
  assert.equal(queued.state, "pending");
  assert.equal(queued.reason, "asked by the agent: download the fixtures");
  let policy = await api("GET", `/v1/sandboxes/${sandbox}/egress/policy`);
  assert.ok(!JSON.stringify(policy.json).includes("files.example.org"), "allowed before approval");
  await new Promise((r) => setTimeout(r, 1500));  // the call is still waiting meanwhile
  const approved = await api("POST", `/v1/sandboxes/${sandbox}/egress/approve`,
                             { name: "files.example.org", once: false });
  assert.equal(approved.status, 200, JSON.stringify(approved.json));
  const answer = await asking;
  assert.equal(answer.isError, false, JSON.stringify(answer));
  assert.equal(answer.structuredContent.granted, true);
  assert.equal(answer.structuredContent.state, "approved");
  assert.ok(progress.length >= 1, "progress while waiting for the person");
  policy = await api("GET", `/v1/sandboxes/${sandbox}/egress/policy`);
  assert.ok(policy.json.allow.includes("files.example.org"), JSON.stringify(policy.json));

  // A denial is an answer too.
  const denying = call("egress_request", { sandbox, name: "evil.example.net", reason: "exfil",
                                           wait_seconds: 30 }, { timeout: 60000 });
  assert.ok(await eventually(async () => {
    const q = await api("GET", `/v1/egress/queue?sandbox=${sandbox}`);
    return q.json.requests.some((r) => r.name === "evil.example.net");
  }));
  await api("POST", `/v1/sandboxes/${sandbox}/egress/deny`, { name: "evil.example.net" });
  const denied = await denying;
  assert.equal(denied.structuredContent.granted, false);
  assert.equal(denied.structuredContent.state, "denied");
  assert.equal(denied.structuredContent.pending, false);
});

test("a client that can elicit asks its user, and the answer is carried out", async () => {
  const asked = [];
  const answers = [{ action: "accept", content: { decision: "once" } }, { action: "decline" }];
  const c = new Client({ name: "abox-mcp-sdk-elicit", version: "1.0.0" },
                       { capabilities: { elicitation: {} } });
  c.setRequestHandler(ElicitRequestSchema, async (request) => {
    asked.push(request.params);
    return answers.shift();
  });
  const t = new StdioClientTransport({ command: ABOX_MCP, env, cwd: project, stderr: "inherit" });
  await c.connect(t);
  try {
    const r = await c.callTool({ name: "egress_request",
                                 arguments: { sandbox, name: "cdn.example.org:8443",
                                              reason: "fetch a wheel", wait_seconds: 20 } },
                               undefined, { timeout: 60000 });
    assert.equal(r.isError, false, JSON.stringify(r));
    assert.equal(r.structuredContent.granted, true);
    assert.equal(r.structuredContent.state, "approved_once");
    assert.equal(asked.length, 1);
    assert.match(asked[0].message, /cdn\.example\.org:8443/);
    assert.match(asked[0].message, /fetch a wheel/);
    assert.deepEqual(asked[0].requestedSchema.properties.decision.enum, ["always", "once", "deny"]);
    let q = await api("GET", `/v1/egress/queue?sandbox=${sandbox}&all=true`);
    const row = q.json.requests.find((x) => x.name === "cdn.example.org");
    assert.equal(row.state, "approved_once");
    assert.equal(row.once_port, 8443);

    // Declined: nothing decided; the ask stays in the queue for the person, and the call
    // answers at once instead of waiting out wait_seconds.
    const t0 = Date.now();
    const d = await c.callTool({ name: "egress_request",
                                 arguments: { sandbox, name: "other.example.org",
                                              reason: "docs", wait_seconds: 30 } },
                               undefined, { timeout: 60000 });
    assert.ok(Date.now() - t0 < 15000, `a declined ask took ${Date.now() - t0} ms`);
    assert.equal(d.structuredContent.granted, false);
    assert.equal(d.structuredContent.pending, true);
    assert.match(d.structuredContent.message, /did not allow/);
    assert.equal(asked.length, 2);
    q = await api("GET", `/v1/egress/queue?sandbox=${sandbox}`);
    assert.ok(q.json.requests.some((x) => x.name === "other.example.org" && x.state === "pending"));
  } finally {
    await c.close();
  }
});

test("errors say what to do next", async () => {
  const unknown = await call("sandbox_inspect", { sandbox: "no-such-sandbox" });
  assert.equal(unknown.isError, true);
  assert.match(unknown.content[0].text, /sandbox_list/);
  const bad = await call("exec", { sandbox, argv: ["true"], shell: "true" });
  assert.equal(bad.isError, true);
  const egress = await call("egress_request", { sandbox, name: "pypi.org",
                                                reason: "pip install requests",
                                                wait_seconds: 0 });
  assert.equal(egress.isError, false, JSON.stringify(egress));
  assert.equal(egress.structuredContent.granted, false);
  assert.equal(egress.structuredContent.pending, true);
  assert.ok(egress.structuredContent.person_commands.includes(
      `abox egress approve ${sandbox} pypi.org --once`));
  const badName = await call("egress_request", { sandbox, name: "pypi.org; rm -rf ~",
                                                 reason: "x", wait_seconds: 0 });
  assert.equal(badName.isError, true);
  assert.match(badName.content[0].text, /NAME:PORT/);
  const widen = await call("sandbox_create", { egress_mode: "open", workspace: false });
  assert.equal(widen.isError, true);
  assert.match(widen.content[0].text, /--allow-egress-changes/);
  await assert.rejects(call("no_such_tool", {}), /-32602|unknown tool/);
});

test("with the person's flags, apply and egress changes are made", async () => {
  await client.close();
  ({ t: transport, c: client } = connect(["--allow-apply", "--allow-egress-changes"]));
  await client.connect(transport);
  const applied = await call("apply_changes", { sandbox });
  assert.equal(applied.isError, false, JSON.stringify(applied));
  assert.equal(fs.readFileSync(path.join(project, "src", "new.txt"), "utf8"),
               "made in the sandbox\n");
  const granted = await call("egress_request", { sandbox, name: "pypi.org", reason: "pip" });
  assert.equal(granted.isError, false, JSON.stringify(granted));
  assert.equal(granted.structuredContent.granted, true);
});

test("closing the session kills its background commands", async () => {
  const pidFile = path.join(tmp, "background.pid");
  const started = await call("exec_start", { sandbox, shell: `echo $$ > ${pidFile}; exec sleep 300` });
  assert.equal(started.isError, false);
  const pid = await readPid(pidFile);
  assert.ok(alive(pid));
  await client.close();
  assert.ok(await eventually(() => !alive(pid)), `process ${pid} is gone`);
  // A new session may not remove what the old one created, unless the person says so.
  ({ t: transport, c: client } = connect());
  await client.connect(transport);
  const refused = await call("sandbox_remove", { sandbox });
  assert.equal(refused.isError, true);
  assert.match(refused.content[0].text, new RegExp(`abox rm ${sandbox}`));
  await client.close();
  // With the person's flag it may.
  ({ t: transport, c: client } = connect(["--allow-remove-any"]));
  await client.connect(transport);
  const stopped = await call("sandbox_stop", { sandbox });
  assert.equal(stopped.isError, false, JSON.stringify(stopped));
  assert.equal(stopped.structuredContent.state, "stopped");
  const inspected = await call("sandbox_inspect", { sandbox });
  assert.equal(inspected.structuredContent.state, "stopped");
  assert.equal(inspected.structuredContent.created_here, false);
  const removed = await call("sandbox_remove", { sandbox });
  assert.equal(removed.isError, false, JSON.stringify(removed));
  assert.equal(removed.structuredContent.removed, sandbox);
  const list = await call("sandbox_list", {});
  assert.ok(!list.structuredContent.sandboxes.some((s) => s.id === sandbox));
});

test("started in the person's home, a sandbox gets no workspace by default", async () => {
  await client.close();
  ({ t: transport, c: client } = connect([], { HOME: project }));
  await client.connect(transport);
  const r = await call("sandbox_create", { name: "nohome" });
  assert.equal(r.isError, false, JSON.stringify(r));
  assert.match(r.structuredContent.workspace_note, /not a project directory/);
  assert.ok(!r.structuredContent.workspace, JSON.stringify(r.structuredContent));
  const removed = await call("sandbox_remove", { sandbox: "nohome" });
  assert.equal(removed.structuredContent.removed, r.structuredContent.id);
});

test("--socket names aboxd's socket", async () => {
  await client.close();
  ({ t: transport, c: client } = connect(["--socket", socket],
                                         { ABOX_SOCKET: path.join(tmp, "elsewhere.sock") }));
  await client.connect(transport);
  const list = await call("sandbox_list", {});
  assert.equal(list.isError, false, JSON.stringify(list));
  // $ABOX_SOCKET was not used: no daemon was started there.
  assert.equal(fs.existsSync(path.join(tmp, "elsewhere.sock")), false);
});

test("unknown flags are refused", async () => {
  const { spawnSync } = await import("node:child_process");
  const r = spawnSync(ABOX_MCP, ["--allow-everything"], { env, input: "" });
  assert.notEqual(r.status, 0);
  assert.match(r.stderr.toString(), /--allow-everything/);
});
