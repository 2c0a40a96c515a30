/**
 * The declaration splitter of the device-side pruning (./policy.ts has the whole design): the
 * token stream cut into namespace-scope items (declarations, directives, namespace and extern "C"
 * braces), skipping template headers, requires-clauses and bracketed groups.
 */
import { isIdStart, isName, K, KEYWORDS, type Tokens, TYPE_KEYWORDS } from "./tokens.ts";

/** A namespace-scope item: a declaration (tokens [a, b)), a directive, or a namespace / extern "C" brace. */
export interface Item {
  kind: "decl" | "dir" | "open" | "close";
  a: number;
  b: number;
  /** How many namespace / extern "C" braces enclose it. */
  nest: number;
}

/** Index after the group opened at `i` (( [ { or <); `<` groups stop at ; and { (not a template argument list). */
export function skipGroup(v: string[], i: number, lim: number): number {
  const op = v[i]!;
  if (op === "<") {
    let d = 0;
    while (i < lim) {
      const s = v[i]!;
      if (s === "(" || s === "[") {
        i = skipGroup(v, i, lim);
        continue;
      }
      if (s === "<") d++;
      else if (s === ">") d--;
      else if (s === ";" || s === "{") return i;
      i++;
      if (d <= 0) return i;
    }
    return i;
  }
  const cl = op === "(" ? ")" : op === "[" ? "]" : "}";
  let d = 0;
  while (i < lim) {
    const s = v[i]!;
    if (s === op) d++;
    else if (s === cl) d--;
    i++;
    if (d === 0) return i;
  }
  return i;
}

/**
 * Index after the leading `template <...>` headers of v from i (several, for member templates of
 * templates; `i` when none), adding their parameter names to `tp`. A `<` after a non-type
 * parameter's name is a comparison (`enable_if_t<_Index<2, int> = 0>`, CCCL's get.h), not an
 * argument list; ( and [ groups are skipped.
 */
export function templateHeaders(v: string[], i: number, lim: number, tp?: Set<string>): number {
  while (i + 1 < lim && v[i] === "template" && v[i + 1] === "<") {
    const nontype = new Set<string>();
    let j = i + 1,
      d = 0;
    while (j < lim) {
      const s = v[j]!;
      if (s === "(" || s === "[") {
        j = skipGroup(v, j, lim);
        continue;
      }
      if (s === "<") {
        if (!nontype.has(v[j - 1]!)) d++;
      } else if (s === ">") d--;
      else if (s === ";" || s === "{")
        break; // not a template header after all
      else if (d === 1) {
        const p = v[j - 1] ?? "",
          nx = v[j + 1] ?? "";
        if ((s === "typename" || s === "class") && (p === "<" || p === "," || p === ">") && isName(nx) && v[j + 2] !== "::") tp?.add(nx);
        else if (s === "..." && isName(nx) && (v[j + 2] === "," || v[j + 2] === ">")) tp?.add(nx);
        else if (isName(s) && (nx === "," || nx === ">" || nx === "=") && (isName(p) || TYPE_KEYWORDS.has(p) || p === "*" || p === "&")) {
          tp?.add(s);
          nontype.add(s);
        }
      }
      j++;
      if (d <= 0) break;
    }
    i = skipRequiresClause(v, j, lim);
  }
  return i;
}

/**
 * Index after a requires-clause at i (`requires C<T> && requires (T& t) { t.f(); } || (sizeof(T) > 4)`:
 * id-expressions with template arguments, parenthesized expressions, requires-expressions, joined
 * by && and ||); `i` when there is none or its shape is not one of those. Line markers between its
 * tokens are skipped.
 */
function skipRequiresClause(v: string[], i: number, lim: number): number {
  if (v[i] !== "requires") return i;
  const dir = (j: number) => j < lim && v[j]!.charCodeAt(0) === 35;
  let j = i + 1;
  for (;;) {
    while (dir(j)) j++;
    const s = v[j];
    if (s === "(") j = skipGroup(v, j, lim);
    else if (s === "true" || s === "false") j++;
    else if (s === "requires") {
      j++;
      while (dir(j)) j++;
      if (v[j] === "(") j = skipGroup(v, j, lim);
      while (dir(j)) j++;
      if (v[j] !== "{") return i;
      j = skipGroup(v, j, lim);
    } else if (s === "::" || (s !== undefined && isName(s))) {
      if (v[j] === "::") j++;
      while (j < lim && isName(v[j]!)) {
        j++;
        if (v[j] === "<") j = skipGroup(v, j, lim);
        if (v[j] !== "::") break;
        j++;
      }
    } else return i;
    while (dir(j)) j++;
    if (v[j] === "&&" || v[j] === "||") {
      j++;
      continue;
    }
    return j;
  }
}

/** Index after a leading `template <...>` header (several); `i` when none. */
export function skipTemplateHeaders(v: string[], i: number, lim: number): number {
  return templateHeaders(v, i, lim);
}

