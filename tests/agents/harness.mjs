// Shared by the agent CLI tests: a throwaway world (HOME, project, abox home with the test image),
// the scripted "model" both fake servers play, the check that the command ran in the guest and
// not on the host, and the cleanup that leaves no sandbox, daemon or VM behind.
import { after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";

export const ABOX = process.env.ABOX_BIN;
export const ABOX_MCP = process.env.ABOX_MCP_BIN;
const TEST_HOME = process.env.ABOX_HOME;  // where scripts/test.sh built the image

// Fails (never skips) when the binaries or the image are missing.
export function checkInputs() {
  assert.ok(ABOX && fs.existsSync(ABOX), `ABOX_BIN names the abox binary (got ${ABOX})`);
  assert.ok(ABOX_MCP && fs.existsSync(ABOX_MCP), `ABOX_MCP_BIN names abox-mcp (got ${ABOX_MCP})`);
  assert.equal(path.dirname(ABOX_MCP), path.dirname(ABOX), "abox-mcp is built next to abox");
  assert.ok(TEST_HOME && fs.existsSync(path.join(TEST_HOME, "images", "default")),
            `ABOX_HOME (${TEST_HOME}) holds a built image: run scripts/test.sh, or ` +
            "ABOX_HOME=~/.cache/abox/test-home abox image build");
}

// A throwaway world. HOME is fresh and abox's paths are its defaults under that HOME (no
// ABOX_* or XDG_* variables): abox-mcp then finds the same daemon whichever environment the
// agent CLI passes on to MCP servers (Codex passes only a few variables, HOME among them). The
// path is short because the daemon's sockets live under it.
export function makeWorld(tag) {
  const root = fs.mkdtempSync(`/tmp/ab${tag}-`);
  const home = path.join(root, "h");
  const project = path.join(home, "project");
  const aboxHome = path.join(home, ".local", "share", "abox");
  fs.mkdirSync(project, { recursive: true });
  fs.mkdirSync(aboxHome, { recursive: true });
  fs.symlinkSync(path.join(TEST_HOME, "images"), path.join(aboxHome, "images"));
  fs.writeFileSync(path.join(project, "README.md"), "A project the agent works on.\n");
  const env = { ...process.env, HOME: home, PATH: `${path.dirname(ABOX)}:${process.env.PATH}` };
  for (const k of Object.keys(env)) {
    if (/^(ABOX_|ABOXD_|XDG_)/.test(k) || /^(ANTHROPIC|CLAUDE|OPENAI|CODEX)/.test(k)) {
      delete env[k];
    }
  }
  const socket = path.join(aboxHome, "run", "aboxd.sock");
  const suffix = crypto.randomBytes(4).toString("hex");
  return { root, home, project, aboxHome, socket, env, suffix,
           sandbox: `agents-${tag}-${suffix}` };
}

// Runs a command to its end; kills its whole process group after `timeoutMs`.
export function run(cmd, args, { env, cwd, timeoutMs = 60000 } = {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { env, cwd, detached: true,
                                     stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try { process.kill(-child.pid, "SIGKILL"); } catch {}
    }, timeoutMs);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      // Whatever it left in its group (an MCP server it did not stop) ends with it.
      try { process.kill(-child.pid, "SIGKILL"); } catch {}
      resolve({ code, signal, stdout, stderr, timedOut });
    });
  });
}

export function abox(world, args, timeoutMs = 60000) {
  return run(ABOX, args, { env: world.env, cwd: world.project, timeoutMs });
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code !== "ESRCH";
  }
}

// Processes whose command line names `needle` (the VMs of this world's daemon).
function processesNaming(needle) {
  const pids = [];
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (fs.readFileSync(`/proc/${entry}/cmdline`, "utf8").includes(needle)) {
        pids.push(Number(entry));
      }
    } catch {}
  }
  return pids;
}

