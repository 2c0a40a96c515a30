/**
 * The shape of src/, measured: its layers, the import graph between its folders and top files
 * (arrows, arrows running back up the layers, import circles), and the size of its files and
 * functions. Read by the architecture tests (test/cpu/layers.test.ts,
 * test/cpu/architecture.test.ts) and printed by scripts/measure-layout.ts (docs/layout.md holds
 * the figures). Reads the source text only: no module of src/ is loaded.
 *
 * The layers, lowest first. A module may import from its own layer and those below, never from one
 * above. Type-only imports (`import type`, `export type`, `import { type A }`) and a dynamic
 * `import()` obey the layer order like any other import.
 *
 *    0 base       src/*.ts but doctor.ts: errors, env, log, version, process-group, leftovers, cache
 *    1 native     src/native/: the one dlopen of each native library (libcuda, libhsa, libc)
 *    2 util       src/util/: formatting for people, edit distance, shell quoting, POSIX regex, whole-file writes, self-exec
 *    3 format     src/format/, src/codeobj/: the capture's files and documents, module images
 *    4 replay     src/replay/: the replay engine over its backends (src/replay/backends/)
 *    5 frontends  src/frontends/: what differs between CUDA C++, Triton and HIP kernels
 *    6 capture    src/capture/: the application run with a capture library injected
 *    7 rebuild    src/rebuild/: the one rebuild policy (validate and the watch)
 *    8 services   src/doctor.ts, src/check/, src/profile/, src/tune/, src/export/, src/eval/: the
 *                 verbs' work above one replay (a corpus check, Nsight, a config sweep, many candidates)
 *    9 ops        src/ops/: one workflow per verb with its gates applied once: what the CLI,
 *                 check's workers and the MCP server's tool children call
 *   10 cli        src/cli/, src/mcp/: argument parsing, verbs, printing; the MCP server
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import ts from "typescript";

export const SRC = resolve(import.meta.dir, "../src");

export const LAYERS: [name: string, prefixes: string[]][] = [
  ["base", []], // src/*.ts: assigned below, doctor.ts excepted
  ["native", ["native/"]],
  ["util", ["util/"]],
  ["format", ["format/", "codeobj/"]],
  ["replay", ["replay/"]],
  ["frontends", ["frontends/"]],
  ["capture", ["capture/"]],
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
    const allTypes =
      !!named &&
      named[1]!
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean)
        .every((s) => s.startsWith("type "));
    add(m[4]!, m.index, !!m[2] || allTypes, false);
  }
  for (const m of text.matchAll(/\bimport\(\s*["'](\.\.?\/[^"']+)["']\s*\)(\.)?/g)) add(m[1]!, m.index, !!m[2], !m[2]);
  return out.sort((a, b) => a.line - b.line);
}

/** The modules of a source tree: every .ts file but tests and declarations. */
export function sourceFiles(dir = SRC): string[] {
  return readdirSync(dir, { recursive: true, encoding: "utf8" })
    .filter((f) => /\.ts$/.test(f) && !f.endsWith(".test.ts") && !f.endsWith(".d.ts"))
    .sort()
    .map((f) => join(dir, f));
}

/**
 * Strongly connected components of more than one module (or a self-import) of the graph of
 * `edges` that `keep` accepts (Tarjan), each sorted.
 */
