/**
 * The MCP tests' client side (test/cpu/mcp/server.test.ts, test/cpu/mcp-progress.test.ts,
 * test/cpu/attacks-agent.test.ts, test/cpu/fuzz-mcp.test.ts): the SDK's own client connected
 * in-process (InMemoryTransport) to a fresh server of src/mcp/server.ts, and the waits for the
 * processes a tool call starts.
 */
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { createMcpServer, type McpTrust, type Reading, ToolChildren } from "../../src/mcp/server.ts";

/**
 * A client connected to a new server (createMcpServer): `trust` its --trust-builds and --root,
 * `progressMs` how often its progress notifications come (the server's default without), `name` the
 * client's name in the handshake, `reading` what the server pauses while the calls it holds are large.
 */
export async function connected(
  o: { trust?: McpTrust; progressMs?: number; name?: string; jobs?: number; inflightMax?: number; reading?: Reading } = {},
): Promise<Client> {
  const [a, b] = InMemoryTransport.createLinkedPair();
  const so = {
    ...(o.progressMs === undefined ? {} : { progressMs: o.progressMs }),
    ...(o.inflightMax === undefined ? {} : { inflightMax: o.inflightMax }),
    ...(o.reading ? { reading: o.reading } : {}),
  };
  await createMcpServer(new ToolChildren(o.jobs), o.trust ?? {}, so).connect(a);
  const client = new Client({ name: o.name ?? "test", version: "1" });
  await client.connect(b);
  return client;
}

/** A tool call's JSON document (its structured content). */
export const doc = (r: any) => r.structuredContent as Record<string, any>;

/** Running and not a zombie (/proc/PID/stat state). */
export function running(pid: number): boolean {
  try {
    const st = readFileSync(`/proc/${pid}/stat`, "utf8");
    return st.slice(st.lastIndexOf(")") + 2)[0] !== "Z";
  } catch {
    return false;
  }
}

/**
 * Poll until `pred` holds, every `everyMs` ms.
 * @throws Error after `ms` ms
 */
export async function until(pred: () => boolean, ms = 20_000, everyMs = 10): Promise<void> {
  const t0 = Date.now();
  while (!pred()) {
    if (Date.now() - t0 > ms) throw new Error("timed out waiting");
    await Bun.sleep(everyMs);
  }
}
