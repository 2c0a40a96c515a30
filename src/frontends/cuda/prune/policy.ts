/**
 * Device-side pruning of a preprocessed CUDA translation unit (issue 14: "compile only what the
 * kernel needs"). A CUDA TU that includes a real project's headers is mostly host code: ggml's
 * mul_mat_q slice preprocesses to 120 000 lines (libstdc++'s <string>, <vector>,
 * <unordered_map>, <memory>, <mutex>, the CUDA runtime headers, ggml's host structures), and
 * measured on the H200, 86% of its rebuild is cicc parsing those headers before any code of the
 * kernel is made (scripts/nvcc-phases.sh). nvcc has no precompiled headers; the EDG PCH options
 * that cicc accepts crash when used (CUDA 13.0: --create_pch works, --use_pch segfaults), and
 * NVRTC's PCH cannot read gcc-preprocessed libstdc++ (NVRTC has no GNU mode: __extension__,
 * _Float32) nor CUDA's own headers next to its built-in ones.
 *
 * So the device compile is given less to parse. The gcc-preprocessed TU (nvcc's own first step,
 * `-E` with __CUDA_ARCH__ defined: the file cicc reads) is split into namespace-scope
 * declarations; starting from every declaration of the primary file (the slice: the kernel's
 * definition or the line that instantiates it), a declaration is kept when a kept one names it,
 * and the rest become blank lines (line numbers, hence compiler messages, stay the same):
 * - every declaration of a referenced name is kept (all overloads, all specializations), so
 *   overload resolution and template specialization see what they saw;
 * - a host-only function definition (no device/global attribute, not constexpr, not auto) is
 *   never compiled for the device: a free one becomes a declaration, an out-of-class member
 *   definition is dropped (its class keeps the member's declaration); names only its body used
 *   are not needed;
 * - operators, and free functions and class-template specializations of the system headers
 *   (libstdc++, libc, the CUDA toolkit's) whose parameters or arguments name classes, are kept
 *   when those classes are needed (std::swap(vector&, vector&) does not need to bring <vector>
 *   because `swap` is used);
 * - member names (after `.`, `->`, `Class::`), template parameter names, attribute names, the
 *   name a local variable declares, are not references (a trailing return type after `) ->`,
 *   `(T)::f`, a namespace alias's `cg::x` are);
 * - every __device__ / __constant__ variable defined outside a template is kept: ptxas writes the
 *   module's variable offsets into the kernel's code, so an unused table that goes changes it;
 * - every __global__ function defined outside a template (and every explicit instantiation of a
 *   kernel template) is kept, with what it names: the full build's module always has them, and
 *   their strings (`assert`'s message, file and function name) are `.global` variables that take
 *   slots in constant bank 4, the module's table of addresses the kernel's code reads by offset
 *   (llm.c: a header's other kernels moved `__assertfail`'s slot from 0x20 to 0x0, and
 *   `layernorm_forward_kernel6`'s `MOV R0, 0x20; LDC.64 R2, c[0x4][R0]; CALL.ABS.NOINC R2`
 *   became `MOV R0, 0x0`). Kernel templates that only host code instantiates are not kept;
 *   where they change the layout, the machine-code check refuses the pruned build;
 * - a pragma that applies to the next declaration (`#pragma nv_exec_check_disable`) goes with a
 *   dropped declaration, and pragmas inside dropped text go; line markers always stay;
 * - a using-declaration `using N::x;` stays only while a declaration of x in N before it stays
 *   (libstdc++ 13's `using __exception_ptr::swap;` at std scope: kept for std::swap, it named
 *   the exception_ptr overload that went with its class, and cicc stops at it);
 * - a requires-clause after a template header is part of the declaration (C++20 <ostream>:
 *   `requires … && requires (_Os& __os, …) { … } using … = _Os&&;`), its braces no body.
 * What cannot be told apart is kept. The result is only ever used when it compiles, and the
 * first build of a watch compares the kernel's machine code with that of the full build
 * (src/frontends/cuda/fast-build.ts): any doubt falls back to the full compile.
 *
 * Measured (CPU, cicc alone, CUDA 13.0): ggml's mul_mat_q<q4_0> slice 79 847 → 17 441 non-blank
 * lines (15 670 before every __device__/__constant__ variable was kept; cicc 2.26 s → 0.66 s
 * then, about 3% more now), the kernel's SASS identical to the full build's.
 */
