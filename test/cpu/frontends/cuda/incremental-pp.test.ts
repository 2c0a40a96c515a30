/**
 * Incremental preprocessing (src/frontends/cuda/incremental-pp.ts) against gcc itself: a small project
 * (a primary file, project headers with #pragma once and include guards, a system header whose
 * macros the project uses), preprocessed whole with g++ -E -dD, then edited; the output
 * assembled from the previous one and the synthetic TU must say what g++ -E says of the edited
 * project, line by line with file, line, include depth and system-header flags; and where the
 * model is known not to hold (the edited header included again after the cut, when a tail
 * includes a file) the verification must see the difference. Skips without g++.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { statSync } from "node:fs";
import {
  assemble,
  macroTable,
  parseBase,
  planIncremental,
  scanLines,
  stripMacroLines,
  verifyAssembled,
} from "../../../../src/frontends/cuda/incremental-pp.ts";
import { pragmaOnceKnown, rememberPragmaOnce } from "../../../../src/frontends/cuda/pragma-once.ts";

const GXX = Bun.which("g++");
const WORK = mkdtempSync(join(tmpdir(), "kerncap-incpp-"));
afterAll(() => rmSync(WORK, { recursive: true, force: true }));

const FILES: Record<string, string> = {
  "sys/sysdefs.h": [
    "#ifndef SYSDEFS_H",
    "#define SYSDEFS_H",
    "#define SYS_ATTR(x) __attribute__((x))",
    "#define SYS_ONE 1",
    "typedef int sys_int;",
    "#endif",
    "",
  ].join("\n"),
  "inc/common.h": ["#pragma once", "#include <sysdefs.h>", "#define SCALE 3", "struct common_t { int v; };", ""].join("\n"),
  "inc/guarded.h": ["#ifndef GUARDED_H", "#define GUARDED_H", '#include "common.h"', "inline int twice(int x) { return 2 * x; }", "#endif", ""].join("\n"),
  "inc/kernel.h": [
    "#pragma once",
    '#include "common.h"',
    '#include "guarded.h"',
    "#define LOCAL(x) ((x) + SCALE)",
    "#if SYS_ONE",
    "SYS_ATTR(noinline) int f(int a) {",
    "  int r = LOCAL(a);",
    "  const char* where = __FILE__; (void)where;",
    "  return r + __LINE__;",
    "}",
    "#else",
    "int f(int a) { return a; }",
    "#endif",
    "int g(int b) {",
    "  return twice(b)",
    "    + SCALE;",
    "}",
    "#ifdef NEVER_DEFINED",
    "int unused_h(void);",
    "#endif",
    "int tail_fn(int c) { return c * SYS_ONE; }",
    "",
  ].join("\n"),
  "inc/nested.h": ["#pragma once", '#include "kernel.h"', "int nested_fn(int d) { return f(d) + g(d); }", ""].join("\n"),
  "main.cc": ['#include "nested.h"', "int main() { return nested_fn(1) + tail_fn(2); }", ""].join("\n"),
  // ggml's shape: every header #pragma once and including the common header, a TU that includes the edited header and then headers that include it (and the common one) again
  "inc/quant.h": ["#pragma once", '#include "common.h"', '#include "kernel.h"', "inline int quant(int q) { return f(q) / SCALE; }", ""].join("\n"),
  "inc/another.h": ["#pragma once", "int another_fn(int z);", ""].join("\n"),
  "mmq.cc": ['#include "common.h"', '#include "kernel.h"', '#include "quant.h"', "int main() { return quant(1) + g(2); }", ""].join("\n"),
  // kerncap's slice: comment lines, then a #line that names it after its TU
  "slice.cc": [
    "// kerncap slice of main.cc",
    "// generated",
    '#line 1 "main.cc"',
    '#include "nested.h"',
    "int main() { return nested_fn(1) + tail_fn(2); }",
    "",
  ].join("\n"),
};

function project(name: string): string {
  const d = join(WORK, name);
  for (const [rel, text] of Object.entries(FILES)) {
    mkdirSync(join(d, rel, ".."), { recursive: true });
    writeFileSync(join(d, rel), text);
  }
  return d;
}

const pp = (d: string, primary: string, out: string) => {
  const p = Bun.spawnSync([GXX!, "-E", "-dD", "-isystem", join(d, "sys"), "-I", join(d, "inc"), primary, "-o", out], { cwd: d, stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(p.stderr.toString());
  return readFileSync(out, "latin1");
};

/** Edit `file` of a fresh project; returns what verifyAssembled says (null: the same as g++ on the whole TU) and the plan. */
function incremental(name: string, file: string, edit: (s: string) => string, main = "main.cc", before?: (d: string) => void) {
  const d = project(name);
  before?.(d);
  const primary = join(d, main);
  const base = parseBase(pp(d, primary, join(d, "base.ii")));
  const path = join(d, file);
  const old = readFileSync(path, "utf8");
  const now = edit(old);
  expect(now).not.toBe(old);
  writeFileSync(path, now);
  const plan = planIncremental(base, path, old, now, (p) => readFileSync(p, "utf8"));
  if ("reason" in plan) throw new Error(plan.reason);
  for (const [p, t] of plan.files) writeFileSync(p, t);
  const synth = pp(d, plan.primary, join(d, "synth.ii"));
  const full = pp(d, primary, join(d, "full.ii"));
  const asm = assemble(base, plan.cut, synth);
  expect(asm).not.toBeNull();
  return { differs: verifyAssembled(asm!, full), plan, asm: asm!, full };
}