async function waitFor(check, ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

// Removes the world's sandbox (even when the test failed), stops its daemon and any VM it
// left, and deletes the world. Returns what `abox ls -a` showed before, for the test to check.
export async function cleanup(world) {
  const rm = await abox(world, ["rm", "-f", world.sandbox], 30000);
  try {
    const pid = Number(fs.readFileSync(`${world.socket}.lock`, "utf8").trim());
    if (pid > 0 && alive(pid)) {
      process.kill(pid, "SIGTERM");
      if (!(await waitFor(() => !alive(pid), 10000))) process.kill(pid, "SIGKILL");
    }
  } catch {}
  for (const pid of processesNaming(world.root)) {
    try { process.kill(pid, "SIGKILL"); } catch {}
  }
  await waitFor(() => processesNaming(world.root).length === 0, 5000);
  fs.rmSync(world.root, { recursive: true, force: true });
  return rm;
}

// What the model asks the guest to run: writes a marker outside the workspace, then prints the
// guest kernel's boot id, its host name and the marker's hash. None of the printed values is in
// the command itself, so an echo of the command cannot pass for its output.
export function makeProbe(world) {
  const token = `${world.suffix}-${crypto.randomBytes(8).toString("hex")}`;
  const marker = `/tmp/abox-e2e-marker-${token}`;
  const shell = `printf '%s\\n' ${token} > ${marker} && ` +
                `echo "boot_id=$(cat /proc/sys/kernel/random/boot_id)" && ` +
                `echo "hostname=$(uname -n)" && ` +
                `echo "marker_sha256=$(sha256sum ${marker} | cut -d' ' -f1)"`;
  const sha = crypto.createHash("sha256").update(`${token}\n`).digest("hex");
  return { token, marker, shell, sha };
}

// Parses the probe's output out of a tool result as the model saw it (any JSON or text wrapping).
export function parseProbeOutput(text) {
  const unescaped = text.replace(/\\n/g, "\n");
  return {
    bootId: unescaped.match(/boot_id=([0-9a-f-]{36})/)?.[1],
    hostname: unescaped.match(/hostname=([A-Za-z0-9.-]+)/)?.[1],
    sha: unescaped.match(/marker_sha256=([0-9a-f]{64})/)?.[1],
  };
}

export function hostBootId() {
  return fs.readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
}

// The scripted model, the same for both CLIs: create a sandbox, run the probe in it, remove
// it, then answer with text. `step` is the number of tool calls already in the conversation
// (so a retried request gets the same answer); `names` maps an abox tool to the name the CLI
// gave it. Returns {tool, name, args} or {text}.
export function scriptedTurn(world, probe, step, names) {
  const calls = [
    ["sandbox_create", { name: world.sandbox }],
    ["exec", { sandbox: world.sandbox, shell: probe.shell }],
    ["sandbox_remove", { sandbox: world.sandbox }],
  ];
  if (step < calls.length) {
    const [tool, args] = calls[step];
    return { tool, name: names[tool], args };
  }
  return { text: `abox-e2e-done ${probe.token}` };
}

// A loopback HTTP server on an ephemeral port; `handle(req, body, res)` answers. Every request
// is recorded (method, url, headers, parsed JSON body).
export async function startServer(handle) {
  const requests = [];
  const errors = [];
  const server = http.createServer((req, res) => {
    let raw = "";
    req.on("data", (d) => (raw += d));
    req.on("end", async () => {
      let body = null;
      try { body = raw ? JSON.parse(raw) : null; } catch {}
      requests.push({ method: req.method, url: req.url, headers: req.headers, body });
      try {
        await handle(req, body, res);
      } catch (e) {
        errors.push(e);
        if (!res.headersSent) res.writeHead(500, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { type: "fake_server_error", message: String(e) } }));
      }
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: server.address().port,
    requests,
    errors,
    close: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }),
  };
}

export function sse(res, events) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  for (const [event, data] of events) {
    res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  }
  res.end();
}

// Checks, while the sandbox still runs, that the probe's output came from it: the test's own
// `abox exec` in the same sandbox sees the same boot id and the marker with the token.
export async function checkInSandbox(world, probe, seen) {
  const r = await abox(world, ["exec", "--no-stdin", world.sandbox, "--", "sh", "-c",
                               `cat /proc/sys/kernel/random/boot_id; cat ${probe.marker}`]);
  assert.equal(r.code, 0, `abox exec in ${world.sandbox}: ${r.stderr}`);
  const [bootId, marker] = r.stdout.trim().split("\n");
  assert.equal(bootId, seen.bootId, "the boot id the model saw is the sandbox's");
  assert.equal(marker, probe.token, "the marker the command wrote is in the sandbox");
}

// The checks every agent test ends with, on what the model saw of the exec.
export function assertRanInGuest(world, probe, seen) {
  assert.ok(seen.bootId, "the exec's stdout (boot_id=...) reached the model");
  assert.notEqual(seen.bootId, hostBootId(), "the boot id is not the host kernel's");
  // aboxd names each guest after its sandbox (its identity, set before any command runs).
  assert.match(seen.hostname, /^abox-[0-9a-f]{12}$/, "uname -n is the guest's host name");
  assert.equal(seen.sha, probe.sha, "the marker's hash reached the model");
  assert.ok(!fs.existsSync(probe.marker), `${probe.marker} does not exist on the host`);
}

// The test's world and fake server, closed and cleaned up after the test whatever its outcome.
export function session() {
  const s = { world: null, server: null };
  after(async () => {
    await s.server?.close();
    if (s.world) await cleanup(s.world);
  });
  return s;
}

// Runs the agent CLI; returns its result and a log of the run and of what the fake model saw
// (printed, and in every assertion message). AGENTS_E2E_DUMP=FILE also writes every request
// the fake server received to FILE.
export async function runAgent(name, cmd, args, options, seen) {
  const started = Date.now();
  const r = await run(cmd, args, options);
  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  const log = `${name} exit ${r.code} (${r.signal ?? ""}) after ${seconds}s\n` +
              `stdout: ${r.stdout}\nstderr: ${r.stderr}\n` +
              `tool calls: ${JSON.stringify([...seen.calls.values()])}\n` +
              `tool results: ${JSON.stringify(seen.results, null, 1)}\n` +
              `abox tools presented: ${JSON.stringify(seen.presented)}`;
  console.log(log);
  if (process.env.AGENTS_E2E_DUMP) {
    fs.writeFileSync(process.env.AGENTS_E2E_DUMP, JSON.stringify(seen.server.requests, null, 1));
  }
  return { r, log };
}

// The model removed its sandbox through the tool: none is left, in any state.
export async function assertNoSandboxLeft(world) {
  const ls = await abox(world, ["ls", "-a", "-q"]);
  assert.equal(ls.code, 0, ls.stderr);
  assert.equal(ls.stdout.trim(), "", "no sandbox is left");
}
