/**
 * The preprocessor as a slice's checks read it (./slice-lookup.ts): which files a text includes,
 * which macros it defines, and the TU's code with those macros expanded. Not a preprocessor: the
 * directives are read from the text as the preprocessor's first phases would leave it (line
 * splices joined, comments gone, the `%:` digraph read as `#`: directiveText), and what this cannot
 * follow (an include named by a macro; a replacement that stringizes or pastes) is said, so that
 * the caller makes no slice rather than one it cannot vouch for (adversary 43: `#include <late.h>`,
 * `#include /*x*\/ "late.h"`, `%:include`, `#inc\⏎lude`, `#include LATE`).
 */

import { closeSync, constants, existsSync, fstatSync, openSync, readdirSync, readFileSync, realpathSync, statSync, type BigIntStats } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { findNvcc } from "./nvcc.ts";
import { includeFolderWords, includeSearchVariable } from "../include-search.ts";
import { MANIFEST_MAX_BYTES, readInCapture } from "../../format/paths.ts";

/** A project header under src/ as the slice's checks read it: its path under src/, its text and its code (codeMask). */
export interface SliceHeader {
  rel: string;
  text: string;
  /** The text with comments, strings and preprocessor lines blanked (src/frontends/cuda/code-mask.ts). */
  mask: string;
}

/**
 * `text` as the preprocessor reads its directives: each backslash-newline removed (the newline
 * kept after the joined line, so line numbers stay), comments replaced by a space (a block
 * comment's newlines kept), string and character literals left as they are, and `%:` (the
 * digraph of `#`) written `#`.
 */
export function directiveText(text: string): string {
  let out = "";
  let pendingNewlines = 0;
  const n = text.length;
  let i = 0;
  const flushNewlines = () => {
    out += "\n".repeat(pendingNewlines);
    pendingNewlines = 0;
  };
  while (i < n) {
    const c = text[i]!;
    if (c === "\\" && (text[i + 1] === "\n" || (text[i + 1] === "\r" && text[i + 2] === "\n"))) {
      i += text[i + 1] === "\n" ? 2 : 3;
      pendingNewlines++;
      continue;
    }
    if (c === "\n") {
      out += "\n";
      flushNewlines();
      i++;
      continue;
    }
    if (c === "/" && text[i + 1] === "/") {
      while (i < n && text[i] !== "\n") {
        if (text[i] === "\\" && text[i + 1] === "\n") pendingNewlines++, i++;
        i++;
      }
      out += " ";
      continue;
    }
    if (c === "/" && text[i + 1] === "*") {
      const end = text.indexOf("*/", i + 2);
      const stop = end < 0 ? n : end + 2;
      pendingNewlines += (text.slice(i, stop).match(/\n/g) ?? []).length;
      out += " ";
      i = stop;
      continue;
    }
    if (c === '"' || c === "'") {
      let j = i + 1;
      while (j < n && text[j] !== c && text[j] !== "\n") j += text[j] === "\\" ? 2 : 1;
      out += text.slice(i, Math.min(j + 1, n));
      i = j + 1;
      continue;
    }
    if (c === "%" && text[i + 1] === ":") {
      out += text[i + 2] === "%" && text[i + 3] === ":" ? "##" : "#";
      i += text[i + 2] === "%" && text[i + 3] === ":" ? 4 : 2;
      continue;
    }
    out += c;
    i++;
  }
  return out;
}

