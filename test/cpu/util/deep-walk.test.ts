/**
 * The walkers over parsed untrusted JSON (src/escape.ts stringWhere, src/format/json-position.ts
 * nonFinite) use a stack of their own: a document nested 200 000 levels deep (an eval
 * --candidate-list, judging settings) overflowed the call stack into an internal error
 * (adversary 73). They find the first match in document order, as the recursive walks did.
 */
import { expect, test } from "bun:test";
import { illFormedStringAt, stringWhere } from "../../../src/escape.ts";
import { nonFinite } from "../../../src/format/json-position.ts";
import { listedCandidates } from "../../../src/eval/candidates.ts";
import { KerncapError } from "../../../src/errors.ts";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** `leaf` inside `n` nested arrays. */
function nested(n: number, leaf: unknown): unknown {
  let x: unknown = leaf;
  for (let i = 0; i < n; i++) x = [x];
  return x;
}

test("200 000 levels: found at the bottom, or nothing found, without a stack overflow", () => {
  const deep = nested(200_000, "\ud800");
  expect(illFormedStringAt(deep)).toBe("[0]".repeat(200_000));
  expect(illFormedStringAt(nested(200_000, "fine"))).toBeUndefined();
  expect(nonFinite(nested(200_000, Infinity))).toContain("is Infinity");
  expect(nonFinite(nested(200_000, 1))).toBeUndefined();
});

test("the first match in document order: keys before their values, earlier entries first", () => {
  const doc = { a: ["x", { b: "hit1" }], hit2: "y", c: "hit3" };
  expect(stringWhere(doc, (s) => s.startsWith("hit"))).toBe("a[1].b");
  expect(stringWhere({ k: "v", hitKey: "hitValue" }, (s) => s.startsWith("hit"))).toBe("hitKey");
  expect(stringWhere("hit", (s) => s === "hit")).toBe("");
  expect(nonFinite({ t: { low: 1, high: -Infinity }, u: [NaN] })).toBe("t.high is -Infinity: a number kerncap never writes (JSON 1e999 reads as Infinity)");
  expect(nonFinite([1, [2, NaN]])).toBe("[1][1] is NaN: a number kerncap never writes (JSON 1e999 reads as Infinity)");
  expect(nonFinite(-Infinity)).toContain("(top level) is -Infinity");
});

test("eval --candidate-list nested 200 000 levels: E_USAGE saying how deep, before any walk", () => {
  const dir = mkdtempSync(join(tmpdir(), "kc-deep-"));
  const file = join(dir, "list.json");
  writeFileSync(file, `{"candidates":[{"label":"a","spec":${"[".repeat(200_000)}${"]".repeat(200_000)}}]}`);
  let e: unknown;
  try {
    listedCandidates(file);
  } catch (x) {
    e = x;
  }
  expect(e instanceof KerncapError && e.code).toBe("E_USAGE");
  expect((e as Error).message).toContain("nests 200003 levels deep");
});
