/**
 * The MCP server through the SDK's own client, in-process (InMemoryTransport): the tool list and
 * its input schemas, inspect/replay/validate returning the verbs' JSON documents (tools run this
 * kerncap in child processes), read_file, edit_file confined to src/, and a stdio round trip.
 */
import { describe, expect, test } from "bun:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { makeCapture, tempDir } from "../../test/cpu/fixtures.ts";
import { createMcpServer } from "./server.ts";

async function connected(): Promise<Client> {
  const [a, b] = InMemoryTransport.createLinkedPair();
  await createMcpServer().connect(a);
  const client = new Client({ name: "test", version: "1" });
  await client.connect(b);
  return client;
}

async function fresh(): Promise<string> {
  const dir = join(tempDir(), "cap");
  await makeCapture(dir);
  mkdirSync(join(dir, "src"));
  writeFileSync(join(dir, "src/kernel.cu"), "__global__ void scale(float* x, int n) { x[0] *= 2.0f; }\n");
  return dir;
}

const doc = (r: any) => r.structuredContent as Record<string, any>;

describe("kerncap mcp", () => {
  test("tools/list: every verb and the file tools, with JSON Schema inputs", async () => {
    const c = await connected();
    const { tools } = await c.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(["edit_file", "inspect", "list", "read_file", "replay", "run", "validate"]);
    const run = tools.find((t) => t.name === "run")!;
    expect(run.inputSchema.required).toEqual(["app"]);
    expect((run.inputSchema.properties as any).dispatch.type).toBe("integer");
    await c.close();
  });

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

  test("edit_file edits under src/ only; read_file reads it back", async () => {
    const c = await connected();
    const dir = await fresh();
    const e = await c.callTool({ name: "edit_file", arguments: { dir, path: "src/kernel.cu", oldText: "2.0f", newText: "3.0f" } });
    expect(e.isError, JSON.stringify(e)).toBe(false);
    expect(doc(e)).toMatchObject({ schema: "kerncap.edit/1", path: "src/kernel.cu" });
    expect(readFileSync(join(dir, "src/kernel.cu"), "utf8")).toContain("3.0f");
    const r = await c.callTool({ name: "read_file", arguments: { dir, path: "src/kernel.cu" } });
    expect(doc(r).content).toContain("x[0] *= 3.0f");
    for (const path of ["../kerncap.json", "../../x", "/etc/passwd"]) {
      const x = await c.callTool({ name: "edit_file", arguments: { dir, path, content: "x" } });
      expect(x.isError, path).toBe(true);
      expect(doc(x).error.code).toBe("E_USAGE");
    }
    expect(JSON.parse(readFileSync(join(dir, "kerncap.json"), "utf8")).format).toBe("kerncap-capture");
    const twice = await c.callTool({ name: "edit_file", arguments: { dir, path: "kernel.cu", oldText: "x", newText: "y" } });
    expect(doc(twice).error.message).toContain("exactly once");
    const none = await c.callTool({ name: "edit_file", arguments: { dir: tempDir(), path: "a.cu", content: "x" } });
    expect(doc(none).error.code).toBe("E_NOT_CAPTURE");
    await c.close();
  });

  test("over stdio: `kerncap mcp` answers tools/list and a call", async () => {
    const dir = await fresh();
    const t = new StdioClientTransport({ command: process.execPath, args: [resolve(import.meta.dir, "../cli/main.ts"), "mcp"], stderr: "pipe" });
    const c = new Client({ name: "test", version: "1" });
    await c.connect(t);
    expect((await c.listTools()).tools.length).toBe(7);
    const i = await c.callTool({ name: "inspect", arguments: { dir } });
    expect(doc(i).schema).toBe("kerncap.inspect/1");
    await c.close();
  }, 30_000);
});
