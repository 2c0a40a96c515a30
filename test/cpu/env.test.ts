/**
 * src/env.ts and each frontend's env.ts own every KERNCAP_* variable: kerncap's TypeScript touches none outside them, the
 * docs/environment.md lists exactly its names, and every name the C libraries, the Triton shim and the
 * reproducer templates read is in it, with that reader named.
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { captureLibraryEnv, type Reader } from "../../src/env.ts";
import { envVars } from "../../src/frontends/index.ts";

const ROOT = resolve(import.meta.dir, "../..");
const ENV_VARS = envVars(); // the core's (src/env.ts) and every frontend's (src/frontends/<name>/env.ts)
const NAMES = new Set(Object.keys(ENV_VARS));

function files(dir: string, keep: (p: string) => boolean): string[] {
  const out: string[] = [];
  for (const n of readdirSync(dir)) {
    const p = join(dir, n);
    if (statSync(p).isDirectory()) out.push(...files(p, keep));
    else if (keep(p)) out.push(p);
  }
  return out;
}

const names = (text: string, re: RegExp) => [...text.matchAll(re)].map((m) => m[1]!);

describe("KERNCAP_* variables", () => {
  test("kerncap's TypeScript reads and writes them only in src/env.ts and a frontend's env.ts", () => {
    const offenders: string[] = [];
    for (const f of files(join(ROOT, "src"), (p) => p.endsWith(".ts") && !p.endsWith(".test.ts") && !p.endsWith("/env.ts"))) {
      const lines = readFileSync(f, "utf8").split("\n");
      lines.forEach((l, i) => {
        // a read (env.KERNCAP_X, env["KERNCAP_X"]) or a write (KERNCAP_X: value in an object); names in messages are fine
        if (/\benv\s*(\.|\[\s*["'`])KERNCAP_/.test(l) || /[{,]\s*KERNCAP_[A-Z0-9_]+\s*:/.test(l) || /^\s*KERNCAP_[A-Z0-9_]+\s*:/.test(l))
          offenders.push(`${relative(ROOT, f)}:${i + 1}: ${l.trim()}`);
      });
    }
    expect(offenders).toEqual([]);
  });

  test("docs/environment.md lists exactly the variables of src/env.ts and the frontends'", () => {
    const readme = readFileSync(join(ROOT, "docs/environment.md"), "utf8"); // the manual's table of variables
    const section = readme;
    const listed = names(section, /^\| `(KERNCAP_[A-Z0-9_]+)`/gm);
    expect(listed.length).toBe(new Set(listed).size);
    expect(new Set(listed)).toEqual(NAMES);
    expect(section).toContain("KERNCAP_CACHE");
    expect(section).toContain("$TMPDIR/kerncap-cache-<uid>");
  });

  const readBy: [string, Reader, RegExp][] = [
    // the units of each library that read the environment (their contracts say so), the shared ones in both
    // (c/hsa/kerncap_hsa.c reads every setting through c/common/kc_settings.c)
    ...["cuda/kerncap_cuda.c", "common/kc_settings.c", "common/kc_process.c", "common/kc_raw.c"].map(
      (u) => [`c/${u}`, "CUDA library", /getenv\("(KERNCAP_[A-Z0-9_]+)"\)/g] as [string, Reader, RegExp],
    ),
    ...["common/kc_settings.c", "common/kc_process.c", "common/kc_raw.c"].map(
      (u) => [`c/${u}`, "HSA library", /getenv\("(KERNCAP_[A-Z0-9_]+)"\)/g] as [string, Reader, RegExp],
    ),
    ["src/frontends/triton/sitecustomize.py", "Triton shim", /environ\.get\(["'](KERNCAP_[A-Z0-9_]+)["']/g],
    ["templates/triton/repro.py", "Triton reproducer", /environ\.get\(["'](KERNCAP_[A-Z0-9_]+)["']/g],
    ["templates/triton/build.sh.hbs", "Triton reproducer", /\$\{(KERNCAP_[A-Z0-9_]+)/g],
  ];
  for (const [file, reader, re] of readBy) {
    test(`every variable ${file} reads is in the table, read by "${reader}"`, () => {
      const found = new Set(names(readFileSync(join(ROOT, file), "utf8"), re));
      expect(found.size).toBeGreaterThan(0);
      for (const n of found) {
        expect(NAMES.has(n), `${n} (read by ${file}) is not in src/env.ts`).toBe(true);
        expect(ENV_VARS[n as keyof typeof ENV_VARS].readers as readonly string[]).toContain(reader);
      }
    });
  }

  test("the capture library's settings: list mode tells no kernel; flags only when on", () => {
    expect(captureLibraryEnv({ out: "/o", mode: "capture", kernel: "", dispatch: 0, rank: 1 })).toEqual({
      KERNCAP_OUT: "/o",
      KERNCAP_MODE: "capture",
      KERNCAP_KERNEL: "",
      KERNCAP_DISPATCH: "0",
      KERNCAP_RANK: "1",
    });
    expect(captureLibraryEnv({ out: "/o", mode: "capture", process: 0 })).toEqual({
      KERNCAP_OUT: "/o",
      KERNCAP_MODE: "capture",
      KERNCAP_KERNEL: "",
      KERNCAP_DISPATCH: "0",
      KERNCAP_PROCESS: "0",
    });
    expect(captureLibraryEnv({ out: "/o", mode: "list", cuptiPath: "/c.so" })).toEqual({
      KERNCAP_OUT: "/o",
      KERNCAP_MODE: "list",
      KERNCAP_CUPTI_PATH: "/c.so",
    });
    expect(captureLibraryEnv({ out: "/o", mode: "capture", kernel: "soft", dispatch: 2, countBenchmarks: true, exitAfterCapture: true, log: true })).toEqual({
      KERNCAP_OUT: "/o",
      KERNCAP_MODE: "capture",
      KERNCAP_KERNEL: "soft",
      KERNCAP_DISPATCH: "2",
      KERNCAP_COUNT_BENCHMARKS: "1",
      KERNCAP_EXIT_AFTER_CAPTURE: "1",
      KERNCAP_LOG: "1",
    });
  });
});
