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

const enum K {
  Id,
  Num,
  Str,
  Chr,
  Punct,
  Dir,
}

/** Tokens of the preprocessed text, as parallel arrays (kind, start, end offsets, text). */
interface Tokens {
  kind: Uint8Array;
  start: Int32Array;
  end: Int32Array;
  text: string[];
  n: number;
}

const STR_PREFIX = new Set(["u8", "u", "U", "L"]);
const RAW_PREFIX = new Set(["R", "u8R", "uR", "UR", "LR"]);

function isIdStart(c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 95 || c === 36;
}
function isIdChar(c: number): boolean {
  return isIdStart(c) || (c >= 48 && c <= 57);
}
function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

/**
 * Tokenize preprocessed C++ (gcc -E output: line markers and #pragma lines are the only
 * directives). `>>` is two `>` tokens (it closes two template argument lists); `>=` and `>>=` are one.
 */
function tokenize(src: string, from = 0, prior?: Tokens, priorN = 0): Tokens {
  const cap = Math.max(1024, priorN + ((src.length - from) >> 2));
  let kind = new Uint8Array(cap), start = new Int32Array(cap), end = new Int32Array(cap);
  const text: string[] = prior ? prior.text.slice(0, priorN) : [];
  let n = 0;
  if (prior) {
    kind.set(prior.kind.subarray(0, priorN)); start.set(prior.start.subarray(0, priorN)); end.set(prior.end.subarray(0, priorN));
    n = priorN;
  }
  const push = (k: K, a: number, b: number) => {
    if (n === kind.length) {
      const k2 = new Uint8Array(n * 2); k2.set(kind); kind = k2;
      const s2 = new Int32Array(n * 2); s2.set(start); start = s2;
      const e2 = new Int32Array(n * 2); e2.set(end); end = e2;
    }
    kind[n] = k; start[n] = a; end[n] = b; text.push(src.slice(a, b)); n++;
  };
  const len = src.length;
  let i = from;
  let lineStart = from === 0 || /^[ \t]*$/.test(src.slice(src.lastIndexOf("\n", from - 1) + 1, from));
  while (i < len) {
    const c = src.charCodeAt(i);
    if (c === 10) { i++; lineStart = true; continue; }
    if (c === 32 || c === 9 || c === 13 || c === 12 || c === 11) { i++; continue; }
    if (c === 35 /* # */ && lineStart) {
      let j = src.indexOf("\n", i);
      if (j < 0) j = len;
      push(K.Dir, i, j); i = j; continue;
    }
    lineStart = false;
    if (c === 47 /* / */ && src.charCodeAt(i + 1) === 47) { const j = src.indexOf("\n", i); i = j < 0 ? len : j; continue; }
    if (c === 47 && src.charCodeAt(i + 1) === 42) { const j = src.indexOf("*/", i + 2); i = j < 0 ? len : j + 2; continue; }
    if (isIdStart(c)) {
      let j = i + 1;
      while (j < len && isIdChar(src.charCodeAt(j))) j++;
      const id = src.slice(i, j);
      const q = src.charCodeAt(j);
      if (q === 34 && RAW_PREFIX.has(id)) { // R"delim( ... )delim"
        const open = src.indexOf("(", j);
        const delim = src.slice(j + 1, open);
        const close = src.indexOf(`)${delim}"`, open);
        const e = close < 0 ? len : close + delim.length + 2;
        push(K.Str, i, e); i = e; continue;
      }
      if ((q === 34 || q === 39) && STR_PREFIX.has(id)) { i = quoted(src, j, q, (e) => push(q === 34 ? K.Str : K.Chr, i, e)); continue; }
      push(K.Id, i, j); i = j; continue;
    }
    if (isDigit(c) || (c === 46 && isDigit(src.charCodeAt(i + 1)))) {
      let j = i + 1;
      while (j < len) {
        const d = src.charCodeAt(j);
        if ((d === 43 || d === 45) && /[eEpP]/.test(src[j - 1]!)) { j++; continue; }
        if (isIdChar(d) || d === 46 || d === 39) { j++; continue; }
        break;
      }
      push(K.Num, i, j); i = j; continue;
    }
    if (c === 34 || c === 39) { const a = i; i = quoted(src, i, c, (e) => push(c === 34 ? K.Str : K.Chr, a, e)); continue; }
    const w = punctLength(src, i, c);
    push(K.Punct, i, i + w); i += w; continue;
  }
  return { kind, start, end, text, n };
}

/** Length of the punctuator at i (first char code c): 3 for ->* ... <<= >>= <=>, 2 for the PUNCT2 pairs, else 1. */
function punctLength(src: string, i: number, c: number): number {
  const c2 = src.charCodeAt(i + 1);
  if (c2 !== c2) return 1; // NaN: end of text
  const c3 = src.charCodeAt(i + 2);
  switch (c) {
    case 45: /* - */ if (c2 === 62) return c3 === 42 ? 3 : 2; return c2 === 45 || c2 === 61 ? 2 : 1;
    case 46: /* . */ if (c2 === 46 && c3 === 46) return 3; return c2 === 42 ? 2 : 1;
    case 60: /* < */ if (c2 === 60) return c3 === 61 ? 3 : 2; if (c2 === 61) return c3 === 62 ? 3 : 2; return 1;
    case 62: /* > */ if (c2 === 62 && c3 === 61) return 3; return c2 === 61 ? 2 : 1;
    case 58: /* : */ return c2 === 58 ? 2 : 1;
    case 38: /* & */ return c2 === 38 || c2 === 61 ? 2 : 1;
    case 124: /* | */ return c2 === 124 || c2 === 61 ? 2 : 1;
    case 43: /* + */ return c2 === 43 || c2 === 61 ? 2 : 1;
    case 35: /* # */ return c2 === 35 ? 2 : 1;
    case 61: case 33: case 42: case 47: case 37: case 94: /* = ! * / % ^ */ return c2 === 61 ? 2 : 1;
    default: return 1;
  }
}

