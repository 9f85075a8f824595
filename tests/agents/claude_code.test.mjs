// The real Claude Code CLI (headless, `claude -p`) with abox-mcp registered by
// `abox mcp install claude --project`, against a scripted fake Anthropic Messages server on
// loopback: the "model" creates a sandbox, runs a command in it and removes it. Run by run.sh.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import * as h from "./harness.mjs";

const CLAUDE = path.join(import.meta.dirname, "node_modules", ".bin", "claude");

// The SSE events of one assistant message holding `block` (text or tool_use).
function messageEvents(id, block, stopReason) {
  const start = block.type === "tool_use" ? { ...block, input: {} } : { type: "text", text: "" };
  const delta = block.type === "tool_use"
    ? { type: "input_json_delta", partial_json: JSON.stringify(block.input) }
    : { type: "text_delta", text: block.text };
  return [
    ["message_start", { type: "message_start",
                        message: { id, type: "message", role: "assistant", model: "fake-model",
                                   content: [], stop_reason: null, stop_sequence: null,
                                   usage: { input_tokens: 10, output_tokens: 1 } } }],
    ["content_block_start", { type: "content_block_start", index: 0, content_block: start }],
    ["content_block_delta", { type: "content_block_delta", index: 0, delta }],
    ["content_block_stop", { type: "content_block_stop", index: 0 }],
    ["message_delta", { type: "message_delta",
                        delta: { stop_reason: stopReason, stop_sequence: null },
                        usage: { output_tokens: 10 } }],
    ["message_stop", { type: "message_stop" }],
  ];
}

function reply(res, body, id, block, stopReason) {
  if (body?.stream) {
    h.sse(res, messageEvents(id, block, stopReason));
    return;
  }
  res.writeHead(200, { "content-type": "application/json" });
  res.end(JSON.stringify({ id, type: "message", role: "assistant", model: "fake-model",
                           content: [block], stop_reason: stopReason, stop_sequence: null,
                           usage: { input_tokens: 10, output_tokens: 10 } }));
}

function text(content) {
  if (typeof content === "string") return content;
  return (content ?? []).map((c) => (c.type === "text" ? c.text : JSON.stringify(c))).join("\n");
}

const session = h.session();

