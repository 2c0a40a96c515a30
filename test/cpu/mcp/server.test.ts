/**
 * The MCP server through the SDK's own client, in-process (InMemoryTransport): the tool list and
 * its input schemas, inspect/replay/validate returning the verbs' JSON documents (tools run this
 * kerncap in child processes), read_file, edit_file confined to src/ (also when src/ is a link),
 * clear errors for a capture without src/ and a missing cwd, a stdio round trip, and the tool
 * children (validate's slow build.sh) ended at cancellation, SIGTERM and stdin EOF.
 */
import { tmpdir } from "node:os";
import { availableParallelism } from "node:os";
import { describe, expect, test } from "bun:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { evaluateRefusal, makeCapture, recordRendered, tempDir, sandboxOffForMarkers } from "../fixtures.ts";
import { NVCC } from "../../nvcc-fixtures.ts";
import { runCli } from "../../../src/cli/main.ts";
import { TOOL_NAMES } from "../../../src/mcp/server.ts";
import { hostIdentity } from "../../../src/format/received.ts";
import { connected, doc, running, until } from "../mcp-client.ts";

async function fresh(): Promise<string> {
  const dir = join(tempDir(), "cap");
  await makeCapture(dir);
  mkdirSync(join(dir, "src"));
  writeFileSync(join(dir, "src/kernel.cu"), "__global__ void scale(float* x, int n) { x[0] *= 2.0f; }\n");
  return dir;
}

/** A capture whose build.sh writes "<its pid> <its parent's (the kerncap child's)> <sleep's>" to ../pids, then sleeps. */
async function slowBuild(): Promise<{ dir: string; pids: string }> {
  const dir = await fresh();
  const pids = join(dirname(dir), "pids");
  writeFileSync(join(dir, "build.sh"), `#!/usr/bin/env bash\nsleep 60 &\necho "$$ $PPID $!" > ${pids}.part && mv ${pids}.part ${pids}\nwait\n`, {
    mode: 0o755,
  });
  recordRendered(dir); // stands for the build.sh kerncap wrote (kerncap mcp's validate runs no other)
  return { dir, pids };
}

/** `kerncap mcp` as a child speaking newline-delimited JSON-RPC on its stdin; a validate call sent. */
async function mcpWithSlowValidate(): Promise<{ p: Bun.Subprocess<"pipe", "pipe", "pipe">; procs: number[] }> {
  const { dir, pids } = await slowBuild();
  const p = Bun.spawn([process.execPath, resolve(import.meta.dir, "../../../src/cli/main.ts"), "mcp", "--root", tmpdir()], {
    stdin: "pipe",
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env }, // as it is now (KERNCAP_SANDBOX=0: sandboxOffForMarkers)
  });
  const send = (m: object) => p.stdin.write(JSON.stringify({ jsonrpc: "2.0", ...m }) + "\n");
  send({ id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } });
  send({ method: "notifications/initialized" });
  send({ id: 2, method: "tools/call", params: { name: "validate", arguments: { dir, force: true } } });
  p.stdin.flush();
  await until(() => existsSync(pids));
  const procs = readFileSync(pids, "utf8").trim().split(" ").map(Number);
  expect(procs.every(running)).toBe(true);
  return { p, procs };
}

