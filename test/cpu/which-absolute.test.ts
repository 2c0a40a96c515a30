// Every tool kerncap runs by name is found on PATH's absolute entries only (src/env.ts whichAbsolute):
// a relative entry names the working folder, which may be a folder another user can write
// (adversary round 70: a planted node_modules/.bin/ncu ran as the user under kerncap profile/doctor).
import { describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { whichAbsolute } from "../../src/env.ts";
import { findNsightTool } from "../../src/profile/ncu.ts";
import { checkNvcc } from "../../src/doctor.ts";
import { tempDir } from "./fixtures.ts";

const SRC = join(import.meta.dir, "../../src");

/** Every .ts file under src/: its path relative to src/ and its text. */
function sourceFiles(d = SRC): [string, string][] {
  return readdirSync(d).flatMap((e): [string, string][] => {
    const p = join(d, e);
    if (statSync(p).isDirectory()) return sourceFiles(p);
    return p.endsWith(".ts") ? [[relative(SRC, p), readFileSync(p, "utf8")]] : [];
  });
}

function tool(folder: string, name: string): string {
  mkdirSync(folder, { recursive: true });
  const p = join(folder, name);
  writeFileSync(p, "#!/bin/sh\necho planted\n");
  chmodSync(p, 0o755);
  return p;
}

describe("tools found on PATH's absolute entries only", () => {
  test("a relative entry holding the tool is passed over; the same folder named absolutely is used", () => {
    const t = tempDir("kerncap-which-");
    tool(join(t, "node_modules/.bin"), "ncu");
    tool(join(t, "node_modules/.bin"), "nvcc");
    const here = process.cwd();
    try {
      process.chdir(t);
      expect(whichAbsolute("ncu", "node_modules/.bin:.:")).toBeNull();
      expect(whichAbsolute("ncu", `node_modules/.bin:${join(t, "node_modules/.bin")}`)).toBe(join(t, "node_modules/.bin/ncu"));
      // profile's ncu and doctor's nvcc: never the working folder's
      const env = { PATH: "node_modules/.bin:/nonexistent", CUDA_HOME: "/nonexistent" };
      let ncu: string | undefined;
      try {
        ncu = findNsightTool("ncu", env);
      } catch {
        ncu = undefined; // none found: E_NO_NCU
      }
      expect(ncu).toBeUndefined();
      expect(checkNvcc(env).path ?? "").not.toContain(t);
    } finally {
      process.chdir(here);
    }
  });

  test("no other lookup by name in src/ (Bun.which only in env.ts, and for the application kerncap run starts)", () => {
    const found = sourceFiles()
      .filter(([, text]) => text.includes("Bun.which("))
      .map(([rel]) => rel);
    expect(found.sort()).toEqual(["capture/run.ts", "env.ts"]);
  });

  test("no process is started by a bare name written at its spawn (Bun.spawn, spawnSync, doctor's sh): an absolute path or a name found by whichAbsolute", () => {
    const bare: string[] = [];
    for (const [rel, text] of sourceFiles())
      for (const m of text.matchAll(/(?:Bun\.spawn|Bun\.spawnSync|[^.\w]spawnSync|[^.\w]spawn|[^.\w]sh)\(\s*\[\s*"([^"]*)"/g))
        if (!m[1]!.startsWith("/")) bare.push(`${rel}: ${m[1]}`);
    expect(bare).toEqual([]);
  });
});
