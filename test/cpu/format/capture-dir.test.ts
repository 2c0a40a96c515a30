/** src/format/capture-dir.ts: what a path given as a capture is, asked without blocking. */
import { expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { startsWithZipSignature } from "../../../src/format/capture-dir.ts";
import { tempDir } from "../fixtures.ts";

test("a FIFO named like an archive is no archive, asked without blocking (adversary 29: inspect, replay, pack … hung on cap.zip, a FIFO); a real zip's signature is seen", () => {
  const d = tempDir();
  const fifo = join(d, "cap.zip");
  expect(Bun.spawnSync(["mkfifo", fifo]).exitCode).toBe(0);
  const t0 = performance.now();
  expect(startsWithZipSignature(fifo)).toBe(false);
  expect(performance.now() - t0).toBeLessThan(1000);
  const zip = join(d, "real.zip");
  writeFileSync(zip, Buffer.concat([Buffer.from("PK\x03\x04"), Buffer.alloc(30)]));
  expect(startsWithZipSignature(zip)).toBe(true);
  // the verbs that ask it, through the CLI: a clean error at once
  const p = Bun.spawnSync([process.execPath, join(import.meta.dir, "../../../src/cli/main.ts"), "inspect", fifo], { stderr: "pipe", timeout: 20_000 });
  expect(p.exitCode).toBe(2);
  expect(p.stderr.toString()).toContain("E_NOT_CAPTURE");
});
