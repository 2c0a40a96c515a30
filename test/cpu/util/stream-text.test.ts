/**
 * src/util/stream-text.ts: a child's output held with bounds, whatever the child writes: the first
 * bytes up to a bound (the rest drained), lines split at a length, the last lines up to a size.
 */
import { expect, test } from "bun:test";
import { boundedLines, readCapped, tailLines } from "../../../src/util/stream-text.ts";

/** A stream of the given chunks. */
const stream = (...chunks: string[]) =>
  new ReadableStream<Uint8Array>({
    start(c) {
      for (const x of chunks) c.enqueue(new TextEncoder().encode(x));
      c.close();
    },
  });

test("readCapped: all of a stream within the bound; past it the first bytes, cut, `over` told once, the rest drained", async () => {
  expect(await readCapped(stream("ab", "cd"), 4)).toEqual({ text: "abcd", cut: false });
  let told = 0;
  const r = await readCapped(stream("abc", "def", "ghi"), 4, () => told++);
  expect(r).toEqual({ text: "abcd", cut: true });
  expect(told).toBe(1);
});

test("boundedLines: lines across chunks, a line past the bound in pieces, a last line without a newline", async () => {
  const got: string[] = [];
  for await (const l of boundedLines(stream("a\nbb", "b\ncccccccc", "cc\n\nd"), 4)) got.push(l);
  expect(got).toEqual(["a", "bbb", "cccc", "cccc", "cc", "", "d"]);
  // a multi-byte character split across chunks stays one character
  const euro = new TextEncoder().encode("€\n");
  const split = new ReadableStream<Uint8Array>({
    start(c) {
      c.enqueue(euro.subarray(0, 1));
      c.enqueue(euro.subarray(1));
      c.close();
    },
  });
  const e: string[] = [];
  for await (const l of boundedLines(split, 8)) e.push(l);
  expect(e).toEqual(["€"]);
});

test("tailLines: every line to onLine, the last ones kept within the size; 2 million lines in linear time", async () => {
  const seen: string[] = [];
  expect(await tailLines(stream("1\n22\n333\n4444\n"), 10, (l) => seen.push(l))).toBe("333\n4444\n");
  expect(seen).toEqual(["1", "22", "333", "4444"]);
  expect(await tailLines(stream(""), 10)).toBe("");
  const t0 = performance.now();
  const many = "warning: x\n".repeat(200_000);
  const tail = await tailLines(stream(...Array.from({ length: 10 }, () => many)), 1 << 20);
  expect(performance.now() - t0).toBeLessThan(5000);
  expect(tail.length).toBeLessThanOrEqual(1 << 20);
  expect(tail.length).toBeGreaterThan((1 << 20) - 20);
  expect(tail.endsWith("warning: x\n")).toBe(true);
});
