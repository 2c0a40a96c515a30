/**
 * src/mcp/tools.ts toolSchema: evaluate's inputSchema says that a candidate gives exactly one of
 * files, patch, config (nu10 #18d: `required: []` and no oneOf, so a schema-driven client learnt
 * it only from the call's E_USAGE).
 */
import { expect, test } from "bun:test";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import { TOOLS, toolSchema } from "../../../src/mcp/tools.ts";

test("evaluate's inputSchema: each candidate exactly one of files, patch, config", () => {
  const schema = toolSchema(TOOLS.evaluate.input) as { properties: { candidates: { items: Record<string, unknown> } } };
  const items = schema.properties.candidates.items;
  expect(items.oneOf).toEqual([{ required: ["files"] }, { required: ["patch"] }, { required: ["config"] }]);
  const check = new AjvJsonSchemaValidator().getValidator(schema as never);
  const call = (c: object) => check({ dir: "cap", candidates: [c] }).valid;
  expect(call({ name: "a", files: { "src/k.cu": "x" } })).toBe(true);
  expect(call({ patch: "--- a/k.cu\n" })).toBe(true);
  expect(call({ config: "BLOCK=64" })).toBe(true);
  expect(call({ name: "none" })).toBe(false);
  expect(call({ patch: "x", config: "A=1" })).toBe(false);
  expect(call({ files: { "src/k.cu": "x" }, patch: "x" })).toBe(false);
  // the other tools' schemas are as before: no oneOf anywhere else
  expect(JSON.stringify(toolSchema(TOOLS.validate.input))).not.toContain("oneOf");
});
