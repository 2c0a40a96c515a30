/**
 * A tool result's text (what an MCP client shows) is written as `--json` writes documents
 * (src/escape.ts jsonText): a received capture's names with C1 controls, bidi overrides and line
 * separators arrive as \uNNNN, where JSON.stringify left them raw (adversary 74); the structured
 * content keeps the value itself.
 */
import { expect, test } from "bun:test";
import { PassThrough } from "node:stream";
import { result } from "../../../src/mcp/children.ts";
import { EscapedStdioTransport } from "../../../src/mcp/stdio.ts";

test("C1 controls, bidi overrides and line separators in a document: \\uNNNN in the text, the value in structuredContent", () => {
  const name = "saxpy\u009b2J\u009b31m\u202eevil\u2028\u0085x";
  const r = result({ schema: "kerncap.inspect/1", demangled: name });
  const text = (r.content[0] as { text: string }).text;
  expect(text).not.toMatch(/[\u0080-\u009f\u202a-\u202e\u2028\u2029]/);
  expect(text).toContain("\\u009b2J\\u009b31m\\u202eevil\\u2028\\u0085x");
  expect(JSON.parse(text).demangled).toBe(name); // the same JSON value
  expect((r.structuredContent as { demangled: string }).demangled).toBe(name);
});

test("the stdio stream (what a client logs): each message one line, C1 and bidi as \\uNNNN, the same JSON value", async () => {
  const out = new PassThrough();
  let written = "";
  out.on("data", (b: Buffer) => (written += b.toString("utf8")));
  const t = new EscapedStdioTransport(new PassThrough(), out);
  const name = "saxpy\u009b2J\u202eevil\u2028x";
  const msg = { jsonrpc: "2.0" as const, id: 1, result: { structuredContent: { demangled: name }, content: [{ type: "text", text: `// ${name}` }] } };
  await t.send(msg);
  expect(written.endsWith("\n")).toBe(true);
  expect(written.trimEnd()).not.toContain("\n");
  expect(written).not.toMatch(/[\u0080-\u009f\u202a-\u202e\u2028\u2029]/);
  expect(JSON.parse(written)).toEqual(msg);
});