/** Skip a quoted literal starting at the quote at `q0`; calls done(end) and returns end. */
function quoted(src: string, q0: number, quote: number, done: (e: number) => void): number {
  let j = q0 + 1;
  while (j < src.length) {
    const d = src.charCodeAt(j);
    if (d === 92) { j += 2; continue; }
    if (d === quote) { j++; break; }
    if (d === 10) break;
    j++;
  }
  done(j);
  return j;
}

const KEYWORDS = new Set(
  ("alignas alignof asm auto bool break case catch char char8_t char16_t char32_t class const consteval constexpr constinit const_cast continue " +
    "decltype default delete do double dynamic_cast else enum explicit export extern false float for friend goto if inline int long mutable " +
    "namespace new noexcept nullptr operator private protected public register reinterpret_cast requires return short signed sizeof static " +
    "static_assert static_cast struct switch template this thread_local throw true try typedef typeid typename union unsigned using virtual void " +
    "volatile wchar_t while __attribute__ __attribute __inline __inline__ __restrict __restrict__ __extension__ __typeof__ __typeof __asm__ __asm " +
    "__volatile__ __volatile __thread __int128 __builtin_va_list __decltype __alignof__ __alignof __const __signed __signed__ __complex__ " +
    "__real__ __imag__ __label__").split(" "),
);
const TYPE_KEYWORDS = new Set("auto bool char double float int long short signed unsigned void wchar_t char16_t char32_t char8_t const volatile".split(" "));
const DEVICE_MARKS = new Set(["device", "global", "__device__", "__global__"]);
const ATTRIBUTE_WORDS = new Set(["__attribute__", "__attribute", "alignas", "__declspec", "decltype", "__typeof__", "__typeof", "__asm__", "__asm", "asm", "noexcept", "throw"]);
/**
 * Names the front end needs without the program naming them (a `<<<…>>>` launch in kept host
 * code is a call of __cudaPushCallConfiguration: cicc stops with "unable to find
 * __cudaPushCallConfiguration declaration" without it).
 */
const ALWAYS = new Set(["initializer_list", "nullptr_t", "size_t", "ptrdiff_t", "type_info", "align_val_t", "max_align_t", "byte", "destroying_delete_t", "nothrow_t", "__cudaPushCallConfiguration"]);

const isName = (s: string) => isIdStart(s.charCodeAt(0)) && !KEYWORDS.has(s);

/** A namespace-scope item: a declaration (tokens [a, b)), a directive, or a namespace / extern "C" brace. */
interface Item {
  kind: "decl" | "dir" | "open" | "close";
  a: number;
  b: number;
  /** How many namespace / extern "C" braces enclose it. */
  nest: number;
}