import { ALWAYS, ATTRIBUTE_WORDS, isName, type Tokens } from "./tokens.ts";
import { type Item, skipTemplateHeaders, words } from "./declarations.ts";
import { type DeclInfo, templateParams } from "./names.ts";
import { prunedText, type PrunedTextMemo } from "./text.ts";

export interface PruneResult {
  /** The pruned preprocessed TU (same line count as the input). */
  text: string;
  /** Namespace-scope declarations in the input, and kept (host-only definitions made declarations count as kept). */
  decls: number;
  kept: number;
  /** Non-blank lines before and after (counted when asked: a scan of both texts). */
  lines(): { before: number; after: number };
  /** Time the pruning took (ms). */
  ms: number;
}

const nonBlankLines = (s: string) => {
  let n = 0,
    blank = true;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 10) {
      if (!blank) n++;
      blank = true;
    } else if (c !== 32 && c !== 9 && c !== 13) blank = false;
  }
  return blank ? n : n + 1;
};

/**
 * What finish computed per item, kept for the next call on a text with the same first items
 * (./cache.ts: a warm prune): the include depths and files, and where prunedText's output stood
 * before each declaration with what it did with it. Memory only (not in the state file).
 */
export interface FinishMemo extends PrunedTextMemo {
  depthOf: Int32Array;
  fileOf: string[];
  sysOf: Uint8Array;
  /** The first item whose line marker was read (the depths count from there); items.length when none. */
  firstMarker: number;
  /** The declarations' analyses these were made from (the state's). */
  info: (DeclInfo | undefined)[];
  /** Each name's declarations (item indices, ascending): taken over and updated by the next call. */
  byName: Map<string, number[]>;
  /** Per item: 1 when kept whatever else is (keptDeclarations' starting set), else 0. */
  seed: Uint8Array;
}

/**
 * The pruning of a split, analysed TU (./cache.ts): which declarations are kept (keptDeclarations,
 * then dropDanglingUsings), and the text with the others blanked (prunedText).
 * @param prev the memo of the last call and how many of its first items this call's items are
 *   (same tokens, same text up to their end): what those items gave is reused, not computed again
 * @returns the result, and the memo for the next call
 */
export function finish(
  text: string,
  t: Tokens,
  items: Item[],
  info: (DeclInfo | undefined)[],
  namespaces: Set<string>,
  t0: number,
  prev?: { memo: FinishMemo; items: number; sameInfo: boolean },
): { result: PruneResult; memo: FinishMemo } {
  const reuse = prev ? Math.min(prev.items, items.length, prev.memo.depthOf.length) : 0;
  const where = includeDepths(t, items, reuse > 0 ? prev!.memo : undefined, reuse);
  const decl: number[] = [];
  items.forEach((it, idx) => {
    if (it.kind === "decl") decl.push(idx);
  });
  const classNames = new Set<string>();
  for (const idx of decl) if (info[idx]!.classlike) for (const d of info[idx]!.defs) classNames.add(d);
  const { gates, ops } = gatesOf(decl, info, classNames, where.isSystem, namespaces);
  // what depends on the analyses only: the reused items' part is the last call's when their analyses are
  const infoReuse = prev?.sameInfo ? reuse : 0;
  const byName = declarationsByName(decl, info, infoReuse > 0 ? prev!.memo : undefined, infoReuse);
  const seed = seeds(decl, info, where, items.length, infoReuse > 0 ? prev!.memo : undefined, infoReuse);
  const keep = keptDeclarations(decl, info, gates, ops, byName, seed);
  dropDanglingUsings(t, items, decl, info, keep, byName);
  const out = prunedText(text, t, items, decl, info, keep, reuse > 0 ? prev!.memo : undefined, reuse);
  const pruned = out.out;
  const result: PruneResult = {
    text: pruned,
    decls: decl.length,
    kept: keep.size,
    lines: () => ({ before: nonBlankLines(text), after: nonBlankLines(pruned) }),
    ms: performance.now() - t0,
  };
  return { result, memo: { ...where, ...out, info, byName, seed } };
}

