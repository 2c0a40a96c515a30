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
    const found: string[] = [];
    const walk = (d: string) => {
      for (const e of readdirSync(d)) {
        const p = join(d, e);
        if (statSync(p).isDirectory()) walk(p);
        else if (p.endsWith(".ts") && readFileSync(p, "utf8").includes("Bun.which(")) found.push(relative(SRC, p));
      }
    };
    walk(SRC);
    expect(found.sort()).toEqual(["capture/run.ts", "env.ts"]);
  });

  test("no process is started by a bare name written at its spawn (Bun.spawn, spawnSync, doctor's sh): an absolute path or a name found by whichAbsolute", () => {
    const bare: string[] = [];
    const walk = (d: string) => {
      for (const e of readdirSync(d)) {
        const p = join(d, e);
        if (statSync(p).isDirectory()) walk(p);
        else if (p.endsWith(".ts"))
          for (const m of readFileSync(p, "utf8").matchAll(/(?:Bun\.spawn|Bun\.spawnSync|[^.\w]spawnSync|[^.\w]spawn|[^.\w]sh)\(\s*\[\s*"([^"]*)"/g))
            if (!m[1]!.startsWith("/")) bare.push(`${relative(SRC, p)}: ${m[1]}`);
      }
    };
    walk(SRC);
    expect(bare).toEqual([]);
  });
});