describe("kerncap mcp", () => {
  sandboxOffForMarkers(); // build.sh writes markers outside the capture
  test("tools/list: every verb and the file tools, with JSON Schema inputs", async () => {
    const c = await connected();
    const { tools } = await c.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([
      "build",
      "edit_file",
      "evaluate",
      "inspect",
      "list",
      "list_files",
      "profile",
      "read_file",
      "replay",
      "run",
      "tune",
      "validate",
    ]);
    expect(tools.map((t) => t.name)).toEqual(TOOL_NAMES); // what `kerncap mcp --help` and its start line name
    const help = Bun.spawnSync([process.execPath, join(import.meta.dir, "../../../src/cli/main.ts"), "mcp", "--help"], { stdout: "pipe", stderr: "pipe" });
    expect(help.stdout.toString() + help.stderr.toString()).toContain(`(${TOOL_NAMES.join(", ")})`);
    const run = tools.find((t) => t.name === "run")!;
    expect(run.inputSchema.required).toEqual(["app"]);
    expect((run.inputSchema.properties as any).dispatch.type).toBe("integer");
    await c.close();
  });

  test("tools/list: every argument has a description; flushL2 is a read, not a memset; allowVersionMismatch, and force its deprecated alias, ask for --allow-version-mismatch", async () => {
    const c = await connected();
    const { tools } = await c.listTools();
    const undescribed: string[] = [];
    const walk = (schema: any, at: string) => {
      for (const [k, p] of Object.entries<any>(schema?.properties ?? {})) {
        if (typeof p.description !== "string" || p.description.length < 12 || /^the candidates$/i.test(p.description)) undescribed.push(`${at}.${k}`);
        walk(p.items ?? p, `${at}.${k}`);
      }
    };
    for (const t of tools) walk(t.inputSchema, t.name);
    expect(undescribed).toEqual([]);
    const prop = (tool: string, k: string) => (tools.find((t) => t.name === tool)!.inputSchema.properties as any)[k];
    for (const tool of ["replay", "tune"]) {
      expect(prop(tool, "flushL2").description, tool).not.toMatch(/memset/);
      expect(prop(tool, "flushL2").description, tool).toContain("a read of a 256 MiB buffer (or of twice the L2 where that is more)");
    }
    for (const tool of ["validate", "profile"]) {
      expect(prop(tool, "allowVersionMismatch").type, tool).toBe("boolean");
      expect(prop(tool, "force").description, tool).toMatch(/^Deprecated: the former name of allowVersionMismatch/);
    }
    const { TOOLS } = await import("../../../src/mcp/tools.ts");
    for (const a of [{ allowVersionMismatch: true }, { force: true }]) {
      expect(TOOLS.validate.argv({ dir: "d", ...a })).toContain("--allow-version-mismatch");
      expect(TOOLS.profile.argv({ dir: "d", build: true, ...a })).toContain("--allow-version-mismatch");
    }
    expect(TOOLS.validate.argv({ dir: "d" })).not.toContain("--allow-version-mismatch");
    await c.close();
  });

  test("--root that does not exist, or is a file: refused at startup (E_USAGE, exit 2) naming it, before anything is served", () => {
    const main = join(import.meta.dir, "../../../src/cli/main.ts");
    const file = join(tempDir(), "a-file");
    writeFileSync(file, "x");
    const ok = tempDir();
    for (const [roots, why] of [
      [["/nonexistent-kerncap-root"], "--root /nonexistent-kerncap-root does not exist"],
      [[ok, file], `--root ${file} is not a folder`],
    ] as const) {
      const p = Bun.spawnSync([process.execPath, main, "mcp", ...roots.flatMap((r) => ["--root", r])], {
        stdin: new Blob(['{"jsonrpc":"2.0","id":1,"method":"tools/list"}\n']),
        stdout: "pipe",
        stderr: "pipe",
        timeout: 20_000,
      });
      expect(p.exitCode, why).toBe(2);
      expect(p.stderr.toString(), why).toContain(why);
      expect(p.stdout.toString(), why).toBe(""); // nothing served: no answer to tools/list
    }
  });

  test("stdin closed with calls in flight: each tools/call is answered or counted in the one warning, a call with no child process too (nu #4: an inspect went unanswered, unsaid)", async () => {
    const main = join(import.meta.dir, "../../../src/cli/main.ts");
    const dir = join(tempDir(), "cap");
    expect(await runCli(["demo", dir])).toBe(0);
    const lines = [
      { id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } },
      { method: "notifications/initialized" },
      { id: 9, method: "tools/call", params: { name: "inspect", arguments: { dir: "/nonexistent-kerncap-cap" } } },
      { id: 3, method: "tools/call", params: { name: "inspect", arguments: { dir, verify: true } } },
      { id: 4, method: "tools/call", params: { name: "inspect", arguments: { dir } } },
      { id: 5, method: "tools/list" },
    ].map((m) => `${JSON.stringify({ jsonrpc: "2.0", ...m })}\n`);
    const p = Bun.spawnSync([process.execPath, main, "mcp"], { stdin: new Blob(lines), stdout: "pipe", stderr: "pipe", timeout: 30_000 });
    expect(p.exitCode).toBe(0);
    const answered = new Set(
      p.stdout
        .toString()
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l).id),
    );
    const unanswered = [9, 3, 4].filter((id) => !answered.has(id)).length;
    const said = /stdin closed while (\d+) tool calls? (was|were) running/.exec(p.stderr.toString());
    expect(said ? Number(said[1]) : 0).toBe(unanswered);
  });

  test("--trust-builds: the server's help names every tool it gates; it and the agent skill say a capture trusted on the command line (recorded) builds without it", () => {
    const help = Bun.spawnSync([process.execPath, join(import.meta.dir, "../../../src/cli/main.ts"), "mcp", "--help"], { stdout: "pipe", stderr: "pipe" });
    const text = (help.stdout.toString() + help.stderr.toString()).replace(/\s+/g, " ");
    expect(text).toContain("validate, tune, profile --build and evaluate");
    expect(text).toContain("a received capture trusted on the command line, kerncap validate DIR --trust=DIGEST, builds without it");
    // the behaviour itself: test/cpu/attacks-agent.test.ts (the user's validate --trust on the command line lets kerncap mcp build)
    const skill = readFileSync(join(import.meta.dir, "../../../docs/agent-skill.md"), "utf8").replace(/\s+/g, " ");
    expect(skill).toContain(
      "build only if the user started the server with `kerncap mcp --trust-builds`, or trusted the folder on the command line (`kerncap validate DIR --trust=DIGEST`, which is recorded)",
    );
  });

  test("tools/list: a title and annotations on every tool (inspect reads, edit_file writes); outputSchemas that calls conform to", async () => {
    const c = await connected();
    const { tools } = await c.listTools();
    const t = Object.fromEntries(tools.map((x) => [x.name, x]));
    for (const x of tools) {
      expect(x.title, x.name).toBeTruthy();
      for (const k of ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"] as const)
        expect(typeof x.annotations?.[k], `${x.name} ${k}`).toBe("boolean");
      expect(x.outputSchema?.type, x.name).toBe("object");
    }
    // what a client asks permission for: reading vs writing, the app's open world
    for (const n of ["inspect", "read_file", "list_files", "replay"]) expect(t[n]!.annotations).toMatchObject({ readOnlyHint: true, openWorldHint: false });
    expect(t.edit_file!.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true, openWorldHint: false });
    expect(t.run!.annotations).toMatchObject({ readOnlyHint: false, openWorldHint: true });
    // list runs the application it is given, whatever it is: as destructive as run (adversary 58)
    expect(t.list!.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true, openWorldHint: true });
    expect(t.run!.annotations).toMatchObject({ destructiveHint: true });
    // profile writes its report, tune its builds: neither reads only, neither destroys
    for (const n of ["profile", "tune", "validate"])
      expect(t[n]!.annotations, n).toMatchObject({ readOnlyHint: false, destructiveHint: false, openWorldHint: false });
    // a result, a file, an edit and an error each conform to the tool's outputSchema (the SDK's own validator)
    const ajv = new AjvJsonSchemaValidator();
    const dir = await fresh();
    const calls: [string, Record<string, unknown>][] = [
      ["inspect", { dir }],
      ["read_file", { dir, path: "src/kernel.cu" }],
      ["list_files", { dir }],
      ["edit_file", { dir, path: "src/kernel.cu", content: "// x\n" }],
      ["inspect", { dir: join(dir, "nothing") }],
    ];
    for (const [name, args] of calls) {
      const r = await c.callTool({ name, arguments: args });
      const check = ajv.getValidator(t[name]!.outputSchema as never)(r.structuredContent);
      expect(check.valid, `${name}: ${check.errorMessage}`).toBe(true);
    }
    // and a document of another tool does not: the schemas say something
    const other = await c.callTool({ name: "read_file", arguments: { dir, path: "src/kernel.cu" } });
    expect(ajv.getValidator(t.inspect!.outputSchema as never)(other.structuredContent).valid).toBe(false);
    await c.close();
  }, 30_000);

  test("read_file withholds this machine's id: kerncap.json with host.machineId null (as inspect shows it), the id in any other file replaced (trial 18 F3)", async () => {
    const c = await connected();
    const dir = await fresh();
    const me = hostIdentity();
    expect(me.machineId).toBeTruthy();
    const p = join(dir, "kerncap.json");
    const m = JSON.parse(readFileSync(p, "utf8"));
    m.host = me;
    writeFileSync(p, JSON.stringify(m));
    const r = doc(await c.callTool({ name: "read_file", arguments: { dir, path: "kerncap.json" } }));
    expect(JSON.parse(r.content).host).toEqual({ name: me.name, machineId: null, uid: me.uid }); // the uid is no secret (who made it); the id is withheld
    expect(r.content).not.toContain(me.machineId!);
    writeFileSync(join(dir, "src/notes.cu"), `// made on ${me.machineId}\n`);
    const n = doc(await c.callTool({ name: "read_file", arguments: { dir, path: "src/notes.cu" } }));
    expect(n.content).toBe("// made on (this machine's id, withheld)\n");
    // upper case and a UUID's dashes too (trial 19), and no edit_file oracle on a file that holds it
    const id = me.machineId!;
    const uuid = `${id.slice(0, 8)}-${id.slice(8, 12)}-${id.slice(12, 16)}-${id.slice(16, 20)}-${id.slice(20)}`.toUpperCase();
    writeFileSync(join(dir, "src/notes.cu"), `// ${uuid}\n`);
    expect(doc(await c.callTool({ name: "read_file", arguments: { dir, path: "src/notes.cu" } })).content).toBe("// (this machine's id, withheld)\n");
    const guess = doc(await c.callTool({ name: "edit_file", arguments: { dir, path: "src/notes.cu", oldText: uuid.slice(0, 4), newText: uuid.slice(0, 4) } }));
    expect(guess.error.message).toContain("holds this machine's id, which read_file withholds");
    await c.close();
  });

  test("bad arguments in plain words: an unknown one with those the tool takes, a missing one", async () => {
    const c = await connected();
    const dir = await fresh();
    const u = await c.callTool({ name: "inspect", arguments: { dir, bogus: 1 } });
    expect(doc(u).error.message).toBe("bad arguments for inspect: unknown argument bogus; the tool takes: dir, verify");
    // a key every object inherits is unknown too (a strict object's check asks `in`, which finds Object's; adversary 40's
    // `__proto__` never reaches the server as a key: the SDK's parse of the request drops it)
    for (const key of ["toString", "constructor", "hasOwnProperty"]) {
      const p = await c.callTool({ name: "inspect", arguments: JSON.parse(`{"dir": ${JSON.stringify(dir)}, ${JSON.stringify(key)}: 1}`) });
      expect(doc(p).error.message, key).toStartWith(`bad arguments for inspect: unknown argument ${JSON.stringify(key)}`);
    }
    const m = await c.callTool({ name: "read_file", arguments: { dir } });
    expect(doc(m).error.message).toBe("bad arguments for read_file: missing argument path");
    // an unknown key of a candidate: the candidate's own keys, not the tool's (nu13: `label` answered with dir, inputs, candidates…)
    const e = await c.callTool({ name: "evaluate", arguments: { dir, candidates: [{ title: "x", patch: "--- a/k\n" }] } });
    expect(doc(e).error.message).toContain("unknown argument candidates.0.title; candidates.0 takes: name, label, files, patch, config");
    // label is name's other word (the results' and the candidate list's: nu14); two that differ: that candidate's refusal, the others
    // evaluated (nu89 #3); two of one name end the call (the name is the key of its record)
    const both = await c.callTool({ name: "evaluate", arguments: { dir, buildOnly: true, candidates: [{ name: "a", label: "b", patch: "--- a/k\n" }] } });
    expect(doc(both).candidates.map((x: any) => [x.label, x.verdict, x.code])).toEqual([["a", "error", "E_CANDIDATE"]]);
    expect(doc(both).candidates[0].reason).toBe("candidate 1 gives name a and label b: give one of the two (the same thing)");
    const twice = await c.callTool({
      name: "evaluate",
      arguments: {
        dir,
        candidates: [
          { name: "a", patch: "x" },
          { name: "a", patch: "y" },
        ],
      },
    });
    expect(doc(twice).error.code).toBe("E_USAGE");
    expect(doc(twice).error.message).toBe("two candidates are named a");
    // kerncap.json is the capture's own file: no "did you mean src/kerncap.json?" (found by a trial)
    const k = await c.callTool({ name: "edit_file", arguments: { dir, path: "kerncap.json", content: "x" } });
    expect(doc(k).error.hint).toContain("kerncap.json is the capture's own file");
    expect(doc(k).error.hint).not.toContain("src/kerncap.json");
    await c.close();
  });

  test("kerncap mcp --print-config CLIENT: the registration with this kerncap's path and the roots it serves (--root, the working folder by default: trial 8, a client starts it in / otherwise); an unknown client names the known ones", async () => {
    const main = resolve(import.meta.dir, "../../../src/cli/main.ts");
    const here = realpathSync(tempDir());
    const cfg = (client: string, ...more: string[]) =>
      Bun.spawnSync([process.execPath, main, "mcp", "--print-config", client, ...more], { stdout: "pipe", stderr: "pipe", cwd: here });
    const exe = realpathSync(process.execPath);
    const code = cfg("claude-code");
    expect(code.exitCode).toBe(0);
    expect(code.stdout.toString()).toBe(`claude mcp add --scope user kerncap -- ${exe} ${main} mcp --root ${here}\n`);
    expect(code.stderr.toString()).toContain(`serves the capture folders under ${here}`);
    const other = realpathSync(tempDir());
    expect(cfg("claude-code", "--root", other).stdout.toString()).toBe(`claude mcp add --scope user kerncap -- ${exe} ${main} mcp --root ${other}\n`);
    // served in / with no --root: refused before anything is served
    const slash = Bun.spawnSync([process.execPath, main, "mcp"], { stdout: "pipe", stderr: "pipe", cwd: "/", stdin: "ignore" });
    expect(slash.exitCode).toBe(2);
    expect(slash.stderr.toString()).toContain("kerncap mcp started in / with no --root");
    // nor with a root of / in any spelling, nor an empty one (trial 26: --root "$UNSET" in / served the whole machine), nor printed so
    for (const more of [["--root="], ["--root", ""], ["--root", "."], ["--root", "/"], ["--root", "/tmp/.."], ["--print-config", "cursor"]]) {
      const r = Bun.spawnSync([process.execPath, main, "mcp", ...more], { stdout: "pipe", stderr: "pipe", cwd: "/", stdin: "ignore" });
      expect(r.exitCode, more.join(" ")).toBe(2);
      expect(r.stdout.toString(), more.join(" ")).toBe("");
    }
    for (const [client, key] of [
      ["claude-desktop", "mcpServers"],
      ["cursor", "mcpServers"],
      ["vscode", "servers"],
    ] as const) {
      const r = cfg(client);
      expect(r.exitCode, client).toBe(0);
      expect(JSON.parse(r.stdout.toString())[key].kerncap).toMatchObject({ command: exe, args: [main, "mcp", "--root", here] });
      expect(r.stderr.toString(), client).toContain(client === "claude-desktop" ? "claude_desktop_config.json" : "mcp.json");
    }
    expect(cfg("codex").stdout.toString()).toContain(`[mcp_servers.kerncap]\ncommand = ${JSON.stringify(exe)}`);
    const bad = cfg("emacs");
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr.toString()).toContain("claude-code, claude-desktop, cursor, vscode, codex");
    // a root named with ESC, a bidi override, C1: no configuration printed with it (adversary 29: pasted raw into a shell or a client's file)
    const odd = join(here, "caps\x1b]0;x\x07\u202e\u009b");
    mkdirSync(odd);
    const r = cfg("claude-code", "--root", odd);
    expect(r.exitCode).toBe(2);
    expect(r.stdout.toString()).toBe("");
    expect(r.stderr.toString()).toContain("holds a control, bidi or line-separator character");
    expect(r.stderr.toString()).not.toMatch(/[\x1b\x9b\u202e]/);
  }, 30_000); // sixteen kerncap processes, each a Bun start: 5 s was too little on a loaded 2-core machine

  test("inspect returns the verb's document; replay and validate their error documents without a GPU/build", async () => {
    const c = await connected();
    const dir = await fresh();
    const i = await c.callTool({ name: "inspect", arguments: { dir, verify: true } });
    expect(i.isError).toBe(false);
    expect(doc(i).schema).toBe("kerncap.inspect/1");
    expect(doc(i).integrity.verdict).toBe("ok");
    expect(JSON.parse((i.content as any)[0].text).manifest.kernel.name).toBe("_Z5scalePfi");
    const v = await c.callTool({ name: "validate", arguments: { dir, iters: 1 } });
    expect(v.isError).toBe(true);
    expect(doc(v).schema).toBe("kerncap.error/1");
    expect(doc(v).error.code).toBe("E_NO_REPRODUCER");
    const bad = await c.callTool({ name: "replay", arguments: { dir, iters: -1 } });
    expect(bad.isError).toBe(true);
    expect(doc(bad).error.message).toContain("iters");
    await c.close();
  }, 30_000);

  test("a value that looks like an option (--help, --json) is a value, never an option of the verb", async () => {
    const c = await connected();
    for (const d of ["--help", "--json", "-x"]) {
      const r = await c.callTool({ name: "inspect", arguments: { dir: d } });
      expect(r.isError).toBe(true);
      expect(doc(r).error.code, d).toBe("E_NOT_CAPTURE"); // the folder ./--help does not exist
    }
    const r = await c.callTool({ name: "run", arguments: { app: ["./no-such-app"], kernel: "--help", out: "--json" } });
    expect(r.isError).toBe(true);
    expect(doc(r).error.code).not.toBe("E_INTERNAL");
    await c.close();
  }, 30_000);

  test("edit_file edits under src/ only; read_file reads it back", async () => {
    const c = await connected();
    const dir = await fresh();
    const e = await c.callTool({ name: "edit_file", arguments: { dir, path: "src/kernel.cu", oldText: "2.0f", newText: "3.0f" } });
    expect(e.isError, JSON.stringify(e)).toBe(false);
    expect(doc(e)).toMatchObject({ schema: "kerncap.edit/1", path: "src/kernel.cu" });
    expect(readFileSync(join(dir, "src/kernel.cu"), "utf8")).toContain("3.0f");
    const r = await c.callTool({ name: "read_file", arguments: { dir, path: "src/kernel.cu" } });
    expect(doc(r).content).toContain("x[0] *= 3.0f");
    // a path that leaves the folder is E_UNSAFE_PATH for every file tool, as errors.md says (trial 7 #14: read_file said E_USAGE, list_files E_UNSAFE_PATH)
    for (const path of ["../kerncap.json", "../../x", "/etc/passwd"]) {
      const x = await c.callTool({ name: "edit_file", arguments: { dir, path, content: "x" } });
      expect(x.isError, path).toBe(true);
      expect(doc(x).error.code).toBe("E_UNSAFE_PATH");
      const r = await c.callTool({ name: "read_file", arguments: { dir, path } });
      expect(doc(r).error.code, path).toBe("E_UNSAFE_PATH");
    }
    expect(JSON.parse(readFileSync(join(dir, "kerncap.json"), "utf8")).format).toBe("kerncap-capture");
    const twice = await c.callTool({ name: "edit_file", arguments: { dir, path: "src/kernel.cu", oldText: "x", newText: "y" } });
    expect(doc(twice).error.message).toContain("exactly once");
    const none = await c.callTool({ name: "edit_file", arguments: { dir: tempDir(), path: "src/a.cu", content: "x" } });
    expect(doc(none).error.code).toBe("E_NOT_CAPTURE");
    await c.close();
  });

  test("list_files lists a capture's files (path, kind, bytes, editable; generated for a slice) without following a link or listing build/; read_file on a folder points at it", async () => {
    // found by a new user: read_file on src got a hint about replacing symbolic links, and an agent had no way to list src/
    const c = await connected();
    const dir = await fresh();
    mkdirSync(join(dir, "src/include"));
    writeFileSync(join(dir, "src/include/util.h"), "#pragma once\n");
    writeFileSync(join(dir, "src/notes.txt"), "n\n");
    writeFileSync(join(dir, "src/gen.sh"), "#!/bin/sh\n");
    writeFileSync(join(dir, "src/kernel.kerncap-slice.cu"), "// kerncap slice of src/kernel.cu sha256=x body=y\n");
    // the manifest names the slice as a capture with one does (the CUDA frontend's generated source)
    const mf = join(dir, "kerncap.json");
    const man = JSON.parse(readFileSync(mf, "utf8"));
    man.source = {
      cuda: { slice: { meta: { kind: "prefix", tu: "kernel.cu", slice: "kernel.kerncap-slice.cu", base: "scale", definitionName: "kernel.cu" } } },
    };
    writeFileSync(mf, JSON.stringify(man));
    symlinkSync("/etc", join(dir, "src/etc"));
    mkdirSync(join(dir, "build"));
    writeFileSync(join(dir, "build/slice-build.log"), "quoted\n");
    const all = doc(await c.callTool({ name: "list_files", arguments: { dir } }));
    expect(all).toMatchObject({ schema: "kerncap.files/1", path: ".", truncated: false });
    const by = Object.fromEntries(all.entries.map((e: any) => [e.path, e]));
    expect(by["src/kernel.cu"]).toEqual({ path: "src/kernel.cu", kind: "file", bytes: readFileSync(join(dir, "src/kernel.cu")).length, editable: true });
    expect(by["src/include/util.h"]).toMatchObject({ kind: "file", editable: true });
    // a slice is generated from its TU: not to be edited (an edited slice is compiled as it is; E_SLICE_EDITED later)
    expect(by["src/kernel.kerncap-slice.cu"]).toMatchObject({ kind: "file", editable: false, generated: true });
    expect(
      Object.values(by)
        .filter((e: any) => "generated" in e)
        .map((e: any) => e.path),
    ).toEqual(["src/kernel.kerncap-slice.cu"]);
    expect(by["src/include"]).toMatchObject({ kind: "folder", bytes: null, editable: false });
    for (const f of ["src/notes.txt", "src/gen.sh", "kerncap.json"]) expect(by[f], f).toMatchObject({ kind: "file", editable: false });
    expect(by["src/etc"]).toMatchObject({ kind: "link", editable: false });
    expect(by.build).toMatchObject({ kind: "folder" });
    expect(all.entries.filter((e: any) => e.path.startsWith("src/etc/") || e.path.startsWith("build/"))).toEqual([]);
    // editable is edit_file's answer: each file listed is written (its own bytes again) exactly when it says so
    for (const e of all.entries.filter((x: any) => x.kind === "file")) {
      const w = await c.callTool({ name: "edit_file", arguments: { dir, path: e.path, content: readFileSync(join(dir, e.path), "utf8") } });
      expect(w.isError, `${e.path}: ${JSON.stringify(w)}`).toBe(!e.editable);
    }
    const slice = doc(await c.callTool({ name: "edit_file", arguments: { dir, path: "src/kernel.kerncap-slice.cu", content: "x" } })).error;
    expect(slice.code).toBe("E_NOT_SOURCE");
    expect(slice.message).toBe(
      "edit_file does not write src/kernel.kerncap-slice.cu, which kerncap generates from src/kernel.cu (list_files: editable false, generated true)",
    );
    expect(slice.hint).toBe("Edit src/kernel.cu instead: validate remakes src/kernel.kerncap-slice.cu from it.");
    expect(readFileSync(join(dir, "src/kernel.kerncap-slice.cu"), "utf8")).toStartWith("// kerncap slice of src/kernel.cu");
    // its name in another case is the slice itself where the file system folds case (adversary 76): refused too, nothing written
    const folded = doc(await c.callTool({ name: "edit_file", arguments: { dir, path: "src/KERNEL.Kerncap-Slice.cu", content: "x" } })).error;
    expect(folded.code).toBe("E_NOT_SOURCE");
    expect(folded.message).toContain("which kerncap generates from src/kernel.cu");
    expect(existsSync(join(dir, "src/KERNEL.Kerncap-Slice.cu"))).toBe(false);
    // a hidden source: pack and export leave it out, so an agent's header there would build otherwise from them (adversary 52)
    const hidden = doc(await c.callTool({ name: "edit_file", arguments: { dir, path: "src/.fast.cuh", content: "#define SCALE 2\n" } })).error;
    expect(hidden.code).toBe("E_PACK_NAME");
    expect(hidden.message).toContain("is a hidden name");
    expect(existsSync(join(dir, "src/.fast.cuh"))).toBe(false);
    // evaluate's candidates by the same rule
    expect(evaluateRefusal(dir, { name: "s", files: { "src/kernel.kerncap-slice.cu": "x" } })).toMatchObject({
      code: "E_NOT_SOURCE",
      reason: expect.stringContaining("candidate s writes src/kernel.kerncap-slice.cu, which kerncap generates from src/kernel.cu"),
    });
    const src = doc(await c.callTool({ name: "list_files", arguments: { dir, path: "src" } }));
    expect(src.entries.map((e: any) => e.path)).toEqual([
      "src/etc",
      "src/gen.sh",
      "src/include",
      "src/include/util.h",
      "src/kernel.cu",
      "src/kernel.kerncap-slice.cu",
      "src/notes.txt",
    ]);
    for (const [path, code] of [
      ["build", "E_CONFINED"],
      ["../", "E_UNSAFE_PATH"],
      ["/etc", "E_UNSAFE_PATH"],
      ["src/etc", "E_UNSAFE_PATH"],
      ["src/kernel.cu", "E_UNSAFE_PATH"],
      ["nope", "E_USAGE"],
    ] as const) {
      const r = await c.callTool({ name: "list_files", arguments: { dir, path } });
      expect(r.isError, path).toBe(true);
      expect(doc(r).error.code, path).toBe(code);
    }
    // bounded: 2000 entries, then truncated
    mkdirSync(join(dir, "src/many"));
    for (let i = 0; i < 2001; i++) writeFileSync(join(dir, `src/many/f${i}.h`), "");
    const many = doc(await c.callTool({ name: "list_files", arguments: { dir, path: "src/many" } }));
    expect(many.entries.length).toBe(2000);
    expect(many.truncated).toBe(true);
    // read_file on a folder: said as a folder, with list_files, not the rule for links
    for (const path of ["src", "src/", "./src/include"]) {
      const f = doc(await c.callTool({ name: "read_file", arguments: { dir, path } })).error;
      expect(f.code, path).toBe("E_USAGE");
      expect(f.message).toContain("is a folder of the capture; read_file reads files");
      expect(f.hint).toContain("list_files");
      expect(f.hint).not.toContain("readlink");
    }
    // a link is still the link's refusal
    expect(doc(await c.callTool({ name: "read_file", arguments: { dir, path: "src/etc" } })).error.code).toBe("E_UNSAFE_PATH");
    await c.close();
  }, 30_000);

  test("edit_file refuses a binary file (never rewrites its bytes as U+FFFD), text over 4 MiB, and unknown arguments", async () => {
    // found by a trial: edit_file turned the invalid bytes of src/bin.dat into U+FFFD and said ok
    const c = await connected();
    const dir = await fresh();
    const bin = Buffer.from([0x61, 0x62, 0x00, 0x63, 0x64, 0xff, 0xfe]);
    writeFileSync(join(dir, "src/bin.dat"), bin);
    writeFileSync(join(dir, "src/bin.h"), bin);
    for (const args of [{ oldText: "ab", newText: "zz" }, { content: "zz" }]) {
      // src/bin.dat is no CUDA source at all; src/bin.h has a source's name but binary bytes
      const d = await c.callTool({ name: "edit_file", arguments: { dir, path: "src/bin.dat", ...args } });
      expect(doc(d).error.code).toBe("E_NOT_SOURCE");
      const r = await c.callTool({ name: "edit_file", arguments: { dir, path: "src/bin.h", ...args } });
      expect(r.isError).toBe(true);
      expect(doc(r).error.message).toContain("is a binary file");
    }
    writeFileSync(join(dir, "src/latin1.h"), Buffer.from("// caf\xe9\n", "latin1")); // no NUL, not UTF-8
    const l = await c.callTool({ name: "edit_file", arguments: { dir, path: "src/latin1.h", oldText: "caf", newText: "tea" } });
    expect(doc(l).error.message).toContain("is a binary file (not UTF-8)");
    expect(readFileSync(join(dir, "src/bin.dat"))).toEqual(bin);
    expect(readFileSync(join(dir, "src/bin.h"))).toEqual(bin);
    const big = await c.callTool({ name: "edit_file", arguments: { dir, path: "src/big.cu", content: "x".repeat((4 << 20) + 1) } });
    expect(doc(big).error.message).toContain("edit_file writes text files up to 4 MiB");
    // new files past what src/ may hold (a trial grew it 4 MiB a call without end): refused; an edit of an existing file is not
    for (let i = 0; i < 16; i++) {
      const r = await c.callTool({ name: "edit_file", arguments: { dir, path: `src/fill${i}.h`, content: "x".repeat(4 << 20) } });
      if (i < 15) expect(r.isError, String(i)).toBeFalsy();
      else expect(doc(r).error.message).toContain("past 2000 files and folders or 64 MiB");
    }
    expect(existsSync(join(dir, "src/fill15.h"))).toBe(false);
    // the folders a write makes count as entries (trial 25: 600 writes of 3 bytes, 30 folders deep each, made 18 001 folders)
    const deepOf = (i: number) => `src/d${i}/${Array.from({ length: 29 }, (_, k) => `f${k}`).join("/")}/x.h`;
    let refused = -1;
    for (let i = 0; i < 80 && refused < 0; i++) {
      const r = await c.callTool({ name: "edit_file", arguments: { dir, path: deepOf(i), content: "x" } });
      if (r.isError) {
        expect(doc(r).error.message).toContain("past 2000 files and folders or 64 MiB");
        refused = i;
      }
    }
    expect(refused).toBeGreaterThan(0);
    expect(existsSync(join(dir, `src/d${refused}`))).toBe(false);
    let entries = 0;
    for (const _ of new Bun.Glob("**/*").scanSync({ cwd: join(dir, "src"), onlyFiles: false, dot: true })) entries++;
    expect(entries).toBeLessThanOrEqual(2000);
    rmSync(join(dir, "src"), { recursive: true, force: true });
    mkdirSync(join(dir, "src"));
    expect((await c.callTool({ name: "edit_file", arguments: { dir, path: "src/fill0.h", content: "y" } })).isError).toBeFalsy();
    expect(existsSync(join(dir, "src/big.cu"))).toBe(false);
    // an argument past the command-line limit: the caller's fault, said as such (found by a trial: "check the installation")
    const huge = await c.callTool({ name: "list", arguments: { app: ["x".repeat(200 << 10)] } });
    expect(doc(huge).error).toMatchObject({ code: "E_USAGE", message: expect.stringContaining("too long for a command line") });
    const extra = await c.callTool({ name: "inspect", arguments: { dir, extra: 1 } });
    expect(extra.isError).toBe(true);
    expect(doc(extra).error.code).toBe("E_USAGE");
    // parallel work past the machine (found by a trial: tune jobs 100 000, each build up to 8 GiB): refused before anything starts
    const many = await c.callTool({ name: "tune", arguments: { dir, maxrregcount: [32, 64], jobs: availableParallelism() + 1 } });
    expect(doc(many).error).toMatchObject({ code: "E_USAGE", message: expect.stringContaining(`${availableParallelism()}`) });
    const workers = await c.callTool({ name: "evaluate", arguments: { dir, candidates: [{ name: "a", files: { "src/k.cu": "x" } }], workersPerGpu: 9 } });
    expect(doc(workers).error.code).toBe("E_USAGE");
    // one GPU repeated multiplied the workers past workersPerGpu's bound (adversary 75: gpus "0,0,0,0,0" × 8: 40 workers)
    for (const gpus of ["0,0,0,0,0", "0,00", Array.from({ length: 17 }, (_, i) => i).join(",")]) {
      const repeated = await c.callTool({
        name: "evaluate",
        arguments: { dir, candidates: [{ name: "a", files: { "src/k.cu": "x" } }], gpus, workersPerGpu: 8 },
      });
      expect([gpus, doc(repeated).error?.code]).toEqual([gpus, "E_USAGE"]);
    }
    expect(existsSync(join(dir, "build"))).toBe(false);
    await c.close();
  }, 30_000); // several tool calls, one of 4 MiB: past 5 s on a loaded 2-core machine

  test("edit_file's bound on src/ holds for rewrites too: files made small, then rewritten to 4 MiB each, stop at 64 MiB; a rewrite that does not grow src/ passes", async () => {
    // found by a trial: only a new file was counted, so 24 tiny files rewritten to 4 MiB took src/ to 97 MiB (2000 of them: 8 GiB)
    const c = await connected();
    const dir = await fresh();
    const big = "x".repeat(4 << 20);
    for (let i = 0; i < 17; i++)
      expect((await c.callTool({ name: "edit_file", arguments: { dir, path: `src/grow${i}.h`, content: "x" } })).isError, String(i)).toBeFalsy();
    for (let i = 0; i < 16; i++) {
      const r = await c.callTool({ name: "edit_file", arguments: { dir, path: `src/grow${i}.h`, content: big } });
      if (i < 15) expect(r.isError, String(i)).toBeFalsy();
      else {
        expect(doc(r).error).toMatchObject({ code: "E_USAGE", message: expect.stringContaining("past 2000 files and folders or 64 MiB") });
        expect(readFileSync(join(dir, "src/grow15.h"), "utf8")).toBe("x"); // left as it was
      }
    }
    // oldText/newText that grows the file is a rewrite as well
    const grown = await c.callTool({ name: "edit_file", arguments: { dir, path: "src/grow16.h", oldText: "x", newText: big } });
    expect(doc(grown).error.message).toContain("past 2000 files and folders or 64 MiB");
    // at the bound, an edit that keeps or shrinks a file's size is still made
    expect((await c.callTool({ name: "edit_file", arguments: { dir, path: "src/grow0.h", content: "y".repeat(4 << 20) } })).isError).toBeFalsy();
    expect((await c.callTool({ name: "edit_file", arguments: { dir, path: "src/grow1.h", oldText: big, newText: "z" } })).isError).toBeFalsy();
    expect(readFileSync(join(dir, "src/grow1.h"), "utf8")).toBe("z");
    // and the room it freed can be used again
    expect((await c.callTool({ name: "edit_file", arguments: { dir, path: "src/grow15.h", content: big } })).isError).toBeFalsy();
    await c.close();
  }, 60_000);

  test("read_file and edit_file resolve a path the same way (relative to the capture folder); edit_file only under src/", async () => {
    const c = await connected();
    const dir = await fresh();
    writeFileSync(join(dir, "build.sh"), "#!/bin/sh\necho build\n");
    expect(doc(await c.callTool({ name: "read_file", arguments: { dir, path: "build.sh" } })).content).toContain("echo build");
    for (const path of ["build.sh", "kernel.cu", "src", "src/", "./src"]) {
      const x = await c.callTool({ name: "edit_file", arguments: { dir, path, content: "x" } });
      expect(x.isError, path).toBe(true);
      expect(doc(x).error.code, path).toBe(path === "build.sh" ? "E_NOT_SOURCE" : "E_USAGE"); // the capture's own file: no source (nu7 #5)
    }
    expect(existsSync(join(dir, "src/build.sh"))).toBe(false);
    expect(existsSync(join(dir, "src/src"))).toBe(false);
    expect(existsSync(join(dir, "src/kernel.cu/src"))).toBe(false);
    expect(readFileSync(join(dir, "build.sh"), "utf8")).toContain("echo build");
    const hint = doc(await c.callTool({ name: "edit_file", arguments: { dir, path: "kernel.cu", content: "x" } })).error.hint;
    expect(hint).toContain("Did you mean src/kernel.cu?");
    // SRC/k.cu: the case, not a missing src/ (found by a trial: "did you mean src/SRC/k.cu?")
    expect(doc(await c.callTool({ name: "edit_file", arguments: { dir, path: "SRC/k.cu", content: "x" } })).error.hint).toContain(
      "Did you mean src/k.cu? (paths are case-sensitive)",
    );
    expect(doc(await c.callTool({ name: "edit_file", arguments: { dir, path: "src/../build.sh", content: "x" } })).error.hint).toContain(
      "relative to the capture folder without ..",
    );
    const ok = await c.callTool({ name: "edit_file", arguments: { dir, path: "./src/new.cu", content: "y" } });
    expect(doc(ok)).toMatchObject({ schema: "kerncap.edit/1", path: "src/new.cu" });
    expect(doc(await c.callTool({ name: "read_file", arguments: { dir, path: "src/new.cu" } })).content).toBe("y");
    // the build's outputs quote what the build read (a confined build refused for reading outside the capture included)
    mkdirSync(join(dir, "build"), { recursive: true });
    writeFileSync(join(dir, "build/slice-build.log"), "creds.h:1: api_token = secret\n");
    for (const path of ["build/slice-build.log", "./build/slice-build.log", "build//slice-build.log"]) {
      const r = await c.callTool({ name: "read_file", arguments: { dir, path } });
      expect(doc(r).error?.code, path).toBe("E_CONFINED");
      expect(JSON.stringify(doc(r))).not.toContain("secret");
    }
    await c.close();
  });

  test("replay, validate and run take the CLI's options: runs, multiset, noVerify, flushL2; captureAll, maxCaptures, rank, process, countBenchmarks", async () => {
    // multiset is a judging argument: offered only under kerncap mcp --agent-judging (the next test)
    const c = await connected({ trust: { agentJudging: true } });
    const { tools } = await c.listTools();
    const props = (n: string) => Object.keys((tools.find((t) => t.name === n)!.inputSchema.properties ?? {}) as object);
    expect(props("replay")).toEqual(expect.arrayContaining(["runs", "multiset", "noVerify", "flushL2"]));
    expect(props("validate")).toContain("multiset");
    expect(props("run")).toEqual(expect.arrayContaining(["captureAll", "maxCaptures", "rank", "process", "countBenchmarks"]));
    const dir = await fresh();
    // the values reach the verb: a region the capture lacks is the child's usage error (before any GPU work)
    for (const name of ["replay", "validate"]) {
      const m = await c.callTool({ name, arguments: { dir, multiset: ["0", "7"] } });
      expect(doc(m).error.code, name).toBe("E_USAGE");
      expect(doc(m).error.message).toContain("--multiset 7: the capture has 2 regions");
    }
    // the CLI's bounds (runs ≥ 2 for an agent), maxCaptures ≥ 1, rank/process ≥ 0
    for (const [name, args] of [
      ["replay", { dir, runs: 0 }],
      // one checked run cannot show nondeterminism an edit brought in: an agent asks for 2 at least
      ["validate", { dir, runs: 1 }],
      ["replay", { dir, runs: 1 }],
      ["run", { app: ["true"], maxCaptures: 0 }],
      ["run", { app: ["true"], rank: -1 }],
      ["run", { app: ["true"], process: 1.5 }],
    ] as const) {
      const x = await c.callTool({ name, arguments: args });
      expect(doc(x).error.message, JSON.stringify(args)).toContain("bad arguments");
    }
    // every flag accepted by the verb (past its option check: the GPU or the app is what fails here)
    const r = await c.callTool({ name: "replay", arguments: { dir, runs: 2, noVerify: true, flushL2: true, multiset: ["changed"] } });
    expect(["E_NO_GPU", "E_LIB"]).toContain(doc(r).error.code);
    const run = await c.callTool({
      name: "run",
      arguments: { app: ["./no-such-app"], captureAll: true, maxCaptures: 2, countBenchmarks: true, rank: 0, process: 0 },
    });
    expect(doc(run).error.code).toBe("E_APP_NOT_FOUND");
    await c.close();
  }, 30_000);

  test("over stdio: a line that is not JSON gets a -32700 parse error, one that is not JSON-RPC -32600; the session goes on", async () => {
    const p = Bun.spawn([process.execPath, resolve(import.meta.dir, "../../../src/cli/main.ts"), "mcp", "--root", tmpdir()], {
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
    });
    p.stdin.write("this is not json\n");
    p.stdin.write('{"hello": 1}\n');
    p.stdin.write(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }) + "\n");
    // JSON with an id, not a JSON-RPC request: answered under its id (a client matching answers by id waited on null)
    p.stdin.write(JSON.stringify({ jsonrpc: "2.0", id: 54, method: "tools/call", params: "x" }) + "\n");
    // a tools/call without a tool name, or with arguments that are no object: -32602 and a sentence, not -32603 and a dump
    p.stdin.write(JSON.stringify({ jsonrpc: "2.0", id: 55, method: "tools/call", params: {} }) + "\n");
    p.stdin.write(JSON.stringify({ jsonrpc: "2.0", id: 56, method: "tools/call", params: { name: "inspect", arguments: [1] } }) + "\n");
    p.stdin.flush();
    const lines: any[] = [];
    const reader = p.stdout.getReader();
    let buf = "";
    while (lines.length < 6) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += new TextDecoder().decode(value);
      for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
        lines.push(JSON.parse(buf.slice(0, i)));
        buf = buf.slice(i + 1);
      }
    }
    p.stdin.end();
    expect(await p.exited).toBe(0);
    expect(lines[0]).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32700 } });
    expect(lines[1]).toMatchObject({ jsonrpc: "2.0", id: null, error: { code: -32600 } });
    const byId = (id: number) => lines.find((l) => l.id === id);
    expect(byId(1)).toMatchObject({ jsonrpc: "2.0", id: 1, result: {} });
    expect(byId(54)).toMatchObject({ error: { code: -32600 } });
    expect(byId(55)).toMatchObject({ error: { code: -32602 } });
    expect(byId(55).error.message).toContain("params.name: a tool name is required");
    expect(byId(55).error.message).toContain("inspect");
    expect(byId(56)).toMatchObject({ error: { code: -32602 } });
    expect(byId(56).error.message).toContain("params.arguments: the tool's arguments are an object");
  }, 30_000);

  test("a string argument past 16 KiB (a trial's 1 MB dir came back six times over in its error) is refused without being echoed; a file's text may be longer", async () => {
    const c = await connected();
    const dir = await fresh();
    const huge = "\u{E0041}".repeat(10_000); // 20 000 UTF-16 units
    for (const [name, args] of [
      ["inspect", { dir: huge }],
      ["evaluate", { dir, inputs: [huge], candidates: [{ name: "a", config: "X=1" }] }],
      ["run", { app: ["true"], kernel: huge }],
    ] as const) {
      const x = await c.callTool({ name, arguments: args });
      expect(doc(x).error.code, name).toBe("E_USAGE");
      expect(doc(x).error.message).toContain(`longer than 16384 characters`);
      expect(JSON.stringify(x).length, name).toBeLessThan(4000); // not echoed
    }
    const e = await c.callTool({ name: "edit_file", arguments: { dir, path: "src/long.cu", content: `// ${"x".repeat(10_000)}\n` } });
    expect(e.isError ?? false).toBe(false);
    await c.close();
  });

  test("over stdio: a client that sends many read_file calls and reads no answer does not grow the server past the answers' backlog bound (a trial: 400 calls, 23.7 GB)", async () => {
    const root = tempDir();
    const dir = join(root, "cap");
    await makeCapture(dir);
    mkdirSync(join(dir, "src"), { recursive: true });
    writeFileSync(join(dir, "src/big.h"), `${"// 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n".repeat(60_000)}`); // 4 MiB of text
    const p = Bun.spawn([process.execPath, resolve(import.meta.dir, "../../../src/cli/main.ts"), "mcp", "--root", root], {
      cwd: root,
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
    });
    const send = (m: object) => p.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", ...m })}\n`);
    send({ id: 0, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } } });
    send({ method: "notifications/initialized" });
    for (let i = 1; i <= 60; i++) send({ id: i, method: "tools/call", params: { name: "read_file", arguments: { dir: "cap", path: "src/big.h" } } });
    p.stdin.flush();
    // nothing read from stdout: the answers wait in the pipe and the server's buffer
    const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${p.pid}/status`, "utf8"))?.[1] ?? 0) * 1024;
    let peak = 0;
    for (let t = 0; t < 40; t++) {
      await Bun.sleep(100);
      peak = Math.max(peak, rss());
    }
    // then the client reads: every answer comes, in full
    const reader = p.stdout.getReader();
    let buf = "";
    let answers = 0;
    while (answers < 61) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += new TextDecoder().decode(value);
      for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
        const m = JSON.parse(buf.slice(0, i));
        if (m.id >= 1) expect(m.result.structuredContent.bytes).toBe(4_080_000);
        answers++;
        buf = buf.slice(i + 1);
      }
    }
    p.stdin.end();
    await p.exited;
    expect(answers).toBe(61);
    // 60 answers of 4 MiB, each held as text and structured content, JSON-escaped, would be gigabytes
    expect(peak).toBeLessThan(900 << 20);
  }, 60_000);

  test("over stdio: a message past the 64 MiB bound gets a -32600 reply, a line on stderr and exit 2, not silence; 11 MiB is read", async () => {
    // found by a trial: a 20 MiB ping made the server go quiet and exit 0 without a word
    const p = Bun.spawn([process.execPath, resolve(import.meta.dir, "../../../src/cli/main.ts"), "mcp", "--root", tmpdir()], {
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
    });
    p.stdin.write(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping", params: { pad: "x".repeat(11 << 20) } }) + "\n");
    p.stdin.flush();
    const first = p.stdout.getReader();
    let got = "";
    while (!got.includes("\n")) {
      const { value, done } = await first.read();
      if (done) break;
      got += new TextDecoder().decode(value);
    }
    first.releaseLock();
    expect(JSON.parse(got.slice(0, got.indexOf("\n")))).toMatchObject({ jsonrpc: "2.0", id: 1, result: {} }); // past the SDK's default 10 MiB
    try {
      p.stdin.write(JSON.stringify({ jsonrpc: "2.0", id: 2, method: "ping", params: { pad: "x".repeat(65 << 20) } }) + "\n");
      await p.stdin.flush();
      await p.stdin.end();
    } catch {
      /* EPIPE: the server ended the session before it had read all of it */
    }
    const reader = p.stdout.getReader();
    let buf = "";
    while (!buf.includes("\n")) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += new TextDecoder().decode(value);
    }
    const [code, err] = await Promise.all([p.exited, new Response(p.stderr).text()]);
    expect(code).toBe(2); // the SDK's transport ends the session: said, and not a success
    expect(JSON.parse(buf.slice(0, buf.indexOf("\n")))).toMatchObject({
      jsonrpc: "2.0",
      id: null,
      error: { code: -32600, message: expect.stringContaining("a message past 64 MiB was dropped") },
    });
    expect(err).toContain("larger than the stdio transport's bound");
    expect(err).toContain("the MCP session ended");
  }, 60_000);

  test("over stdio: `kerncap mcp` answers tools/list and a call", async () => {
    const dir = await fresh();
    // no --root: the folder it starts in is the one root
    const t = new StdioClientTransport({
      command: process.execPath,
      args: [resolve(import.meta.dir, "../../../src/cli/main.ts"), "mcp"],
      stderr: "pipe",
      cwd: dirname(dir),
    });
    const c = new Client({ name: "test", version: "1" });
    await c.connect(t);
    expect((await c.listTools()).tools.length).toBe(12);
    const i = await c.callTool({ name: "inspect", arguments: { dir } });
    expect(doc(i).schema).toBe("kerncap.inspect/1");
    // outside the root, or not a capture: one message whatever is there (a file, a folder, nothing), no existence oracle
    const said = new Set<string>();
    for (const d of ["/etc/passwd", "/etc/nonexist", "/etc", join(dirname(dir), "nothing-here"), "../"]) {
      const e = doc(await c.callTool({ name: "inspect", arguments: { dir: d } })).error;
      expect(e.code).toBe("E_NOT_CAPTURE");
      said.add(e.message.replace(JSON.stringify(d), "DIR"));
      expect(doc(await c.callTool({ name: "read_file", arguments: { dir: d, path: "kerncap.json" } })).error.code).toBe("E_NOT_CAPTURE");
    }
    expect(said.size).toBe(1);
    await c.close();
  }, 30_000);

  test("edit_file refuses a src/ that is a symbolic link (out of the capture or inside it); nothing is written there", async () => {
    const c = await connected();
    const dir = await fresh();
    const outside = join(dirname(dir), "outside");
    mkdirSync(outside);
    rmSync(join(dir, "src"), { recursive: true });
    symlinkSync(outside, join(dir, "src"));
    const e = await c.callTool({ name: "edit_file", arguments: { dir, path: "src/PWNED.cu", content: "x" } });
    expect(e.isError).toBe(true);
    expect(doc(e).error.code).toBe("E_USAGE");
    expect(doc(e).error.message).toContain("src is a symbolic link");
    expect(readdirSync(outside)).toEqual([]);
    // a link that stays inside the capture is refused too: no link is followed (src/format/paths.ts)
    const inside = join(dirname(dir), "cap2");
    cpSync(await fresh(), inside, { recursive: true });
    rmSync(join(inside, "src"), { recursive: true });
    mkdirSync(join(inside, "real-src"));
    symlinkSync(join(inside, "real-src"), join(inside, "src"));
    const no = await c.callTool({ name: "edit_file", arguments: { dir: inside, path: "src/k.cu", content: "y" } });
    expect(doc(no).error.code).toBe("E_USAGE");
    expect(readdirSync(join(inside, "real-src"))).toEqual([]);
    await c.close();
  });

  test("a folder inside a capture under the roots is E_NESTED_CAPTURE naming the capture, as the CLI says; inside a capture outside the roots, the one E_NOT_CAPTURE", async () => {
    // found by a trial: inspect {dir: "cap/src"} said E_NOT_CAPTURE, where agent-skill.md and `kerncap inspect cap/src` say E_NESTED_CAPTURE
    const dir = await fresh();
    const root = dirname(dir);
    const c = await connected({ trust: { roots: [root] } });
    for (const [name, args] of [
      ["inspect", { dir: join(dir, "src") }],
      ["validate", { dir: join(dir, "src") }],
      ["read_file", { dir: join(dir, "src"), path: "kernel.cu" }],
      ["evaluate", { dir, inputs: [join(dir, "src")], candidates: [{ files: { "src/kernel.cu": "x" } }] }],
    ] as const) {
      const e = doc(await c.callTool({ name, arguments: args })).error;
      expect(e.code, name).toBe("E_NESTED_CAPTURE");
      expect(e.message).toContain(`lies inside the capture ${dir}`);
    }
    await c.close();
    // a root inside a capture: that capture lies outside the roots, and is not named
    mkdirSync(join(dir, "src/sub/x"), { recursive: true });
    const inner = await connected({ trust: { roots: [join(dir, "src/sub")] } });
    const e = doc(await inner.callTool({ name: "inspect", arguments: { dir: join(dir, "src/sub/x") } })).error;
    expect(e.code).toBe("E_NOT_CAPTURE");
    expect(e.message).not.toContain(`capture ${dir}`);
    await inner.close();
  }, 30_000);

  test("run's out outside the roots is refused before the child starts (no GPU needed to see it), one message whatever is there", async () => {
    // found by a trial: run {out: "/etc/newcap"} answered E_NO_GPU, so the refusal of a path outside the roots never showed without a GPU
    const root = tempDir();
    mkdirSync(join(root, "work"));
    symlinkSync("/etc", join(root, "work/etc-link"));
    symlinkSync(join(root, "nowhere"), join(root, "work/dangling"));
    const c = await connected({ trust: { roots: [join(root, "work")] } });
    const said = new Set<string>();
    for (const [out, cwd] of [
      ["/etc/newcap", undefined],
      ["/etc/passwd", undefined],
      ["/no/such/folder/cap", undefined],
      ["../cap", join(root, "work")],
      ["etc-link/newcap", join(root, "work")],
      ["dangling", join(root, "work")],
    ] as const) {
      const r = await c.callTool({ name: "run", arguments: { app: ["/bin/true"], kernel: "saxpy", ...(out ? { out } : {}), ...(cwd ? { cwd } : {}) } });
      expect(r.isError).toBe(true);
      const e = doc(r).error;
      expect(e.code, `${out} in ${cwd}`).toBe("E_UNSAFE_PATH");
      said.add(e.message.replace(JSON.stringify(out ?? "kerncap-capture"), "OUT"));
    }
    expect(said.size).toBe(1);
    expect([...said][0]).toContain("is not under the folders this server was started for");
    expect(existsSync(join(root, "cap"))).toBe(false);
    // the application's working folder outside the roots: run's and list's alike, before anything runs (adversary 58: list ran `sh -c` in /)
    for (const name of ["run", "list"]) {
      const r = await c.callTool({ name, arguments: { app: ["/bin/sh", "-c", "echo ran > ran"], cwd: root } });
      expect(doc(r).error.code, name).toBe("E_UNSAFE_PATH");
      expect(doc(r).error.message, name).toBe(`cwd ${JSON.stringify(root)} is not under the folders this server was started for (${join(root, "work")})`);
    }
    expect(existsSync(join(root, "ran"))).toBe(false);
    // what the capture reads and copies into src/ (sourceRoot, compileCommands): one message whether it exists,
    // is readable or not (adversary 83 #02: "does not exist" / "permission denied" / parsed told what lies outside)
    mkdirSync(join(root, "private"));
    writeFileSync(join(root, "private/compile_commands.json"), "[]");
    for (const key of ["sourceRoot", "compileCommands"] as const) {
      const told = new Set<string>();
      for (const value of [
        join(root, "private"),
        join(root, "private/compile_commands.json"),
        "/no/such/src",
        "/etc/shadow",
        "etc-link/passwd",
        "../private",
      ]) {
        const r = await c.callTool({ name: "run", arguments: { app: ["/bin/true"], kernel: "saxpy", out: "cap", cwd: join(root, "work"), [key]: value } });
        const e = doc(r).error;
        expect(e.code, `${key} ${value}`).toBe("E_UNSAFE_PATH");
        told.add(e.message.replace(JSON.stringify(value), "V"));
      }
      expect([...told], key).toEqual([`${key} V is not under the folders this server was started for (${join(root, "work")})`]);
    }
    // under the roots, the run's own checks come next (a missing app here)
    const ok = await c.callTool({ name: "run", arguments: { app: ["./no-such-app"], out: "cap", cwd: join(root, "work") } });
    expect(doc(ok).error.code).toBe("E_APP_NOT_FOUND");
    await c.close();
  }, 30_000);

  test("an unknown tool is a JSON-RPC error -32602 naming the tools, as the MCP specification has it (nu83 #9)", async () => {
    const c = await connected();
    let err: unknown;
    try {
      await c.callTool({ name: "nope\n[kerncap] forged", arguments: {} });
    } catch (e) {
      err = e;
    }
    expect((err as { code?: number }).code).toBe(-32602);
    expect((err as Error).message).toContain('Unknown tool: "nope\\n[kerncap] forged"; the tools are ');
    expect((err as Error).message).toContain("validate");
    // the server goes on
    expect((await c.listTools()).tools.length).toBeGreaterThan(5);
    await c.close();
  });

  test("clear errors: edit_file on a capture without src/, list with a cwd that does not exist", async () => {
    const c = await connected();
    const dir = await fresh();
    rmSync(join(dir, "src"), { recursive: true });
    const e = await c.callTool({ name: "edit_file", arguments: { dir, path: "src/k.cu", content: "x" } });
    expect(doc(e).error.code).toBe("E_NO_REPRODUCER");
    expect(doc(e).error.message).toContain("has no src/ folder");
    // a path of this test's own: /nonexistent exists on some machines (nobody's home folder)
    const missing = join(tempDir(), "nonexistent");
    const l = await c.callTool({ name: "list", arguments: { app: ["true"], cwd: missing } });
    expect(l.isError).toBe(true);
    expect(doc(l).error.code).toBe("E_USAGE");
    expect(doc(l).error.message).toBe(`cwd ${missing} does not exist`);
    await c.close();
  });

  test("a cancelled call ends its child's process group (validate's build.sh)", async () => {
    const c = await connected();
    const { dir, pids } = await slowBuild();
    const ac = new AbortController();
    const call = c.callTool({ name: "validate", arguments: { dir, force: true } }, undefined, { signal: ac.signal });
    call.catch(() => {});
    await until(() => existsSync(pids));
    const procs = readFileSync(pids, "utf8").trim().split(" ").map(Number);
    ac.abort();
    await expect(call).rejects.toThrow();
    await until(() => !procs.some(running), 15_000);
    await c.close();
  }, 30_000);

  test("SIGTERM of kerncap mcp during a call ends the call's processes and exits 143", async () => {
    const { p, procs } = await mcpWithSlowValidate();
    p.kill("SIGTERM");
    const code = await p.exited;
    expect(code, await new Response(p.stderr).text()).toBe(143);
    await until(() => !procs.some(running), 15_000);
  }, 30_000);

  test("stdin EOF during a call ends the call's processes and exits 0 without waiting for the call", async () => {
    const { p, procs } = await mcpWithSlowValidate();
    const t0 = Date.now();
    await p.stdin.end();
    const code = await p.exited;
    expect(code, await new Response(p.stderr).text()).toBe(0);
    expect(Date.now() - t0).toBeLessThan(15_000);
    await until(() => !procs.some(running), 15_000);
  }, 30_000);

  test("an agent does not choose how its edits are judged: atol, rtol, dtype and multiset are refused and not offered, unless the server runs with --agent-judging", async () => {
    const dir = await fresh();
    const judging = { atol: 1e300, rtol: 1e300, dtype: "fp32", multiset: ["all"] };
    const c = await connected();
    const { tools } = await c.listTools();
    for (const name of ["replay", "validate", "tune", "evaluate"]) {
      const props = Object.keys((tools.find((t) => t.name === name)!.inputSchema.properties ?? {}) as object);
      for (const k of Object.keys(judging)) expect(props, `${name} offers ${k}`).not.toContain(k);
    }
    const calls: [string, Record<string, unknown>][] = [
      ["replay", { dir, ...judging }],
      ["validate", { dir, rtol: 1e300 }],
      ["tune", { dir, maxrregcount: [32], multiset: ["all"] }],
      ["evaluate", { dir, candidates: [{ name: "a", patch: "x" }], atol: 1 }],
    ];
    for (const [name, args] of calls) {
      const x = await c.callTool({ name, arguments: args });
      expect(x.isError, name).toBe(true);
      expect(doc(x).error.code).toBe("E_USAGE");
      expect(doc(x).error.message).toContain("the user's to set, not the agent's");
      expect(doc(x).error.hint).toContain("kerncap judge DIR");
    }
    await c.close();
    // with --agent-judging: offered, and they reach the verb (a region the capture lacks is the child's own usage error)
    const a = await connected({ trust: { agentJudging: true } });
    const listed = (await a.listTools()).tools;
    for (const name of ["replay", "validate", "tune", "evaluate"])
      expect(Object.keys((listed.find((t) => t.name === name)!.inputSchema.properties ?? {}) as object)).toEqual(
        expect.arrayContaining(["atol", "rtol", "multiset"]),
      );
    const m = await a.callTool({ name: "validate", arguments: { dir, multiset: ["7"] } });
    expect(doc(m).error.message).toContain("--multiset 7: the capture has 2 regions");
    await a.close();
  }, 30_000);

  test("profile and tune: the CLI's options, checked by their schemas; errors are the verbs' documents, conforming to the outputSchemas", async () => {
    const c = await connected({ trust: { agentJudging: true } }); // tune's atol/rtol: judging arguments
    const { tools } = await c.listTools();
    const t = Object.fromEntries(tools.map((x) => [x.name, x]));
    const props = (n: string) => Object.keys((t[n]!.inputSchema.properties ?? {}) as object);
    expect(props("profile")).toEqual(expect.arrayContaining(["dir", "name", "build", "force", "metrics", "set", "clockControl", "cacheControl"]));
    expect(props("tune")).toEqual(
      expect.arrayContaining(["dir", "config", "define", "maxrregcount", "nvccFlags", "grid", "iters", "jobs", "atol", "rtol", "flushL2"]),
    );
    const dir = await fresh();
    for (const [name, args] of [
      ["profile", { dir, metrics: ["a b"] }],
      ["profile", { dir, name: "../x" }],
      ["profile", { dir, clockControl: "reset" }],
      // the set is a name: an ncu option there reached ncu as --set's value (trial 17)
      ["profile", { dir, set: "--section-folder-restore" }],
      ["profile", { dir, set: "-h" }],
      ["tune", { dir, maxrregcount: [0] }],
      ["tune", { dir, iters: 2 }],
      ["tune", { dir, bogus: 1 }],
    ] as const) {
      const x = await c.callTool({ name, arguments: args });
      expect(doc(x).error.message, JSON.stringify(args)).toContain("bad arguments");
    }
    const ajv = new AjvJsonSchemaValidator();
    // the verbs' own errors: no ncu (or no GPU) here; a CUDA capture without build.sh; a Triton option on a CUDA capture
    const p = await c.callTool({ name: "profile", arguments: { dir, metrics: ["dram__bytes.sum"], set: "basic", clockControl: "none", cacheControl: "none" } });
    expect(p.isError).toBe(true);
    expect(doc(p).error.code).not.toBe("E_USAGE"); // the options passed ncu's check: the tool or the GPU is what fails
    expect(ajv.getValidator(t.profile!.outputSchema as never)(p.structuredContent).valid).toBe(true);
    const nr = await c.callTool({ name: "tune", arguments: { dir, define: ["TILE=16,32"], maxrregcount: [32, 64], nvccFlags: ["-Xptxas=-O1", ""] } });
    expect(doc(nr).error.code).toBe("E_NO_REPRODUCER");
    expect(ajv.getValidator(t.tune!.outputSchema as never)(nr.structuredContent).valid).toBe(true);
    expect(doc(await c.callTool({ name: "tune", arguments: { dir, maxrregcount: [32], grid: "4" } })).error.message).toContain(
      "--grid is a Triton tune's option",
    );
    expect(doc(await c.callTool({ name: "tune", arguments: { dir, nvccFlags: ["-ccbin=/tmp/x"] } })).error.message).toContain(
      "is not a flag kerncap tune sweeps",
    );
    await c.close();
  }, 60_000);

  test.skipIf(!NVCC)(
    "tune builds each config confined, each config's folder removed once judged (adversary 39: an agent's configs filled the disk); a received capture's build.sh runs only with --trust-builds",
    async () => {
      const saved = process.env.XDG_STATE_HOME;
      process.env.XDG_STATE_HOME = tempDir(); // the demo's trust record, and --trust's, in a state folder of this test's own
      try {
        const dir = join(tempDir(), "demo");
        expect(await runCli(["demo", dir])).toBe(0);
        const c = await connected();
        const r = await c.callTool({ name: "tune", arguments: { dir, maxrregcount: [32, 64], jobs: 2, iters: 5 } });
        if (!existsSync("/dev/nvidiactl")) expect(doc(r).error.code, JSON.stringify(doc(r))).toBe("E_NO_GPU");
        // build.sh as is and the 2 configs: built confined, each in its folder under build/tune, removed once judged
        if (!doc(r).error) expect(doc(r).rows.length).toBe(3);
        for (const i of [0, 1, 2]) expect(existsSync(join(dir, `build/tune/cuda-${i}`)), String(i)).toBe(false);
        expect(existsSync(join(dir, "build/kerncap-deps.d"))).toBe(false);
        // a copy whose manifest records no host (as one from another machine): received, untrusted
        const copy = join(tempDir(), "copy");
        cpSync(dir, copy, { recursive: true });
        rmSync(join(copy, "build"), { recursive: true, force: true });
        const { host: _, ...noHost } = JSON.parse(readFileSync(join(copy, "kerncap.json"), "utf8"));
        writeFileSync(join(copy, "kerncap.json"), JSON.stringify(noHost, null, 2));
        const u = await c.callTool({ name: "tune", arguments: { dir: copy, maxrregcount: [32] } });
        expect(doc(u).error.code).toBe("E_UNTRUSTED");
        expect(doc(u).error.hint).toContain("--trust-builds");
        // the build tool (a child kerncap): its refusal carries build.sh once, in the message for the user, not again as
        // stderr's tail (nu15: the tail of the dump printed for a person)
        const b = await c.callTool({ name: "build", arguments: { dir: copy } });
        expect(doc(b).error.code).toBe("E_UNTRUSTED");
        expect(JSON.stringify(b.content)).not.toContain("stderr (last lines)");
        expect(JSON.stringify(b.content).split("#!/usr/bin/env bash").length).toBeLessThanOrEqual(2);
        expect(existsSync(join(copy, "build/tune/cuda-1"))).toBe(false);
        await c.close();
        const trusted = await connected({ trust: { trustBuilds: true } });
        const ok = await trusted.callTool({ name: "tune", arguments: { dir: copy, maxrregcount: [32] } });
        expect(doc(ok).error?.code).not.toBe("E_UNTRUSTED");
        if (!doc(ok).error) expect(doc(ok).rows.length).toBe(2);
        expect(existsSync(join(copy, "build/tune/cuda-1"))).toBe(false);
        await trusted.close();
      } finally {
        if (saved === undefined) delete process.env.XDG_STATE_HOME;
        else process.env.XDG_STATE_HOME = saved;
      }
    },
    120_000,
  );

  test.skipIf(!NVCC)(
    "build: validate --build-only through the agent's loop (edit_file, then build: registers beside the captured module's, no GPU); a compile error is E_BUILD with the compiler's message",
    async () => {
      const saved = process.env.XDG_STATE_HOME;
      process.env.XDG_STATE_HOME = tempDir(); // the demo's trust record in a state folder of this test's own
      try {
        const dir = join(tempDir(), "demo");
        expect(await runCli(["demo", dir])).toBe(0);
        const c = await connected();
        const b = await c.callTool({ name: "build", arguments: { dir } });
        expect(b.isError, JSON.stringify(doc(b))).toBe(false);
        expect(doc(b).schema).toBe("kerncap.validate-build/1");
        expect(doc(b).rebuild.registers).toBe(doc(b).rebuild.captured.registers);
        expect(doc(b).rebuild.registers).toBeGreaterThan(0);
        // the tool's build is validate --confine's: the compiler's dependency list is written
        expect(existsSync(join(dir, "build/kerncap-deps.d"))).toBe(true);
        // a GPU verb where there is none: the tools that work without one, not --build-only or kerncap doctor (nu89 #2)
        if (!existsSync("/dev/nvidiactl")) {
          const v = await c.callTool({ name: "validate", arguments: { dir } });
          expect(doc(v).error.code).toBe("E_NO_GPU");
          expect(doc(v).error.hint).toContain("the build tool compiles an edit without one");
          expect(doc(v).error.hint).not.toContain("--build-only");
        }
        const e = await c.callTool({
          name: "edit_file",
          arguments: { dir, path: "src/saxpy.cu", oldText: "p->a * p->x.data[i]", newText: "p->a * p->x.data[i] +* 2" },
        });
        expect(e.isError, JSON.stringify(doc(e))).toBe(false);
        const broken = await c.callTool({ name: "build", arguments: { dir } });
        expect(broken.isError).toBe(true);
        expect(doc(broken).error.code).toBe("E_BUILD");
        expect(doc(broken).error.message).toContain("saxpy.cu");
        // the hint in the tools' words: call build again, not "run validate again" (nu89 #2)
        expect(doc(broken).error.hint).toContain("call build again");
        await c.close();
      } finally {
        if (saved === undefined) delete process.env.XDG_STATE_HOME;
        else process.env.XDG_STATE_HOME = saved;
      }
    },
    60_000,
  );
});

test("the arguments of the calls running or waiting are bounded: a call past the bound while others are held is refused at once, E_BUSY; one alone is always taken (adversary 30: 50 queued evaluate calls of 60 MiB held 10.5 GiB)", async () => {
  const dir = await fresh();
  const c = await connected({ inflightMax: 4096, jobs: 1 });
  try {
    const big = "x".repeat(3000); // the bound counts every string of the arguments, before they are checked
    const calls = [0, 1, 2].map(() => c.callTool({ name: "inspect", arguments: { dir, _pad: big } as Record<string, unknown> }));
    const rs = await Promise.all(calls);
    const busy = rs.filter((r) => (r as any).isError && JSON.stringify(r).includes("E_BUSY"));
    expect(busy.length).toBeGreaterThanOrEqual(1);
    expect(JSON.stringify(busy[0])).toContain("of arguments of 1 call");
    // alone, the same call is taken (its own bad argument is its answer, not E_BUSY)
    const alone = await c.callTool({ name: "inspect", arguments: { dir, _pad: big } as Record<string, unknown> });
    expect(JSON.stringify(alone)).not.toContain("E_BUSY");
  } finally {
    await c.close();
  }
});

test("while the calls held reach half the bound, the server stops reading the client's messages and reads again once they end (adversary 30: parsed requests cost several times their bytes before any handler refuses them)", async () => {
  const dir = await fresh();
  const seen: string[] = [];
  const c = await connected({ inflightMax: 4096, jobs: 1, reading: { pause: () => seen.push("pause"), resume: () => seen.push("resume") } });
  try {
    await c.callTool({ name: "inspect", arguments: { dir, _pad: "x".repeat(3000) } as Record<string, unknown> });
    expect(seen).toEqual(["pause", "resume"]);
    seen.length = 0;
    await c.callTool({ name: "inspect", arguments: { dir } });
    expect(seen).toEqual([]); // a small call leaves reading as it is (no resume of a stdin the transport paused to close)
  } finally {
    await c.close();
  }
});