/** Index after the group opened at `i` (( [ { or <); `<` groups stop at ; and { (not a template argument list). */
function skipGroup(v: string[], i: number, lim: number): number {
  const op = v[i]!;
  if (op === "<") {
    let d = 0;
    while (i < lim) {
      const s = v[i]!;
      if (s === "(" || s === "[") { i = skipGroup(v, i, lim); continue; }
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
function templateHeaders(v: string[], i: number, lim: number, tp?: Set<string>): number {
  while (i + 1 < lim && v[i] === "template" && v[i + 1] === "<") {
    const nontype = new Set<string>();
    let j = i + 1, d = 0;
    while (j < lim) {
      const s = v[j]!;
      if (s === "(" || s === "[") { j = skipGroup(v, j, lim); continue; }
      if (s === "<") { if (!nontype.has(v[j - 1]!)) d++; }
      else if (s === ">") d--;
      else if (s === ";" || s === "{") break; // not a template header after all
      else if (d === 1) {
        const p = v[j - 1] ?? "", nx = v[j + 1] ?? "";
        if ((s === "typename" || s === "class") && (p === "<" || p === "," || p === ">") && isName(nx) && v[j + 2] !== "::") tp?.add(nx);
        else if (s === "..." && isName(nx) && (v[j + 2] === "," || v[j + 2] === ">")) tp?.add(nx);
        else if (isName(s) && (nx === "," || nx === ">" || nx === "=") && (isName(p) || TYPE_KEYWORDS.has(p) || p === "*" || p === "&")) { tp?.add(s); nontype.add(s); }
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
    if (v[j] === "&&" || v[j] === "||") { j++; continue; }
    return j;
  }
}

/** Index after a leading `template <...>` header (several); `i` when none. */
function skipTemplateHeaders(v: string[], i: number, lim: number): number {
  return templateHeaders(v, i, lim);
}

/** Split the token stream into namespace-scope items. */
function splitItems(t: Tokens, from = 0, items: Item[] = []): Item[] {
  const v = t.text, k = t.kind, n = t.n;
  let nest = 0;
  const walk = (i: number, inner: boolean): number => {
    while (i < n) {
      if (k[i] === K.Dir) { items.push({ kind: "dir", a: i, b: i + 1, nest }); i++; continue; }
      const s = v[i]!;
      if (s === "}" && inner) return i;
      if (s === ";") { items.push({ kind: "decl", a: i, b: i + 1, nest }); i++; continue; }
      // namespace N { … }, inline namespace, extern "C" { … }
      let j = i;
      if (s === "inline" && v[i + 1] === "namespace") j = i + 1;
      if (v[j] === "namespace") {
        let q = j + 1;
        while (q < n && v[q] !== "{" && v[q] !== ";" && v[q] !== "=") q++;
        if (v[q] === "{") { i = container(i, q + 1); continue; }
      }
      if (s === "extern" && k[i + 1] === K.Str && v[i + 2] === "{") { i = container(i, i + 3); continue; }
      // a declaration: up to ';' at depth 0, or the brace group that ends a function definition
      let q = skipTemplateHeaders(v, i, n);
      let depth = 0, classlike = false, sawEq = false, ctorInit = false;
      // a requires-expression in a requires-clause (`requires C<_Os> && requires (_Os& __os) { __os << __t; }`,
      // libstdc++'s <ostream> in C++20): its `{…}` is no body. `requires` after an operator starts one;
      // after `>` or `)` it is the clause itself (`requires (C<T>) {` is a function's body)
      let reqExpr = false;
      let pw = ""; // the previous token (directives left out)
      while (q < n) {
        if (k[q] === K.Dir) { q++; continue; }
        const w = v[q]!;
        if (depth === 0) {
          if (w === "class" || w === "struct" || w === "union" || w === "enum" || w === "typedef") classlike = true;
          if (w === "=" && pw !== "operator") sawEq = true;
          if (w === ":" && (pw === ")" || pw === "noexcept")) ctorInit = true; // X::X(…) noexcept : a{…}, b(…) {…}
          if (w === ";") { q++; break; }
          if (w === "requires" && ["&&", "||", "!", "(", ",", "=", "requires", "?", ":"].includes(pw)) reqExpr = true;
          if (w === "{" && reqExpr && (pw === "requires" || pw === ")")) {
            q = skipGroup(v, q, n); pw = "}"; reqExpr = false; continue;
          }
          if (w === "{") {
            const init = ctorInit && (pw === ">" || (isIdStart(pw.charCodeAt(0)) && !KEYWORDS.has(pw))); // a member's brace initializer
            let d = 1; q++;
            while (q < n && d) { const x = v[q]!; if (k[q] !== K.Dir) { if (x === "{") d++; else if (x === "}") d--; } q++; }
            pw = "}";
            if (classlike || sawEq || init) continue; // struct X {…} x;  int a[] = {…};
            if (q < n && v[q] === ";") q++;
            break;
          }
        }
        if (w === "(" || w === "[") depth++;
        else if (w === ")" || w === "]") depth--;
        pw = w;
        q++;
      }
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

/** The non-directive token texts of [a, b). */
function words(t: Tokens, a: number, b: number): string[] {
  const out: string[] = [];
  for (let i = a; i < b; i++) if (t.kind[i] !== K.Dir) out.push(t.text[i]!);
  return out;
}

/** Names a declaration declares (its tokens after any template header), given the namespace names. */
function declaredNames(body: string[], namespaces: Set<string>): Set<string> {
  const names = new Set<string>();
  const L = body.length;
  if (body[0] === "using") {
    if (body[1] === "namespace") return new Set(["<using-directive>"]);
    if (body[2] === "=") return new Set([body[1]!]);
    const ids = body.filter(isName);
    return ids.length ? new Set([ids[ids.length - 1]!]) : names;
  }
  // class / struct / union / enum heads
  let head = -1;
  for (let a = 0; a < L; a++) {
    const s = body[a]!;
    if (ATTRIBUTE_WORDS.has(s) && body[a + 1] === "(") { a = skipGroup(body, a + 1, L) - 1; continue; } // typedef __attribute__((…)) struct
    if (s === "[" && body[a + 1] === "[") { a = skipGroup(body, a, L) - 1; continue; }
    if (s === "(" || s === "=" || s === "{" || s === ";") break;
    if (s === "class" || s === "struct" || s === "union" || s === "enum") { head = a; break; }
  }
  if (head >= 0) {
    let b = head + 1;
    while (b < L && ["class", "struct", "__attribute__", "__attribute", "alignas", "__declspec", "["].includes(body[b]!)) {
      if (body[b] === "[") b = skipGroup(body, b, L);
      else if (body[b] === "class" || body[b] === "struct") b++;
      else b = skipGroup(body, b + 1, L);
    }
    while (b + 2 < L && isName(body[b]!) && body[b + 1] === "::" && isName(body[b + 2]!)) b += 2; // class __cxx11::collate
    if (b < L && isName(body[b]!)) names.add(body[b]!);
    let rest: string[] = [];
    const s0 = body.indexOf("{", head);
    if (s0 >= 0) {
      if (body[head] === "enum") { // unscoped or scoped, the enumerators are declared names either way (conservative)
        let d = 0, expect = true;
        for (let a = s0 + 1; a < L; a++) {
          const w = body[a]!;
          if (w === "(" || w === "{" || w === "[") d++;
          else if (w === ")" || w === "}" || w === "]") d--;
          if (d < 0) break;
          if (d === 0 && w === ",") { expect = true; continue; }
          if (d === 0 && expect && isName(w)) { names.add(w); expect = false; }
        }
      }
      rest = body.slice(skipGroup(body, s0, L));
    } else if (body[0] === "typedef") rest = body.slice(b + 1);
    let last: string | null = null;
    for (const w of rest) {
      if (isName(w)) last = w;
      else if (w === "," || w === ";" || w === "[" || w === "=") { if (last) names.add(last); last = null; }
    }
    return names;
  }
  // functions, variables, typedefs: each declarator's name
  let a = 0;
  let last: string | null = null, lastAt = -1;
  while (a < L) {
    const s = body[a]!;
    if (s === "[" && body[a + 1] === "[") { a = skipGroup(body, a, L); continue; }
    if (ATTRIBUTE_WORDS.has(s)) { a = body[a + 1] === "(" ? skipGroup(body, a + 1, L) : a + 1; continue; }
    if (s === "operator") { names.add("operator"); return names; }
    if (s === "(") {
      if (body[a + 1] === "*" || body[a + 1] === "&") { // (*name)(…) declarator
        let b2 = a + 2;
        while (b2 < L && ["__attribute__", "__attribute", "const", "volatile"].includes(body[b2]!)) b2 = body[b2]!.startsWith("__attr") ? skipGroup(body, b2 + 1, L) : b2 + 1;
        if (b2 < L && isName(body[b2]!)) { names.add(body[b2]!); return names; }
      }
      if (last) {
        // Class::name( or Class<…>::name( : an out-of-class member definition declares its class
        if (lastAt >= 2 && body[lastAt - 1] === "::") {
          const q = classQualifier(body, lastAt - 2, namespaces);
          names.add(q ?? last);
          return names;
        }
        names.add(last);
        return names;
      }
      a = skipGroup(body, a, L); continue;
    }
    if (s === "<" && last) { a = skipGroup(body, a, L); continue; }
    if (s === "[" || s === "=" || s === ";" || s === "," || s === ":" || s === "{") {
      if (last) names.add(last);
      if (s === "=" || s === "[" || s === "{") {
        while (a < L && body[a] !== "," && body[a] !== ";") {
          const w = body[a]!;
          if (w === "(" || w === "[" || w === "{") { a = skipGroup(body, a, L); continue; }
          if (w === "<" && a > 0 && isName(body[a - 1]!)) { a = skipGroup(body, a, L); continue; }
          a++;
        }
      }
      last = null; a++; continue;
    }
    if (isName(s)) { last = s; lastAt = a; }
    a++;
  }
  if (last && body[L - 1] === ";") names.add(last);
  return names;
}

/**
 * The class name before `::` at index q, or null when there is none or it names a namespace. A
 * name with template arguments (`complex<_Tp>::`) is a class even where a namespace has the
 * same name (thrust's `namespace complex`, std's class template complex).
 */
function classQualifier(body: string[], q: number, namespaces: Set<string>): string | null {
  const c = qualifierName(body, q);
  return c !== null && (body[q] === ">" || !namespaces.has(c)) ? c : null;
}

/** The class name before `::` at index q (`X` of `X::` or of `X<…>::`), or null. */
function qualifierName(body: string[], q: number): string | null {
  if (body[q] === ">") {
    let d = 0;
    while (q >= 0) {
      if (body[q] === ">") d++;
      else if (body[q] === "<") d--;
      if (d <= 0) break;
      q--;
    }
    q--;
  }
  return q >= 0 && isName(body[q]!) ? body[q]! : null;
}

/** Template parameter names of the leading template headers of `v`. */
function templateParams(v: string[]): Set<string> {
  const tp = new Set<string>();
  templateHeaders(v, 0, v.length, tp);
  return tp;
}

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
  let n = 0, blank = true;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 10) { if (!blank) n++; blank = true; } else if (c !== 32 && c !== 9 && c !== 13) blank = false;
  }
  return blank ? n : n + 1;
};

/**
 * Prune a gcc-preprocessed CUDA TU (the input of cicc: `gcc -E` with nvcc's device-side
 * defines, line markers included) to the declarations the primary file's code needs (see the
 * module comment). Pure text in, text out; no compiler is run.
 * @param text the preprocessed TU (UTF-8 text, bytes of gcc -E output)
 * @returns the pruned text (same number of lines), counts and the time taken (ms)
 */
/** What one declaration declares and names, and whether its body is taken out (host-only). */
interface DeclInfo {
  defs: Set<string>;
  refs: Set<string>;
  /** Token index of the body's '{' (the definition becomes a declaration), or "drop" (an out-of-class host member). */
  stub: number | "drop" | undefined;
  /** Its tokens' texts (directives left out). */
  body: string[];
  classlike: boolean;
  /**
   * A namespace-scope __device__ or __constant__ variable defined here (not extern, constexpr,
   * inline nor a template): always kept. ptxas lays out the module's global and constant-bank
   * variables and writes their offsets into the instructions (a relocation's addend, constant
   * bank 3's offsets), so an unused table that goes moves the used ones and the kernel's machine
   * code differs from the full build's.
   */
  deviceVar: boolean;
  /**
   * A __global__ function defined outside a template, or an explicit instantiation of a kernel
   * template: always kept, as the full build's module always has it. ptxas gives every `.global`
   * variable of the module (other kernels' `assert` and `printf` strings among them) a slot in
   * constant bank 4, the module's table of symbol addresses that the driver fills at load, and
   * the kernel reads addresses from there by offset (`ULDC.64 UR4, c[0x4][0x10]`); which kernels
   * the module has also decides where an extern function's slot goes (`__assertfail`'s: before
   * the variables when the kernel calling it is the module's last entry, after them otherwise;
   * seen with CUDA 13.0's ptxas on llm.c, not documented). A pruned module without the other
   * kernels moves those slots, so the kernel's instructions differ from the full build's.
   */
  kernel: boolean;
  /**
   * A using-declaration `using [::]A::…::N::x;` (at namespace scope): N (`""` for `using ::x;`)
   * and x. It must name a declaration of x in N that comes before it (cicc: `namespace
   * "std::__exception_ptr" has no member "swap"`), so it is kept only while one such stays.
   */
  using?: { ns: string; name: string };
  /** The gate or operator condition (finish), computed for the class names whose hash is gateKey. */
  gateKey?: number;
  gate?: Set<string>;
  op?: { names: Set<string>; all: boolean };
}

function analyse(t: Tokens, it: Item, namespaces: Set<string>): DeclInfo {
  const v = words(t, it.a, it.b);
  const after = skipTemplateHeaders(v, 0, v.length);
  const body = v.slice(after);
  const tparams = templateParams(v);
  let ds = declaredNames(body, namespaces);
  // an out-of-class member definition (X::f(, X<…>::f(, X::operator, X::~X) also declares X
  let pd = 0;
  for (let a = 0; a + 3 < v.length; a++) {
    const s = v[a]!;
    if (s === "(" || s === "[" || s === "{") pd++;
    else if (s === ")" || s === "]" || s === "}") pd--;
    if (s === "=" || s === "{") break;
    // (or a static data member's: `template <class T> const int X<T>::n = 3;`, `constexpr int Y::arr[2];`)
    const nx = v[a + 3];
    if (pd === 0 && v[a + 1] === "::" && ((/^[A-Za-z_~]/.test(v[a + 2]!) && (nx === "(" || nx === "<" || nx === "=" || nx === ";" || nx === "[" || nx === "{")) || v[a + 2] === "operator" || v[a + 2] === "~")) {
      const q = classQualifier(v, a, namespaces);
      if (q !== null) {
        ds = new Set([...ds, q]);
        if (v[a + 2] === "operator") { ds.delete("operator"); ds.add("<member-operator>"); }
        break;
      }
    }
  }
  for (const p of tparams) ds.delete(p);
  let classlike = false;
  for (let a = 0; a < body.length; a++) {
    const s = body[a]!;
    if (ATTRIBUTE_WORDS.has(s) && body[a + 1] === "(") { a = skipGroup(body, a + 1, body.length) - 1; continue; }
    if (s === "(" || s === "{" || s === "=" || s === ";") break;
    if (s === "class" || s === "struct" || s === "union" || s === "enum") { classlike = true; break; }
  }
  // a host-only function definition: made a declaration (or dropped: a member defined out of class)
  let ta = it.a;
  while (ta < it.b && t.kind[ta] === K.Dir) ta++;
  let refEnd = it.b;
  let stub: number | "drop" | undefined;
  if (v[v.length - 1] === "}" && v.includes("(")) {
    let d = 0, bo = -1, afterParen = false, bad = false;
    for (let a = 0; a < v.length; a++) {
      const s = v[a]!;
      if (s === "(" || s === "[") { d++; afterParen = true; }
      else if (s === ")" || s === "]") d--;
      else if (d === 0 && s === ":" && afterParen && (v[a - 1] === ")" || v[a - 1] === "noexcept")) { bad = true; break; } // a constructor's initializers
      else if (d === 0 && s === "=" && v[a - 1] !== "operator") { bad = true; break; }
      else if (d === 0 && s === "{") { bo = a; break; }
    }
    if (bo > 0 && afterParen && !bad) {
      const headWords = v.slice(0, bo);
      const hs = new Set(headWords);
      const noDevice = ![...DEVICE_MARKS, "constexpr", "consteval", "auto", "decltype", "class", "struct", "union", "enum", "namespace"].some((w) => hs.has(w));
      const bodyHasDevice = v.slice(bo).some((w) => DEVICE_MARKS.has(w));
      if (noDevice && !bodyHasDevice) {
        // the token index of the body's '{'
        let seen = -1, ti = it.a;
        for (; ti < it.b; ti++) if (t.kind[ti] !== K.Dir && ++seen === bo) break;
        // the parameter list's '(' (not an attribute's: `__attribute ((__abi_tag__ ("cxx11"))) _InIter num_get<…>::_M_extract_float(`)
        let p0 = templateHeaders(headWords, 0, headWords.length);
        while (p0 < headWords.length && headWords[p0] !== "(") {
          const w = headWords[p0]!;
          if (ATTRIBUTE_WORDS.has(w) && headWords[p0 + 1] === "(") p0 = skipGroup(headWords, p0 + 1, headWords.length);
          else if (w === "[" && headWords[p0 + 1] === "[") p0 = skipGroup(headWords, p0, headWords.length);
          else if (w === "<" && p0 > 0 && isName(headWords[p0 - 1]!)) p0 = skipGroup(headWords, p0, headWords.length);
          else p0++;
        }
        let nm = headWords.includes("operator") ? headWords.indexOf("operator") : p0 - 1;
        if (nm > 0 && headWords[nm - 1] === "~") nm--;
        // a qualified definition (a class's member, or a namespace's function defined outside it)
        // goes: its declaration is elsewhere (in the class, in the namespace), and a qualified
        // declaration outside them does not compile
        const qualified = nm >= 1 && headWords[nm - 1] === "::";
        stub = qualified ? "drop" : ti;
        refEnd = ti;
      }
    }
  }
  // references: identifiers of the declaration (of its head only when the body was taken out)
  const rs = new Set<string>();
  const localSeen = new Set<string>();
  // token indices, without directives and attribute groups: an attribute's name is not a
  // reference, its arguments are (launch_bounds(f()))
  const kept: number[] = [];
  const tx = t.text, tk = t.kind;
  for (let i = it.a; i < refEnd; ) {
    if (tk[i] === K.Dir) { i++; continue; }
    const s = tx[i]!;
    if ((s === "__attribute__" || s === "__attribute") && tx[i + 1] === "(") {
      let d = 0; i++;
      while (i < refEnd) { const x = tx[i]!; if (tk[i] !== K.Dir) { if (x === "(") d++; else if (x === ")") d--; if (d >= 3) kept.push(i); } i++; if (d === 0) break; }
      continue;
    }
    if (s === "[" && tx[i + 1] === "[") {
      let d = 0;
      while (i < refEnd) { const x = tx[i]!; if (x === "[") d++; else if (x === "]") d--; i++; if (d === 0) break; }
      continue;
    }
    kept.push(i); i++;
  }
  for (let a = 0; a < kept.length; a++) {
    const wi = kept[a]!, ws = tx[wi]!, wk = tk[wi];
    if (wk === K.Num) {
      const m = /^[0-9.][0-9a-fA-FxX.']*?([g-zG-Z_]\w*)$/.exec(ws);
      if (m) rs.add(`<udl>${m[1]}`);
      continue;
    }
    if (wk !== K.Id) continue;
    const pi = a > 0 ? kept[a - 1]! : -1;
    if (pi >= 0 && (tk[pi] === K.Str || tk[pi] === K.Chr) && t.end[pi] === t.start[wi]) { rs.add(`<udl>${ws}`); continue; }
    if (KEYWORDS.has(ws) || tparams.has(ws)) continue;
    const ps = pi >= 0 ? tx[pi]! : "";
    if (ps === ".") continue; // a member
    if (ps === "->") { // a member (p->m, this->m, a[i]->m), or a trailing return type (`) -> T`, `const -> T`): a reference
      const bi = a > 1 ? kept[a - 2]! : -1, bs = bi >= 0 ? tx[bi]! : "";
      if (bs === "]" || bs === "this" || (bi >= 0 && tk[bi] === K.Id && !KEYWORDS.has(bs))) continue;
    }
    if (ps === "::" && a > 1) {
      const qi = kept[a - 2]!, qs = tx[qi]!;
      // Class::member, Class<…>::member; not `(float)::f(x)` nor `a > ::f(x)` (spaced): the global namespace's f
      if ((tk[qi] === K.Id && !KEYWORDS.has(qs) && !namespaces.has(qs)) || (qs === ">" && t.end[qi] === t.start[pi])) continue;
    }
    // `Type name(` / `Type name =` …: a local variable being declared, the first time
    const ns = a + 1 < kept.length ? tx[kept[a + 1]!]! : "";
    if (pi >= 0 && (ns === "(" || ns === "{" || ns === "=" || ns === ";" || ns === "[" || ns === ",") && (ps === ">" || (tk[pi] === K.Id && (!KEYWORDS.has(ps) || TYPE_KEYWORDS.has(ps)))) && !localSeen.has(ws)) {
      localSeen.add(ws);
      continue;
    }
    rs.add(ws);
  }
  let deviceVar = false;
  if (v[0] !== "template" && !classlike && !v.includes("extern") && !v.includes("constexpr") && !v.includes("inline") && !v.includes("typedef") && !v.includes("using")) {
    let marked = false, fn = false;
    for (let a = 0; a < v.length; a++) {
      const s = v[a]!;
      if ((s === "__attribute__" || s === "__attribute") && v[a + 1] === "(") {
        if (v[a + 2] === "(" && (v[a + 3] === "device" || v[a + 3] === "constant" || v[a + 3] === "__device__" || v[a + 3] === "__constant__")) marked = true;
        a = skipGroup(v, a + 1, v.length) - 1; continue;
      }
      if (s === "=" || s === "[" || s === ";") break; // an initializer, an array, the end: a variable
      if (s === "(" ) { if (v[a + 1] !== "*") fn = true; break; } // a function (not `T (*p)(…)`)
      if (s === "{") { fn = true; break; }
    }
    deviceVar = marked && !fn;
  }
  // a __global__ function defined outside a template, or an explicit instantiation of a kernel
  // template (`template __global__ void k<int>(int*);`; not `extern template`)
  let kernel = false;
  const instantiation = v[0] === "template" && v[1] !== "<";
  if ((v[0] !== "template" || instantiation) && !classlike && (v[v.length - 1] === "}" || instantiation)) {
    for (let a = 0; a < v.length; a++) {
      const s = v[a]!;
      if (s === "__global__") { kernel = true; break; }
      if ((s === "__attribute__" || s === "__attribute") && v[a + 1] === "(") {
        if (v[a + 2] === "(" && v[a + 3] === "global") { kernel = true; break; }
        a = skipGroup(v, a + 1, v.length) - 1; continue;
      }
      if (s === "(" || s === "{" || s === "=" || s === ";") break; // the head ends: the parameter list
    }
  }
  return { defs: ds, refs: rs, stub, body: v, classlike, deviceVar, kernel, using: usingDeclaration(v) };
}

/** What a pruner keeps between calls: the last text, its tokens, items and declarations' analyses. */
interface PruneState {
  text: string;
  t: Tokens;
  items: Item[];
  info: (DeclInfo | undefined)[];
  namespaces: string;
}

/** 32-bit FNV-1a of a string's UTF-16 units. */
function hashString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** Length of the common prefix of a and b (UTF-16 units). */
function commonPrefix(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  // 64 KiB, then 1 KiB chunks compared as strings (a native compare), then characters
  for (const step of [65536, 1024]) while (i + step <= n && a.slice(i, i + step) === b.slice(i, i + step)) i += step;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}

/**
 * A pruner that reuses, from one call to the next, the tokens and the analysis of every
 * namespace-scope declaration that ends before the first character that changed (the watch
 * loop's saves change one file of the TU: what comes before it is the same text). Same result
 * as pruneDeviceTU.
 */
export class DevicePruner {
  private state: PruneState | undefined;
  /** Declarations whose analysis the last call reused. */
  reused = 0;

  prune(text: string): PruneResult {
    const t0 = performance.now();
    let t: Tokens, items: Item[], info: (DeclInfo | undefined)[] = [];
    const st = this.state;
    let k = -1;
    if (st) {
      const L = commonPrefix(st.text, text);
      for (let i = st.items.length - 1; i >= 0; i--) {
        const it = st.items[i]!;
        if (it.nest === 0 && it.kind !== "open" && it.b > it.a && st.t.end[it.b - 1]! <= L) { k = i; break; }
      }
    }
    if (st && k >= 0) {
      const tb = st.items[k]!.b;
      t = tokenize(text, st.t.end[tb - 1]!, st.t, tb);
      items = splitItems(t, tb, st.items.slice(0, k + 1));
      info = st.info.slice(0, k + 1);
    } else {
      t = tokenize(text);
      items = splitItems(t);
    }
    const namespaces = new Set(["std", "__gnu_cxx", "__cxxabiv1"]);
    for (const it of items) {
      if (it.kind === "open") { for (const w of words(t, it.a, it.b)) if (isName(w)) namespaces.add(w); }
      // a namespace alias (`namespace cg = cooperative_groups;`): `cg::thread_block` names thread_block
      else if (it.kind === "decl" && t.text[it.a] === "namespace" && t.text[it.a + 2] === "=" && isName(t.text[it.a + 1]!)) namespaces.add(t.text[it.a + 1]!);
    }
    const nsKey = [...namespaces].sort().join(" ");
    if (st && nsKey !== st.namespaces) info = []; // a namespace appeared or went: every declaration is read again
    this.reused = 0;
    for (let idx = 0; idx < items.length; idx++) {
      if (items[idx]!.kind !== "decl") continue;
      if (info[idx]) this.reused++;
      else info[idx] = analyse(t, items[idx]!, namespaces);
    }
    this.state = { text, t, items, info, namespaces: nsKey };
    return finish(text, t, items, info, namespaces, t0);
  }
}

/**
 * Prune a gcc-preprocessed CUDA TU (the input of cicc: `gcc -E` with nvcc's device-side
 * defines, line markers included) to the declarations the primary file's code needs (see the
 * module comment). Pure text in, text out; no compiler is run.
 * @param text the preprocessed TU (gcc -E output, read as latin1 so that bytes round-trip)
 * @returns the pruned text (same number of lines), counts and the time taken (ms)
 */
export function pruneDeviceTU(text: string): PruneResult {
  return new DevicePruner().prune(text);
}

function finish(text: string, t: Tokens, items: Item[], info: (DeclInfo | undefined)[], namespaces: Set<string>, t0: number): PruneResult {
  // the include depth of each item: 0 is the primary file (a #line rename keeps the depth)
  const depthOf = new Int32Array(items.length);
  const fileOf: string[] = new Array(items.length);
  const sysOf = new Uint8Array(items.length);
  let depth = 0, file = "", sys = 0;
  let seenFirst = false;
  items.forEach((it, idx) => {
    if (it.kind === "dir") {
      const m = /^#\s*(\d+)\s+"((?:\\.|[^"\\])*)"((?:\s+\d)*)/.exec(t.text[it.a]!);
      if (m) {
        const flags = m[3]!.trim().split(/\s+/);
        if (flags.includes("1")) depth++;
        else if (flags.includes("2")) depth = Math.max(0, depth - 1);
        if (!seenFirst) { seenFirst = true; depth = 0; }
        file = m[2]!;
        sys = flags.includes("3") ? 1 : 0;
      }
    }
    depthOf[idx] = depth; fileOf[idx] = file; sysOf[idx] = sys;
  });
  // a system header: gcc's line-marker flag 3, or a file under /usr (libstdc++, libc, the CUDA toolkit)
  const isSystem = (idx: number) => sysOf[idx] === 1 || fileOf[idx]!.startsWith("/usr/");

  const decl: number[] = [];
  items.forEach((it, idx) => { if (it.kind === "decl") decl.push(idx); });
  const defs = { get: (idx: number) => info[idx]!.defs };
  const refs = { get: (idx: number) => info[idx]!.refs };
  const bodies = { get: (idx: number) => info[idx]!.body };
  const stub = { get: (idx: number) => info[idx]!.stub };
  const classNames = new Set<string>();
  for (const idx of decl) if (info[idx]!.classlike) for (const d of info[idx]!.defs) classNames.add(d);

  // gates: system-header free functions and class specializations naming classes; operators
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
    inf.gateKey = classKey; inf.gate = undefined; inf.op = undefined;
    gateOf(idx);
    if (gates.has(idx)) inf.gate = gates.get(idx);
    if (ops.has(idx)) inf.op = ops.get(idx);
  }
  function gateOf(idx: number): void {
    const v = bodies.get(idx)!;
    const ds = defs.get(idx)!;
    if (ds.has("operator") && ds.size === 1) {
      const p = v.indexOf("operator");
      if (v[p + 1] === '""' && v[p + 2]) { ops.set(idx, { names: new Set([`<udl>${v[p + 2]}`]), all: false }); return; }
      let q = p + 1;
      if (v[q] === "(" && v[q + 1] === ")") q += 2;
      while (q < v.length && v[q] !== "(") q++;
      const g = new Set<string>();
      for (let d = 0, r = q; r < v.length; r++) { if (v[r] === "(") d++; else if (v[r] === ")") d--; if (d === 0) break; if (isName(v[r]!)) g.add(v[r]!); }
      const cls = new Set([...g].filter((x) => classNames.has(x)));
      ops.set(idx, { names: cls.size ? cls : g.size ? g : refs.get(idx)!, all: isSystem(idx) && cls.size > 0 });
      return;
    }
    if (!isSystem(idx) || ds.size === 0 || [...ds].some((d) => classNames.has(d)) && !isSpecialization(v)) return;
    const g = isSpecialization(v) ? specializationGate(v, classNames) : parameterGate(v, ds, classNames, namespaces);
    if (g && g.size) gates.set(idx, g);
  }
  const byName = new Map<string, number[]>();
  for (const idx of decl) {
    if (gates.has(idx) || ops.has(idx)) continue;
    for (const d of defs.get(idx)!) { const l = byName.get(d); if (l) l.push(idx); else byName.set(d, [idx]); }
  }
  for (const [idx] of ops) for (const d of defs.get(idx)!) if (d !== "operator") { const l = byName.get(d); if (l) l.push(idx); else byName.set(d, [idx]); }

  const keep = new Set<number>();
  const work: number[] = [];
  const add = (idx: number) => { if (!keep.has(idx)) { keep.add(idx); work.push(idx); } };
  for (const idx of decl) {
    const ds = defs.get(idx)!;
    if (depthOf[idx] === 0 || info[idx]!.deviceVar || info[idx]!.kernel || fileOf[idx] === "<built-in>" || fileOf[idx] === "<command-line>" || [...ds].some((d) => ALWAYS.has(d)) || ds.has("<using-directive>")) add(idx);
    else if (ds.size === 0 && !bodies.get(idx)!.includes("static_assert")) add(idx); // what a declaration declares could not be told: kept
  }
  const needed = new Set<string>();
  for (;;) {
    while (work.length) {
      const idx = work.pop()!;
      for (const r of refs.get(idx)!) {
        if (needed.has(r)) continue;
        needed.add(r);
        for (const m of byName.get(r) ?? []) add(m);
      }
    }
    let grew = false;
    for (const [idx, g] of gates) if (!keep.has(idx) && [...defs.get(idx)!].some((d) => needed.has(d)) && [...g].every((x) => needed.has(x))) { add(idx); grew = true; }
    for (const [idx, o] of ops) if (!keep.has(idx) && (o.all ? [...o.names].every((x) => needed.has(x)) : [...o.names].some((x) => needed.has(x)))) { add(idx); grew = true; }
    if (!grew) break;
  }

  // a kept using-declaration `using N::x;` whose N keeps no declaration of x before it goes: cicc
  // stops at a using-declaration that names nothing (libstdc++ 13's exception_ptr.h: `using
  // __exception_ptr::swap;` at std scope, kept for bits/move.h's std::swap, while the overload for
  // exception_ptr went with its class). Nothing needs it then: what it would bring is not kept.
  // Any namespace of that name around the declaration counts (inline ones, nested ones), `::x`
  // counts declarations outside any namespace but inline ones; a using-declaration counts as a
  // declaration of x while it is kept (chains), so this runs until nothing changes. A qualifier
  // that is no namespace the TU opens (an alias, an enum: C++20's `using E::a;`) is left as it is.
  const usings = decl.filter((idx) => keep.has(idx) && info[idx]!.using !== undefined);
  if (usings.length) {
    const { pathOf, opened } = namespacePaths(t, items);
    const wanted = new Set(usings.map((idx) => info[idx]!.using!.name));
    const declsOf = new Map<string, number[]>();
    for (const idx of decl) for (const d of defs.get(idx)!) if (wanted.has(d)) { const l = declsOf.get(d); if (l) l.push(idx); else declsOf.set(d, [idx]); }
    const targets = usings.filter((idx) => { const u = info[idx]!.using!; return u.ns === "" || opened.has(u.ns); });
    for (let changed = true; changed; ) {
      changed = false;
      for (const idx of targets) {
        if (!keep.has(idx)) continue;
        const u = info[idx]!.using!;
        const found = (declsOf.get(u.name) ?? []).some((c) => c < idx && keep.has(c) && stub.get(c) !== "drop" &&
          (u.ns === "" ? pathOf[c]!.allInline : pathOf[c]!.names.includes(u.ns)));
        if (!found) { keep.delete(idx); changed = true; }
      }
    }
  }

  // output: a dropped declaration becomes as many newlines as it spanned, a host-only body ";" and
  // newlines; directive lines inside either (line markers) stay
  const out: string[] = [];
  let pos = 0;
  const blank = (s: string) => {
    let n = 0;
    for (let i = s.indexOf("\n"); i >= 0; i = s.indexOf("\n", i + 1)) n++;
    return "\n".repeat(n);
  };
  // a pragma that applies to the declaration after it (CCCL's _CCCL_EXEC_CHECK_DISABLE is
  // `#pragma nv_exec_check_disable`) goes with that declaration: left before whatever follows,
  // cicc stops with "this pragma must immediately precede a declaration"
  const attached = (i: number) => /^#\s*pragma\s+(?:nv_exec_check_disable|hd_warning_disable|nv_abi)\b/.test(t.text[i]!);
  for (const idx of decl) {
    const it = items[idx]!;
    const st = stub.get(idx);
    const drop = !keep.has(idx) || st === "drop";
    if (!drop && typeof st !== "number") continue;
    let from = drop ? it.a : (st as number);
    while (from < it.b && t.kind[from] === K.Dir) from++;
    if (from >= it.b) continue;
    if (drop) {
      const before: number[] = []; // the pragmas (their token indices) just before it, line markers between them
      for (let j = idx - 1; j >= 0 && items[j]!.kind === "dir"; j--) {
        const ti = items[j]!.a;
        if (attached(ti)) before.push(ti);
        else if (!/^#\s*\d/.test(t.text[ti]!)) break;
      }
      for (const ti of before.reverse()) {
        if (t.start[ti]! < pos) continue;
        out.push(text.slice(pos, t.start[ti]!));
        pos = t.end[ti]!;
      }
    }
    out.push(text.slice(pos, t.start[from]!));
    if (!drop) out.push(";");
    pos = t.start[from]!;
    for (let i = from; i < it.b; i++) {
      if (t.kind[i] !== K.Dir) continue;
      // line markers stay; a pragma inside what is taken out goes with it (`#pragma unroll` of a
      // dropped body would be left at namespace scope: "expected a declaration")
      out.push(blank(text.slice(pos, t.start[i]!)), /^#\s*\d/.test(t.text[i]!) ? t.text[i]! : "");
      pos = t.end[i]!;
    }
    const e = t.end[it.b - 1]!;
    if (e > pos) { out.push(blank(text.slice(pos, e))); pos = e; }
  }
  out.push(text.slice(pos));
  const pruned = out.join("");
  return { text: pruned, decls: decl.length, kept: keep.size, lines: () => ({ before: nonBlankLines(text), after: nonBlankLines(pruned) }), ms: performance.now() - t0 };
}

/** `using [::]A::…::N::x;` (tokens v): N (`""` for `using ::x;`) and x; undefined for anything else (an operator, a directive, an alias). */
function usingDeclaration(v: string[]): { ns: string; name: string } | undefined {
  if (v[0] !== "using" || v[v.length - 1] !== ";" || v.length < 4) return undefined;
  let a = 1;
  if (v[a] === "::") a++;
  const parts: string[] = [];
  for (; a < v.length - 1; a += 2) {
    if (!isName(v[a]!)) return undefined;
    parts.push(v[a]!);
    const sep = v[a + 1];
    if (sep === ";") break;
    if (sep !== "::") return undefined;
  }
  if (a !== v.length - 2 || (parts.length < 2 && v[1] !== "::")) return undefined;
  return { ns: parts.length >= 2 ? parts[parts.length - 2]! : "", name: parts[parts.length - 1]! };
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
    if (it.kind === "close") { if (stack.length > 1) stack.pop(); pathOf[idx] = stack[stack.length - 1]!; return; }
    pathOf[idx] = stack[stack.length - 1]!;
    if (it.kind !== "open") return;
    const w = words(t, it.a, it.b);
    const top = stack[stack.length - 1]!;
    if (w[0] === "extern") { stack.push(top); return; }
    const inline = w[0] === "inline";
    const names: string[] = [];
    for (let a = w.indexOf("namespace") + 1; a < w.length && w[a] !== "{"; a++) {
      if (ATTRIBUTE_WORDS.has(w[a]!) || w[a] === "(" || w[a] === "[") break;
      if (isName(w[a]!)) { names.push(w[a]!); opened.add(w[a]!); }
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
    if (v[c] === "<") d++; else if (v[c] === ">") d--;
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
    if (v[q] === "(") d++; else if (v[q] === ")") d--;
    if (d === 0) break;
    if (classNames.has(v[q]!) && !(v[q - 1] === "::" && !namespaces.has(v[q - 2] ?? ""))) g.add(v[q]!);
  }
  return g.size ? g : null;
}
