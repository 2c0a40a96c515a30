/** The shared progress line (src/util/progress.ts) with a fake clock and a fake terminal. */
import { describe, expect, test } from "bun:test";
import { describeProgressLine, etaMs, formatDuration, ProgressLine, progressMode } from "../../../src/util/progress.ts";

function fake(mode: "live" | "lines" | "off", unit: "bytes" | { noun: string } = { noun: "configs" }, o: { everyMs?: number; redrawMs?: number } = {}) {
  let clock = 0;
  let out = "";
  const make = (label: string, total: number) => new ProgressLine(label, total, { mode, unit, write: (s) => void (out += s), now: () => clock, ...o });
  return { make, tick: (ms: number) => void (clock += ms), out: () => out };
}

describe("progress line", () => {
  test("the mode: off under --json, live on a terminal, plain lines otherwise", () => {
    expect(progressMode({ json: true, isTTY: true })).toBe("off");
    expect(progressMode({ json: false, isTTY: true })).toBe("live");
    expect(progressMode({ json: false, isTTY: false })).toBe("lines");
    expect(progressMode({})).toBe("lines");
  });

  test("the estimate: the rate so far on what is left, only after a second and once something is done", () => {
    expect(etaMs(0, 10, 5000)).toBeUndefined();
    expect(etaMs(5, 10, 500)).toBeUndefined();
    expect(etaMs(10, 10, 5000)).toBeUndefined();
    expect(etaMs(1, 4, 2000)).toBe(6000);
    expect(formatDuration(6000)).toBe("6 s");
    expect(formatDuration(185_000)).toBe("3 min 5 s");
    expect(formatDuration(3_725_000)).toBe("1 h 02 min");
    expect(describeProgressLine("packing cap", 1536 * 1024 ** 2, 4 * 1024 ** 3, "bytes", 3000)).toBe("packing cap: 1.5 GiB of 4.0 GiB (37%), about 5 s left");
    expect(describeProgressLine("building configs", 0, 16, { noun: "built" }, 0, "now a")).toBe("building configs: 0 of 16 built (0%); now a");
  });

  test("live: redrawn in place at most every 200 ms, notes above it, erased at the end", () => {
    const f = fake("live");
    const p = f.make("building", 4);
    p.update(0);
    f.tick(100);
    p.update(1); // within 200 ms of the last draw: not drawn
    f.tick(1900);
    p.update(2);
    p.note("a warning");
    p.end();
    expect(f.out()).toBe(
      "\r\x1b[Kbuilding: 0 of 4 configs (0%)" +
        "\r\x1b[Kbuilding: 2 of 4 configs (50%), about 2 s left" +
        "\r\x1b[Ka warning\n" +
        "\r\x1b[Kbuilding: 2 of 4 configs (50%), about 2 s left" +
        "\r\x1b[K",
    );
  });

  test("lines: nothing for a short task; one plain line per interval for a long one; no control characters", () => {
    const f = fake("lines", "bytes", { everyMs: 10_000 });
    const p = f.make("unpacking cap", 100 * 1024 ** 2);
    for (let i = 1; i <= 5; i++) f.tick(1000), p.update(i * 1024 ** 2);
    expect(f.out()).toBe(""); // 5 s: under the interval
    for (let i = 6; i <= 25; i++) f.tick(1000), p.update(i * 1024 ** 2);
    p.end();
    expect(f.out().split("\n").filter(Boolean)).toEqual([
      "unpacking cap: 10.0 MiB of 100.0 MiB (10%), about 1 min 30 s left",
      "unpacking cap: 20.0 MiB of 100.0 MiB (20%), about 1 min 20 s left",
    ]);
    expect(f.out()).not.toMatch(/[\r\x1b]/);
  });

  test("a new phase starts its own clock and total; off writes nothing at all", () => {
    const f = fake("live", "bytes", { redrawMs: 0 });
    const p = f.make("checking cap's memory chunks", 2048);
    f.tick(5000);
    p.update(2048);
    p.phase("packing cap", 4096);
    f.tick(1000);
    p.update(1024);
    expect(f.out()).toEndWith("\r\x1b[Kpacking cap: 1.0 KiB of 4.0 KiB (25%), about 3 s left");
    const off = fake("off");
    const q = off.make("x", 3);
    q.update(1);
    q.note("n");
    q.end();
    expect(off.out()).toBe("");
  });
});

test("names from captures are escaped: no escape sequence of theirs reaches the terminal, the line stays one line", () => {
  let out = "";
  const p = new ProgressLine("checking \x1b]0;pwned\x07cap", 2, { mode: "live", unit: { noun: "captures" }, write: (s) => void (out += s), now: () => 0 });
  p.update(1, "now a\nb\u202e");
  p.note("[1/2] ok \x1b[2Jx");
  expect(out).not.toContain("\x1b]");
  expect(out).not.toContain("\x1b[2J");
  expect(out).toContain("checking \\x1b]0;pwned\\x07cap: 1 of 2 captures (50%); now a\\nb\\u202e");
  expect(out).toContain("[1/2] ok \\x1b[2Jx\n");
});
