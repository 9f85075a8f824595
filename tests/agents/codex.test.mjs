// The real Codex CLI (headless, `codex exec`) with abox-mcp registered by
// `abox mcp install codex --global` (CODEX_HOME in a throwaway HOME), against a scripted fake
// Responses API server on loopback: the "model" creates a sandbox, runs a command in it and
// removes it. Run by run.sh.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import * as h from "./harness.mjs";

const CODEX = path.join(import.meta.dirname, "node_modules", ".bin", "codex");
const usage = { input_tokens: 10, input_tokens_details: null, output_tokens: 10,
                output_tokens_details: null, total_tokens: 20 };

// The SSE events of one response holding `item` (a message or a function_call).
function responseEvents(id, item) {
  return [
    ["response.created", { type: "response.created", response: { id } }],
    ["response.output_item.added", { type: "response.output_item.added", output_index: 0,
                                     item }],
    ["response.output_item.done", { type: "response.output_item.done", output_index: 0, item }],
    ["response.completed", { type: "response.completed", response: { id, usage } }],
  ];
}

function outputText(output) {
  if (typeof output === "string") return output;
  if (Array.isArray(output)) {
    return output.map((c) => (typeof c.text === "string" ? c.text : JSON.stringify(c))).join("\n");
  }
  return JSON.stringify(output);
}

const session = h.session();

