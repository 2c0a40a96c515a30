/**
 * c/common/kc_json.h, the JSON writer of both capture libraries' raw.json: a tiny C program
 * (c/test/json_main.c) writes a document through it, JSON.parse reads it back. Checks the escaping
 * (quotes, backslash, every control byte, UTF-8 kernel names), the commas (nested empty and
 * non-empty objects and arrays, a value written by another helper), numbers at their limits, hex,
 * bool/null, and non-finite doubles as null. Skipped without gcc.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "../..");
const haveGcc = !!Bun.which("gcc");
let tmp = "";
let exe = "";
beforeAll(() => {
  if (!haveGcc) return;
  tmp = mkdtempSync(join(tmpdir(), "kerncap-kc-json-"));
  exe = join(tmp, "json_main");
  const cc = Bun.spawnSync(
    ["gcc", "-std=gnu11", "-Wall", "-Wextra", "-Werror", `-I${join(ROOT, "c/common")}`, "-o", exe, join(ROOT, "c/test/json_main.c"), "-lm"],
    { stderr: "pipe" },
  );
  if (cc.exitCode !== 0) throw new Error(cc.stderr.toString());
});
afterAll(() => tmp && rmSync(tmp, { recursive: true, force: true }));

describe.skipIf(!haveGcc)("kc_json.h", () => {
  test("strings: quotes, backslashes, control bytes, UTF-8 names come back as written; commas and nesting parse", () => {
    const names = ['say "hi"', "back\\slash", "tab\there", "nl\nbell\x07", "kernel<float, 3>(Pair const*)", "noyau_été_核函数", "emoji 🚀", "", "\x7f del"];
    const p = Bun.spawnSync([exe, ...names], { stdout: "pipe", stderr: "pipe" });
    expect(p.exitCode).toBe(0);
    const text = p.stdout.toString();
    // no raw control byte inside the document (JSON forbids them in strings)
    expect([...text.trimEnd()].filter((c) => c.charCodeAt(0) < 0x20)).toEqual([]);
    const d = JSON.parse(text);
    expect(d.args).toEqual(names);
    expect(d.control).toBe('a\x01\x1f\t\n\r"\\b');
    expect(text).toContain("\\u0001\\u001f\\u0009");
    expect(d.null_string).toBe("");
    expect(text).toContain('"u64max":18446744073709551615');
    expect(d.i64min).toBe(-9223372036854775808);
    expect(d.va).toBe("0x7f00deadbeef");
    expect(d.bytes).toBe("00ab10");
    expect([d.yes, d.no, d.nothing]).toEqual([true, false, null]);
    expect(d.us).toBe(12.3);
    expect(text).toContain('"us":12.3,');
    expect([d.nan, d.inf]).toEqual([null, null]);
    expect(d.grid).toEqual([1, 2, 3]);
    expect(d.nested).toEqual([{}, [], { a: 1, raw: { by: "another helper" } }]);
    expect(d.empty_key_next).toBe("");
    expect(Object.keys(d)).toEqual([
      "args",
      "control",
      "null_string",
      "u64max",
      "i64min",
      "va",
      "bytes",
      "yes",
      "no",
      "nothing",
      "us",
      "nan",
      "inf",
      "grid",
      "nested",
      "empty_key_next",
    ]);
  });
});
