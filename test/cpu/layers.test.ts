/**
 * The layers of src/, lowest first. A module may import from its own layer and the layers below,
 * never from a layer above; and no module may reach itself again through value imports (a cycle
 * decides the order in which modules evaluate, so a value read at load time may be undefined).
 * Type-only imports (`import type`, `export type`, `import { type A }`) are erased at compile
 * time and a dynamic `import()` runs when called: either may close a cycle, but both obey the
 * layer order like any other import.
 *
 *   0 base      src/*.ts but doctor.ts: errors, env, log, version, process-group, leftovers, cache
 *   1 native    src/native/: the one dlopen of each native library (libcuda, libhsa, libc)
 *   2 util      src/util/: formatting for people, edit distance, shell quoting, POSIX regex (libc's), whole-file writes
 *   3 format    src/format/, src/codeobj/: the capture's files and documents, module images
 *   4 engines   src/capture/, src/replay/, src/frontends/: capture, replay, each frontend's work;
 *               inside it replay/ → frontends/ → capture/, lowest first (the replay asks no
 *               frontend: its caller passes what the frontend knows; the Frontend interface has its
 *               own types, not capture's)
 *   5 rebuild   src/rebuild/: the one rebuild policy (validate and the watch)
 *   6 services  src/doctor.ts, src/check/, src/profile/, src/tune/, src/export/, src/eval/:
 *               the verbs' work above one replay (a corpus check, Nsight, a config sweep, many
 *               candidates)
 *   7 ops       src/ops/: one workflow per verb (validate, replay, profile, tune, check's
 *               per-capture work, eval) with its gates applied once: what the CLI, check's
 *               workers and the MCP server's tool children call
 *   8 cli       src/cli/, src/mcp/: argument parsing, verbs, printing; the MCP server
 *
 * And a native library is opened (bun:ffi dlopen) in src/native/ only, so that one module holds
 * each symbol table, its error checks and its search path.
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, existsSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const SRC = resolve(import.meta.dir, "../../src");

const LAYERS: [name: string, prefixes: string[]][] = [
  ["base", []], // src/*.ts: assigned below, doctor.ts excepted
  ["native", ["native/"]],
  ["util", ["util/"]],
  ["format", ["format/", "codeobj/"]],
  ["engines", ["capture/", "replay/", "frontends/"]],
  ["rebuild", ["rebuild/"]],
  ["services", ["doctor.ts", "check/", "profile/", "tune/", "export/", "eval/"]],
  ["ops", ["ops/"]],
  ["cli", ["cli/", "mcp/"]],
];

/** The layer index of a path relative to src/, or -1 when none claims it. */
export function layerOf(rel: string): number {
  for (let i = LAYERS.length - 1; i > 0; i--) if (LAYERS[i]![1].some((p) => rel === p || rel.startsWith(p))) return i;
  return rel.includes("/") ? -1 : 0;
}

export interface Import {
  from: string;
  to: string;
  /** Erased at compile time: `import type`, `export type`, `import { type A }`, `import("…").T` in a type. */
  typeOnly: boolean;
  /** A dynamic `import()`, evaluated when called (the verb table): no load-order cycle through it. */
  lazy: boolean;
  line: number;
}

/**
 * The relative imports of one module that land on a TypeScript file under src/ (static, `export
 * … from`, side-effect and dynamic `import()`); assets (`with { type: "file" }`) and packages are
 * not modules of the tree.
 */