test("Codex runs abox tools in a VM, and their results reach the model", async () => {
  h.checkInputs();
  const world = (session.world = h.makeWorld("cx"));
  const probe = h.makeProbe(world);
  const presented = [];     // the abox tools of the first request, as Codex named them
  const results = [];       // [{name, text}] tool outputs, in the order they came back
  const calls = new Map();  // call id -> {name, args}: the calls the model made
  const seen = new Set();   // call ids whose output is in `results`
  let verifiedInSandbox = false;

  const server = (session.server = await h.startServer(async (req, body, res) => {
    if (req.method !== "POST" || !req.url.startsWith("/v1/responses")) {
      res.writeHead(404, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: `no ${req.method} ${req.url} here` } }));
      return;
    }
    // Codex offers an MCP server's tools as one namespace tool, `mcp__<server>`.
    const ns = (body.tools ?? []).find((t) => t.type === "namespace" && t.name === "mcp__abox");
    const inNs = (ns?.tools ?? []).map((t) => t.name);
    if (presented.length === 0) {
      presented.push(...(body.tools ?? []).filter((t) => /abox/.test(t.name ?? ""))
        .map((t) => ({ type: t.type, name: t.name, tools: t.tools?.map((f) => f.name) })));
    }
    const input = body.input ?? [];
    const callNames = new Map();
    for (const item of input) {
      if (item.type === "function_call") {
        callNames.set(item.call_id, item.namespace ? `${item.namespace}/${item.name}` : item.name);
      }
    }
    for (const item of input) {  // each output once, though a request may be retried
      if (item.type === "function_call_output" && !seen.has(item.call_id)) {
        seen.add(item.call_id);
        results.push({ name: callNames.get(item.call_id), text: outputText(item.output) });
      }
    }
    const names = {};
    for (const tool of ["sandbox_create", "exec", "sandbox_remove"]) {
      if (inNs.includes(tool)) names[tool] = tool;
    }
    const step = callNames.size;
    if (!names.sandbox_create || !names.exec || !names.sandbox_remove) {
      h.sse(res, responseEvents("resp_none", {
        type: "message", role: "assistant", id: "msg_none",
        content: [{ type: "output_text", text: "no abox tools were offered" }] }));
      return;
    }
    if (step === 2 && !verifiedInSandbox) {  // the exec's output just came back: check it now,
      verifiedInSandbox = true;              // while the sandbox still runs
      await h.checkInSandbox(world, probe, h.parseProbeOutput(results.at(-1)?.text ?? ""));
    }
    const turn = h.scriptedTurn(world, probe, step, names);
    if (turn.text) {
      h.sse(res, responseEvents(`resp_${step}`, {
        type: "message", role: "assistant", id: `msg_${step}`,
        content: [{ type: "output_text", text: turn.text }] }));
      return;
    }
    calls.set(`call_abox_${step}`, { name: `mcp__abox/${turn.name}`, args: turn.args });
    h.sse(res, responseEvents(`resp_${step}`, {
      type: "function_call", id: `fc_${step}`, call_id: `call_abox_${step}`,
      namespace: "mcp__abox", name: turn.name, arguments: JSON.stringify(turn.args) }));
  }));

  // Codex reads the provider from the same config.toml the installer edits: the provider comes
  // first (top-level keys must precede every table), then the installer appends its table.
  const codexHome = path.join(world.home, ".codex");
  fs.mkdirSync(codexHome);
  const config = path.join(codexHome, "config.toml");
  fs.writeFileSync(config, [
    'model = "fake-model"',
    'model_provider = "fake"',
    "",
    "[model_providers.fake]",
    'name = "fake"',
    `base_url = "http://127.0.0.1:${server.port}/v1"`,
    'env_key = "ABOX_E2E_FAKE_KEY"',
    'wire_api = "responses"',
    "",
  ].join("\n"));
  world.env = { ...world.env, CODEX_HOME: codexHome, ABOX_E2E_FAKE_KEY: "fake" };
  const install = await h.abox(world, ["mcp", "install", "codex", "--global"]);
  assert.equal(install.code, 0, `abox mcp install: ${install.stdout}${install.stderr}`);
  const toml = fs.readFileSync(config, "utf8");
  assert.match(toml, /^model_provider = "fake"$/m, "the installer kept the provider");
  assert.match(toml, /^\[mcp_servers\.abox\]$/m);
  assert.ok(toml.includes(`command = "${h.ABOX_MCP}"`), toml);

  // Codex asks before calling an MCP tool annotated destructive (abox's exec, sandbox_remove),
  // and `codex exec` never asks: it refuses ("MCP tool call requires approval, but approval
  // policy is never"). The installer approves the tools that act only inside sandboxes, so
  // the run needs nothing more; apply_changes, which writes the host, is left to ask.
  assert.match(toml, /^tools\.exec\.approval_mode = "approve"$/m, toml);
  assert.match(toml, /^tools\.sandbox_remove\.approval_mode = "approve"$/m, toml);
  assert.doesNotMatch(toml, /^tools\.apply_changes/m, toml);
  const { r, log } = await h.runAgent("codex", CODEX,
                                      ["exec", "--skip-git-repo-check",
                                       "Run the probe in an abox sandbox."],
                                      { env: world.env, cwd: world.project, timeoutMs: 90000 },
                                      { server, calls, results, presented });
  assert.deepEqual(server.errors, [], `the fake server's checks\n${log}`);
  assert.ok(server.requests.length > 0, `Codex called the fake Responses API\n${log}`);
  assert.equal(server.requests[0].headers.authorization, "Bearer fake", log);
  assert.deepEqual([...calls.values()].map((c) => c.name),
                   ["mcp__abox/sandbox_create", "mcp__abox/exec", "mcp__abox/sandbox_remove"],
                   `the model got to call every abox tool it needed\n${log}`);
  assert.equal(r.code, 0, log);
  assert.match(r.stdout, new RegExp(`abox-e2e-done ${probe.token}`), log);

  // Each call's output came back in the next request, in order.
  assert.deepEqual(results.map((x) => x.name), [...calls.values()].map((c) => c.name), log);
  const [created, exec, removed] = results;
  assert.match(created.text, new RegExp(world.sandbox), `sandbox_create's output names it\n${log}`);
  assert.ok(verifiedInSandbox, "the test checked the sandbox while it ran");
  h.assertRanInGuest(world, probe, h.parseProbeOutput(exec.text));
  assert.match(removed.text, /removed/, log);
  await h.assertNoSandboxLeft(world);
});
