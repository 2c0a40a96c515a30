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

test("a manifest's parameter buffer over 1 MiB or module of 4 GiB is no manifest (E_MANIFEST naming the field), never an internal error where it is read whole (adversary 61: params.size of 4 GiB ended in a RangeError)", async () => {
  const { readManifest } = await import("../../../src/format/capture-dir.ts");
  const { makeCapture } = await import("../fixtures.ts");
  const { readFileSync } = await import("node:fs");
  for (const [field, size] of [
    ["params", 2 ** 32 + 8],
    ["params", (1 << 20) + 1],
    ["module", 2 ** 32],
  ] as const) {
    const dir = join(tempDir(), "cap");
    await makeCapture(dir);
    const m = JSON.parse(readFileSync(join(dir, "kerncap.json"), "utf8"));
    m[field].size = size;
    writeFileSync(join(dir, "kerncap.json"), JSON.stringify(m));
    let code: unknown;
    try {
      readManifest(dir);
    } catch (e) {
      code = (e as { code?: string }).code;
    }
    expect(code, `${field}.size ${size}`).toBe("E_MANIFEST");
  }
});

test("a manifest's chunk size past 64 MiB (the capture library's largest) is no manifest: one chunk's hash reads it whole (adversary 62)", async () => {
  const { readManifest } = await import("../../../src/format/capture-dir.ts");
  const { makeCapture } = await import("../fixtures.ts");
  const { readFileSync } = await import("node:fs");
  const dir = join(tempDir(), "cap");
  await makeCapture(dir);
  const m = JSON.parse(readFileSync(join(dir, "kerncap.json"), "utf8"));
  m.memory.chunkBytes = 2 ** 40;
  writeFileSync(join(dir, "kerncap.json"), JSON.stringify(m));
  expect(() => readManifest(dir)).toThrow(/memory.chunkBytes 1099511627776 is not a power of two from 4096 to 64 MiB/);
});

test("a manifest number that reads as Infinity (JSON 1e999) is refused by name, in the manifest (which export reads) and in judging settings (adversary round 70)", async () => {
  const { makeCapture } = await import("../fixtures.ts");
  const { readManifest } = await import("../../../src/format/capture-dir.ts");
  const { readJudging, writeJudging } = await import("../../../src/replay/judge-settings.ts");
  const dir = join(tempDir(), "cap");
  await makeCapture(dir);
  const path = join(dir, "kerncap.json");
  const text = (await Bun.file(path).text()).replace('"app_launch_us": 4.5', '"app_launch_us": 1e999');
  expect(text).toContain("1e999");
  writeFileSync(path, text);
  let err: any;
  try {
    readManifest(dir);
  } catch (e) {
    err = e;
  }
  expect(err?.code).toBe("E_MANIFEST");
  expect(err?.message).toContain("timing.app_launch_us is Infinity");
  // the judging settings: the same refusal, E_JUDGE
  const other = join(tempDir(), "cap");
  await makeCapture(other);
  writeJudging(other, { atol: 1e-3 });
  const jp = join(other, "kerncap-judge.json");
  writeFileSync(jp, (await Bun.file(jp).text()).replace('"atol": 0.001', '"atol": 1e999'));
  expect(() => readJudging(other)).toThrow(/atol is Infinity/);
});