export function cyclesOf(edges: Import[], keep: (e: Import) => boolean): string[][] {
  const next = new Map<string, string[]>();
  for (const e of edges) if (keep(e)) next.set(e.from, [...(next.get(e.from) ?? []), e.to]);
  const index = new Map<string, number>(),
    low = new Map<string, number>(),
    on = new Set<string>();
  const stack: string[] = [],
    sccs: string[][] = [];
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

/** Cycles of the static value-import graph: they decide the order in which modules evaluate, so a value read at load time may be undefined. */
export function valueCycles(edges: Import[]): string[][] {
  return cyclesOf(edges, (e) => !e.typeOnly && !e.lazy);
}

/** Import circles: cycles of every static import, type-only ones included (a dynamic import() is not followed). */
export function importCircles(edges: Import[]): string[][] {
  return cyclesOf(edges, (e) => !e.lazy);
}

/** The folder or top file of src/ a module belongs to ("replay", "doctor.ts"): the nodes of the arrows. */
export function unitOf(rel: string): string {
  const i = rel.indexOf("/");
  return i < 0 ? rel : rel.slice(0, i);
}

/** One function of a module and its length (lines, from its first line to its last). */
export interface FunctionSize {
  file: string;
  name: string;
  line: number;
  lines: number;
}

/** Every function, method, constructor, accessor and arrow function of a module, with its length in lines. */
export function functionSizes(file: string, text: string): FunctionSize[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const out: FunctionSize[] = [];
  const nameOf = (n: ts.Node): string => {
    const named = (n as { name?: ts.Node }).name;
    if (named && (ts.isIdentifier(named) || ts.isPrivateIdentifier(named) || ts.isStringLiteral(named))) return named.text;
    if (ts.isConstructorDeclaration(n)) return "constructor";
    const p = n.parent;
    if (p && (ts.isVariableDeclaration(p) || ts.isPropertyAssignment(p) || ts.isPropertyDeclaration(p)) && ts.isIdentifier(p.name)) return p.name.text;
    return "(anonymous)";
  };
  const visit = (n: ts.Node): void => {
    if (ts.isFunctionLike(n) && (n as { body?: ts.Node }).body) {
      const first = sf.getLineAndCharacterOfPosition(n.getStart(sf)).line;
      const last = sf.getLineAndCharacterOfPosition(n.getEnd()).line;
      out.push({ file, name: nameOf(n), line: first + 1, lines: last - first + 1 });
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return out;
}

/** The measures of docs/layout.md. Paths relative to src/. */
export interface LayoutMeasures {
  /** Folders and top files of src/ (the nodes of the arrows). */
  units: number;
  layers: number;
  modules: number;
  /** Distinct imports from one folder or top file to another (every kind). */
  arrows: number;
  /** Those running from a lower layer to a higher one, with one import that makes each. */
  arrowsUp: { from: string; to: string; via: string }[];
  /** Import circles (type-only imports included), each its modules. */
  circles: string[][];
  /** Those whose modules lie in more than one folder. */
  circlesAcrossFolders: string[][];
  valueCycles: string[][];
  /** The ten largest files (lines), largest first. */
  largestFiles: { file: string; lines: number }[];
  /** Files over the file limit (lines), largest first. */
  filesOver: { file: string; lines: number }[];
  /** Functions over the function limit (lines), longest first. */
  longFunctions: FunctionSize[];
}

/** Measure src/ (or another tree laid out the same way). */
export function measureLayout(src = SRC, limits = { file: 600, function: 100 }): LayoutMeasures {
  const files = sourceFiles(src);
  const rel = (p: string) => relative(src, p);
  const texts = new Map(files.map((f) => [f, readFileSync(f, "utf8")]));
  const edges = files.flatMap((f) => importsOf(f, texts.get(f)!)).filter((e) => texts.has(e.to));
  const arrows = new Map<string, Import>();
  for (const e of edges) {
    const a = unitOf(rel(e.from)),
      b = unitOf(rel(e.to));
    if (a !== b && !arrows.has(`${a} ${b}`)) arrows.set(`${a} ${b}`, e);
  }
  const arrowsUp = [...arrows.entries()]
    .filter(([, e]) => layerOf(rel(e.to)) > layerOf(rel(e.from)))
    .map(([k, e]) => ({ from: k.split(" ")[0]!, to: k.split(" ")[1]!, via: `${rel(e.from)}:${e.line} imports ${rel(e.to)}` }));
  const circles = importCircles(edges).map((c) => c.map(rel));
  const sizes = files
    .map((f) => ({ file: rel(f), lines: texts.get(f)!.split("\n").length - (texts.get(f)!.endsWith("\n") ? 1 : 0) }))
    .sort((a, b) => b.lines - a.lines);
  const fns = files.flatMap((f) => functionSizes(rel(f), texts.get(f)!));
  return {
    units: new Set(files.map((f) => unitOf(rel(f)))).size,
    layers: LAYERS.length,
    modules: files.length,
    arrows: arrows.size,
    arrowsUp,
    circles,
    circlesAcrossFolders: circles.filter((c) => new Set(c.map((f) => dirname(f))).size > 1),
    valueCycles: valueCycles(edges).map((c) => c.map(rel)),
    largestFiles: sizes.slice(0, 10),
    filesOver: sizes.filter((s) => s.lines > limits.file),
    longFunctions: fns.filter((f) => f.lines > limits.function).sort((a, b) => b.lines - a.lines),
  };
}

/**
 * The exceptions the architecture tests accept for now, each with its reason: reshapings under
 * way. Keep it short; an entry that no longer holds fails the tests (delete it then).
 *   arrowUp: "from-unit → to-unit"; circle: the circle's first module; file, function: "file" / "file name".
 */
export const EXCEPTIONS: { kind: "arrowUp" | "circle" | "file" | "function"; what: string; why: string }[] = [];

/** The measures that break the rules (0 arrows up, circles inside one folder, files ≤ 600 lines, functions ≤ 100) and the EXCEPTIONS that are not used. */
export function layoutViolations(m: LayoutMeasures, exceptions = EXCEPTIONS): { violations: string[]; unused: string[] } {
  const found = [
    ...m.arrowsUp.map((a) => ({ kind: "arrowUp", what: `${a.from} → ${a.to}`, text: `arrow up: ${a.from} → ${a.to} (${a.via})` })),
    ...m.circlesAcrossFolders.map((c) => ({ kind: "circle", what: c[0]!, text: `circle across folders: ${c.join(" ↔ ")}` })),
    ...m.filesOver.map((f) => ({ kind: "file", what: f.file, text: `file over 600 lines: ${f.file} (${f.lines})` })),
    ...m.longFunctions.map((f) => ({
      kind: "function",
      what: `${f.file} ${f.name}`,
      text: `function over 100 lines: ${f.file}:${f.line} ${f.name} (${f.lines})`,
    })),
  ];
  const allowed = (x: { kind: string; what: string }) => exceptions.some((e) => e.kind === x.kind && e.what === x.what);
  return {
    violations: found.filter((x) => !allowed(x)).map((x) => x.text),
    unused: exceptions.filter((e) => !found.some((x) => x.kind === e.kind && x.what === e.what)).map((e) => `${e.kind} ${e.what}`),
  };
}
