/**
 * nvcc runs its steps through a shell and pastes paths into them: the paths it is given, the
 * source's real path (links resolved: cicc's --orig_src_path_name) and its temporary files'
 * (TMPDIR). A capture's build.sh keeps each plain (adversary 49: a capture folder named with `$(…)`
 * ran it through a temporary folder's link to src/, an OUTPUT argument and a TMPDIR ran theirs):
 * here with a real nvcc, each command substitution would create a marker file (its path in the
 * environment), and none may.
 */
import { describe, expect, test } from "bun:test";
import { chmodSync, cpSync, existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { writeDemo } from "../../../../src/capture/demo.ts";
import { findNvcc } from "../../../../src/frontends/cuda/nvcc.ts";
import { tempDir } from "../../fixtures.ts";

const NVCC = (() => {
  try {
    return findNvcc();
  } catch {
    return undefined;
  }
})();

describe.skipIf(!NVCC)("build.sh keeps every path nvcc pastes into a shell plain", () => {
  test("a capture folder, an OUTPUT and a TMPDIR whose paths hold $(…), backquotes and quotes: built, nothing of them runs", () => {
    const root = tempDir();
    const mark = join(root, "marker");
    const env = { ...process.env, KC_MARK: mark };
    mkdirSync(join(root, "plain"));
    const { dir } = writeDemo(join(root, "plain", "cap"), false);
    const odd = join(root, "c$(touch $KC_MARK)a`touch $KC_MARK`p 'q\"", "cap");
    cpSync(dir, odd, { recursive: true, preserveTimestamps: true });
    const run = (cwd: string, args: string[], extra: Record<string, string> = {}) => {
      const p = Bun.spawnSync(["bash", join(cwd, "build.sh"), ...args], { cwd, env: { ...env, ...extra }, stdout: "pipe", stderr: "pipe" });
      return { code: p.exitCode, out: p.stdout.toString().trim(), err: p.stderr.toString() };
    };
    // the folder: its src/ copied into a plain temporary folder (a link there is resolved by nvcc)
    const a = run(odd, []);
    expect(a.err).not.toContain("error");
    expect(a.code).toBe(0);
    expect(a.out).toBe(join(odd, "build", "kernel.cubin"));
    expect(existsSync(join(odd, "build", "kernel.cubin"))).toBe(true);
    expect(existsSync(mark)).toBe(false);
    // an OUTPUT with shell syntax, relative and absolute, in a plain and an odd folder: written under its own name
    for (const [cwd, output] of [
      [dir, "build/k$(touch $KC_MARK).cubin"],
      [dir, join(root, "o$(touch $KC_MARK).cubin")],
      [odd, join(odd, "build", "k`touch $KC_MARK`.cubin")],
    ] as const) {
      const r = run(cwd, [output]);
      expect(r.code).toBe(0);
      expect(existsSync(output.startsWith("/") ? output : join(cwd, output))).toBe(true);
      expect(existsSync(mark)).toBe(false);
    }
    // a TMPDIR of this user's whose path holds $(…): nvcc's temporary files go to a plain folder
    const tmp = join(root, "t$(touch $KC_MARK)");
    mkdirSync(tmp);
    chmodSync(tmp, 0o700);
    const t = run(dir, [], { TMPDIR: tmp });
    expect(t.code).toBe(0);
    expect(existsSync(mark)).toBe(false);
  });
});