export function importsOf(file: string, text: string): Import[] {
  const out: Import[] = [];
  const add = (spec: string, at: number, typeOnly: boolean, lazy: boolean) => {
    if (/\.tsx?$/.test(spec)) out.push({ from: file, to: resolve(dirname(file), spec), typeOnly, lazy, line: text.slice(0, at).split("\n").length });
  };
  for (const m of text.matchAll(/^\s*(import|export)\s+(type\s+)?([^"'`;]*?)\s*(?:from\s*)?["'](\.\.?\/[^"']+)["']/gm)) {
    // `import { type A, type B } from`: every named binding is a type
    const named = /^\{([^}]*)\}$/.exec(m[3]!.trim());
    const allTypes = !!named && named[1]!.split(",").map((s) => s.trim()).filter(Boolean).every((s) => s.startsWith("type "));
    add(m[4]!, m.index, !!m[2] || allTypes, false);
  }
  for (const m of text.matchAll(/\bimport\(\s*["'](\.\.?\/[^"']+)["']\s*\)(\.)?/g)) add(m[1]!, m.index, !!m[2], !m[2]);
  return out.sort((a, b) => a.line - b.line);
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((f) => /\.ts$/.test(f) && !f.endsWith(".test.ts") && !f.endsWith(".d.ts"))
    .map((f) => join(dir, f));
}

/** Cycles of the static value-import graph (Tarjan's strongly connected components of more than one module, or a self-import). */
export function valueCycles(edges: Import[]): string[][] {
  const next = new Map<string, string[]>();
  for (const e of edges) if (!e.typeOnly && !e.lazy) next.set(e.from, [...(next.get(e.from) ?? []), e.to]);
  const index = new Map<string, number>(), low = new Map<string, number>(), on = new Set<string>();
  const stack: string[] = [], sccs: string[][] = [];
  let n = 0;
  const visit = (v: string): void => {
    index.set(v, n), low.set(v, n++), stack.push(v), on.add(v);
    for (const w of next.get(v) ?? []) {
      if (!index.has(w)) visit(w), low.set(v, Math.min(low.get(v)!, low.get(w)!));
      else if (on.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const scc: string[] = [];
      let w: string;
      do (w = stack.pop()!), on.delete(w), scc.push(w);
      while (w !== v);
      if (scc.length > 1 || (next.get(v) ?? []).includes(v)) sccs.push(scc.sort());
    }
  };
  for (const v of [...next.keys()].sort()) if (!index.has(v)) visit(v);
  return sccs;
}

const files = sourceFiles(SRC);
const edges = files.flatMap((f) => importsOf(f, readFileSync(f, "utf8")));
const rel = (p: string) => relative(SRC, p);

describe("the layers of src/", () => {
  test("the import parser sees every form (and tells type-only ones apart)", () => {
    const got = importsOf(
      "/x/src/a/m.ts",
      [
        'import { a } from "./v.ts";',
        'import type { T } from "../t.ts";',
        'import { type U, type W } from "./u.ts";',
        'import { type U, v } from "./mixed.ts";',
        'export { b } from "./b.ts";',
        'export type { C } from "./c.ts";',
        'import "./side.ts";',
        'const d = await import("../d/lazy.ts");',
        'let e: import("./env.ts").Envelope;',
        'import lib from "../../c/lib.so" with { type: "file" };',
        'import { x } from "valibot";',
      ].join("\n"),
    );
    expect(got.map((e) => [relative("/x/src", e.to), e.typeOnly, e.lazy])).toEqual([
      ["a/v.ts", false, false],
      ["t.ts", true, false],
      ["a/u.ts", true, false],
      ["a/mixed.ts", false, false],
      ["a/b.ts", false, false],
      ["a/c.ts", true, false],
      ["a/side.ts", false, false],
      ["d/lazy.ts", false, true],
      ["a/env.ts", true, false],
    ]);
  });

  test("the cycle finder finds a value cycle and lets a type-only one pass", () => {
    const e = (from: string, to: string, typeOnly = false, lazy = false): Import => ({ from, to, typeOnly, lazy, line: 1 });
    expect(valueCycles([e("a", "b"), e("b", "c"), e("c", "a"), e("c", "d")])).toEqual([["a", "b", "c"]]);
    expect(valueCycles([e("a", "b"), e("b", "a", true)])).toEqual([]);
    expect(valueCycles([e("a", "b"), e("b", "a", false, true)])).toEqual([]);
  });

  test("every module of src/ belongs to a layer", () => {
    expect(files.length).toBeGreaterThan(50);
    expect(files.map(rel).filter((f) => layerOf(f) < 0)).toEqual([]);
  });

  test("no module imports from a layer above its own", () => {
    const up = edges
      .filter((e) => existsSync(e.to) && e.to.startsWith(SRC + "/"))
      .filter((e) => layerOf(rel(e.to)) > layerOf(rel(e.from)))
      .map((e) => `${rel(e.from)}:${e.line} (${LAYERS[layerOf(rel(e.from))]![0]}) imports ${rel(e.to)} (${LAYERS[layerOf(rel(e.to))]![0]})${e.typeOnly ? " [type]" : ""}`);
    expect(up).toEqual([]);
  });

  test("inside the engines layer: src/replay/ imports neither src/frontends/ nor src/capture/, src/frontends/ not src/capture/", () => {
    const rank = (r: string) => (r.startsWith("replay/") ? 0 : r.startsWith("frontends/") ? 1 : r.startsWith("capture/") ? 2 : -1);
    const up = edges
      .filter((e) => e.to.startsWith(SRC + "/") && rank(rel(e.from)) >= 0 && rank(rel(e.to)) > rank(rel(e.from)))
      .map((e) => `${rel(e.from)}:${e.line} imports ${rel(e.to)}${e.typeOnly ? " [type]" : ""}`);
    expect(up).toEqual([]);
  });

  test("dlopen is called in src/native/ only", () => {
    const opens = files.filter((f) => !rel(f).startsWith("native/") && /\bdlopen\s*\(/.test(readFileSync(f, "utf8")));
    expect(opens.map(rel)).toEqual([]);
  });

  test("no cycle of value imports", () => {
    expect(valueCycles(edges).map((c) => c.map(rel).join(" → "))).toEqual([]);
  });
});
