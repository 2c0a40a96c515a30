/**
 * A confined build's sources name no file outside (docs/security.md, "A file's existence"): the
 * dependency list (./confine.ts) says which files the compiler *read*, but the preprocessor also
 * learns whether a file *exists* without reading it (`#if __has_include("/home/u/.ssh/id_rsa")`,
 * `#pragma GCC dependency`, an `#include` that fails or not), and the build's success, or the
 * kernel it compiles, hands that bit to the agent. So before a confined build every source under
 * src/ is read with the preprocessor's own tokens (comments, string and raw string literals,
 * line splices) and refused when it could make the preprocessor look up a path outside:
 *  - `__has_include`, `__has_include_next`, `__has_embed`: only with a header name written out
 *    (`"x.h"` or `<x.h>`), relative and without `..` (a macro argument is refused: `#define P
 *    "/etc/x"` then `__has_include(P)`);
 *  - `#include`, `#include_next`, `#import`, `#embed`: a header name written out, not absolute,
 *    whose `..` stay inside the capture folder (`<…>`: no `..`); a computed `#include MACRO` is refused;
 *  - `#if`/`#elif`: no function-like macro but `defined` and the compilers' `__has_builtin`-like
 *    queries, and no macro defined in these sources whose body holds a call, `#` or `##` (a token
 *    pasted into `__has_include` only works there);
 *  - `_Pragma` only with a string literal, and no `dependency` anywhere (`#pragma GCC dependency`
 *    fails the build on a missing file);
 *  - no string literal that is an absolute path or climbs with `..`, and no `/` or `..` starting a
 *    macro argument (`S(/etc/x)` stringized into one).
 */
import { lstatSync, readdirSync } from "node:fs";
import { join, posix } from "node:path";
import { KerncapError } from "../errors.ts";
import { readInCapture } from "../format/paths.ts";

/** The largest source read (bytes); a larger file under src/ is refused. */
const SOURCE_MAX = 16 << 20;
/** The most files under src/ read. */
const SOURCES_MAX = 20000;

