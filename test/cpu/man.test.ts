/**
 * The manual page docs/kerncap.1 (src/cli/man.ts, written by scripts/make-man.ts): current with
 * the verb table (a verb's new option without `bun scripts/make-man.ts` fails here), every verb and
 * visible option in it, nothing internal, and, where groff is installed, rendered without a warning.
 */
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { manPage, roff } from "../../src/cli/man.ts";
import { commands } from "../../src/cli/verbs.ts";
import { TOOL_VERSION } from "../../src/version.ts";

const ROOT = resolve(import.meta.dir, "../..");

test("docs/kerncap.1 is what the verb table makes now (run `node_modules/.bin/bun scripts/make-man.ts` after changing a verb)", async () => {
  const page = await manPage(commands, TOOL_VERSION);
  expect(readFileSync(join(ROOT, "docs/kerncap.1"), "utf8")).toBe(page);
  for (const verb of Object.keys(commands)) expect(page, verb).toContain(`.SS \\fB${roff(verb)}\\fR`);
  for (const opt of ["allow\\-version\\-mismatch", "report", "print\\-config", "launch\\-skip"]) expect(page, opt).toContain(`\\fB\\-\\-${opt}\\fR`);
  expect(page).not.toMatch(/\\-\\-worker\\fR/); // check's and eval's protocol option (eval's --workers-per-gpu is for people)
  expect(page).toMatch(/^[\x00-\x7f]*$/); // every other character as \[uXXXX]
  const check = Bun.spawnSync([process.execPath, join(ROOT, "scripts/make-man.ts"), "--check"], { stderr: "pipe" });
  expect(check.exitCode, check.stderr.toString()).toBe(0);
});

test("roff escaping: a leading dot or quote cannot become a request, backslashes and dashes are literal", () => {
  expect(roff(".SH x")).toBe("\\&.SH x");
  expect(roff("'x")).toBe("\\&'x");
  expect(roff("a\\b -c")).toBe("a\\eb \\-c");
  expect(roff("12 µs × 2")).toBe("12 \\[u00B5]s \\[u00D7] 2");
});

test.skipIf(!Bun.which("groff"))("groff renders it without a warning", () => {
  const r = Bun.spawnSync(["groff", "-man", "-Tutf8", "-ww", "-z", join(ROOT, "docs/kerncap.1")], { stderr: "pipe" });
  expect(r.exitCode).toBe(0);
  expect(r.stderr.toString()).toBe("");
});