/**
 * Where each item comes from, by the line markers: its include depth (0: the primary file; a
 * #line rename keeps the depth), its file, and whether that is a system header. With `prev`, the
 * first `reuse` items' answers are prev's (the same items), and the reading resumes after them.
 */
function includeDepths(
  t: Tokens,
  items: Item[],
  prev: FinishMemo | undefined,
  reuse: number,
): { depthOf: Int32Array; fileOf: string[]; sysOf: Uint8Array; firstMarker: number; isSystem: (idx: number) => boolean } {
  const depthOf = new Int32Array(items.length);
  const sysOf = new Uint8Array(items.length);
  let fileOf: string[];
  let depth = 0,
    file = "",
    sys = 0,
    firstMarker = items.length;
  let from = 0;
  if (prev && reuse > 0) {
    depthOf.set(prev.depthOf.subarray(0, reuse));
    sysOf.set(prev.sysOf.subarray(0, reuse));
    fileOf = prev.fileOf.slice(0, reuse);
    fileOf.length = items.length;
    from = reuse;
    depth = depthOf[reuse - 1]!;
    file = fileOf[reuse - 1]!;
    sys = sysOf[reuse - 1]!;
    if (prev.firstMarker < reuse) firstMarker = prev.firstMarker;
  } else fileOf = new Array(items.length);
  for (let idx = from; idx < items.length; idx++) {
    const it = items[idx]!;
    if (it.kind === "dir") {
      const m = /^#\s*(\d+)\s+"((?:\\.|[^"\\])*)"((?:\s+\d)*)/.exec(t.text[it.a]!);
      if (m) {
        const flags = m[3]!.trim().split(/\s+/);
        if (flags.includes("1")) depth++;
        else if (flags.includes("2")) depth = Math.max(0, depth - 1);
        if (firstMarker === items.length) {
          firstMarker = idx;
          depth = 0;
        }
        file = m[2]!;
        sys = flags.includes("3") ? 1 : 0;
      }
    }
    depthOf[idx] = depth;
    fileOf[idx] = file;
    sysOf[idx] = sys;
  }
  // a system header: gcc's line-marker flag 3, or a file under /usr (libstdc++, libc, the CUDA toolkit)
  const isSystem = (idx: number) => sysOf[idx] === 1 || fileOf[idx]!.startsWith("/usr/");
  return { depthOf, fileOf, sysOf, firstMarker, isSystem };
}

/**
 * The gates: a system-header free function or class specialization naming classes is kept only
 * when those classes are needed (gates), an operator when its operand classes are (ops). Each
 * declaration's answer is kept in its DeclInfo, computed again only when the set of class names
 * changed (gateKey).
 */
