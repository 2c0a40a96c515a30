/**
 * The published JSON Schemas carry each field's description (src/format/schema-descriptions.json,
 * made from the valibot schemas' doc comments by scripts/make-schema-descriptions.ts and set by
 * jsonSchemaOf): a harness or an agent reading `kerncap schema NAME` or an MCP tool's output schema
 * learns what a field means, its unit and direction, without the docs.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { jsonSchemaOf } from "../../../src/format/documents.ts";
import { outputSchema } from "../../../src/mcp/output-schema.ts";
import { ERROR_CODES } from "../../../src/error-codes.ts";

const ROOT = join(import.meta.dir, "../../..");

test("schema-descriptions.json is what the schemas' doc comments make now (run scripts/make-schema-descriptions.ts after a schema change)", () => {
  const p = Bun.spawnSync([process.execPath, join(ROOT, "scripts/make-schema-descriptions.ts"), "--check"], { stderr: "pipe" });
  expect(p.stderr.toString()).toBe("");
  expect(p.exitCode).toBe(0);
}, 60_000);

test("a field's doc comment is its JSON Schema description: through nullable, arrays, spreads of shared parts, and the manifest", () => {
  const rec = jsonSchemaOf("eval-record") as any;
  const timing = rec.properties.timing.anyOf.find((x: any) => x.type === "object");
  expect(timing.properties.speedup.description).toContain("above 1, the candidate is faster");
  expect(rec.properties.input.description).toStartWith("The input's identity");
  // the developers' pointers into the source are left out of what a reader sees
  expect(JSON.stringify(rec)).not.toContain("src/eval/");
  const ev = jsonSchemaOf("eval") as any;
  expect(ev.properties.candidates.items.properties).toBeDefined();
  expect(ev.properties.results.description).toContain("--jsonl results file");
  const watch = jsonSchemaOf("validate-watch") as any;
  expect(watch.properties.buildSteps.properties.parseBaseMs.description).toContain("incremental preprocessing");
  const m = jsonSchemaOf("manifest") as any;
  const described = JSON.stringify(m).match(/"description"/g)?.length ?? 0;
  expect(described).toBeGreaterThan(20);
});

test("an MCP tool's output schema carries the same descriptions (what an agent reads in tools/list)", () => {
  const out = outputSchema("eval") as any;
  const doc = out.anyOf[0];
  expect(doc.properties.results.description).toContain("--jsonl results file");
  expect(out.anyOf[1].properties.error).toBeDefined();
});

test("an MCP tool's output schema stops below its top-level fields (the full schema: kerncap schema NAME); the error document keeps its code's enum (nu #12: tools/list was 139 KB)", () => {
  const inspect = outputSchema("inspect") as any;
  const manifest = inspect.anyOf[0].properties.manifest;
  expect(manifest.properties).toBeUndefined();
  expect(manifest.description).toContain("kerncap schema inspect");
  expect(JSON.stringify(inspect).length).toBeLessThan(6000); // was 21 KB: the whole manifest's schema
  const err = inspect.anyOf[1].properties.error.properties;
  expect(new Set(err.code.enum)).toEqual(new Set(Object.keys(ERROR_CODES)));
  expect(err.hint.description).toBeDefined();
});

test("kerncap.error/1's code is the enum of the stable codes, and details names what the codes carry (nu12 #16)", () => {
  const err = (jsonSchemaOf("error") as any).properties.error.properties;
  expect(err.code.enum).toContain("E_BUILD");
  expect(err.code.enum).toContain("E_STDERR_CLOSED"); // printed by the CLI itself (src/cli/main.ts)
  expect(new Set(err.code.enum)).toEqual(new Set(Object.keys(ERROR_CODES)));
  for (const k of ["diagnostics", "rebuild", "trust", "configs"]) expect(err.details.description).toContain(k);
});
