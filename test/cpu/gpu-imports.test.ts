/**
 * The GPU suite runs on a node that has no node_modules: test/gpu/*.ts run under the kerncap
 * binary's own Bun (scripts/gpu-test.sh, BUN_BE_BUN=1), which resolves `node:` and `bun:` modules
 * only. So every module a GPU test reaches through static value imports must import no package
 * (consola, valibot, …); a `import type` is erased and a dynamic `import()` is not followed here,
 * since the GPU tests call none. (A share test once imported src/format/trust.ts, which imports
 * the logger: "Cannot find package 'consola'" on the node, and the whole file failed.)
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "../..");
const GPU = join(ROOT, "test/gpu");

/** Static, value import specifiers of a module (type-only imports and `import()` left out). */
export function valueSpecifiers(text: string): string[] {
  const out: string[] = [];
  const code = text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, ""); // comments are not imports
  for (const m of code.matchAll(/^\s*(import|export)\s+(type\s+)?([^"'`;]*?)\s*(?:from\s*)?["']([^"']+)["'](\s*with\s*\{[^}]*\})?/gm)) {
    if (m[2] || m[5]) continue; // import type …; an asset (with { type: "file" })
    const named = /^\{([^}]*)\}$/.exec(m[3]!.trim());
    if (
      named &&
      named[1]!
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean)
        .every((s) => s.startsWith("type "))
    )
      continue;
    if (m[1] === "export" && !/\bfrom\b/.test(m[0])) continue; // `export { a }` of local names
    out.push(m[4]!);
  }
  return out;
}

/** Every package a module reaches, with the import chain that reaches it. */
function packagesReached(entry: string): { pkg: string; chain: string[] }[] {
  const found: { pkg: string; chain: string[] }[] = [];
  const seen = new Set<string>();
  const walk = (file: string, chain: string[]) => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const spec of valueSpecifiers(readFileSync(file, "utf8"))) {
      if (spec.startsWith("node:") || spec.startsWith("bun:")) continue;
      if (spec.startsWith(".")) {
        if (/\.tsx?$/.test(spec)) walk(resolve(dirname(file), spec), [...chain, relative(ROOT, resolve(dirname(file), spec))]);
        else if (spec.endsWith(".json")) continue; // Bun reads JSON itself
        continue;
      }
      found.push({ pkg: spec, chain });
    }
  };
  walk(entry, [relative(ROOT, entry)]);
  return found;
}

describe("GPU tests import no package (the GPU node has no node_modules)", () => {
  test("the parser keeps value imports and drops type-only ones and assets", () => {
    expect(
      valueSpecifiers(
        [
          'import { a } from "./a.ts";',
          'import type { T } from "valibot";',
          'import { type U } from "consola";',
          'import lib from "../c/x.so" with { type: "file" };',
          'export { b } from "fflate";',
          'import { c, type D } from "citty";',
          '/** a comment: import { x } from "y" */',
          '// import "z";',
        ].join("\n"),
      ),
    ).toEqual(["./a.ts", "fflate", "citty"]);
  });
  const files = readdirSync(GPU).filter((f) => f.endsWith(".ts"));
  test("there are GPU test files to check", () => expect(files.length).toBeGreaterThan(5));
  for (const f of files)
    test(f, () => {
      const got = packagesReached(join(GPU, f)).map((x) => `${x.pkg} via ${x.chain.join(" → ")}`);
      expect(got).toEqual([]);
    });
});