function gatesOf(
  decl: number[],
  info: (DeclInfo | undefined)[],
  classNames: Set<string>,
  isSystem: (idx: number) => boolean,
  namespaces: Set<string>,
): { gates: Map<number, Set<string>>; ops: Map<number, { names: Set<string>; all: boolean }> } {
  const defs = { get: (idx: number) => info[idx]!.defs };
  const refs = { get: (idx: number) => info[idx]!.refs };
  const bodies = { get: (idx: number) => info[idx]!.body };
  const gates = new Map<number, Set<string>>();
  const ops = new Map<number, { names: Set<string>; all: boolean }>();
  const classKey = hashString([...classNames].sort().join(" ")); // one number: compared once per declaration
  for (const idx of decl) {
    const inf = info[idx]!;
    if (inf.gateKey === classKey) {
      if (inf.gate) gates.set(idx, inf.gate);
      if (inf.op) ops.set(idx, inf.op);
      continue;
    }
    inf.gateKey = classKey;
    inf.gate = undefined;
    inf.op = undefined;
    gateOf(idx);
    if (gates.has(idx)) inf.gate = gates.get(idx);
    if (ops.has(idx)) inf.op = ops.get(idx);
  }
  function gateOf(idx: number): void {
    const v = bodies.get(idx)!;
    const ds = defs.get(idx)!;
    if (ds.has("operator") && ds.size === 1) {
      const p = v.indexOf("operator");
      if (v[p + 1] === '""' && v[p + 2]) {
        ops.set(idx, { names: new Set([`<udl>${v[p + 2]}`]), all: false });
        return;
      }
      let q = p + 1;
      if (v[q] === "(" && v[q + 1] === ")") q += 2;
      while (q < v.length && v[q] !== "(") q++;
      const g = new Set<string>();
      for (let d = 0, r = q; r < v.length; r++) {
        if (v[r] === "(") d++;
        else if (v[r] === ")") d--;
        if (d === 0) break;
        if (isName(v[r]!)) g.add(v[r]!);
      }
      const cls = new Set([...g].filter((x) => classNames.has(x)));
      ops.set(idx, { names: cls.size ? cls : g.size ? g : refs.get(idx)!, all: isSystem(idx) && cls.size > 0 });
      return;
    }
    if (!isSystem(idx) || ds.size === 0 || ([...ds].some((d) => classNames.has(d)) && !isSpecialization(v))) return;
    const g = isSpecialization(v) ? specializationGate(v, classNames) : parameterGate(v, ds, classNames, namespaces);
    if (g && g.size) gates.set(idx, g);
  }
  return { gates, ops };
}

/** Whether some element of `a` is in `b` (no array made: called for every declaration of the TU on every save). */
function anyIn(a: Set<string>, b: Set<string>): boolean {
  for (const x of a) if (b.has(x)) return true;
  return false;
}
/** Whether every element of `a` is in `b`. */
function allIn(a: Set<string>, b: Set<string>): boolean {
  for (const x of a) if (!b.has(x)) return false;
  return true;
}

/**
 * Each name's declarations (item indices, ascending), whatever their gates. With `prev` (the
 * last call's memo, whose first `reuse` items and their analyses are these), prev's map is taken
 * over: the last call's declarations from `reuse` on are taken out of it, this call's put in.
 */
function declarationsByName(decl: number[], info: (DeclInfo | undefined)[], prev: FinishMemo | undefined, reuse: number): Map<string, number[]> {
  let byName: Map<string, number[]>;
  if (prev && reuse > 0) {
    byName = prev.byName;
    for (let idx = prev.seed.length - 1; idx >= reuse; idx--) {
      const d = prev.info[idx];
      if (!d) continue;
      for (const name of d.defs) {
        const l = byName.get(name);
        if (!l) continue; // emptied by another of them
        while (l.length && l[l.length - 1]! >= reuse) l.pop();
        if (!l.length) byName.delete(name);
      }
    }
  } else byName = new Map();
  for (const idx of decl) {
    if (idx < reuse) continue;
    for (const d of info[idx]!.defs) {
      const l = byName.get(d);
      if (l) l.push(idx);
      else byName.set(d, [idx]);
    }
  }
  return byName;
}

/** Per item, 1 for a declaration kept whatever else is: the primary file's, device variables, kernels, the compiler's own, what cannot be told apart. The first `reuse` items' are prev's. */
function seeds(
  decl: number[],
  info: (DeclInfo | undefined)[],
  { depthOf, fileOf }: { depthOf: Int32Array; fileOf: string[] },
  nItems: number,
  prev: FinishMemo | undefined,
  reuse: number,
): Uint8Array {
  const seed = new Uint8Array(nItems);
  if (prev && reuse > 0) seed.set(prev.seed.subarray(0, reuse));
  for (const idx of decl) {
    if (idx < reuse) continue;
    const ds = info[idx]!.defs;
    if (
      depthOf[idx] === 0 ||
      info[idx]!.deviceVar ||
      info[idx]!.kernel ||
      fileOf[idx] === "<built-in>" ||
      fileOf[idx] === "<command-line>" ||
      anyIn(ds, ALWAYS) ||
      ds.has("<using-directive>")
    )
      seed[idx] = 1;
    else if (ds.size === 0 && !info[idx]!.body.includes("static_assert")) seed[idx] = 1; // what a declaration declares could not be told: kept
  }
  return seed;
}

