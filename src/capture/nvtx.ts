/**
 * NVTX range selection for `kerncap run` and `list` (`--nvtx`, `--nvtx-include EXPR`,
 * `--nvtx-exclude EXPR`, Nsight Compute's spelling): the expressions are checked here, before the
 * application starts, with the grammar the capture library parses and matches them with
 * (c/cuda/kc_nvtx.h says it; test/cpu/nvtx.test.ts runs one table through both), and turned into
 * the application's environment: KERNCAP_NVTX_INCLUDE / KERNCAP_NVTX_EXCLUDE (one expression per
 * line), KERNCAP_NVTX_SUMMARY (`list --print-summary per-nvtx`) and NVTX_INJECTION64_PATH naming the capture library, whose InitializeInjectionNvtx2 then
 * follows every thread's ranges (c/cuda/kc_nvtx.c).
 */
import { KerncapError } from "../errors.ts";

/** One parsed expression: canonical spelling, and what it selects (for messages). */
export interface NvtxExpr {
  text: string;
  canonical: string;
  kind: "push/pop" | "start/end";
  domain?: string;
  regex: boolean;
}

const SPECIAL = new Set(["/", ",", "@", "[", "]", "\\"]);

/** Index of the first unescaped `c` in s, or -1. */
function findUnescaped(s: string, c: string): number {
  for (let i = 0; i < s.length; i++) {
    if (s[i] === "\\") {
      i++;
      continue;
    }
    if (s[i] === c) return i;
  }
  return -1;
}

function escapedAt(s: string, i: number): boolean {
  let b = 0;
  while (b < i && s[i - 1 - b] === "\\") b++;
  return b % 2 === 1;
}

function unescape(s: string): string {
  let o = "";
  for (let i = 0; i < s.length; i++) {
    if (s[i] === "\\" && i + 1 < s.length && SPECIAL.has(s[i + 1]!)) i++; // "\\." stays for a regex
    o += s[i];
  }
  return o;
}

/** A regex the capture library compiles with regcomp(REG_EXTENDED): JavaScript's parser as a first check (src/util/posix-regex.ts checks --kernel the same way). */
function checkRegex(pattern: string, what: string, text: string): void {
  try {
    new RegExp(pattern);
  } catch (e) {
    throw usage(`invalid regex in ${what} "${pattern}" of NVTX expression "${text}": ${(e as Error).message}`);
  }
}

function usage(message: string): KerncapError {
  return new KerncapError("E_USAGE", message, {
    hint: 'NVTX expressions as ncu writes them: "A/" kernels inside push/pop range A, "A/B/" B directly inside A, "A/*/B/" B anywhere inside A, "[A/" A outermost, "A]" A innermost, "A,B" inside start/end ranges A and B, "DOMAIN@A/" another domain than the default, "regex:RE/" regexes (docs/verbs.md, "NVTX ranges").',
  });
}

/**
 * Parse one --nvtx-include/--nvtx-exclude expression (grammar: c/cuda/kc_nvtx.h).
 * @throws KerncapError E_USAGE naming what is wrong (the capture library would refuse it too).
 */