/** Queries of the compilers that look no file up. */
const SAFE_QUERIES = new Set(["defined", "__has_builtin", "__has_attribute", "__has_cpp_attribute", "__has_c_attribute", "__has_declspec_attribute", "__has_feature", "__has_extension", "__has_warning", "__is_identifier", "__is_target_arch", "__is_target_vendor", "__is_target_os", "__is_target_environment", "__building_module"]);
/** The preprocessor's queries that look a file up. */
const FILE_QUERIES = new Set(["__has_include", "__has_include_next", "__has_embed", "__has_include__", "__has_include_next__"]);

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
        push("str", body, at);
        i = end;
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
      const t = three === "..." || three === "%:%" ? three : ["##", "%:", "<:", ":>", "<%", "%>", "::", "->", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||"].includes(two) ? two : c;
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

/** The text of a string literal token (no prefix, no quotes; escapes as written). */
const literal = (t: string) => t.replace(/^(u8|u|U|L)?R?/, "").replace(/^"|"$/g, "");

/** Why a header name written in a source may not be looked up (a phrase), or undefined: absolute, `~`, or `..` that leaves the capture (quoted: from the source's folder `from`, capture-relative) or any `..` (`<…>`). */
function headerProblem(name: string, angled: boolean, from: string): string | undefined {
  if (name.startsWith("/") || name.startsWith("~") || /^[A-Za-z]:/.test(name)) return `names ${JSON.stringify(name)}, an absolute path`;
  const parts = name.split("/");
  if (!parts.includes("..")) return undefined;
  if (angled) return `names <${name}>, which climbs with ..`;
  const resolved = posix.normalize(posix.join(from, name));
  if (resolved === ".." || resolved.startsWith("../")) return `names ${JSON.stringify(name)}, which leaves the capture folder`;
  return undefined;
}

/**
 * What in one source (its text; `rel`: its capture-relative path) could make the preprocessor look
 * up a file outside the capture (phrases with the line). `defs`: the bodies of the macros defined
 * in all the sources checked (name → body tokens), for the `#if` rule.
 */
export function probeProblems(text: string, rel: string, defs: Map<string, Token[]> = definitions([ppTokens(text)])): string[] {
  const toks = ppTokens(text);
  const from = posix.dirname(rel);
  const out: string[] = [];
  const say = (t: Token, what: string) => out.push(`${rel}:${t.line}: ${what}`);
  for (let i = 0; i < toks.length; i++) {
    const t = toks[i]!;
    const next = toks[i + 1];
    // a directive
    if (t.bol && t.text === "#" && t.kind === "punct") {
      const name = next?.kind === "id" ? next.text : "";
      let end = i + 1;
      while (end < toks.length && !toks[end]!.bol) end++;
      const rest = toks.slice(i + 2, end);
      if (["include", "include_next", "import", "embed"].includes(name)) {
        const op = rest[0];
        if (op?.kind === "str" && op.text.startsWith('"')) {
          const p = headerProblem(literal(op.text), false, from);
          if (p) say(op, `#${name} ${p}`);
        } else if (op?.text === "<") {
          const close = rest.findIndex((x) => x.text === ">");
          const hn = rest.slice(1, close < 0 ? undefined : close).map((x) => x.text).join("");
          const p = headerProblem(hn, true, from);
          if (p) say(op, `#${name} ${p}`);
        } else say(next ?? t, `#${name} of a computed name (a macro): kerncap mcp cannot tell which file it looks up`);
      } else if (name === "if" || name === "elif") {
        for (const p of ifProblems(rest, defs, new Set())) say(next ?? t, `#${name} ${p}`);
      } else if (name === "pragma" && rest.some((x) => /dependency/.test(x.text))) say(next ?? t, "#pragma … dependency looks a file up");
      // the tokens of every directive (a #define's body too) go through the checks below as well
    }
    // `defined(__has_include)`, `#ifdef __has_include`: asks whether the query exists, looks nothing up
    const asked = toks[i - 1]?.text === "defined" || (toks[i - 1]?.text === "(" && toks[i - 2]?.text === "defined") || (toks[i - 2]?.text === "#" && /^(ifdef|ifndef|elifdef|elifndef|undef)$/.test(toks[i - 1]?.text ?? ""));
    if (t.kind === "id" && FILE_QUERIES.has(t.text) && asked) continue;
    if (t.kind === "id" && FILE_QUERIES.has(t.text)) {
      const arg = headerArgument(toks, i + 1);
      if (!arg) say(t, `${t.text} without a header name written out (a macro, or a name pasted together): kerncap mcp cannot tell which file it looks up`);
      else {
        const p = headerProblem(arg.name, arg.angled, from);
        if (p) say(t, `${t.text} ${p}`);
      }
    } else if (t.kind === "id" && t.text === "_Pragma") {
      const a = toks[i + 1]?.text === "(" ? toks[i + 2] : undefined;
      if (!a || a.kind !== "str" || toks[i + 3]?.text !== ")") say(t, "_Pragma of anything but a string literal: kerncap mcp cannot tell what it asks for");
    } else if (/dependency/.test(t.text) && (t.kind === "id" || t.kind === "str")) say(t, "`dependency` (#pragma GCC dependency looks a file up)");
    else if (t.kind === "str" && !t.text.startsWith("'")) {
      const s = literal(t.text);
      const prev = toks[i - 1];
      const operand = prev?.kind === "id" && ["include", "include_next", "import", "embed"].includes(prev.text) && toks[i - 2]?.text === "#";
      if (!operand && (/^(\/|~\/)[^\s]/.test(s) || /(^|\/)\.\.(\/|$)/.test(s))) say(t, `the string ${JSON.stringify(s.slice(0, 80))} is a path outside (absolute, or climbing with ..)`);
    } else if (t.kind === "punct" && (t.text === "(" || t.text === ",") && next?.text === "/") say(next, "a macro argument starting with / (a path, stringized)");
    else if (t.kind === "punct" && (t.text === "(" || t.text === "," || t.text === "/") && next?.text === "." && toks[i + 2]?.text === ".") say(next, "`..` in a macro argument (a path, stringized)");
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
    if (toks[j]!.line !== a.line || ["(", ")", "#", "##"].includes(toks[j]!.text)) return undefined;
    name += toks[j]!.text;
  }
  return toks[j]?.text === ">" && toks[j + 1]?.text === ")" ? { name, angled: true } : undefined;
}

/**
 * Why an `#if` expression may look a file up (phrases): a call of a function-like macro other
 * than `defined` and the compilers' own queries (SAFE_QUERIES; the file queries are checked where
 * they stand), or a macro defined in the sources whose body holds such a call, `#` or `##`.
 */
function ifProblems(expr: Token[], defs: Map<string, Token[]>, seen: Set<string>): string[] {
  const out: string[] = [];
  for (let i = 0; i < expr.length; i++) {
    const t = expr[i]!;
    if (t.kind === "punct" && (t.text === "#" || t.text === "##")) out.push(`uses ${t.text} (a token pasted or stringized)`);
    if (t.kind !== "id") continue;
    if (t.text === "defined") {
      i += expr[i + 1]?.text === "(" ? 3 : 1; // defined X, defined(X): X is not expanded
      continue;
    }
    if (expr[i + 1]?.text === "(") {
      if (SAFE_QUERIES.has(t.text) || FILE_QUERIES.has(t.text)) {
        let depth = 0;
        for (i++; i < expr.length; i++) {
          if (expr[i]!.text === "(") depth++;
          else if (expr[i]!.text === ")" && --depth === 0) break;
        }
        continue;
      }
      out.push(`calls ${t.text}(…), a function-like macro: its expansion is not checked`);
      continue;
    }
    const body = defs.get(t.text);
    if (body && !seen.has(t.text)) {
      seen.add(t.text);
      for (const p of ifProblems(body, defs, seen)) out.push(`uses ${t.text}, which ${p}`);
    }
  }
  return out;
}

/** Whether the #define's name at `i` is a function-like macro's: its ( follows with no space (C's rule). */
function fnLike(toks: Token[], i: number): boolean {
  return toks[i + 1]?.text === "(" && toks[i + 1]!.glued === true;
}

/** The object-like macros the sources define: name → body tokens. */
export function definitions(sources: Token[][]): Map<string, Token[]> {
  const defs = new Map<string, Token[]>();
  for (const toks of sources) {
    for (let i = 0; i < toks.length; i++) {
      const t = toks[i]!;
      if (!(t.bol && t.text === "#" && toks[i + 1]?.text === "define" && toks[i + 2]?.kind === "id")) continue;
      let end = i + 1;
      while (end < toks.length && !toks[end]!.bol) end++;
      const name = toks[i + 2]!.text;
      // an object-like macro's body: what it expands to in an #if (a function-like one is a call there, refused as such)
      if (!fnLike(toks, i + 2)) defs.set(name, toks.slice(i + 3, end));
    }
  }
  return defs;
}

/**
 * Before a confined build: every file under the capture's src/ whose name ends as `suffixes` do
 * (the frontend's sources, what an agent may write) is read and checked (probeProblems).
 * @throws KerncapError E_CONFINED naming each file and line (at most 10), E_UNSAFE_PATH (a link… under src/)
 */
export function assertNoProbes(dir: string, suffixes: readonly string[]): void {
  const files: { rel: string; text: string }[] = [];
  const walk = (rel: string) => {
    let names: string[];
    try {
      names = readdirSync(join(dir, rel)).sort();
    } catch {
      return;
    }
    for (const n of names) {
      const r = `${rel}/${n}`;
      const st = lstatSync(join(dir, r));
      if (st.isDirectory()) walk(r);
      else if (suffixes.some((s) => n.endsWith(s))) {
        if (files.length >= SOURCES_MAX) throw new KerncapError("E_CONFINED", `src/ holds more than ${SOURCES_MAX} sources: kerncap mcp checks each before a confined build`, { hint: "Validate on the command line." });
        files.push({ rel: r, text: readInCapture(dir, r, SOURCE_MAX)!.toString("utf8") });
      }
    }
  };
  walk("src");
  const defs = definitions(files.map((f) => ppTokens(f.text)));
  const problems = files.flatMap((f) => probeProblems(f.text, f.rel, defs));
  if (problems.length) {
    throw new KerncapError("E_CONFINED", `the sources could make the preprocessor look up a file outside the capture, which a confined build (kerncap mcp) does not allow: whether it exists would show in the build's result (${problems.length}): ${problems.slice(0, 10).join("; ")}${problems.length > 10 ? "; …" : ""}`, {
      hint: "Name headers under src/ (or the toolchain's) with a relative path written out; no __has_include, #include or _Pragma of a macro, no absolute path. Nothing was built. The user may validate such sources on the command line.",
    });
  }
}