/**
 * The declarations kept: the seeds (see seeds), then every declaration of a name a kept one needs
 * (byName: a gated one only when its gate opened, an operator under its other names), and the
 * gated ones whose gate opened.
 */
function keptDeclarations(
  decl: number[],
  info: (DeclInfo | undefined)[],
  gates: Map<number, Set<string>>,
  ops: Map<number, { names: Set<string>; all: boolean }>,
  byName: Map<string, number[]>,
  seed: Uint8Array,
): Set<number> {
  const defs = { get: (idx: number) => info[idx]!.defs };
  const refs = { get: (idx: number) => info[idx]!.refs };
  const keep = new Set<number>();
  const work: number[] = [];
  const add = (idx: number) => {
    if (!keep.has(idx)) {
      keep.add(idx);
      work.push(idx);
    }
  };
  for (const idx of decl) if (seed[idx]) add(idx);
  const needed = new Set<string>();
  for (;;) {
    while (work.length) {
      const idx = work.pop()!;
      for (const r of refs.get(idx)!) {
        if (needed.has(r)) continue;
        needed.add(r);
        const l = byName.get(r);
        if (l)
          for (const m of l) {
            // a gated declaration is not found by its names (its gate decides), an operator by its other names only
            const op = ops.has(m);
            if (op ? r !== "operator" : !gates.has(m)) add(m);
          }
      }
    }
    let grew = false;
    for (const [idx, g] of gates)
      if (!keep.has(idx) && anyIn(defs.get(idx)!, needed) && allIn(g, needed)) {
        add(idx);
        grew = true;
      }
    for (const [idx, o] of ops)
      if (!keep.has(idx) && (o.all ? allIn(o.names, needed) : anyIn(o.names, needed))) {
        add(idx);
        grew = true;
      }
    if (!grew) break;
  }
  return keep;
}

/**
 * A kept using-declaration `using N::x;` whose N keeps no declaration of x before it goes: cicc
 * stops at a using-declaration that names nothing (libstdc++ 13's exception_ptr.h: `using
 * __exception_ptr::swap;` at std scope, kept for bits/move.h's std::swap, while the overload for
 * exception_ptr went with its class). Nothing needs it then: what it would bring is not kept.
 * Any namespace of that name around the declaration counts (inline ones, nested ones), `::x`
 * counts declarations outside any namespace but inline ones; a using-declaration counts as a
 * declaration of x while it is kept (chains), so this runs until nothing changes. A qualifier
 * that is no namespace the TU opens (an alias, an enum: C++20's `using E::a;`) is left as it is.
 * @param declsOf each name's declarations, ascending (declarationsByName)
 */
function dropDanglingUsings(t: Tokens, items: Item[], decl: number[], info: (DeclInfo | undefined)[], keep: Set<number>, declsOf: Map<string, number[]>): void {
  const stub = { get: (idx: number) => info[idx]!.stub };
  const usings = decl.filter((idx) => keep.has(idx) && info[idx]!.using !== undefined);
  if (usings.length) {
    const { pathOf, opened } = namespacePaths(t, items);
    const targets = usings.filter((idx) => {
      const u = info[idx]!.using!;
      return u.ns === "" || opened.has(u.ns);
    });
    for (let changed = true; changed; ) {
      changed = false;
      for (const idx of targets) {
        if (!keep.has(idx)) continue;
        const u = info[idx]!.using!;
        const found = (declsOf.get(u.name) ?? []).some(
          (c) => c < idx && keep.has(c) && stub.get(c) !== "drop" && (u.ns === "" ? pathOf[c]!.allInline : pathOf[c]!.names.includes(u.ns)),
        );
        if (!found) {
          keep.delete(idx);
          changed = true;
        }
      }
    }
  }
}

