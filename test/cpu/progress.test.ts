/** The capture library's progress file (src/capture/progress.ts): parsing, wording, the watcher's two modes. */
import { describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describeProgress, parseProgress, watchProgress } from "../../src/capture/progress.ts";
import { tempDir } from "./fixtures.ts";

describe("progress file", () => {
  test("the line c/cuda/kc_snapshot.h writes (padded with spaces to 127 bytes + newline) parses; anything else does not", () => {
    expect(parseProgress("before 1048576 4194304".padEnd(127) + "\n")).toEqual({ phase: "before", done: 1048576, total: 4194304 });
    expect(parseProgress("fsync 0 0\n")).toEqual({ phase: "fsync", done: 0, total: 0 });
    expect(parseProgress("")).toBeUndefined();
    expect(parseProgress("before 12")).toBeUndefined();
  });

  test("wording: bytes and percent while drawn live, the phase's size once per phase", () => {
    expect(describeProgress({ phase: "before", done: 1536 * 1024 * 1024, total: 4 * 1024 ** 3 })).toBe("writing the before state: 1.5 GiB of 4.0 GiB (37%)");
    expect(describeProgress({ phase: "after", done: 0, total: 2048 }, true)).toBe("writing the after state (2.0 KiB)");
    expect(describeProgress({ phase: "fsync", done: 5, total: 5 })).toBe("flushing the memory files to disk");
  });

  test("live: one line redrawn in place while it changes, a new line at each phase and at stop", async () => {
    const d = tempDir();
    const drawn: string[] = [];
    const said: string[] = [];
    const w = watchProgress(d, { live: true, draw: (s) => drawn.push(s), say: (l) => said.push(l), intervalMs: 20 });
    await Bun.sleep(60); // no file yet: nothing
    expect(drawn).toEqual([]);
    for (const line of ["before 0 2048", "before 1024 2048", "after 0 1024"]) {
      writeFileSync(join(d, "progress"), line + "\n");
      await Bun.sleep(80);
    }
    w.stop();
    expect(said).toEqual([]);
    expect(drawn).toEqual([
      "\r\x1b[Kwriting the before state: 0 B of 2.0 KiB (0%)",
      "\r\x1b[Kwriting the before state: 1.0 KiB of 2.0 KiB (50%)",
      "\n",
      "\r\x1b[Kwriting the after state: 0 B of 1.0 KiB (0%)",
      "\n",
    ]);
  });

  test("several targets in one run: the capture being written now is shown, named by its number", async () => {
    const d = tempDir();
    const said: string[] = [];
    const w = watchProgress(d, { live: false, draw: () => {}, say: (l) => said.push(l), intervalMs: 20 });
    mkdirSync(join(d, "captures/0"), { recursive: true });
    writeFileSync(join(d, "captures/0/progress"), "before 0 4096\n");
    await Bun.sleep(80);
    mkdirSync(join(d, "captures/1"), { recursive: true });
    writeFileSync(join(d, "captures/1/progress"), "before 0 2048\n");
    await Bun.sleep(80);
    w.stop();
    expect(said).toEqual(["capture 0: writing the before state (4.0 KiB)", "capture 1: writing the before state (2.0 KiB)"]);
  });
});
