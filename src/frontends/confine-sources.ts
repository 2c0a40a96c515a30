/**
 * A confined build's sources name no file outside (docs/security.md, "A file's existence"): the
 * dependency list (./confine.ts) says which files the compiler *read*, but the preprocessor also
 * learns whether a file *exists* without reading it (`#if __has_include("/home/u/.ssh/id_rsa")`,
 * `#pragma GCC dependency "…"`, an `#include` that fails or not), and the build's success, or the
 * kernel it compiles, hands that bit to the agent. The preprocessor can only look up a name that
 * is written somewhere, so before a confined build every file under src/, whatever its name (a
 * source includes `p.txt` as it includes `p.h`), is read with the preprocessor's own tokens (comments, string and raw string literals, line splices, digraphs) and
 * refused when it writes a path a confined build may not read (./confine.ts confinedReadable), in
 * any form the preprocessor can turn into a file name:
 *  - a string literal anywhere (an `#include` operand, a macro's body `#define P "/etc/x"`, an
 *    argument, a `_Pragma`), absolute or climbing with `..` out of what a confined build reads;
 *  - a header name `<…>` (after `#include`, `__has_include(`): the same, any `..` refused;
 *  - (`__has_include(P)` with `#define P "/etc/x"`: P's string is checked where it is written;
 *    strings cannot be pasted together, only stringized from tokens, which the next rule catches)
 *  - the tokens that only a path being stringized can hold: a `/` that starts a macro argument, a
 *    header name or a macro's body (`S(/etc/x)`), and `..` outside a literal.
 * What is left is a relative name, looked up in the capture's and the recorded build's include
 * folders, which a confined build may read anyway.
 */
import { lstatSync, readdirSync, realpathSync, type Stats } from "node:fs";
import { join, posix, resolve } from "node:path";
import { KerncapError } from "../errors.ts";
import type { Manifest } from "../format/manifest.ts";
import { readInCapture } from "../format/paths.ts";
import { confinedReadable } from "./confine.ts";
import { includeFolderWords, includeSearchVariable } from "./include-search.ts";

/** The largest file under src/ read (bytes); a larger one is refused. */
const SOURCE_MAX = 16 << 20;
/** The most files under src/ read. */
const SOURCES_MAX = 20000;

/** The preprocessor's queries that look a file up. */
const FILE_QUERIES = new Set(["__has_include", "__has_include_next", "__has_embed", "__has_include__", "__has_include_next__"]);
/** The directives that look a file up by the name that follows. */
const FILE_DIRECTIVES = new Set(["include", "include_next", "import", "embed"]);

interface Token {
  kind: "id" | "num" | "str" | "punct";
  text: string;
  line: number;
  /** The first token of its line (a directive starts with # there). */
  bol: boolean;
  /** No space between it and the token before (a #define's name and its "(": a function-like macro). */
  glued?: boolean;
}

