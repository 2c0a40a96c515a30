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
    // the time left, as every progress line says it (src/util/progress.ts), from the phase's rate
    expect(describeProgress({ phase: "before", done: 1024 ** 3, total: 4 * 1024 ** 3 }, false, 10_000)).toBe(
      "writing the before state: 1.0 GiB of 4.0 GiB (25%), about 30 s left",
    );
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

  test("not a terminal: a line when a phase starts, then done/total with the time left every everyMs while it runs", async () => {
    const d = tempDir();
    const said: string[] = [];
    let t = 0;
    const w = watchProgress(d, { live: false, draw: () => {}, say: (l) => said.push(l), intervalMs: 10, everyMs: 2000, now: () => t });
    const step = async (line: string, at: number) => {
      t = at;
      writeFileSync(join(d, "progress"), line + "\n");
      await Bun.sleep(40);
    };
    await step("before 0 4096", 0);
    await step("before 1024 4096", 1000); // within 2 s of the phase's line: nothing
    await step("before 2048 4096", 2500); // 2.5 s: a line, 2 KiB in 2.5 s leaves 2.5 s
    await step("before 3072 4096", 3000); // 0.5 s after it: nothing
    await step("before 4096 4096", 5000); // done: no line for a finished phase
    await step("fsync 0 0", 5100);
    w.stop();
    expect(said).toEqual([
      "writing the before state (4.0 KiB)",
      "writing the before state: 2.0 KiB of 4.0 KiB (50%), about 3 s left",
      "flushing the memory files to disk",
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

describe("progress of pack, unpack and inspect --verify (src/util/progress.ts through the verbs' callbacks)", () => {
  test("pack: checking the chunks, then packing, in bytes up to their totals; unpack: unpacking, then checking", async () => {
    const { makeCapture } = await import("./fixtures.ts");
    const { packCapture, unpackArchive } = await import("../../src/format/archive.ts");
    const { archiveProgress } = await import("../../src/cli/format.ts");
    const root = tempDir();
    const dir = join(root, "cap");
    await makeCapture(dir);
    const events: [string, number, number][] = [];
    await packCapture(dir, join(root, "cap.zip"), { onProgress: (p, done, total) => void events.push([p, done, total]) });
    const phases = (ev: typeof events) => ev.map((e) => e[0]).filter((p, i, a) => a[i - 1] !== p);
    expect(phases(events)).toEqual(["checking", "packing"]);
    for (const p of ["checking", "packing"]) {
      const mine = events.filter((e) => e[0] === p);
      expect(mine.at(-1)![1], p).toBe(mine.at(-1)![2]); // ends at its total
      expect(
        mine.every((e, i) => i === 0 || e[1] >= mine[i - 1]![1]),
        p,
      ).toBe(true); // never backwards
    }
    const back: typeof events = [];
    await unpackArchive(join(root, "cap.zip"), join(root, "back"), { onProgress: (p, done, total) => void back.push([p, done, total]) });
    expect(phases(back)).toEqual(["unpacking", "checking"]);
    expect(back.filter((e) => e[0] === "unpacking").at(-1)![1]).toBeGreaterThan(0);
    // the verbs' line under --json: nothing
    const line = archiveProgress("cap", true);
    const write = process.stderr.write;
    let err = "";
    (process.stderr as any).write = (s: string) => ((err += s), true);
    try {
      line.update("packing", 1, 2);
      line.end();
    } finally {
      (process.stderr as any).write = write;
    }
    expect(err).toBe("");
  });

  test("inspect --verify: on a terminal (script(1)'s pseudo-terminal) a line redrawn in place and erased; off one, nothing for a small capture", async () => {
    const { makeCapture } = await import("./fixtures.ts");
    const dir = join(tempDir(), "cap");
    await makeCapture(dir);
    const argv = [process.execPath, join(import.meta.dir, "../../src/cli/main.ts"), "inspect", dir, "--verify"];
    const p = Bun.spawnSync(argv, { stdout: "pipe", stderr: "pipe" });
    expect(p.exitCode, p.stderr.toString()).toBe(0);
    expect(p.stderr.toString()).not.toContain("checking"); // a plain line comes only every 10 s
    if (!Bun.which("script")) return;
    const t = Bun.spawnSync(["script", "-qec", argv.map((a) => `'${a}'`).join(" "), "/dev/null"], { stdout: "pipe", stderr: "pipe" });
    const tty = t.stdout.toString();
    expect(t.exitCode, tty).toBe(0);
    expect(tty).toMatch(/\r\x1b\[Kchecking cap's memory chunks: [\d.]+ (B|KiB) of [\d.]+ KiB \(\d+%\)/);
    expect(tty).toMatch(/\r\x1b\[K(\r\n)?integrity  every checksum matches/); // erased before the verdict
  });
});