test("Claude Code runs abox tools in a VM, and their results reach the model", async () => {
  h.checkInputs();
  const world = (session.world = h.makeWorld("cc"));
  const probe = h.makeProbe(world);
  const offered = [];       // the tool names of each agent request
  const loaded = [];        // mcp__abox__exec as sent after ToolSearch loaded it
  const presented = [];     // the abox tools in `tools` and those only listed as deferred
  const results = [];       // [{name, text, isError}] tool results, in the order they came back
  const calls = new Map();  // tool_use id -> {name, args}: the calls the model made
  const seen = new Set();   // tool_use ids whose result is in `results`
  let verifiedInSandbox = false;

  const server = (session.server = await h.startServer(async (req, body, res) => {
    if (req.method === "HEAD" || req.method === "GET") {
      res.writeHead(200);
      res.end();
      return;
    }
    if (!req.url.startsWith("/v1/messages") || req.url.startsWith("/v1/messages/count_tokens")) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ input_tokens: 10 }));
      return;
    }
    const tools = (body.tools ?? []).map((t) => t.name);
    if (tools.length === 0) {  // a side request (title, summary): not the agent loop
      reply(res, body, "msg_side", { type: "text", text: "abox e2e" }, "end_turn");
      return;
    }
    offered.push(tools);
    // Tool calls so far, and the results the client sent back for them.
    const uses = new Map();
    for (const m of body.messages) {
      for (const c of Array.isArray(m.content) ? m.content : []) {
        if (c.type === "tool_use") uses.set(c.id, c.name);
      }
    }
    for (const c of body.messages.flatMap((m) => (Array.isArray(m.content) ? m.content : []))) {
      if (c.type === "tool_result" && !seen.has(c.tool_use_id)) {  // once, though retried
        seen.add(c.tool_use_id);
        results.push({ name: uses.get(c.tool_use_id), text: text(c.content),
                       isError: c.is_error === true });
      }
    }
    // Claude Code defers MCP tools: it lists their names in a system message and offers
    // ToolSearch to load their schemas. The model loads the three it needs first, as a real
    // one must ("calling them directly will fail with InputValidationError").
    const wanted = ["sandbox_create", "exec", "sandbox_remove"].map((t) => `mcp__abox__${t}`);
    const listed = new Set(JSON.stringify([body.system, body.messages])
      .match(/mcp__abox__[A-Za-z0-9_]+/g) ?? []);
    if (presented.length === 0) {
      presented.push({ tools: tools.filter((n) => n.startsWith("mcp__")), deferred: [...listed] });
    }
    const searched = [...uses.values()].includes("ToolSearch");
    if (!wanted.every((n) => tools.includes(n)) && !searched) {
      if (wanted.every((n) => listed.has(n)) && tools.includes("ToolSearch")) {
        const search = { name: "ToolSearch", args: { query: `select:${wanted.join(",")}` } };
        calls.set("toolu_search", search);
        reply(res, body, "msg_search", { type: "tool_use", id: "toolu_search", name: search.name,
                                         input: search.args }, "tool_use");
        return;
      }
      reply(res, body, "msg_none", { type: "text", text: "no abox tools were offered" },
            "end_turn");
      return;
    }
    const names = { sandbox_create: wanted[0], exec: wanted[1], sandbox_remove: wanted[2] };
    loaded.push(...(body.tools ?? []).filter((t) => t.name === names.exec));
    const step = [...uses.values()].filter((n) => n.startsWith("mcp__abox__")).length;
    if (step === 2 && !verifiedInSandbox) {  // the exec's result just came back: check it now,
      verifiedInSandbox = true;              // while the sandbox still runs
      const exec = results.find((x) => x.name === names.exec);
      await h.checkInSandbox(world, probe, h.parseProbeOutput(exec?.text ?? ""));
    }
    const turn = h.scriptedTurn(world, probe, step, names);
    if (turn.text) {
      reply(res, body, `msg_${step}`, { type: "text", text: turn.text }, "end_turn");
      return;
    }
    calls.set(`toolu_abox_${step}`, { name: turn.name, args: turn.args });
    reply(res, body, `msg_${step}`,
          { type: "tool_use", id: `toolu_abox_${step}`, name: turn.name, input: turn.args },
          "tool_use");
  }));

  // Registration as a person does it: the real installer, in the project.
  const install = await h.abox(world, ["mcp", "install", "claude", "--project", world.project]);
  assert.equal(install.code, 0, `abox mcp install: ${install.stdout}${install.stderr}`);
  const mcpJson = JSON.parse(fs.readFileSync(path.join(world.project, ".mcp.json"), "utf8"));
  assert.equal(mcpJson.mcpServers.abox.command, h.ABOX_MCP);

  const env = {
    ...world.env,
    ANTHROPIC_BASE_URL: `http://127.0.0.1:${server.port}`,
    ANTHROPIC_API_KEY: "fake",
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    DISABLE_AUTOUPDATER: "1",
    MCP_TIMEOUT: "30000",
    MCP_TOOL_TIMEOUT: "90000",
  };
  const allowed = ["sandbox_create", "exec", "sandbox_remove"].map((t) => `mcp__abox__${t}`);
  const { r, log } = await h.runAgent("claude", CLAUDE,
                                      ["-p", "Run the probe in an abox sandbox.",
                                       "--allowedTools", allowed.join(","),
                                       "--output-format", "text"],
                                      { env, cwd: world.project, timeoutMs: 90000 },
                                      { server, calls, results, presented });
  assert.deepEqual(server.errors, [], `the fake server's checks\n${log}`);
  assert.ok(offered.length > 0, `Claude Code sent an agent request with tools\n${log}`);
  const aboxCalls = [...calls.values()].filter((c) => c.name.startsWith("mcp__abox__"));
  assert.deepEqual(aboxCalls.map((c) => c.name),
                   ["mcp__abox__sandbox_create", "mcp__abox__exec", "mcp__abox__sandbox_remove"],
                   `the model got to call every abox tool it needed\n${log}`);
  assert.ok(loaded.length > 0 && loaded.every((t) => t.input_schema?.properties?.shell),
            `mcp__abox__exec went to the model with abox-mcp's schema\n${log}`);
  assert.equal(r.code, 0, log);
  assert.match(r.stdout, new RegExp(`abox-e2e-done ${probe.token}`), log);

  // Each call's result came back in the next request, in order, none an error.
  assert.deepEqual(results.map((x) => x.name), [...calls.values()].map((c) => c.name), log);
  for (const x of results) assert.equal(x.isError, false, `${x.name} succeeded\n${log}`);
  const [created, exec] = results.filter((x) => x.name.startsWith("mcp__abox__"));
  assert.match(created.text, new RegExp(world.sandbox), "sandbox_create's result names it");
  assert.ok(verifiedInSandbox, "the test checked the sandbox while it ran");
  h.assertRanInGuest(world, probe, h.parseProbeOutput(exec.text));
  await h.assertNoSandboxLeft(world);
});
