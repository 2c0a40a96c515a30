/**
 * Incremental preprocessing for the pruned build (src/frontends/cuda/fast-build.ts): after a save that
 * changed one source file F, the TU's gcc -E output is the previous output up to where F's text
 * changed, followed by the preprocessing of only what comes after that point. gcc has no way to
 * resume from a point, so the rest is given to it as a small synthetic TU: the macro table at the
 * cut (read from the previous output, made with -dD so that it holds every #define and #undef in
 * place), then F from the cut (`#line` keeps the names and line numbers), then what each file
 * that includes F has after its #include line, in files beside the originals (their quoted
 * #includes resolve as before).
 *
 * A header with `#pragma once` that was entered before the cut is skipped by gcc when something
 * after the cut includes it again (code bases that use #pragma once throughout include their
 * common header from every header: ggml). The synthetic TU makes gcc see it once too: after the
 * macro table it #includes each such header (their output, before the sentinel, is not kept),
 * then puts the macro table back as it was at the cut (every macro those headers define undone,
 * the cut's definitions again).
 *
 * It is speculative: the pruned build compiles this TU at once and runs gcc -E on the whole TU
 * beside it; the compile is kept only when both give the same text at the same file and line,
 * line by line (sameLocatedText), else it is stopped and the whole TU's output is compiled. So
 * an edge this model misses (push_macro, __COUNTER__, #include_next, a #pragma once header whose
 * text depends on where it was first included …) costs time, never a wrong build.
 *
 * The cut is at the start of a line L' ≤ the first changed line where nothing spans lines: no
 * comment, string or directive continues across it, no parenthesis is open, and the text before
 * it does not end in a name or `)` (a function-like macro's name cannot meet its arguments on
 * the next line); each conditional group open at L' is entered (`#if 1`) only when the previous
 * output has a line of F inside it (the proof that it was taken), else the cut moves before its
 * #if. Facts about gcc's output (gcc 12, CUDA 13's nvcc -E): markers `# N "file" flags` (1 enter,
 * 2 return, 3 system header); -dD prints each #define/#undef at its line, also the built-in and
 * command-line ones (under `# 0 "<built-in>"` / `"<command-line>"`); #pragma push_macro/pop_macro
 * are not printed (and pop_macro's restore is not a #define): hence the verification.
 */
import { basename, dirname, isAbsolute, resolve } from "node:path";
import { pragmaOnce } from "./pragma-once.ts";

/** A line marker of gcc -E output: `# N "file" flags`. */
export interface Marker {
  line: number;
  file: string;
  flags: number[];
}

const MARKER = /^# (\d+) "((?:[^"\\]|\\.)*)"((?: \d+)*)\s*$/;

export function parseMarker(l: string): Marker | null {
  if (!l.startsWith("# ")) return null;
  const m = MARKER.exec(l);
  if (!m) return null;
  return { line: Number(m[1]), file: m[2]!, flags: m[3] ? m[3].trim().split(" ").map(Number) : [] };
}

