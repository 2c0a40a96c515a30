/**
 * Where tests live (docs/layout.md, "test/"): CPU tests under test/cpu/, a test of one folder's
 * modules in that folder's mirror (src/replay/stats.ts → test/cpu/replay/stats.test.ts), suites
 * across folders at test/cpu/<topic>.test.ts; GPU suites in test/gpu/; the data tests read under test/fixtures/,
 * never in src/. A test elsewhere fails here; ALLOWED may list a place on its way to its spot (empty now).
 */
import { expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";

const ROOT = join(import.meta.dir, "../..");

/** Tests or test data allowed out of place while they move (each removed once moved). */
const ALLOWED = new Set<string>([]);

function files(): string[] {
  const git = Bun.spawnSync(["git", "ls-files", "--cached", "--others", "--exclude-standard"], { cwd: ROOT });
  return git.stdout
    .toString()
    .trim()
    .split("\n")
    .filter((f) => f && existsSync(join(ROOT, f)));
}

/** Why `path` (a test file) is out of place, or undefined when it sits where the rule puts it. */
export function misplaced(path: string, exists: (p: string) => boolean): string | undefined {
  if (path.startsWith("test/gpu/")) return path.slice(9).includes("/") ? "GPU suites sit at the top of test/gpu/" : undefined;
  if (!path.startsWith("test/cpu/")) return "a test goes under test/cpu/ (mirroring src/) or test/gpu/";
  const rel = path.slice(9);
  if (!rel.includes("/")) return undefined; // a suite across modules
  const folder = dirname(rel);
  if (!exists(`src/${folder}`)) return `test/cpu/${folder}/ mirrors no folder of src/ (a suite across folders goes at the top of test/cpu/)`;
  return undefined;
}

test("every test sits where docs/layout.md's rule puts it, and test data is not in src/", () => {
  const exists = (p: string) => existsSync(join(ROOT, p));
  const wrong: string[] = [];
  for (const f of files()) {
    const data = /^src\/(.*\/)?testdata\//.exec(f);
    if (data) {
      if (!ALLOWED.has(data[0])) wrong.push(`${f}: test data goes under test/fixtures/`);
      continue;
    }
    if (!f.endsWith(".test.ts") || ALLOWED.has(f)) continue;
    const why = misplaced(f, exists);
    if (why) wrong.push(`${f}: ${why}`);
  }
  expect(wrong).toEqual([]);
});

test("the allow-list names only places that still exist (a moved test leaves it)", () => {
  expect([...ALLOWED].filter((f) => !existsSync(join(ROOT, f)))).toEqual([]);
});

test("the rule itself", () => {
  const have = new Set(["src/replay", "src/replay/stats.ts", "src/format", "src/format/zip.ts"]);
  const exists = (p: string) => have.has(p);
  expect(misplaced("test/cpu/replay/stats.test.ts", exists)).toBeUndefined();
  expect(misplaced("test/cpu/replay/restorer.test.ts", exists)).toBeUndefined(); // an aspect of the folder
  expect(misplaced("test/cpu/cli.test.ts", exists)).toBeUndefined();
  expect(misplaced("test/gpu/watch.test.ts", exists)).toBeUndefined();
  expect(misplaced("src/replay/stats.test.ts", exists)).toContain("test/cpu/");
  expect(misplaced("test/apps/hip/hsa-run.test.ts", exists)).toContain("test/cpu/");
  expect(misplaced("test/cpu/nowhere/zip.test.ts", exists)).toContain("mirrors no folder");
  expect(misplaced("test/gpu/sub/x.test.ts", exists)).toContain("top of test/gpu/");
});
