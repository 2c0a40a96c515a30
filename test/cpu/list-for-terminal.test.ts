/** src/escape.ts listForTerminal: names from someone else's folder, listed on one line of a message. */
import { expect, test } from "bun:test";
import { listForTerminal } from "../../src/escape.ts";

test("each name on one line, controls and bidi overrides escaped, the first `max` then …", () => {
  const names = ["a.cu", "b\n[kerncap] ✔ forged", "c\x1b]0;title\x07", "d\u202Ee"];
  const got = listForTerminal(names, 3);
  expect(got).not.toMatch(/[\n\x1b\x07\u202E]/);
  expect(got.startsWith("a.cu, b\\n[kerncap] ✔ forged, c")).toBe(true);
  expect(got.endsWith(", …")).toBe(true);
  expect(listForTerminal(names.slice(0, 1), 3)).toBe("a.cu");
  expect(listForTerminal([], 3)).toBe("");
});