/** A `#define NAME…` / `#undef NAME` line of -dD output: the macro's name, or null (a scan, not a regular expression: -dD output has tens of thousands of these). */
function macroName(l: string, directive: "#define " | "#undef "): string | null {
  if (!l.startsWith(directive)) return null;
  const a = directive.length;
  let b = a;
  for (; b < l.length; b++) {
    const c = l.charCodeAt(b);
    // [A-Za-z_$], then also [0-9]
    if (!((c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 95 || c === 36 || (b > a && c >= 48 && c <= 57))) break;
  }
  return b > a ? l.slice(a, b) : null;
}

/** The -dD output with its #define/#undef lines blanked (the line count kept): what cicc reads. */
export function stripMacroLines(text: string): string {
  return text.replace(/^#(?:define|undef) [^\n]*$/gm, "");
}

/** One inclusion in a -dD output: the file entered, its marker's line index, its includer, where it returns. */
interface Entry {
  /** The name it was entered by (a path: what is read for its text). */
  file: string;
  /** Its presumed name now (a #line in it renames it: kerncap's slice names itself after its TU). */
  name: string;
  /** The name its return marker gives the includer. */
  retName: string;
  /** Index of its `# 1 "file" 1` line. */
  at: number;
  parent: Entry | null;
  /** Index of the return marker to the includer (`# N "parent" 2`), or lines.length. */
  ret: number;
  /** The line of the #include in the includer, in its presumed numbering (N − 1 of the return marker). */
  includeLine: number;
  depth: number;
}

/** What the previous build's preprocessing leaves for the next one. */
export interface PpBase {
  /** The whole TU's gcc -E -dD output. */
  text: string;
  /** The texts of the reproducer's sources (absolute path → text), read just before that run. */
  sources: Map<string, string>;
}

/** A parsed base (cached by the caller with it). */
export interface ParsedBase {
  lines: string[];
  /** Per line: its source line number (markers: the marker's), and the entry it belongs to (index into entries; -1 before the primary). */
  lineNo: Int32Array;
  entryOf: Int32Array;
  /** Per line: 0 in a user file, 1 in a system header (marker flag 3), 2 in one wrapped in extern "C" (flags 3 4). */
  sys: Uint8Array;
  entries: Entry[];
  primary: Entry;
}

/** Parse a -dD output into lines located at their file (the entry) and line. */
export function parseBase(text: string): ParsedBase {
  const lines = text.split("\n");
  const lineNo = new Int32Array(lines.length);
  const entryOf = new Int32Array(lines.length).fill(-1);
  const sys = new Uint8Array(lines.length);
  let sysNow = 0;
  const entries: Entry[] = [];
  let primary: Entry | null = null;
  let cur: Entry | null = null;
  let curIdx = -1;
  const parents: number[] = []; // the index of each open entry's includer
  let n = 0;
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i]!;
    const mk = l.charCodeAt(0) === 35 /* # */ ? parseMarker(l) : null;
    if (mk) {
      if (mk.flags.includes(1)) {
        if (cur) {
          const e: Entry = { file: mk.file, name: mk.file, retName: "", at: i, parent: cur, ret: lines.length, includeLine: 0, depth: cur.depth + 1 };
          entries.push(e);
          cur = e;
          parents.push(curIdx);
          curIdx = entries.length - 1;
        }
      } else if (mk.flags.includes(2)) {
        if (cur?.parent && cur.parent.name === mk.file) {
          cur.ret = i;
          cur.retName = mk.file;
          cur.includeLine = mk.line - 1;
          cur = cur.parent;
          curIdx = parents.pop()!;
        }
      } else if (!primary && mk.line === 1 && mk.file !== "<built-in>" && mk.file !== "<command-line>" && !mk.flags.length) {
        // `# 1 "primary.cu"`: the primary file begins (after the built-ins, the command line and -include files)
        primary = { file: mk.file, name: mk.file, retName: "", at: i, parent: null, ret: lines.length, includeLine: 0, depth: 0 };
        entries.push(primary);
        cur = primary;
        curIdx = entries.length - 1;
      } else if (cur) cur.name = mk.file; // a #line (or a resync) in the current file
      n = mk.line;
      lineNo[i] = mk.line;
      entryOf[i] = curIdx;
      sysNow = mk.flags.includes(3) ? (mk.flags.includes(4) ? 2 : 1) : 0;
      sys[i] = sysNow;
      continue;
    }
    lineNo[i] = n++;
    entryOf[i] = curIdx;
    sys[i] = sysNow;
  }
  if (!primary) throw new Error("no primary file in the preprocessed output");
  return { lines, lineNo, entryOf, sys, entries, primary };
}

/** The lexical state at the start of each line of a source, for choosing a cut. */
interface LineState {
  /** Nothing spans into this line (comment, string, continuation, open parenthesis, a name or `)` before it). */
  clean: boolean;
  /** The conditional groups open here: the line of the directive that began the current branch (#if/#elif/#else) and of its #if. */
  open: { ifLine: number; branchLine: number }[];
}

/**
 * Scan a C/C++ source (lines 1…upTo) for where a cut may go.
 * @returns the state at the start of lines 1…upTo (index 0 = line 1), or null when it cannot tell (a raw string literal)
 */