/** The preprocessing tokens of a source (C, C++, CUDA): comments dropped, line splices joined, string, character and raw string literals as one token each. */
export function ppTokens(src: string): Token[] {
  const out: Token[] = [];
  let line = 1;
  let bol = true;
  // a line splice (backslash newline) joins lines; count it so that lines stay the file's
  const text = src.replace(/\r\n?/g, "\n");
  let i = 0;
  let lastEnd = -1;
  let start = 0;
  const push = (kind: Token["kind"], t: string, at: number) => {
    out.push({ kind, text: t, line: at, bol, glued: start === lastEnd });
    bol = false;
    lastEnd = i;
  };
  const splice = () => {
    while (text[i] === "\\" && text[i + 1] === "\n") (i += 2), line++;
  };
  while (i < text.length) {
    splice();
    const c = text[i];
    if (c === undefined) break;
    start = i;
    if (c === "\n") {
      line++;
      bol = true;
      i++;
    } else if (c === " " || c === "\t" || c === "\f" || c === "\v") i++;
    else if (c === "/" && text[i + 1] === "/") {
      while (i < text.length && text[i] !== "\n") i += text[i] === "\\" && text[i + 1] === "\n" ? (line++, 2) : 1;
    } else if (c === "/" && text[i + 1] === "*") {
      const j = text.indexOf("*/", i + 2);
      const end = j < 0 ? text.length : j + 2;
      for (let k = i; k < end; k++) if (text[k] === "\n") line++;
      i = end;
    } else if (/[A-Za-z_$\u0080-\uffff]/.test(c)) {
      const at = line;
      let t = "";
      for (; i < text.length; splice()) {
        const d = text[i]!;
        if (!/[A-Za-z0-9_$\u0080-\uffff]/.test(d)) break;
        t += d;
        i++;
      }
      // a raw string (R"d(…)d", u8R, LR …): its body is one token whatever it holds
      if (/^(u8|u|U|L)?R$/.test(t) && text[i] === '"') {
        const open = text.indexOf("(", i);
        const delim = text.slice(i + 1, open);
        const close = text.indexOf(`)${delim}"`, open);
        const end = close < 0 ? text.length : close + delim.length + 2;
        const body = text.slice(i, end);
        for (const ch of body) if (ch === "\n") line++;
        i = end;
        push("str", t + body, at);
      } else if (/^(u8|u|U|L)$/.test(t) && (text[i] === '"' || text[i] === "'")) {
        push("str", quoted(), at);
      } else push("id", t, at);
    } else if (/[0-9]/.test(c) || (c === "." && /[0-9]/.test(text[i + 1] ?? ""))) {
      let t = "";
      for (; i < text.length; splice()) {
        const d = text[i]!;
        if (/[eEpP]/.test(d) && /[+-]/.test(text[i + 1] ?? "")) (t += d + text[i + 1]), (i += 2);
        else if (/[A-Za-z0-9_.]/.test(d) || (d === "'" && /[A-Za-z0-9_]/.test(text[i + 1] ?? ""))) (t += d), i++;
        else break;
      }
      push("num", t, line);
    } else if (c === '"' || c === "'") push("str", quoted(), line);
    else {
      const three = text.slice(i, i + 3);
      const two = text.slice(i, i + 2);
      const t =
        three === "..." || three === "%:%"
          ? three
          : ["##", "%:", "<:", ":>", "<%", "%>", "::", "->", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||"].includes(two)
            ? two
            : c;
      const digraphPaste = t === "%:%" && text[i + 3] === ":";
      i += digraphPaste ? 4 : t === "%:%" ? 2 : t.length;
      push("punct", t === "%:" || (t === "%:%" && !digraphPaste) ? "#" : digraphPaste ? "##" : t, line);
    }
  }
  return out;

  function quoted(): string {
    const q = text[i]!;
    let t = q;
    i++;
    while (i < text.length && text[i] !== q && text[i] !== "\n") {
      if (text[i] === "\\" && i + 1 < text.length) {
        if (text[i + 1] === "\n") line++;
        t += text[i]! + text[i + 1]!;
        i += 2;
      } else t += text[i++]!;
    }
    if (text[i] === q) (t += q), i++;
    return t;
  }
}

/** The text of a string literal token (no prefix, no quotes, escapes as written; a raw string's body). */
function literal(t: string): string {
  const raw = /^(?:u8|u|U|L)?R"([^(]*)\(([\s\S]*)\)\1"$/.exec(t);
  if (raw) return raw[2]!;
  return t.replace(/^(u8|u|U|L)?/, "").replace(/^"|"$/g, "");
}

/**
 * Why a file name written in a source may not be looked up in a confined build (a phrase), or
 * undefined. `from`: the source's folder (absolute); `readable`: confinedReadable. Absolute names
 * and names with `..` (from the source's folder) must be readable; `~` never is; a `<…>` name may
 * hold no `..` (its include folder is not known here). A relative name without `..` is left: it
 * is looked up in include folders a confined build reads anyway.
 */
function pathProblem(name: string, angled: boolean, from: string, readable: (p: string) => boolean, capture?: string): string | undefined {
  const shown = JSON.stringify(name.length > 120 ? `${name.slice(0, 120)}…` : name);
  if (name.startsWith("~")) return `names ${shown}, in a home folder`;
  const climbs = name.split(/[/\\]/).includes("..");
  if (angled && climbs) return `names <${name}>, which climbs with ..`;
  // the build compiles a private copy of src/: a name of the capture folder itself reaches its live files, which an
  // edit may change after this scan (a trial's race), and a .. out of src/ lands elsewhere from the copy's folder
  const inCapture = (p: string) => capture !== undefined && (p === capture || p.startsWith(`${capture}/`));
  if (name.startsWith("/"))
    return inCapture(resolve(name))
      ? `names ${shown}, the capture folder by its absolute path (a confined build compiles a copy of src/: name it relative)`
      : readable(resolve(name))
        ? undefined
        : `names ${shown}, outside what a confined build reads`;
  if (climbs) {
    const p = resolve(from, name);
    if (inCapture(p) && capture !== undefined && !p.startsWith(`${capture}/src/`)) return `names ${shown}, which climbs out of src/`;
    return readable(p) ? undefined : `names ${shown}, which climbs out of what a confined build reads`;
  }
  return undefined;
}

/**
 * Whether a string literal's text looks like a path (one that pathProblem is asked about): absolute
 * (any number of leading slashes: `"//home/u/x"` is `/home/u/x` to the preprocessor, and a scan that
 * took `//` for no path let a trial's include through), `~`, or with a `..` part.
 */
const pathLike = (s: string) => /^(\/+[^\s/]|~)/.test(s) || /(^|[/\\])\.\.([/\\]|$)/.test(s);

/**
 * What in one source could make the preprocessor look up a file a confined build may not read
 * (phrases naming the line): see the file comment. `rel`: its capture-relative path; `abs`: its
 * absolute path (a relative name's base); `readable`: confinedReadable of the capture.
 */
export function probeProblems(text: string, rel: string, abs: string, readable: (p: string) => boolean, beyond?: string): string[] {
  const out: string[] = [];
  // a trigraph (??/ is a backslash under -std=c++14 or older) changes where strings and comments end,
  // which this scan cannot follow for every standard: one hid a __has_include from it (a trial)
  const tri = /\?\?[=/'()!<>-]/.exec(text);
  if (tri) out.push(`${rel}:${text.slice(0, tri.index).split("\n").length}: a trigraph (${tri[0]}), which a confined build does not take`);
  // likewise a backslash with blanks before the line's end: gcc joins the lines (with a warning), the scan would not
  const bs = /\\[ \t\f\v]+\r?\n/.exec(text);
  if (bs)
    out.push(`${rel}:${text.slice(0, bs.index).split("\n").length}: a backslash followed by blanks at the line's end, which gcc reads as joining the lines`);
  const toks = ppTokens(text);
  const from = posix.dirname(abs);
  // the capture folder: `abs` is its path joined with `rel`
  const capture = abs.endsWith(`/${rel}`) ? abs.slice(0, abs.length - rel.length - 1) : undefined;
  const say = (t: Token, what: string) => out.push(`${rel}:${t.line}: ${what}`);
  let directive = "";
  let bodyStart = -1;
  for (let i = 0; i < toks.length; i++) {
    const t = toks[i]!;
    const prev = toks[i - 1];
    const next = toks[i + 1];
    if (t.bol) directive = "";
    if (t.bol && t.text === "#" && t.kind === "punct") {
      directive = next?.kind === "id" ? next.text : "#";
      // where a #define's body starts (after the name, and the parameters of a function-like macro)
      bodyStart = -1;
      if (directive === "define" && toks[i + 2]?.kind === "id") {
        let b = i + 3;
        if (toks[b]?.text === "(" && toks[b]!.glued && !toks[b]!.bol) {
          while (b < toks.length && !toks[b]!.bol && toks[b]!.text !== ")") b++;
          b++;
        }
        bodyStart = b;
      }
      if (FILE_DIRECTIVES.has(directive)) {
        const op = toks[i + 2];
        if (op?.text === "<" && !op.bol) {
          let j = i + 3;
          let hn = "";
          for (; j < toks.length && !toks[j]!.bol && toks[j]!.text !== ">"; j++) hn += (toks[j]!.glued || j === i + 3 ? "" : " ") + toks[j]!.text;
          const p = pathProblem(hn, true, from, readable, capture);
          if (p) say(op, `#${directive} ${p}`);
        }
        // a quoted name is a string literal: checked below. A computed one (a macro naming the file) is
        // refused: what a macro expands to can be assembled from tokens no scan of the text sees as a
        // path (an empty macro before a `/`, token pasting), so a confined build takes written names only
        else if (!(op?.kind === "str" && op.text.startsWith('"')) && !op?.bol)
          say(op ?? t, `a computed #${directive} (a macro names the file): a confined build takes only a written "name" or <name>`);
      }
    }
    if (t.kind === "id" && FILE_QUERIES.has(t.text)) {
      // the user's own build searches folders the sandbox does not hold: a query there could answer otherwise (adversary 49)
      if (beyond) say(t, `${t.text}: your own build also searches ${beyond}, which a confined build cannot see, so the two could answer it differently`);
      // `__has_include(<…>)`: a header name, not a string token; a macro argument (`__has_include(P)`) is
      // checked where P's text is written (a string, or a path stringized from tokens, below)
      const arg = headerArgument(toks, i + 1);
      if (arg?.angled) {
        const p = pathProblem(arg.name, true, from, readable, capture);
        if (p) say(t, `${t.text} ${p}`);
      }
      // a computed operand (a macro, `__has_include(X(E/etc/shadow))`) or the query inside a macro: refused, as a computed
      // #include (`defined(__has_include)`, `#ifdef __has_include` name it without asking)
      if (!arg && next?.text === "(")
        say(t, `${t.text} without a written "name" or <name> in its parentheses (a macro names the file): a confined build takes only written names`);
    }
    // _Pragma("…") is a #pragma line once destringized: checked as one
    if (t.kind === "id" && t.text === "_Pragma" && next?.text === "(" && toks[i + 2]?.kind === "str") {
      const line = literal(toks[i + 2]!.text).replace(/\\(["\\])/g, "$1");
      for (const p of probeProblems(`#pragma ${line}\n`, rel, abs, readable)) say(t, `_Pragma: ${p.slice(p.indexOf(": ") + 2)}`);
    }
    if (t.kind === "str" && !/^(u8|u|U|L)?'/.test(t.text)) {
      const s = literal(t.text);
      if (pathLike(s)) {
        const p = pathProblem(s, false, from, readable, capture);
        if (p) say(t, `the string ${p}`);
      }
    }
    // C's / is always binary: after ( , < # or at the start of a macro's body, and followed at once by a
    // name, it can only begin a path (an operator passed to a macro, `F(/, divides)`, is not one)
    // a header name after #include or __has_include( is checked whole above
    const headerName =
      prev?.text === "<" && (FILE_DIRECTIVES.has(toks[i - 2]?.text ?? "") || (toks[i - 2]?.text === "(" && FILE_QUERIES.has(toks[i - 3]?.text ?? "")));
    const startsName =
      !headerName && next !== undefined && next.glued === true && !next.bol && (next.kind === "id" || next.kind === "num" || next.text === ".");
    if (t.kind === "punct" && t.text === "/" && startsName && (prev === undefined || ["(", ",", "<", "#", "##"].includes(prev.text) || i === bodyStart)) {
      say(t, "a / that starts a path (a macro argument, a header name or a macro's body, stringized into a file name)");
    }
    if (t.kind === "punct" && t.text === "." && next?.text === "." && next.glued) say(t, "`..` outside a string literal (a path, stringized into a file name)");
    if (t.kind === "num" && /\.\./.test(t.text)) say(t, "`..` in a number-like token (a path, stringized into a file name)");
  }
  return out;
}

/** After a file query (`__has_include`): `( "name" )` or `( <name> )` written out, else undefined. */
function headerArgument(toks: Token[], i: number): { name: string; angled: boolean } | undefined {
  if (toks[i]?.text !== "(") return undefined;
  const a = toks[i + 1];
  if (a?.kind === "str" && a.text.startsWith('"') && toks[i + 2]?.text === ")") return { name: literal(a.text), angled: false };
  if (a?.text !== "<") return undefined;
  let j = i + 2;
  let name = "";
  for (; j < toks.length && toks[j]!.text !== ">"; j++) {
    if (toks[j]!.line !== a.line || ["(", ")", "#", "##", ","].includes(toks[j]!.text) || (toks[j]!.kind === "id" && !toks[j]!.glued && j > i + 2))
      return undefined;
    name += toks[j]!.text;
  }
  return toks[j]?.text === ">" && toks[j + 1]?.text === ")" ? { name, angled: true } : undefined;
}

/**
 * Before a confined build: every regular file under the capture's src/, whatever its name (an
 * `#include "p.txt"` reads a file of any suffix: a scan of the C, C++, CUDA and HIP suffixes alone
 * let a candidate's `src/p.txt` ask `__has_include("/etc/shadow")`, a trial), is read and checked
 * (probeProblems) against what a confined build of `m` may read: at most SOURCES_MAX files of
 * SOURCE_MAX bytes each, no link followed. `at`: the folder whose src/ is read, the build's private
 * copy (src/format/staged-build.ts), so that the bytes checked are the bytes the compiler reads;
 * positions are judged as the capture's (`dir`).
 * @throws KerncapError E_CONFINED naming each file and line (at most 10), or a src/ past the bounds; E_UNSAFE_PATH (a link, FIFO… under src/)
 */
export function assertNoProbes(dir: string, m: Pick<Manifest, "source">, at = dir): void {
  const readable = confinedReadable(dir, m);
  const beyond = searchBeyondSandbox(at, readable);
  const root = realpathSync(dir);
  const problems: string[] = [];
  let count = 0;
  forEachSrcFile(at, (r, st) => {
    if (++count > SOURCES_MAX)
      throw new KerncapError("E_CONFINED", `src/ holds more than ${SOURCES_MAX} files: a confined build reads each first`, {
        hint: "Keep only the sources under src/, or validate on the command line.",
      });
    if (st.size > SOURCE_MAX)
      throw new KerncapError("E_CONFINED", `${r} has ${st.size} bytes: a confined build reads every file under src/ first, at most ${SOURCE_MAX} bytes each`, {
        hint: "Move data out of src/ (a source may include a file of any name, so every file there is read), or validate on the command line.",
      });
    // a link, a FIFO or a device: refused by readInCapture (E_UNSAFE_PATH), never followed nor opened for reading
    problems.push(...probeProblems(readInCapture(at, r, SOURCE_MAX)!.toString("utf8"), r, join(root, r), readable, beyond));
  });
  if (problems.length) {
    throw new KerncapError(
      "E_CONFINED",
      `the sources could make the preprocessor look up a file that a confined build may not read, and whether it exists would show in the build's result (${problems.length}): ${problems.slice(0, 10).join("; ")}${problems.length > 10 ? "; …" : ""}`,
      {
        hint: "Name headers under src/ (or the toolchain's) with a relative path written out: no absolute path or .. out of the capture, no __has_include of a macro. Nothing was built. The user may validate such sources on the command line.",
      },
    );
  }
}

/**
 * The include folders the user's own build of the capture in `at` searches beyond what a confined
 * build sees (a phrase), or undefined: a variable of kerncap's environment that adds flags or include
 * folders to every compile (CPATH, C_INCLUDE_PATH, CPLUS_INCLUDE_PATH, NVCC_PREPEND_FLAGS,
 * NVCC_APPEND_FLAGS; EXTRA_FLAGS with an include folder), or an include folder of build.sh other than
 * src/ and the toolchain's (`readable`: confinedReadable; an overlay capture's original folders). A
 * header there is hidden in the sandbox, so `__has_include` of a relative name written out could
 * answer "no" in the confined build and "yes" in the user's.
 */
function searchBeyondSandbox(at: string, readable: (p: string) => boolean): string | undefined {
  const variable = includeSearchVariable();
  if (variable) return `the folders ${variable} adds`;
  if (includeFolderWords(process.env.EXTRA_FLAGS ?? "").length) return "the include folders of EXTRA_FLAGS";
  let script = "";
  try {
    // its commands, not its comments
    script = (readInCapture(at, "build.sh", SOURCE_MAX)?.toString("utf8") ?? "").replace(/^[ \t]*#.*$/gm, "");
  } catch {
    // no build.sh to read: the build itself says so
  }
  for (const d of includeFolderWords(script)) {
    if (/^(?:\$here\/src|\.\/src|src)(?:\/|$)/.test(d)) continue;
    if (d.startsWith("/") && readable(join(d, "kerncap-probe.h"))) continue; // the toolchain's or the system's: in the sandbox
    return `the include folder ${JSON.stringify(d)} of build.sh`;
  }
  return undefined;
}

/**
 * Where the files under `at`/src/ (any name: a source may include one; at most SOURCES_MAX read, none
 * over SOURCE_MAX) `#include` (include_next, import) one of `files` (absolute paths) by a written
 * name the path ends with (`"x.h"` or `<sys/x.h>`, no `..`), as `src/k.cu:3 ("x.h")`, at most 10:
 * what the hint of a confined build that read outside points at (./confine.ts confinedError).
 * A file reached another way (a header it includes, a flag of build.sh) has none.
 */
export function includesNaming(at: string, files: string[]): string[] {
  const out: string[] = [];
  let count = 0;
  const named = (name: string) => {
    const n = posix.normalize(name);
    return !n.startsWith("..") && files.some((f) => f === n || f.endsWith(n.startsWith("/") ? n : `/${n}`));
  };
  forEachSrcFile(at, (r, st) => {
    if (!st.isFile()) return;
    if (++count > SOURCES_MAX || out.length >= 10) return false;
    const text = readInCapture(at, r, SOURCE_MAX)?.toString("utf8");
    if (text === undefined) return;
    const toks = ppTokens(text);
    for (let i = 0; i + 2 < toks.length; i++) {
      if (!(toks[i]!.bol && toks[i]!.text === "#" && FILE_DIRECTIVES.has(toks[i + 1]!.text))) continue;
      const op = toks[i + 2]!;
      let name: string | undefined;
      if (op.kind === "str" && op.text.startsWith('"')) name = literal(op.text);
      else if (op.text === "<") {
        name = "";
        for (let j = i + 3; j < toks.length && !toks[j]!.bol && toks[j]!.text !== ">"; j++) name += toks[j]!.text;
      }
      if (name && named(name) && out.length < 10) out.push(`${r}:${op.line} (${JSON.stringify(name)})`);
    }
  });
  return out;
}

/**
 * Each entry under `at`/src/ that is not a folder (files, and links, FIFOs … for the caller to
 * refuse), in name order, with its lstat: folders walked, none followed through a link, an
 * unreadable folder passed over. `visit` returns false to stop the walk.
 */
function forEachSrcFile(at: string, visit: (rel: string, st: Stats) => boolean | void): void {
  const walk = (rel: string): boolean => {
    let names: string[];
    try {
      names = readdirSync(join(at, rel)).sort();
    } catch {
      return true;
    }
    for (const n of names) {
      const r = `${rel}/${n}`;
      const st = lstatSync(join(at, r), { throwIfNoEntry: false });
      if (!st) continue;
      if (st.isDirectory() ? !walk(r) : visit(r, st) === false) return false;
    }
    return true;
  };
  walk("src");
}