/**
 * The namespace names around each item (one array per nesting, shared by the items inside it;
 * `namespace a::b {` gives both names, extern "C" none) and whether each of those is inline,
 * and the names of the namespaces the TU opens.
 */
function namespacePaths(t: Tokens, items: Item[]): { pathOf: { names: string[]; allInline: boolean }[]; opened: Set<string> } {
  const root = { names: [] as string[], allInline: true };
  const stack = [root];
  const opened = new Set<string>();
  const pathOf: { names: string[]; allInline: boolean }[] = new Array(items.length);
  items.forEach((it, idx) => {
    if (it.kind === "close") {
      if (stack.length > 1) stack.pop();
      pathOf[idx] = stack[stack.length - 1]!;
      return;
    }
    pathOf[idx] = stack[stack.length - 1]!;
    if (it.kind !== "open") return;
    const w = words(t, it.a, it.b);
    const top = stack[stack.length - 1]!;
    if (w[0] === "extern") {
      stack.push(top);
      return;
    }
    const inline = w[0] === "inline";
    const names: string[] = [];
    for (let a = w.indexOf("namespace") + 1; a < w.length && w[a] !== "{"; a++) {
      if (ATTRIBUTE_WORDS.has(w[a]!) || w[a] === "(" || w[a] === "[") break;
      if (isName(w[a]!)) {
        names.push(w[a]!);
        opened.add(w[a]!);
      }
    }
    stack.push({ names: [...top.names, ...names], allInline: top.allInline && inline });
  });
  return { pathOf, opened };
}

/** Whether the declaration is a class template (partial or explicit) specialization: `template<…> struct X<…>`. */
function isSpecialization(v: string[]): boolean {
  const a = skipTemplateHeaders(v, 0, v.length);
  if (a === 0 || !["struct", "class", "union"].includes(v[a]!)) return false;
  let b = a + 1;
  while (b < v.length && !isName(v[b]!)) b++;
  return v[b + 1] === "<";
}

/** A class specialization's gate: the class names among its template arguments (not its own name nor its parameters). */
function specializationGate(v: string[], classNames: Set<string>): Set<string> | null {
  const tp = templateParams(v);
  const a = skipTemplateHeaders(v, 0, v.length);
  let b = a + 1;
  while (b < v.length && !isName(v[b]!)) b++;
  const g = new Set<string>();
  for (let d = 0, c = b + 1; c < v.length; c++) {
    if (v[c] === "<") d++;
    else if (v[c] === ">") d--;
    if (d <= 0) break;
    if (classNames.has(v[c]!) && !tp.has(v[c]!) && v[c] !== v[b]) g.add(v[c]!);
  }
  return g.size ? g : null;
}

/** A free function's gate: the class names in its parameter list. */
function parameterGate(v: string[], ds: Set<string>, classNames: Set<string>, namespaces: Set<string>): Set<string> | null {
  const a = skipTemplateHeaders(v, 0, v.length);
  if (v.slice(a, a + 3).some((w) => ["class", "struct", "union", "enum", "typedef", "using", "="].includes(w))) return null;
  const p = v.indexOf("(", a);
  if (p <= 0 || !ds.has(v[p - 1]!)) return null;
  const g = new Set<string>();
  for (let d = 0, q = p; q < v.length; q++) {
    if (v[q] === "(") d++;
    else if (v[q] === ")") d--;
    if (d === 0) break;
    if (classNames.has(v[q]!) && !(v[q - 1] === "::" && !namespaces.has(v[q - 2] ?? ""))) g.add(v[q]!);
  }
  return g.size ? g : null;
}

/** 32-bit FNV-1a of a string's UTF-16 units. */
function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}