export function scanLines(text: string, upTo: number): LineState[] | null {
  const lines = text.split("\n");
  const out: LineState[] = [];
  let inComment = false,
    continued = false,
    paren = 0;
  let last = ""; // the last significant character before here, "" at the start, "\n" after a directive
  const stack: { ifLine: number; branchLine: number }[] = [];
  for (let ln = 1; ln <= Math.min(upTo, lines.length + 1); ln++) {
    const clean = !inComment && !continued && paren === 0 && !/[A-Za-z0-9_$)]/.test(last);
    out.push({ clean, open: stack.map((s) => ({ ...s })) });
    if (ln > lines.length) break;
    const l = lines[ln - 1]!;
    if (/\bR"/.test(l)) return null;
    const directive = !inComment && !continued && /^\s*#/.test(l);
    const wasContinued = continued;
    continued = /\\\s*$/.test(l);
    if (directive) {
      const d = /^\s*#\s*([a-z]+)/.exec(l)?.[1] ?? "";
      if (d === "if" || d === "ifdef" || d === "ifndef") stack.push({ ifLine: ln, branchLine: ln });
      else if ((d === "elif" || d === "else" || d === "elifdef" || d === "elifndef") && stack.length) stack[stack.length - 1]!.branchLine = ln;
      else if (d === "endif") stack.pop();
    }
    // characters: comments, strings, parentheses (a directive's do not count)
    for (let i = 0; i < l.length; i++) {
      const c = l[i]!;
      if (inComment) {
        if (c === "*" && l[i + 1] === "/") {
          inComment = false;
          i++;
        }
        continue;
      }
      if (c === "/" && l[i + 1] === "*") {
        inComment = true;
        i++;
        continue;
      }
      if (c === "/" && l[i + 1] === "/") break;
      if (c === '"' || c === "'") {
        let j = i + 1;
        while (j < l.length && l[j] !== c) j += l[j] === "\\" ? 2 : 1;
        i = j;
        if (!directive && !(wasContinued && continued)) last = c;
        continue;
      }
      if (/\s/.test(c)) continue;
      if (directive || (wasContinued && last === "\n")) continue;
      if (c === "(") paren++;
      else if (c === ")") paren = Math.max(0, paren - 1);
      last = c;
    }
    if (directive || (wasContinued && last === "\n")) last = "\n";
  }
  return out;
}

/** The synthetic TU of an incremental preprocessing: files to write, the primary to preprocess, where the base is cut. */
export interface IncrementalPlan {
  files: Map<string, string>;
  primary: string;
  /** The base's lines [0, cut) are the output's beginning. */
  cut: number;
  /** The line of F the synthetic TU starts at (for the log). */
  file: string;
  fromLine: number;
}

/**
 * The real line of the #include that gcc's markers put at `presumed` (a `#line N` or `# N "file"`
 * directive before it renumbers what follows), or null when no #include is there.
 */
