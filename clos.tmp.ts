import { readFileSync, existsSync } from "node:fs";
import { dirname, resolve, relative } from "node:path";
interface Import { from: string; to: string; typeOnly: boolean; lazy: boolean; line: number }
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


const target = resolve("src/frontends/index.ts");
for (const t of process.argv.slice(2)) {
  const seen = new Set<string>(); const stack = [resolve(t)];
  while (stack.length) { const f = stack.pop()!; if (seen.has(f) || !existsSync(f)) continue; seen.add(f); for (const e of importsOf(f, readFileSync(f, "utf8"))) if (!e.typeOnly && !e.lazy) stack.push(e.to); }
  console.log(t, seen.has(target));
}