/** Split the token stream into namespace-scope items. */
export function splitItems(t: Tokens, from = 0, items: Item[] = []): Item[] {
  const v = t.text,
    k = t.kind,
    n = t.n;
  let nest = 0;
  const walk = (i: number, inner: boolean): number => {
    while (i < n) {
      if (k[i] === K.Dir) {
        items.push({ kind: "dir", a: i, b: i + 1, nest });
        i++;
        continue;
      }
      const s = v[i]!;
      if (s === "}" && inner) return i;
      if (s === ";") {
        items.push({ kind: "decl", a: i, b: i + 1, nest });
        i++;
        continue;
      }
      const body = containerBody(t, i);
      if (body >= 0) {
        i = container(i, body);
        continue;
      }
      const q = declarationEnd(t, i);
      items.push({ kind: "decl", a: i, b: q, nest });
      i = q;
    }
    return i;
  };
  // namespace N { / extern "C" { at i, its first inner token at `inner`: the index after its '}'
  const container = (i: number, inner: number): number => {
    items.push({ kind: "open", a: i, b: inner, nest });
    nest++;
    const e = walk(inner, true);
    nest--;
    items.push({ kind: "close", a: e, b: Math.min(e + 1, n), nest });
    return e + 1;
  };
  walk(from, false);
  return items;
}

/** `namespace N {`, `inline namespace N {` or `extern "C" {` at i: the index of its first inner token; -1 for anything else. */
function containerBody(t: Tokens, i: number): number {
  const v = t.text,
    s = v[i];
  let j = i;
  if (s === "inline" && v[i + 1] === "namespace") j = i + 1;
  if (v[j] === "namespace") {
    let q = j + 1;
    while (q < t.n && v[q] !== "{" && v[q] !== ";" && v[q] !== "=") q++;
    if (v[q] === "{") return q + 1;
  }
  if (s === "extern" && t.kind[i + 1] === K.Str && v[i + 2] === "{") return i + 3;
  return -1;
}

/** A declaration at i: the index after it, its ';' at depth 0 or the brace group that ends a function definition. */
function declarationEnd(t: Tokens, i: number): number {
  const v = t.text,
    k = t.kind,
    n = t.n;
  let q = skipTemplateHeaders(v, i, n);
  let depth = 0,
    classlike = false,
    sawEq = false,
    ctorInit = false;
  // a requires-expression in a requires-clause (`requires C<_Os> && requires (_Os& __os) { __os << __t; }`,
  // libstdc++'s <ostream> in C++20): its `{…}` is no body. `requires` after an operator starts one;
  // after `>` or `)` it is the clause itself (`requires (C<T>) {` is a function's body)
  let reqExpr = false;
  let pw = ""; // the previous token (directives left out)
  while (q < n) {
    if (k[q] === K.Dir) {
      q++;
      continue;
    }
    const w = v[q]!;
    if (depth === 0) {
      if (w === "class" || w === "struct" || w === "union" || w === "enum" || w === "typedef") classlike = true;
      if (w === "=" && pw !== "operator") sawEq = true;
      if (w === ":" && (pw === ")" || pw === "noexcept")) ctorInit = true; // X::X(…) noexcept : a{…}, b(…) {…}
      if (w === ";") return q + 1;
      if (w === "requires" && ["&&", "||", "!", "(", ",", "=", "requires", "?", ":"].includes(pw)) reqExpr = true;
      if (w === "{" && reqExpr && (pw === "requires" || pw === ")")) {
        q = skipGroup(v, q, n);
        pw = "}";
        reqExpr = false;
        continue;
      }
      if (w === "{") {
        const init = ctorInit && (pw === ">" || (isIdStart(pw.charCodeAt(0)) && !KEYWORDS.has(pw))); // a member's brace initializer
        q = braceGroupEnd(t, q);
        pw = "}";
        if (classlike || sawEq || init) continue; // struct X {…} x;  int a[] = {…};
        return q < n && v[q] === ";" ? q + 1 : q;
      }
    }
    if (w === "(" || w === "[") depth++;
    else if (w === ")" || w === "]") depth--;
    pw = w;
    q++;
  }
  return q;
}

/** The index after the brace group whose `{` is at q (braces of directives not counted); the token count when unclosed. */
function braceGroupEnd(t: Tokens, q: number): number {
  let d = 1;
  q++;
  while (q < t.n && d) {
    const x = t.text[q]!;
    if (t.kind[q] !== K.Dir) {
      if (x === "{") d++;
      else if (x === "}") d--;
    }
    q++;
  }
  return q;
}

/** The non-directive token texts of [a, b). */
export function words(t: Tokens, a: number, b: number): string[] {
  const out: string[] = [];
  for (let i = a; i < b; i++) if (t.kind[i] !== K.Dir) out.push(t.text[i]!);
  return out;
}