export function realIncludeLine(text: string, presumed: number): number | null {
  const lines = text.split("\n");
  const pres = presumedLines(text);
  let found: number | null = null;
  for (let r = 1; r <= lines.length; r++) if (pres.line[r] === presumed && /^\s*#\s*include/.test(lines[r - 1]!)) found = r;
  return found;
}

/**
 * The presumed line number and name of each real line of a source (index = real line, 1-based):
 * a `#line N "name"` (or `# N "name"`) makes the next line N of "name" (null: the name it was
 * entered by); `lastLineDirective(r)`: the last such directive's real line before r (0: none).
 */
export function presumedLines(text: string): { line: number[]; name: (string | null)[]; lastLineDirective: (r: number) => number } {
  const lines = text.split("\n");
  const line: number[] = [0],
    name: (string | null)[] = [null],
    directives: number[] = [];
  let p = 1,
    n: string | null = null;
  for (let r = 1; r <= lines.length + 1; r++) {
    line.push(p);
    name.push(n);
    const m = /^\s*#\s*(?:line\s+)?(\d+)(?:\s+"((?:[^"\\]|\\.)*)")?/.exec(lines[r - 1] ?? "");
    if (m) {
      p = Number(m[1]);
      if (m[2] !== undefined) n = m[2];
      directives.push(r);
    } else p++;
  }
  return { line, name, lastLineDirective: (r) => directives.filter((d) => d < r).pop() ?? 0 };
}

/** The sentinel after the macro table in the synthetic primary: the output's part after it is kept. */
export const SENTINEL = "#pragma kerncap_incremental_cut";

/**
 * Plan the incremental preprocessing of a TU whose only changed source is `file`.
 * @param base the previous output, parsed
 * @param file the changed file (absolute, resolved)
 * @param oldText, newText its text then and now
 * @param readText the text of another file of the include chain (the includers)
 * @param cwd the folder the preprocessor runs in: the markers' names are relative to it (kerncap's
 *   build.sh names its sources src/…); the plan's names stay as the markers spell them, so gcc's
 *   markers of the synthetic TU (and __builtin_FILE) read as the whole TU's
 * @returns the plan, or why there is none (a sentence)
 */
export function planIncremental(
  base: ParsedBase,
  file: string,
  oldText: string,
  newText: string,
  readText: (path: string) => string,
  cwd = process.cwd(),
): IncrementalPlan | { reason: string } {
  const at = (name: string) => resolve(cwd, name);
  const fe = base.entries.filter((e) => at(e.file) === file);
  if (fe.length !== 1) return { reason: fe.length ? `${file} is included ${fe.length} times` : `${file} is not in the TU` };
  const F = fe[0]!;
  const L = firstChangedLine(oldText, newText);
  const states = scanLines(newText, L);
  if (!states) return { reason: "a raw string literal" };
  const fIndex = base.entries.indexOf(F);
  // gcc's markers number F's lines as presumed (a #line renumbers and renames what follows it: kerncap's slice)
  const pres = presumedLines(newText);
  // F's lines in the previous output that hold something (proof that their conditional group was taken), presumed numbering
  const held: number[] = [];
  for (let i = F.at + 1; i < F.ret; i++) if (base.entryOf[i] === fIndex && base.lines[i]!.trim() && !parseMarker(base.lines[i]!)) held.push(base.lineNo[i]!);
  const taken = (from: number, to: number) => from > pres.lastLineDirective(to) && held.some((t) => t > pres.line[from]! && t < pres.line[to]!);
  let c = Math.min(L, states.length);
  for (; c > 1; c--) {
    const s = states[c - 1]!;
    if (s.clean && c > pres.lastLineDirective(c) && s.open.every((g) => taken(g.branchLine, c))) break;
  }
  const open = states[c - 1]!.open.length;
  const cut = c === 1 ? F.at : baseCut(base, fIndex, pres.line[c]!);
  // the synthetic files, innermost first
  const files = new Map<string, string>();
  const tag = `.kerncap-pp-${process.pid}`;
  // beside the original, by the same spelling of its folder (gcc names what it includes from there after it: join would normalize `..`)
  const beside = (name: string) => `${dirname(name)}/${tag}-${basename(name)}`;
  const tail = (text: string, from: number) =>
    text
      .split("\n")
      .slice(from - 1)
      .join("\n");
  const ifs = (n: number) => "#if 1\n".repeat(n);
  // the #include of `name` from the synthetic copy of `includer` (beside it): a name the markers spell from the includer's
  // folder (build.sh's src/…) is written from there, as gcc found the original, so that gcc names it, and what it
  // includes, as the whole TU's markers do; any other (an absolute name, one found through -I) by its absolute path
  const spell = (name: string, includer: Entry) => {
    const from = `${dirname(includer.file)}/`;
    return !isAbsolute(name) && name.startsWith(from) && name.length > from.length ? name.slice(from.length) : at(name);
  };
  // from its first line: F itself (its own #pragma once, for a header that includes it back), else its tail
  let body: string | null = c === 1 ? null : `${ifs(open)}#line ${pres.line[c]} "${pres.name[c] ?? F.file}"\n${tail(newText, c)}`;
  // the files open at the cut (F, its includers) that may be included whole before the synthetic TU's body: none when F is
  // included from its first line; else up the chain while no tail (F's from the cut, each includer's after its #include)
  // includes a file (their inclusion there would include it first, and the tail's #include of it would then be skipped)
  const includes = (t: string) => /^[ \t]*#[ \t]*include/m.test(t);
  const openOnce = new Set<Entry>();
  let quiet = c > 1 && !includes(tail(newText, c));
  if (quiet) openOnce.add(F);
  let child = F;
  for (let e = F.parent; e; child = e, e = e.parent) {
    let text: string;
    try {
      text = readText(at(e.file));
    } catch {
      return { reason: `cannot read ${e.file}` };
    }
    const inc = realIncludeLine(text, child.includeLine);
    if (inc === null || /["\\]/.test(child.file)) return { reason: `no #include at line ${child.includeLine} of ${e.file}` };
    const st = scanLines(text, inc + 1);
    if (!st || st.length < inc + 1 || !st[inc]!.clean) return { reason: `${e.file}: something spans its #include line ${inc}` };
    quiet &&= !includes(tail(text, inc + 1));
    if (quiet) openOnce.add(e);
    const childPath = body === null ? child.file : beside(child.file);
    if (body !== null) files.set(childPath, body);
    body = `${ifs(st[inc - 1]!.open.length)}#include "${spell(childPath, e)}"\n#line ${child.includeLine + 1} "${child.retName}"\n${tail(text, inc + 1)}`;
  }
  if (body === null) return { reason: "the primary file changed from its first line" };
  const primary = beside(base.primary.file);
  // no tail at all includes a file (quiet to the primary file): no #include after the cut can be skipped for a header seen
  // before it, so none is seen again before the sentinel (gcc would preprocess each anew, F and its includers whole, for
  // output that is dropped: on ggml's mmq.cuh 1.5 MB of the synthetic TU's 1.6 MB, 40 of its 50 ms); the verification
  // against the whole TU's output holds either way
  const once = quiet ? [] : onceBeforeCut(base, cut, openOnce, readText, at);
  const marks = once.length ? `${once.map((p) => `#include "${p}"`).join("\n")}\n${macroTable(base, cut, true)}` : "";
  files.set(primary, `${macroTable(base, cut)}${marks}${SENTINEL}\n${body}`);
  return { files, primary, cut, file: F.file, fromLine: c };
}

/**
 * The first changed line of a file (1-based; one past the end when nothing changed). A `//`
 * comment line changed for another leaves the output as it was (kerncap's slice: its first line
 * holds its TU's sha256, which every edit of the TU changes).
 */
function firstChangedLine(oldText: string, newText: string): number {
  const a = oldText.split("\n"),
    b = newText.split("\n");
  const commentOnly = (l: string) => /^\s*\/\//.test(l) && !/\\\s*$/.test(l);
  let L = 1;
  while (L <= a.length && L <= b.length && (a[L - 1] === b[L - 1] || (commentOnly(a[L - 1]!) && commentOnly(b[L - 1]!) && !/\\\s*$/.test(b[L - 2] ?? "")))) L++;
  if (L > a.length && L > b.length) L = b.length + 1; // unchanged: the cut at its end
  return L;
}

/**
 * Where the previous output is cut for a synthetic TU that starts at F's presumed line `line`
 * (F = base.entries[fIndex]): the output line of the first of F's lines, or of its children's
 * entries, at or after it; F's return when none.
 */
function baseCut(base: ParsedBase, fIndex: number, line: number): number {
  const F = base.entries[fIndex]!;
  for (let i = F.at + 1; i < F.ret; i++) {
    const ei = base.entryOf[i]!;
    if (ei === fIndex) {
      const mk = parseMarker(base.lines[i]!);
      if (mk?.flags.includes(2)) continue; // back in F from a child: its line is the one after the #include
      if (base.lineNo[i]! >= line && !(mk && mk.line < line)) return i;
    } else if (ei >= 0 && base.entries[ei]!.parent === F && base.entries[ei]!.at === i) {
      if (base.entries[ei]!.includeLine >= line) return i;
    }
  }
  return F.ret;
}

/**
 * The `#pragma once` headers entered before the cut, which gcc must see once again: those it left
 * before the cut, and the open ones of openOnce (the primary file and paths an #include cannot
 * spell left out), each once.
 */
function onceBeforeCut(base: ParsedBase, cut: number, openOnce: Set<Entry>, readText: (path: string) => string, at: (name: string) => string): string[] {
  const once: string[] = [];
  const seen = new Set<string>([at(base.primary.file)]);
  for (const e of base.entries) {
    const p = at(e.file);
    if (e.at >= cut || seen.has(p) || /["\\\n]/.test(p) || (e.ret >= cut && !openOnce.has(e))) continue;
    seen.add(p);
    if (pragmaOnce(p, readText)) once.push(p);
  }
  return once;
}

/** The macros at line `cut` of a base (the last call's kept: planIncremental asks twice for the same cut). */
const macrosCache = new WeakMap<ParsedBase, { cut: number; macros: ReturnType<typeof readMacros> }>();
function macrosAt(base: ParsedBase, cut: number): ReturnType<typeof readMacros> {
  const c = macrosCache.get(base);
  if (c?.cut === cut) return c.macros;
  const macros = readMacros(base, cut);
  macrosCache.set(base, { cut, macros });
  return macros;
}

/** The predefined macros (before the first file is entered), the table at `cut` (each definition's line and system-header flag, in definition order), the names files defined. */
function readMacros(base: ParsedBase, cut: number) {
  const pre = new Map<string, string>(),
    now = new Map<string, { line: string; sys: number }>();
  const inFiles = new Set<string>();
  let predefined = true;
  for (let i = 0; i < cut; i++) {
    const l = base.lines[i]!;
    if (l.charCodeAt(0) !== 35) continue;
    if (predefined && parseMarker(l)?.flags.includes(1)) predefined = false;
    const d = macroName(l, "#define "),
      u = d ? null : macroName(l, "#undef ");
    if (d) {
      now.delete(d); // a redefinition goes to the end (its place, its system-header flag)
      now.set(d, { line: l, sys: base.sys[i]! });
      if (predefined) pre.set(d, l);
      else inFiles.add(d);
    } else if (u) {
      now.delete(u);
      if (predefined) pre.delete(u);
    }
  }
  return { pre, now, inFiles };
}

/**
 * The #define/#undef lines that turn the predefined macros (the built-in and command-line ones,
 * before the first file is entered, which gcc defines again for the synthetic TU) into the macro
 * table at line `cut` of the base. `restore`: from any state that the files entered before the
 * cut made (the #pragma once headers included again), also an #undef of every macro those files
 * defined, before the table's definitions.
 */
export function macroTable(base: ParsedBase, cut: number, restore = false): string {
  const { pre, now, inFiles } = macrosAt(base, cut);
  // gcc marks the tokens of a macro defined in a system header (`# N "file" 3 4` around them): each
  // definition goes under a linemarker with the flags of the place it was defined in
  const FLAGS = ["", " 3", " 3 4"];
  const out: string[] = [];
  for (const k of pre.keys()) if (!now.has(k)) out.push(`#undef ${k}`);
  if (restore) for (const k of inFiles) if (!pre.has(k)) out.push(`#undef ${k}`);
  let sys = -1;
  for (const [k, d] of now) {
    if (pre.get(k) === d.line && !(restore && inFiles.has(k))) continue;
    if (d.sys !== sys) out.push(`# 1 "<kerncap macro table>"${FLAGS[d.sys]}`);
    sys = d.sys;
    if (pre.has(k)) out.push(`#undef ${k}`);
    out.push(d.line);
  }
  out.push('# 1 "<kerncap macro table>"');
  return out.join("\n") + "\n";
}

/** A file name of the synthetic TU (its files beside the originals, the macro table's linemarker). */
const synthetic = (file: string) => file.includes("/.kerncap-pp-") || file === "<kerncap macro table>";

/**
 * The output (the base's lines before the cut, then the synthetic TU's output after its
 * sentinel), and where its new part begins. The synthetic files' own markers go: the entry into
 * a continuation (the base has already entered that file), and the return from one, whose flag 2
 * goes to the `#line` marker that follows (the return to the includer, as in the whole TU).
 */
export function assemble(base: ParsedBase, cut: number, synthOut: string): { text: string; prefix: string } | null {
  const s = synthOut.indexOf(`\n${SENTINEL}\n`);
  if (s < 0) return null;
  const prefix = base.lines.slice(0, cut).join("\n") + "\n";
  const rest = synthOut.slice(s + SENTINEL.length + 2).split("\n");
  let pendingReturn = false;
  for (let i = 0; i < rest.length; i++) {
    const l = rest[i]!;
    const mk = l.charCodeAt(0) === 35 ? parseMarker(l) : null;
    if (!mk) continue;
    if (synthetic(mk.file) && (mk.flags.includes(1) || mk.flags.includes(2))) {
      if (mk.flags.includes(2)) pendingReturn = true;
      rest[i] = "";
    } else if (pendingReturn) {
      if (synthetic(mk.file) || mk.flags.length) return null; // not the #line marker expected
      rest[i] = `${l.trimEnd()} 2`;
      pendingReturn = false;
    }
  }
  return { text: prefix + rest.join("\n"), prefix };
}

/**
 * Whether the whole TU's new output `full` says what the assembled one says: the common prefix
 * compared as text, the rest with sameLocatedText from the file and line where the prefix ends.
 * @returns null when the same, else the first difference (a sentence)
 */
export function verifyAssembled(assembled: { text: string; prefix: string }, full: string): string | null {
  if (!full.startsWith(assembled.prefix)) return sameLocatedText(assembled.text, full); // the part before the cut changed too: all of it
  let file = "",
    line = 0;
  const p = assembled.prefix;
  // the file and line of the first line after the prefix: from the prefix's last marker
  let i = p.length - 1,
    after = 0;
  for (;;) {
    const s = p.lastIndexOf("\n", i - 1);
    const l = p.slice(s + 1, i);
    const mk = l.charCodeAt(0) === 35 ? parseMarker(l) : null;
    if (mk) {
      file = mk.file;
      line = mk.line + after;
      break;
    }
    after++;
    if (s < 0) break;
    i = s;
  }
  return sameLocatedText(assembled.text, full, { offset: p.length, file, line });
}

/**
 * Compare two gcc -E outputs by what they say, not how: each non-blank line that is not a
 * marker, with the file and line it comes from, its include depth (markers' flags 1 and 2) and
 * system-header flags (3, 4); blank lines and the markers themselves (a jump of more than 8 lines
 * is a marker, fewer are blank lines) do not count.
 * @returns null when they say the same, else the first difference (a sentence)
 */
export function sameLocatedText(a: string, b: string, from: { offset: number; file: string; line: number } = { offset: 0, file: "", line: 0 }): string | null {
  const ia = located(a, from),
    ib = located(b, from);
  for (;;) {
    const x = ia.next(),
      y = ib.next();
    if (x.done && y.done) return null;
    if (x.done || y.done) return `one output ends before the other (${x.done ? `at ${y.value}` : `at ${x.value}`})`;
    if (x.value !== y.value) return `${x.value.split("\u0000").slice(0, 2).join(":")} differs from ${y.value.split("\u0000").slice(0, 2).join(":")}`;
  }
}

function* located(text: string, from: { offset: number; file: string; line: number }): Generator<string> {
  let { file, line, offset: start } = from;
  let depth = 0,
    sys = ""; // relative to where the comparison starts: both sides start at the same place
  while (start <= text.length) {
    let end = text.indexOf("\n", start);
    if (end < 0) end = text.length;
    const l = text.slice(start, end);
    start = end + 1;
    const mk = l.charCodeAt(0) === 35 ? parseMarker(l) : null;
    if (mk) {
      file = mk.file;
      line = mk.line;
      if (mk.flags.includes(1)) depth++;
      if (mk.flags.includes(2)) depth--;
      sys = mk.flags.filter((f) => f >= 3).join(" ");
      continue;
    }
    if (l.trim()) yield `${file}\u0000${line}\u0000${depth}\u0000${sys}\u0000${l.trimEnd()}`;
    line++;
    if (end === text.length) break;
  }
}
