/** jsonErrorPosition agrees with JSON.parse on what is JSON, and says where a text stops being it. */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { describeJsonError, jsonErrorPosition } from "../../../src/format/json-position.ts";

const parses = (t: string) => {
  try {
    JSON.parse(t);
    return true;
  } catch {
    return false;
  }
};

describe("jsonErrorPosition", () => {
  test("valid exactly where JSON.parse accepts: any JSON value, and strings of JSON's own characters", () => {
    fc.assert(fc.property(fc.jsonValue(), (j) => expect(jsonErrorPosition(JSON.stringify(j, null, 2))).toBeUndefined()));
    const piece = fc.constantFrom("{", "}", "[", "]", ",", ":", '"', "\\", "u", "0", "1", "-", ".", "e", "+", "true", "null", "a", " ", "\n");
    fc.assert(
      fc.property(
        fc.array(piece, { maxLength: 12 }).map((a) => a.join("")),
        (t) => expect(jsonErrorPosition(t) === undefined).toBe(parses(t)),
      ),
      { numRuns: 2000 },
    );
  });

  test("every proper prefix of an object or array is truncated, at its end", () => {
    fc.assert(
      fc.property(fc.oneof(fc.object(), fc.array(fc.jsonValue())), fc.nat(), (o, k) => {
        const t = JSON.stringify(o, null, 2);
        const cut = t.slice(0, k % t.length);
        expect(jsonErrorPosition(cut)).toMatchObject({ offset: cut.length, truncated: true });
      }),
    );
  });

  test("line and column of the first bad byte; a truncated manifest said as such", () => {
    expect(jsonErrorPosition('{\n  "a": 1,\n  b: 2\n}')).toEqual({ offset: 14, line: 3, column: 3, truncated: false });
    expect(describeJsonError('{\n  "a": 1,\n  b: 2\n}')).toBe("at line 3, column 3");
    expect(describeJsonError('{\n  "regions": [\n    {"va": "0x6')).toBe("truncated: it ends inside a value, at line 3, column 16 (32 bytes)");
    expect(describeJsonError('{"a": 1} x')).toBe("at line 1, column 10");
    expect(describeJsonError("[1, 2]")).toBe("");
  });
});

describe("jsonDepth", () => {
  test("counts brackets outside strings only: escaped quotes, brackets in strings, scalars", async () => {
    const { jsonDepth } = await import("../../../src/format/json-position.ts");
    expect(jsonDepth("1")).toBe(0);
    expect(jsonDepth('{"a":[1,{"b":[]}]}')).toBe(4);
    expect(jsonDepth('{"a":"[[[{{{\\"]]]"}')).toBe(1);
    expect(jsonDepth(`${"[".repeat(1000)}${"]".repeat(1000)}`)).toBe(1000);
    fc.assert(
      fc.property(fc.jsonValue(), (v) => {
        const depth = (x: unknown): number => (x !== null && typeof x === "object" ? 1 + Math.max(0, ...Object.values(x as object).map(depth)) : 0);
        return jsonDepth(JSON.stringify(v)) === depth(v);
      }),
    );
  });
});
