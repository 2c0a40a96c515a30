/**
 * scripts/walkthrough.sh (docs/walkthrough.md is what it writes on the GPU node): it parses, and on a
 * machine without an NVIDIA GPU it stops at once with exit 2 and says where to run it, writing
 * nothing but its output folder.
 */
import { expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const SCRIPT = resolve(import.meta.dir, "../../scripts/walkthrough.sh");
const HAS_GPU = existsSync("/dev/nvidiactl") || existsSync("/dev/nvidia0");
const DIST = resolve(import.meta.dir, "../../dist/kerncap");

test("walkthrough.sh parses", () => {
  const r = Bun.spawnSync(["bash", "-n", SCRIPT], { stderr: "pipe" });
  expect(r.exitCode, r.stderr.toString()).toBe(0);
});

test.skipIf(HAS_GPU)("without a GPU it stops with exit 2 and says to run it on the GPU node", () => {
  const out = mkdtempSync(join(tmpdir(), "kerncap-walkthrough-"));
  const before = existsSync(DIST) ? statSync(DIST).mtimeMs : undefined;
  try {
    const r = Bun.spawnSync(["bash", SCRIPT], { env: { PATH: process.env.PATH ?? "", OUT: out, KERNCAP_BIN: "/bin/true" }, stdout: "pipe", stderr: "pipe" });
    expect(r.exitCode).toBe(2);
    expect(r.stderr.toString()).toContain("no NVIDIA GPU here; run it on the GPU node");
    expect(readdirSync(out)).toEqual([]);
    // nothing else: dist/kerncap (a user's fresh build) is not replaced by .carry's binary
    if (before !== undefined) expect(statSync(DIST).mtimeMs).toBe(before);
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});
