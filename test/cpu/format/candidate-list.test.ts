/**
 * src/format/candidate-list.ts: eval's --candidate-list as a supported input with a JSON Schema of
 * its own, `kerncap schema candidate-list` (nu10 #23: E_USAGE, no such name), which accepts what
 * eval reads and refuses what it refuses.
 */
import { expect, test } from "bun:test";
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import { CandidateList } from "../../../src/format/candidate-list.ts";
import { jsonSchemaOf, SCHEMA_NAMES } from "../../../src/format/documents.ts";
import * as v from "valibot";

test("kerncap schema candidate-list: listed among the names; its JSON Schema takes each form eval reads and refuses what eval refuses", () => {
  expect(SCHEMA_NAMES).toContain("candidate-list");
  const schema = jsonSchemaOf("candidate-list")!;
  expect(schema.$id).toBe("kerncap.candidate-list");
  expect(schema.title).toContain("--candidate-list");
  const { $schema: _, ...rest } = schema;
  const validator = new AjvJsonSchemaValidator().getValidator(rest as never); // the JSON Schema validator a harness would use (the MCP SDK's Ajv)
  const check = (x: unknown) => validator(x).valid;
  const good = {
    candidates: [
      { label: "good-tree", spec: "cands/good/src" },
      { label: "p1", spec: "fix.patch" },
      { label: "ov", overlay: "/tmp/ov" },
      { label: "cfg", config: "BLOCK_M=64 num_warps=4" },
      { label: "bad", refused: { kind: "patch", code: "E_PATCH", reason: "does not apply" } },
    ],
  };
  expect(check(good)).toBe(true);
  expect(v.safeParse(CandidateList, good).success).toBe(true);
  for (const bad of [
    { candidates: [] },
    { candidates: [{ label: "a b", spec: "x" }] },
    { candidates: [{ label: "a", spec: "x", config: "A=1" }] },
    { candidates: [{ label: "a", refused: { kind: "patch", code: "E_BUILD", reason: "x" } }] },
  ]) {
    expect(check(bad)).toBe(false);
    expect(v.safeParse(CandidateList, bad).success).toBe(false);
  }
});
