/**
 * The layers of src/ (scripts/layout.ts LAYERS, lowest first: base, native, util, format, replay,
 * frontends, capture, rebuild, services, ops, cli). A module may import from its own layer
 * and the layers below, never from a layer above (but the EXCEPTIONS listed there, each with its
 * reason); and no module may reach itself again through value imports (a cycle decides the order
 * in which modules evaluate, so a value read at load time may be undefined). Type-only imports
 * (`import type`, `export type`, `import { type A }`) are erased at compile time and a dynamic
 * `import()` runs when called: either may close a cycle, but both obey the layer order like any
 * other import.
 *
 * And a native library is opened (bun:ffi dlopen) in src/native/ only, so that one module holds
 * each symbol table, its error checks and its search path.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { relative } from "node:path";
import { EXCEPTIONS, importsOf, layerOf, LAYERS, sourceFiles, SRC, unitOf, valueCycles, type Import } from "../../scripts/layout.ts";

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
      .filter((e) => !EXCEPTIONS.some((x) => x.kind === "arrowUp" && x.what === `${unitOf(rel(e.from))} → ${unitOf(rel(e.to))}`))
      .map(
        (e) =>
          `${rel(e.from)}:${e.line} (${LAYERS[layerOf(rel(e.from))]![0]}) imports ${rel(e.to)} (${LAYERS[layerOf(rel(e.to))]![0]})${e.typeOnly ? " [type]" : ""}`,
      );
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