describe.skipIf(!GXX)("incremental preprocessing against g++ -E", () => {
  test("an edit in a function body after the includes: cut at the edit's statement, same output as the whole TU (__FILE__, __LINE__, a system header's macro)", () => {
    const r = incremental("body", "inc/kernel.h", (s) => s.replace("  int r = LOCAL(a);", "  int r = LOCAL(a) * 2;"));
    expect(r.differs).toBeNull();
    expect(r.plan.fromLine).toBeGreaterThan(4); // after the #includes and #define, inside the taken #if
    expect(r.asm.text).toContain("((a) + 3) * 2;"); // the edit, its macros expanded
    expect(stripMacroLines(r.asm.text)).not.toMatch(/^#define /m);
  });
  test("no tail includes a file (an edit after the includes, included from headers that include nothing after it): no header is included again before the sentinel, and the output is the whole TU's", () => {
    for (const [name, edit] of [
      ["quiet-body", (s: string) => s.replace("  int r = LOCAL(a);", "  int r = LOCAL(a) - 1;")],
      ["quiet-append", (s: string) => s + "// kerncap bench watch edit 1\n"],
    ] as const) {
      const r = incremental(name, "inc/kernel.h", edit);
      expect(r.differs, name).toBeNull();
      const synthetic = [...r.plan.files.values()].join("\n");
      // common.h (#pragma once) was entered and left before the cut: not seen again (the synthetic TU's own chain is all it includes)
      expect(synthetic, name).not.toContain(`#include "${join(WORK, name, "inc/common.h")}"`);
      expect(synthetic.match(/^#include /gm)?.length ?? 0, name).toBe(r.plan.files.size - 1);
    }
  });
  test("an edit after a statement that spans lines: the cut goes before it", () => {
    const r = incremental("span", "inc/kernel.h", (s) => s.replace("    + SCALE;", "    + SCALE + 1;"));
    expect(r.differs).toBeNull();
    expect(r.plan.fromLine).toBeLessThanOrEqual(15); // not between `return twice(b)` and its continuation
  });
  test("an edit at the end of a file included from a header included from the primary file", () => {
    const r = incremental("nested", "inc/nested.h", (s) => s + "int more(int e) { return e + SCALE; }\n");
    expect(r.differs).toBeNull();
  });
  test("a primary file that renames itself with #line (kerncap's slice): its tail is read at the real line of its #include", () => {
    const r = incremental("renamed", "inc/nested.h", (s) => s.replace("f(d) + g(d)", "f(d) - g(d)"), "slice.cc");
    expect(r.differs).toBeNull();
  });
  test("kerncap's slice remade after an edit of its TU: its first line (the TU's sha256) changes too, the cut is at the edit", () => {
    const r = incremental(
      "slice-edit",
      "slice.cc",
      (s) => s.replace("// kerncap slice of main.cc", "// kerncap slice of main.cc sha256=feed").replace("tail_fn(2)", "tail_fn(3)"),
      "slice.cc",
    );
    expect(r.differs).toBeNull();
    expect(r.plan.fromLine).toBeGreaterThan(1);
  });
  test("an edit inside a group whose branch left nothing in the output: the cut moves before its #ifdef", () => {
    const r = incremental("untaken", "inc/kernel.h", (s) => s.replace("int unused_h(void);", "int unused_h(int);"));
    expect(r.differs).toBeNull();
    expect(r.plan.fromLine).toBeLessThanOrEqual(18);
  });
  test("an edit of the first line: the file itself is included (its #pragma once holds)", () => {
    const r = incremental("first", "inc/kernel.h", (s) => "// edited\n" + s);
    expect(r.differs).toBeNull();
    expect(r.plan.fromLine).toBe(1);
  });
  test("a #pragma once header included again after the cut is skipped, as g++ skips it on the whole TU", () => {
    // common.h was entered before the cut; the edit's new #include of it
    const r = incremental("once", "inc/kernel.h", (s) => s.replace("int tail_fn(int c)", '#include "common.h"\nint tail_fn(int c)'));
    expect(r.differs).toBeNull();
    expect(r.plan.fromLine).toBeGreaterThan(1);
  });
  test("ggml's shape: a line appended to the edited header, then headers that include it and the common header again (#pragma once): the whole TU's output", () => {
    for (const [name, edit] of [
      ["append", (s: string) => s + "// kerncap bench watch edit 1\n"],
      ["body", (s: string) => s.replace("  int r = LOCAL(a);", "  int r = LOCAL(a) + 1;\n  r += 2;")], // the lines after it move down
    ] as const) {
      const r = incremental(`ggml-${name}`, "inc/kernel.h", edit, "mmq.cc");
      expect(r.differs, name).toBeNull();
      expect(r.plan.fromLine, name).toBeGreaterThan(1);
      expect(stripMacroLines(r.asm.text).match(/inline int quant\(/g), name).toHaveLength(1);
    }
  });
  test("the edited header included again after the cut, where its tail includes a file: a difference the verification sees", () => {
    // kernel.h is open at the cut and its tail includes another.h: it is not marked seen before the tail, and quant.h's #include of it is not skipped
    const r = incremental("ggml-tail-include", "inc/kernel.h", (s) => s + '#include "another.h"\n', "mmq.cc");
    expect(r.differs).not.toBeNull();
  });
});

describe.skipIf(!GXX)("the #pragma once answers a previous process kept (validate: one process per edit)", () => {
  const keyOf = (path: string, mtimeMs?: number) => {
    const st = statSync(path);
    return `${path}\0${st.size}\0${mtimeMs ?? st.mtimeMs}`;
  };
  const append = (s: string) => s + "// kerncap bench watch edit 1\n";
  test("kept answers: what this process read is offered to the next; an answer is used while the header's path, size and mtime hold", () => {
    const r = incremental("once-kept", "inc/kernel.h", append, "mmq.cc");
    expect(r.differs).toBeNull();
    const common = join(WORK, "once-kept", "inc/common.h");
    expect(pragmaOnceKnown()).toContainEqual([keyOf(common), true]);
    // a wrong answer under the header's present key is believed (so the kept ones are what is read): common.h, entered
    // before the cut, is not seen once before the tail, the edit's #include of it is not skipped, and the verification sees it
    const reinclude = (s: string) => s.replace("int tail_fn(int c)", '#include "common.h"\nint tail_fn(int c)');
    expect(incremental("once-right", "inc/kernel.h", reinclude).differs).toBeNull();
    const wrong = incremental("once-wrong", "inc/kernel.h", reinclude, "main.cc", (d) => rememberPragmaOnce([[keyOf(join(d, "inc/common.h")), false]]));
    expect(wrong.differs).not.toBeNull();
  });
  test("a stale answer (the header's mtime another) is not used: the plan is the one made without kept answers", () => {
    let staleKey = "";
    const r = incremental("once-stale", "inc/kernel.h", append, "mmq.cc", (d) => {
      const common = join(d, "inc/common.h");
      staleKey = keyOf(common, statSync(common).mtimeMs - 5000);
      rememberPragmaOnce([[staleKey, false], ["not an entry"], [1, true]]);
    });
    expect(r.differs).toBeNull();
    expect([...r.plan.files.values()].join("\n")).toContain(`#include "${join(WORK, "once-stale", "inc/common.h")}"`);
    expect(pragmaOnceKnown().filter(([k]) => k === staleKey)).toEqual([[staleKey, false]]); // kept, never asked
  });
  test("macroTable: the same table when asked twice at one cut and after another cut (the pass over the base is kept per cut)", () => {
    const d = project("macros");
    const base = parseBase(pp(d, join(d, "mmq.cc"), join(d, "base.ii")));
    const at = (cut: number) => [macroTable(base, cut), macroTable(base, cut, true)];
    const cut = base.lines.length - 2;
    const first = at(cut);
    expect(first[0]).toContain("#define SCALE 3");
    expect(at(5)[0]).not.toContain("#define SCALE 3");
    expect(at(cut)).toEqual(first);
    expect(macroTable(parseBase(base.lines.join("\n")), cut, true)).toBe(first[1]!);
  });
});

describe("scanLines: where a cut may go", () => {
  test("a comment, a continued directive, an open parenthesis or a name at the end of the previous line spans into the next line", () => {
    const s = scanLines(["int a;", "/* x", "y */ int b;", "#define M(x) \\", "  x", "f(1,", "2);", "int c = FOO", "(1);", "int d;"].join("\n"), 11)!;
    const clean = s.map((x) => x.clean);
    expect(clean).toEqual([true, true, false, true, false, true, false, true, false, true, true]);
  });
  test("the conditional groups open at each line: the #if and the branch", () => {
    const s = scanLines(["#if A", "x", "#else", "y", "#endif", "z"].join("\n"), 6)!;
    expect(s[1]!.open).toEqual([{ ifLine: 1, branchLine: 1 }]);
    expect(s[3]!.open).toEqual([{ ifLine: 1, branchLine: 3 }]);
    expect(s[5]!.open).toEqual([]);
  });
  test("a raw string literal: no answer", () => {
    expect(scanLines('const char* s = R"(x\n)";', 2)).toBeNull();
  });
});