export function parseNvtxExpr(text: string): NvtxExpr {
  let s = text;
  const regex = s.startsWith("regex:");
  if (regex) s = s.slice(6);
  if (!s) throw usage(`empty NVTX expression "${text}": name a range ("A/" push/pop, "A" start/end)`);
  if (s.includes("\n")) throw usage(`NVTX expression "${text.replace(/\n/g, "\\n")}" holds a line break`);
  let domain: string | undefined;
  const at = findUnescaped(s, "@");
  if (at === 0) throw usage(`NVTX expression "${text}": empty domain before '@'`);
  if (at > 0) {
    domain = unescape(s.slice(0, at));
    if (regex) checkRegex(domain, "NVTX domain", text);
    s = s.slice(at + 1);
    if (findUnescaped(s, "@") >= 0) throw usage(`NVTX expression "${text}": more than one '@' (escape a literal one as \\@)`);
  }
  const trailingSlash = s.length > 0 && s.endsWith("/") && !escapedAt(s, s.length - 1);
  const bottom = s.startsWith("[");
  if (bottom) s = s.slice(1);
  if (trailingSlash) s = s.slice(0, -1);
  const top = s.endsWith("]") && !escapedAt(s, s.length - 1);
  if (top) s = s.slice(0, -1);
  const pushpop = bottom || top || trailingSlash;
  if (!s) throw usage(`NVTX expression "${text}": no range name`);
  if (pushpop && findUnescaped(s, ",") >= 0)
    throw usage(`NVTX expression "${text}": ',' separates start/end ranges, '/' push/pop ranges: not both (escape a literal one as \\,)`);
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (c === "\\") {
      i++;
      continue;
    }
    if ((!regex && (c === "[" || c === "]")) || (!pushpop && c === "/")) {
      const where = c === "/" ? "in a push/pop expression, which ends with '/'" : c === "[" ? "at the start" : "at the end";
      throw usage(`NVTX expression "${text}": '${c}' is only allowed ${where} (escape a literal one as \\${c})`);
    }
  }
  const sep = pushpop ? "/" : ",";
  const items: string[] = [];
  for (let rest = s; ; ) {
    const i = findUnescaped(rest, sep);
    const raw = i < 0 ? rest : rest.slice(0, i);
    if (!raw) throw usage(`NVTX expression "${text}": empty range name (two '${sep}' in a row, or one at an end)`);
    if (pushpop && (raw === "*" || raw === "+")) items.push(raw);
    else {
      const name = unescape(raw);
      if (regex) checkRegex(name, "NVTX range name", text);
      // escaped as the library's canonical spelling escapes (kc_nvtx_filter.c needs_escape)
      const needs = (ch: string, k: number): boolean => {
        if (ch === "\\") return k + 1 === name.length || SPECIAL.has(name[k + 1]!);
        return SPECIAL.has(ch) || (pushpop && k === 0 && name.length === 1 && (ch === "*" || ch === "+"));
      };
      const esc = [...name].map((ch, k) => (needs(ch, k) ? `\\${ch}` : ch)).join("");
      items.push(esc);
    }
    if (i < 0) break;
    rest = rest.slice(i + 1);
  }
  if (items.length > 32) throw usage(`NVTX expression "${text}": more than 32 ranges`);
  const canonical = `${regex ? "regex:" : ""}${domain !== undefined ? `${domain}@` : ""}${bottom ? "[" : ""}${items.join(sep)}${top ? "]" : pushpop ? "/" : ""}`;
  return { text, canonical, kind: pushpop ? "push/pop" : "start/end", ...(domain !== undefined ? { domain } : {}), regex };
}

/** What `run`/`list` asked for: --nvtx, and its include and exclude expressions in order. */
export interface NvtxSelection {
  include: string[];
  exclude: string[];
  /** `list --print-summary per-nvtx`: the library counts each launch by its thread's open ranges (KERNCAP_NVTX_SUMMARY). */
  summary?: boolean;
}

/**
 * The selection from the verbs' options: `nvtx` (--nvtx), the --nvtx-include and --nvtx-exclude
 * values as given (each repeatable, at most 32). An include or exclude implies --nvtx (ncu wants
 * both spelled; kerncap takes either). Undefined when nothing was asked.
 * @throws KerncapError E_USAGE for an expression that does not parse, or more than 32 of a kind.
 */
export function nvtxSelection(nvtx: boolean, include: string[], exclude: string[]): NvtxSelection | undefined {
  if (!nvtx && !include.length && !exclude.length) return undefined;
  for (const [flag, list] of [
    ["--nvtx-include", include],
    ["--nvtx-exclude", exclude],
  ] as const) {
    if (list.length > 32) throw usage(`more than 32 ${flag} expressions`);
    for (const e of list) parseNvtxExpr(e);
  }
  return { include, exclude };
}

/**
 * The application's environment for a selection: the expressions for the capture library, and
 * NVTX_INJECTION64_PATH naming it (`lib`: the library CUDA_INJECTION64_PATH names). An application
 * whose NVTX already names another injection (nsys, ncu) loses it, with a warning.
 */
export function nvtxEnv(
  sel: NvtxSelection,
  lib: string,
  env: Record<string, string | undefined> = process.env,
): { env: Record<string, string>; warnings: string[] } {
  const prev = env.NVTX_INJECTION64_PATH;
  const warnings =
    prev && prev !== lib
      ? [`NVTX_INJECTION64_PATH was already set (${prev}); kerncap replaces it for the application, so that tool does not see its NVTX ranges`]
      : [];
  const out: Record<string, string> = { NVTX_INJECTION64_PATH: lib };
  if (sel.include.length) out.KERNCAP_NVTX_INCLUDE = sel.include.join("\n");
  if (sel.exclude.length) out.KERNCAP_NVTX_EXCLUDE = sel.exclude.join("\n");
  if (sel.summary) out.KERNCAP_NVTX_SUMMARY = "1";
  return { env: out, warnings };
}
