/**
 * A capture folder the user cannot write to (someone else's, chmod -R a-w, a read-only mount):
 * inspect --verify and pack read it. Root may open any file read-write, so the check runs the CLI as
 * user nobody (setpriv); it skips where setpriv, the nobody user, or nobody's access to this
 * checkout is missing.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, mkdtempSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { makeCapture } from "./fixtures.ts";

const MAIN = resolve(import.meta.dir, "../../src/cli/main.ts");
const AS_NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"];

/** True when `setpriv` runs this Bun as nobody and nobody can read the CLI's entry point. */
function nobodyCanRun(): boolean {
  if (process.getuid?.() !== 0 || !Bun.which("setpriv")) return false;
  const p = Bun.spawnSync([...AS_NOBODY, process.execPath, "-e", `require("fs").readFileSync(${JSON.stringify(MAIN)})`], {
    stdout: "ignore",
    stderr: "ignore",
  });
  return p.exitCode === 0;
}

// not under TMPDIR: test.sh's scratch folder is 0700 (root's), which nobody cannot enter
const root = mkdtempSync("/tmp/kerncap-readonly-");
afterAll(() => {
  Bun.spawnSync(["chmod", "-R", "u+w", root]);
  rmSync(root, { recursive: true, force: true });
});

describe("a read-only capture folder", () => {
  test.skipIf(!nobodyCanRun())(
    "inspect --verify --json and pack as nobody on a chmod -R a-w capture owned by root",
    async () => {
      const dir = join(root, "cap");
      await makeCapture(dir);
      chmodSync(root, 0o777); // pack writes its archive next to the folder: let nobody write there
      expect(Bun.spawnSync(["chmod", "-R", "a-w,a+rX", dir]).exitCode).toBe(0);
      const env = { ...process.env, HOME: root, TMPDIR: root };
      const inspect = Bun.spawnSync([...AS_NOBODY, process.execPath, MAIN, "inspect", dir, "--verify", "--json"], { stdout: "pipe", stderr: "pipe", env });
      expect(inspect.stderr.toString()).not.toContain("EACCES");
      expect(inspect.exitCode).toBe(0);
      expect(JSON.parse(inspect.stdout.toString()).integrity).toBeDefined();
      const pack = Bun.spawnSync([...AS_NOBODY, process.execPath, MAIN, "pack", dir, "-o", join(root, "cap.zip")], { stdout: "pipe", stderr: "pipe", env });
      expect(pack.stderr.toString()).not.toContain("EACCES");
      expect(pack.exitCode).toBe(0);
    },
    30_000,
  );

  test.skipIf(!nobodyCanRun())(
    "tune, judge and clean --dry-run say the folder is not writable (E_IO, exit 2), not a build failure, a temp file's error, or a removal that will not happen",
    async () => {
      const dir = join(root, "cap2");
      await makeCapture(dir);
      Bun.spawnSync(["mkdir", "-p", join(dir, "build", "eval")]);
      chmodSync(root, 0o777);
      expect(Bun.spawnSync(["chmod", "-R", "a-w,a+rX", dir]).exitCode).toBe(0);
      const env = { ...process.env, HOME: root, TMPDIR: root };
      const run = (...args: string[]) => {
        const p = Bun.spawnSync([...AS_NOBODY, process.execPath, MAIN, ...args, "--json"], { stdout: "pipe", stderr: "pipe", env });
        return { code: p.exitCode, doc: JSON.parse(p.stdout.toString() || "{}") };
      };
      const tune = run("tune", dir, "--build-only", "--maxrregcount", "32");
      expect(tune.code).toBe(2);
      expect(tune.doc.error.code).toBe("E_IO");
      expect(tune.doc.error.message).toContain("is not writable");
      const judge = run("judge", dir, "--rtol", "1e-3");
      expect(judge.code).toBe(2);
      expect(judge.doc.error.message).toContain("kerncap judge stores the capture's settings in it");
      expect(judge.doc.error.hint).not.toContain("--out");
      const clean = run("clean", dir, "--dry-run");
      expect(clean.code).toBe(2);
      // another user's capture (root's, here): kerncap clean removes only what is the user's alone (adversary 86/87: clean passes over what is not)
      expect(clean.doc.error.code).toBe("E_IO");
      expect(clean.doc.error.message).toMatch(/cannot clean .*cap2: the folder belongs to another user/);
    },
    30_000,
  );
});