/** The directive lines of a text (directiveText), each without its `#`: `include "x.h"`, `define N 3`, `pragma once`. */
function directives(text: string): string[] {
  return [...directiveText(text).matchAll(/^[ \t]*#[ \t]*(.*)$/gm)].map((m) => m[1]!);
}

/** Whether a text holds a preprocessor directive, `__COUNTER__` or a pragma operator (`_Pragma("pop_macro…")`): what a body left out of a slice must not hold. */
export function holdsDirective(text: string): boolean {
  return directives(text).length > 0 || /\b(?:__COUNTER__|_Pragma|__pragma)\b/.test(text);
}

/**
 * Whether a conditional directive's group is certainly not compiled, given `undefinedMacro` (a name
 * no flag, source or header defines): `#ifdef M`, `#if defined(M)`, `#if defined M`, `#if M` of
 * such an M, and the `#else` of `#ifndef M`; anything else may be.
 */
function deadIf(d: string, undefinedMacro: (name: string) => boolean): boolean | undefined {
  const m =
    /^ifdef[ \t]+([A-Za-z_]\w*)[ \t]*$/.exec(d) ??
    /^if[ \t]+defined[ \t]*\([ \t]*([A-Za-z_]\w*)[ \t]*\)[ \t]*$/.exec(d) ??
    /^if[ \t]+defined[ \t]+([A-Za-z_]\w*)[ \t]*$/.exec(d) ??
    /^if[ \t]+([A-Za-z_]\w*)[ \t]*$/.exec(d);
  if (m) return undefinedMacro(m[1]!);
  return undefined;
}

/**
 * The names a text `#include`s (`"…"` and `<…>`), and whether one is computed (`#include NAME`: a
 * macro's). Every include, whatever `#if` it is in, unless `undefinedMacro` says which names are
 * certainly not macros: then an include in a group that is certainly not compiled (deadIf) is not
 * one (llm.c's `#ifdef MULTI_GPU` / `#include <nccl.h>` built with NO_MULTI_GPU=1).
 */
export function includesOf(text: string, undefinedMacro?: (name: string) => boolean): { names: string[]; computed: boolean } {
  const names: string[] = [];
  let computed = false;
  // per open conditional: whether its current group is dead, and what its #else is (dead, alive or unknown: alive)
  const stack: { dead: boolean; elseDead: boolean; parentDead: boolean }[] = [];
  const deadNow = () => stack.length > 0 && stack[stack.length - 1]!.dead;
  for (const d of directives(text)) {
    if (undefinedMacro) {
      const parentDead = deadNow();
      if (/^if(?:n?def)?\b/.test(d)) {
        const ifndef = /^ifndef[ \t]+([A-Za-z_]\w*)[ \t]*$/.exec(d);
        const notTaken = ifndef ? false : deadIf(d, undefinedMacro) === true;
        const elseDead = ifndef ? undefinedMacro(ifndef[1]!) : false;
        stack.push({ dead: parentDead || notTaken, elseDead, parentDead });
        continue;
      }
      if (/^elif/.test(d) && stack.length) {
        const top = stack[stack.length - 1]!;
        top.dead = top.parentDead; // another condition: may be taken
        top.elseDead = false;
        continue;
      }
      if (/^else\b/.test(d) && stack.length) {
        const top = stack[stack.length - 1]!;
        top.dead = top.parentDead || top.elseDead;
        continue;
      }
      if (/^endif\b/.test(d)) {
        stack.pop();
        continue;
      }
      if (deadNow()) continue;
    }
    const m = /^include(?:_next)?\b[ \t]*(.*)$/.exec(d);
    if (!m) continue;
    const q = /^(?:"([^"\n]+)"|<([^>\n]+)>)/.exec(m[1]!);
    if (q) names.push((q[1] ?? q[2])!);
    else computed = true;
  }
  return { names, computed };
}

/** Whether a header is entered once: `#pragma once`, or its first directives `#ifndef G` / `#define G` (an include guard). */
function guarded(h: SliceHeader): boolean {
  const d = directives(h.text);
  if (d.some((x) => /^pragma[ \t]+once\b/.test(x))) return true;
  const g = /^ifndef[ \t]+([A-Za-z_]\w*)/.exec(d[0] ?? "") ?? /^if[ \t]+!\s*defined\s*\(?\s*([A-Za-z_]\w*)/.exec(d[0] ?? "");
  return !!g && new RegExp(`^define[ \\t]+${g[1]}\\b`).test(d[1] ?? "");
}

/** The headers under src/ an include name can be: its path, `.` and `..` steps resolved, is the header's or ends one (`"late.cuh"` is every `…/late.cuh`). */
function headersNamed(name: string, headers: SliceHeader[]): SliceHeader[] {
  const parts: string[] = [];
  for (const p of name.split("/"))
    if (p === "..") parts.pop();
    else if (p && p !== ".") parts.push(p);
  const n = parts.join("/");
  return n ? headers.filter((h) => h.rel === n || h.rel.endsWith(`/${n}`)) : [];
}

/** What a text includes, followed through the project's headers (includeClosure). */
export interface Included {
  /** The headers under src/ (every header a name can be: one of the same name as a system header counts as that one). */
  found: Set<SliceHeader>;
  /** The names that are no header under src/ (system headers, or headers outside the project: not read). */
  outside: Set<string>;
  /** Whether an include among them is named by a macro. */
  computed: boolean;
}

/**
 * The headers under src/ that `text` includes, and theirs. `entered`: headers already entered
 * (before a slice's cut): one that is entered once (guarded) is not entered again, one with no
 * guard is (its text may declare something else the second time: adversary 43).
 */
export function includeClosure(
  text: string,
  headers: SliceHeader[],
  entered: Iterable<SliceHeader> = [],
  undefinedMacro?: (name: string) => boolean,
): Included {
  const once = new Set([...entered].filter(guarded));
  const found = new Set<SliceHeader>();
  const outside = new Set<string>();
  let computed = false;
  const queue = [text];
  while (queue.length) {
    const inc = includesOf(queue.pop()!, undefinedMacro);
    computed ||= inc.computed;
    for (const name of inc.names) {
      const hs = headersNamed(name, headers);
      if (!hs.length) outside.add(name);
      for (const h of hs)
        if (!found.has(h) && !once.has(h)) {
          found.add(h);
          if (guarded(h)) once.add(h);
          queue.push(h.text);
        }
    }
  }
  return { found, outside, computed };
}

/** A macro's parameters (undefined: object-like) and replacement. */
export type MacroTable = Map<string, { params?: string[]; body: string }>;

/** The macros `#define`d in `text` (directiveText: continuation lines joined), added to `into`. */
export function macroTable(text: string, into: MacroTable = new Map()): MacroTable {
  for (const d of directives(text)) {
    const m = /^define[ \t]+([A-Za-z_]\w*)(\(([^)]*)\))?(.*)$/.exec(d);
    if (m)
      into.set(m[1]!, {
        params:
          m[2] === undefined
            ? undefined
            : m[3]!
                .split(",")
                .map((p) => p.trim())
                .filter(Boolean),
        body: m[4]!.trim(),
      });
  }
  return into;
}

/**
 * `code` with its macros expanded, as far as kerncap reads them: a function-like macro's call
 * (balanced parentheses) or an object-like macro's name replaced by its replacement, the
 * parameters by the arguments, up to `rounds` times; undefined where a replacement stringizes or
 * pastes (`#`, `##`), a variadic one is called, or a macro is left after the last round.
 */
export function expandMacros(code: string, macros: MacroTable, rounds = 6): string | undefined {
  let text = code;
  for (let r = 0; r < rounds; r++) {
    let changed = false;
    let out = "";
    let i = 0;
    for (const m of text.matchAll(/[A-Za-z_]\w*/g)) {
      const def = macros.get(m[0]);
      if (!def || m.index! < i) continue;
      if (/#/.test(def.body) || def.params?.some((p) => p.includes("..."))) return undefined;
      if (def.params === undefined) {
        out += text.slice(i, m.index) + ` ${def.body} `;
        i = m.index! + m[0].length;
        changed = true;
        continue;
      }
      const open = /^\s*\(/.exec(text.slice(m.index! + m[0].length));
      if (!open) continue;
      let j = m.index! + m[0].length + open[0].length;
      const args: string[] = [];
      let depth = 1,
        start = j;
      for (; j < text.length && depth > 0; j++) {
        const c = text[j]!;
        if (c === "(") depth++;
        else if (c === ")") depth--;
        if ((c === "," && depth === 1) || depth === 0) {
          args.push(text.slice(start, j).trim());
          start = j + 1;
        }
      }
      if (depth > 0) return undefined;
      let body = def.body;
      def.params.forEach((p, k) => (body = body.replace(new RegExp(`\\b${p}\\b`, "g"), args[k] ?? "")));
      out += text.slice(i, m.index) + ` ${body} `;
      i = j;
      changed = true;
    }
    text = out + text.slice(i);
    if (!changed) return text;
  }
  return [...text.matchAll(/[A-Za-z_]\w*/g)].some((m) => macros.has(m[0])) ? undefined : text;
}

/** The folders of libstdc++'s versions and of gcc's own headers' versions. */
const CXX_BASES = ["/usr/include/c++", "/usr/include/x86_64-linux-gnu/c++", "/usr/include/aarch64-linux-gnu/c++"];
const GCC_BASES = ["/usr/lib/gcc/x86_64-linux-gnu", "/usr/lib/gcc/aarch64-linux-gnu", "/usr/lib/gcc/x86_64-pc-linux-gnu"];

/** The include folders of the toolchain and the system (nvcc's CUDA headers, gcc's C and C++ ones), found once. */
let systemDirs: string[] | undefined;

/** A system header's path (the first include folder that has it), or undefined; cached. */
const systemPaths = new Map<string, string[]>();
/**
 * Every path the lookups below asked about, there or not (the include folders, their bases, the
 * nvcc found, each header's name in each), with its identity when asked (a header read: the file
 * read, by its descriptor): what a slice's check depended on (./system-facts.ts).
 */
const systemProbed = new Map<string, string>();
/** The paths the system-header lookups of this process asked about, each with its identity then, sorted by path. */
export const systemPathsProbed = (): [string, string][] => [...systemProbed].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));

/** A path's identity (device, inode, size, mtime and ctime in ns; a link followed), or "absent"; `st` a stat already made. */
export function pathIdentity(path: string, st?: BigIntStats): string {
  try {
    const s = st ?? statSync(path, { bigint: true, throwIfNoEntry: false });
    return s ? `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}` : "absent";
  } catch {
    return "absent"; // ENOTDIR: a file where a folder of the path would be
  }
}
/** Ask about `p`: its identity recorded; whether it is there. */
const probe = (p: string): boolean => {
  const id = pathIdentity(p);
  systemProbed.set(p, id);
  return id !== "absent";
};
/** The names a system header includes; cached. */
const systemIncludeNames = new Map<string, string[]>();

function systemPath(name: string): string | undefined {
  if (!systemDirs) {
    const dirs = ["/usr/local/include", "/usr/include", "/usr/include/x86_64-linux-gnu", "/usr/include/aarch64-linux-gnu"];
    // the toolkit where it usually lies, and where CUDA_HOME says, beside the nvcc found now
    for (const root of [process.env.CUDA_HOME, process.env.CUDA_PATH, "/usr/local/cuda"].filter((r): r is string => !!r))
      dirs.push(join(root, "include"), join(root, "targets/x86_64-linux/include"), join(root, "targets/sbsa-linux/include"));
    try {
      const nvcc = findNvcc();
      probe(nvcc); // the toolkit behind it (a link retargeted: another file)
      const bin = dirname(realpathSync(nvcc));
      dirs.push(join(bin, "../include"), join(bin, "../targets/x86_64-linux/include"), join(bin, "../targets/sbsa-linux/include"));
    } catch {
      // no nvcc: its headers are not known, the system's are
    }
    for (const base of CXX_BASES)
      try {
        for (const v of readdirSync(base)) dirs.push(join(base, v), join(base, v, "backward"));
      } catch {
        // none
      }
    // gcc's own folders (stddef.h, float.h: NULL, FLT_MAX; adversary 49), every version's
    for (const base of GCC_BASES)
      try {
        for (const v of readdirSync(base)) dirs.push(join(base, v, "include"), join(base, v, "include-fixed"));
      } catch {
        // none
      }
    for (const d of [...CXX_BASES, ...GCC_BASES]) probe(d); // a version folder added or removed changes its base
    systemDirs = dirs.filter(probe);
  }
  if (!systemPaths.has(name)) {
    const paths = name.includes("..") ? [] : systemDirs.map((d) => join(d, name));
    systemPaths.set(name, paths.filter(probe));
  }
  return systemPaths.get(name)![0];
}

/** Whether a folder is one of the include folders whose headers the slice's checks read (systemPath's). */
function isSystemDir(path: string): boolean {
  systemPath("");
  return systemDirs!.includes(resolve(path.replace(/\/+$/, "") || "/"));
}

/** Every file of a system header's name in the include folders (the compiler's search order may pick another than the first here). */
function systemPathsOf(name: string): string[] {
  systemPath(name);
  return systemPaths.get(name)!;
}

/**
 * The toolchain's and the system's headers as a slice's checks read them (./slice-lookup.ts SliceContext.system):
 * a name is one when an include folder of nvcc's or gcc's has it; what it includes is read from
 * the first such file (every #include in it, over every #if).
 */
export const systemHeaders: { has(name: string): boolean; includes(name: string): string[]; defines(name: string): string[] } = {
  has: (name) => systemPath(name) !== undefined,
  includes: (name) => systemRead(name).includes,
  defines: (name) => systemRead(name).defines,
};

/** A system header's text, its identity recorded as the file read (its descriptor's). */
function readSystemFile(p: string): string {
  const fd = openSync(p, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    systemProbed.set(p, pathIdentity(p, fstatSync(fd, { bigint: true })));
    systemFilesRead++;
    return readFileSync(fd, "latin1");
  } finally {
    closeSync(fd);
  }
}

/** How many system header files this process read (systemRead): none where an earlier process's facts were taken. */
let systemFilesRead = 0;
export const systemHeaderFilesRead = (): number => systemFilesRead;
/** The macros the system headers define; cached. */
const systemDefineNames = new Map<string, string[]>();

/** A system header's #include names and #define names (its own lines, as written), read once. */
function systemRead(name: string): { includes: string[]; defines: string[] } {
  let includes = systemIncludeNames.get(name);
  let defines = systemDefineNames.get(name);
  if (!includes || !defines) {
    try {
      // the toolchain's own headers: their #include lines as written (no splices or digraphs to read through), by one
      // regular expression rather than directiveText's pass over every character (0.1 s cold for libstdc++ and CUDA's);
      // every file of the name (which one the compiler reads depends on its search order)
      const text = systemPathsOf(name).map(readSystemFile).join("\n");
      // a quoted name is looked up beside the header first: its folder's name too (CUDA's crt/…)
      const beside = (n: string) => join(dirname(name), n);
      includes = [...text.matchAll(/^[ \t]*#[ \t]*include(?:_next)?[ \t]*([<"])([^>"\n]+)[>"]/gm)].flatMap((m) =>
        m[1] === '"' && beside(m[2]!) !== m[2] ? [m[2]!, beside(m[2]!)] : [m[2]!],
      );
      defines = [...text.matchAll(/^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)/gm)].map((m) => m[1]!);
    } catch {
      includes = [];
      defines = [];
    }
    systemIncludeNames.set(name, includes);
    systemDefineNames.set(name, defines);
  }
  return { includes, defines };
}

/**
 * What this process's system-header lookups found: the include folders, each name's files there,
 * each read header's #include and #define names. An earlier process's are taken by
 * adoptSystemHeaderFacts (./system-facts.ts keeps them, with the identity of every path asked about).
 */
export interface SystemHeaderFacts {
  dirs: string[];
  paths: [string, string[]][];
  reads: [string, string[], string[]][];
}

/** This process's SystemHeaderFacts; undefined before any lookup. */
export function systemHeaderFacts(): SystemHeaderFacts | undefined {
  if (!systemDirs) return undefined;
  return { dirs: systemDirs, paths: [...systemPaths], reads: [...systemIncludeNames].map(([n, inc]) => [n, inc, systemDefineNames.get(n) ?? []]) };
}

/**
 * Take an earlier process's facts as this one's, where this process has looked nothing up yet
 * (the caller checked that every path they were found by, `probed`, is as it was then: those are
 * this process's probes too). Facts not of their shape are not taken.
 */
export function adoptSystemHeaderFacts(f: SystemHeaderFacts, probed: readonly (readonly [string, string])[]): void {
  const strings = (x: unknown) => Array.isArray(x) && x.every((y) => typeof y === "string");
  if (systemDirs || !strings(f.dirs) || !Array.isArray(f.paths) || !Array.isArray(f.reads)) return;
  if (!f.paths.every((e) => typeof e?.[0] === "string" && strings(e[1]))) return;
  if (!f.reads.every((e) => typeof e?.[0] === "string" && strings(e[1]) && strings(e[2]))) return;
  systemDirs = [...f.dirs];
  for (const [n, p] of f.paths) systemPaths.set(n, p);
  for (const [n, inc, def] of f.reads) systemIncludeNames.set(n, inc), systemDefineNames.set(n, def);
  for (const [p, id] of probed) systemProbed.set(p, id);
}

const INCLUDE_RE = /^\s*#\s*include\s*(["<])([^">]+)[">]/;

/**
 * The first `#include` line of the TU (trimmed) through which the definition file is reached,
 * following the project's own headers by their text (every `#include`, whatever `#if` it is in),
 * resolved like the compiler: the includer's folder for quoted names, then includeDirs.
 * Undefined when none reaches it.
 */
export function includeLeadingTo(tuText: string, tuPath: string, definition: string, includeDirs: string[]): string | undefined {
  const target = resolve(definition);
  const resolveInc = (name: string, quoted: boolean, from: string): string | undefined => {
    for (const d of [...(quoted ? [dirname(from)] : []), ...includeDirs]) {
      const p = resolve(d, name);
      if (existsSync(p)) return p;
    }
    return undefined;
  };
  const reaches = (file: string, seen: Set<string>): boolean => {
    if (file === target) return true;
    if (seen.has(file)) return false;
    seen.add(file);
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch {
      return false;
    }
    for (const line of text.split("\n")) {
      const m = INCLUDE_RE.exec(line);
      const p = m && resolveInc(m[2]!, m[1] === '"', file);
      if (p && reaches(p, seen)) return true;
    }
    return false;
  };
  const seen = new Set<string>();
  for (const line of tuText.split("\n")) {
    const m = INCLUDE_RE.exec(line);
    const p = m && resolveInc(m[2]!, m[1] === '"', tuPath);
    if (p && reaches(p, seen)) return line.trim();
  }
  return undefined;
}

/**
 * Whether the compile may define a macro by its flags (SliceContext.flagDefines), read from
 * `dir`'s build.sh (any of its lines): flagDefinesIn; every name where build.sh does not read.
 */
export function flagDefinesOf(dir: string): (name: string) => boolean {
  let script: string;
  try {
    const b = readInCapture(dir, "build.sh", MANIFEST_MAX_BYTES);
    if (!b) return () => true;
    script = b.toString("utf8").replace(/^[ \t]*#.*$/gm, ""); // its commands, not its comments
  } catch {
    return () => true;
  }
  return flagDefinesIn(script);
}

/**
 * Whether a compile whose command-line words are in `text` (build.sh, or its flag words) may
 * define a macro: a `-D` word of it or of EXTRA_FLAGS; every name where a word names a file of
 * definitions or options (`-include`, `-imacros`, `--pre-include`, `@file`, `--options-file`), an
 * include folder other than the capture's src/ (`-I`, `-isystem`, `-iquote`, `-idirafter`: a header
 * found there may define it, and is not read here), or where the environment adds flags or include
 * folders (NVCC_PREPEND_FLAGS, NVCC_APPEND_FLAGS, CPATH, C_INCLUDE_PATH, CPLUS_INCLUDE_PATH,
 * EXTRA_FLAGS with any of these).
 */
export function flagDefinesIn(text: string): (name: string) => boolean {
  const env = process.env;
  if (includeSearchVariable(env)) return () => true;
  const words = `${text}\n${env.EXTRA_FLAGS ?? ""}`;
  if (/(?:^|[\s'"=,])(?:-include|-imacros|--pre-include|-preinclude|--options-file|-optf|@[^\s"'])/.test(words)) return () => true;
  for (const d of includeFolderWords(words)) if (!/^(?:\$here\/src|\.\/src|src)(?:\/|$)/.test(d) && !isSystemDir(d)) return () => true;
  const named = new Set([...words.matchAll(/(?:^|[\s'"=,])(?:-D|--define-macro)[\s'"=]*([A-Za-z_]\w*)/g)].map((m) => m[1]!));
  return (name) => named.has(name);
}
