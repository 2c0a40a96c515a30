/**
 * The table of error codes (src/error-codes.ts): every code written in src/ is a row of it (a throw
 * site's code is also type-checked: KerncapError takes only ErrorCode), every row is used and is
 * documented in docs/errors.md (generated from the table), and a KerncapError takes its exit
 * status and its default hint from its row.
 */
import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { errorsMarkdown } from "../../scripts/make-errors-doc.ts";
import { ERROR_CODES, isErrorCode } from "../../src/error-codes.ts";
import { KerncapError } from "../../src/errors.ts";

const ROOT = join(import.meta.dir, "../..");

/** Every non-test .ts file under src/, as [path relative to the repository, text]. */
function sources(): [string, string][] {
  return readdirSync(join(ROOT, "src"), { recursive: true, encoding: "utf8" })
    .filter((f) => f.endsWith(".ts") && !f.endsWith(".test.ts"))
    .map((f) => [relative(ROOT, join(ROOT, "src", f)), readFileSync(join(ROOT, "src", f), "utf8")]);
}

/** The E_* string literals of a source text (a code in quotes: a throw site, a comparison, a record's code). */
function codesIn(text: string): string[] {
  return [...text.matchAll(/["'`](E_[A-Z0-9_]+)["'`]/g)].map((m) => m[1]!);
}

test("every error code written in src/ is a row of the table", () => {
  const unknown: string[] = [];
  for (const [path, text] of sources()) {
    if (path === "src/error-codes.ts") continue;
    for (const c of codesIn(text)) if (!isErrorCode(c)) unknown.push(`${path}: ${c}`);
  }
  expect(unknown).toEqual([]);
});

test("every row of the table is a code src/ reports (no row outlives its last throw site)", () => {
  const used = new Set(
    sources()
      .filter(([p]) => p !== "src/error-codes.ts")
      .flatMap(([, t]) => codesIn(t)),
  );
  expect(Object.keys(ERROR_CODES).filter((c) => !used.has(c))).toEqual([]);
});

test("docs/errors.md is what the table makes now (run `node_modules/.bin/bun scripts/make-errors-doc.ts` after changing a code)", () => {
  const doc = readFileSync(join(ROOT, "docs/errors.md"), "utf8");
  expect(doc).toBe(errorsMarkdown());
  for (const code of Object.keys(ERROR_CODES)) expect(doc).toContain(`| \`${code}\` |`);
  const check = Bun.spawnSync([process.execPath, join(ROOT, "scripts/make-errors-doc.ts"), "--check"], { stderr: "pipe" });
  expect(check.exitCode).toBe(0);
});

test("every row has an exit status, a sentence and a hint", () => {
  for (const [code, r] of Object.entries(ERROR_CODES)) {
    expect(code).toMatch(/^E_[A-Z0-9_]+$/);
    expect([2, 130]).toContain(r.exit);
    expect(r.about.length).toBeGreaterThan(10);
    expect(r.hint.length).toBeGreaterThan(10);
  }
});

test("a KerncapError takes its exit status and default hint from its row; a throw site's hint replaces it", () => {
  const plain = new KerncapError("E_NO_NVCC", "nvcc not found");
  expect(plain.exitCode).toBe(2);
  expect(plain.hint).toBe(ERROR_CODES.E_NO_NVCC.hint);
  const own = new KerncapError("E_NO_NVCC", "nvcc not found", { hint: "Set NVCC." });
  expect(own.hint).toBe("Set NVCC.");
  expect(new KerncapError("E_INTERRUPTED", "interrupted").exitCode).toBe(130);
  expect(new KerncapError("E_INTERRUPTED", "interrupted", { exitCode: 143 }).exitCode).toBe(143);
  // @ts-expect-error: an exit status of its own is only for E_INTERRUPTED (the signal's); the table's wins
  expect(new KerncapError("E_USAGE", "bad", { exitCode: 1 }).exitCode).toBe(2);
  // @ts-expect-error: a code that is no row of the table is a type error (tsc --noEmit runs in scripts/test.sh)
  const odd = new KerncapError("E_NO_SUCH_CODE", "x");
  expect(odd.exitCode).toBe(2);
  expect(odd.hint).toBeUndefined();
});
