/**
 * The name analysis of the device-side pruning (./policy.ts has the whole design): what one
 * namespace-scope declaration declares and what it names (references), whether it is host-only
 * (its body taken out), a class, a __device__/__constant__ variable, a kernel, a using-declaration.
 */
import { ATTRIBUTE_WORDS, DEVICE_MARKS, isName, K, KEYWORDS, type Tokens, TYPE_KEYWORDS } from "./tokens.ts";
import { type Item, skipGroup, skipTemplateHeaders, templateHeaders, words } from "./declarations.ts";

/** Names a declaration declares (its tokens after any template header), given the namespace names. */
function declaredNames(body: string[], namespaces: Set<string>): Set<string> {
  if (body[0] === "using") return usingDeclared(body);
  const head = classHead(body);
  return head >= 0 ? classDeclared(body, head) : declaratorNames(body, namespaces);
}

/** What a `using` declares: a directive as "<using-directive>", an alias its name, a using-declaration its last name. */
function usingDeclared(body: string[]): Set<string> {
  if (body[1] === "namespace") return new Set(["<using-directive>"]);
  if (body[2] === "=") return new Set([body[1]!]);
  const ids = body.filter(isName);
  return ids.length ? new Set([ids[ids.length - 1]!]) : new Set<string>();
}

/** The index of the class / struct / union / enum keyword that heads the declaration (attributes before it skipped); -1 when none. */
function classHead(body: string[]): number {
  const L = body.length;
  for (let a = 0; a < L; a++) {
    const s = body[a]!;
    if (ATTRIBUTE_WORDS.has(s) && body[a + 1] === "(") {
      a = skipGroup(body, a + 1, L) - 1;
      continue;
    } // typedef __attribute__((…)) struct
    if (s === "[" && body[a + 1] === "[") {
      a = skipGroup(body, a, L) - 1;
      continue;
    }
    if (s === "(" || s === "=" || s === "{" || s === ";") break;
    if (s === "class" || s === "struct" || s === "union" || s === "enum") return a;
  }
  return -1;
}

/** Names a class / struct / union / enum declaration declares: its own name, an enum's enumerators, the declarators after its body (or a typedef's). */
function classDeclared(body: string[], head: number): Set<string> {
  const names = new Set<string>();
  const L = body.length;
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
    // unscoped or scoped, the enumerators are declared names either way (conservative)
    if (body[head] === "enum") addEnumerators(body, s0, names);
    rest = body.slice(skipGroup(body, s0, L));
  } else if (body[0] === "typedef") rest = body.slice(b + 1);
  let last: string | null = null;
  for (const w of rest) {
    if (isName(w)) last = w;
    else if (w === "," || w === ";" || w === "[" || w === "=") {
      if (last) names.add(last);
      last = null;
    }
  }
  return names;
}

/** Add the enumerators of the enum body whose `{` is at s0: the first name of each comma-separated entry. */
function addEnumerators(body: string[], s0: number, names: Set<string>): void {
  let d = 0,
    expect = true;
  for (let a = s0 + 1; a < body.length; a++) {
    const w = body[a]!;
    if (w === "(" || w === "{" || w === "[") d++;
    else if (w === ")" || w === "}" || w === "]") d--;
    if (d < 0) break;
    if (d === 0 && w === ",") {
      expect = true;
      continue;
    }
    if (d === 0 && expect && isName(w)) {
      names.add(w);
      expect = false;
    }
  }
}

/** Names a function, variable or typedef declaration declares: each declarator's name (an out-of-class member definition: its class). */
function declaratorNames(body: string[], namespaces: Set<string>): Set<string> {
  const names = new Set<string>();
  const L = body.length;
  let a = 0;
  let last: string | null = null,
    lastAt = -1;
  while (a < L) {
    const s = body[a]!;
    if (s === "[" && body[a + 1] === "[") {
      a = skipGroup(body, a, L);
      continue;
    }
    if (ATTRIBUTE_WORDS.has(s)) {
      a = body[a + 1] === "(" ? skipGroup(body, a + 1, L) : a + 1;
      continue;
    }
    if (s === "operator") {
      names.add("operator");
      return names;
    }
    if (s === "(") {
      const pointer = pointerDeclaratorName(body, a); // (*name)(…)
      if (pointer) return names.add(pointer);
      if (last) {
        // Class::name( or Class<…>::name( : an out-of-class member definition declares its class
        return names.add((lastAt >= 2 && body[lastAt - 1] === "::" ? classQualifier(body, lastAt - 2, namespaces) : null) ?? last);
      }
      a = skipGroup(body, a, L);
      continue;
    }
    if (s === "<" && last) {
      a = skipGroup(body, a, L);
      continue;
    }
    if (s === "[" || s === "=" || s === ";" || s === "," || s === ":" || s === "{") {
      if (last) names.add(last);
      if (s === "=" || s === "[" || s === "{") a = initializerEnd(body, a);
      last = null;
      a++;
      continue;
    }
    if (isName(s)) {
      last = s;
      lastAt = a;
    }
    a++;
  }
  if (last && body[L - 1] === ";") names.add(last);
  return names;
}

/** The name of a `(*name)(…)` or `(&name)` declarator whose `(` is at a; undefined when it is none. */
function pointerDeclaratorName(body: string[], a: number): string | undefined {
  if (body[a + 1] !== "*" && body[a + 1] !== "&") return undefined;
  const L = body.length;
  let b2 = a + 2;
  while (b2 < L && ["__attribute__", "__attribute", "const", "volatile"].includes(body[b2]!))
    b2 = body[b2]!.startsWith("__attr") ? skipGroup(body, b2 + 1, L) : b2 + 1;
  return b2 < L && isName(body[b2]!) ? body[b2]! : undefined;
}

/** The index of the `,` or `;` that ends the initializer (or array bound) starting at a, groups and template arguments skipped; the body's length when none. */
function initializerEnd(body: string[], a: number): number {
  const L = body.length;
  while (a < L && body[a] !== "," && body[a] !== ";") {
    const w = body[a]!;
    if (w === "(" || w === "[" || w === "{") {
      a = skipGroup(body, a, L);
      continue;
    }
    if (w === "<" && a > 0 && isName(body[a - 1]!)) {
      a = skipGroup(body, a, L);
      continue;
    }
    a++;
  }
  return a;
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
export function templateParams(v: string[]): Set<string> {
  const tp = new Set<string>();
  templateHeaders(v, 0, v.length, tp);
  return tp;
}

/** What one declaration declares and names, and whether its body is taken out (host-only). */
export interface DeclInfo {
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

/** What one namespace-scope declaration (item `it` of the tokens `t`) declares and names, given the namespace names; see DeclInfo. */
export function analyse(t: Tokens, it: Item, namespaces: Set<string>): DeclInfo {
  const v = words(t, it.a, it.b);
  const after = skipTemplateHeaders(v, 0, v.length);
  const body = v.slice(after);
  const tparams = templateParams(v);
  const ds = memberClassDefs(v, declaredNames(body, namespaces), namespaces);
  for (const p of tparams) ds.delete(p);
  const classlike = isClasslike(body);
  const { stub, refEnd } = hostOnlyBody(t, it, v);
  const rs = references(t, it.a, refEnd, tparams, namespaces);
  return {
    defs: ds,
    refs: rs,
    stub,
    body: v,
    classlike,
    deviceVar: isDeviceVariable(v, classlike),
    kernel: isKernel(v, classlike),
    using: usingDeclaration(v),
  };
}

/** `ds` and, for an out-of-class member definition (X::f(, X<…>::f(, X::operator, X::~X), its class X. */
function memberClassDefs(v: string[], ds: Set<string>, namespaces: Set<string>): Set<string> {
  let pd = 0;
  for (let a = 0; a + 3 < v.length; a++) {
    const s = v[a]!;
    if (s === "(" || s === "[" || s === "{") pd++;
    else if (s === ")" || s === "]" || s === "}") pd--;
    if (s === "=" || s === "{") break;
    // (or a static data member's: `template <class T> const int X<T>::n = 3;`, `constexpr int Y::arr[2];`)
    const nx = v[a + 3];
    if (
      pd === 0 &&
      v[a + 1] === "::" &&
      ((/^[A-Za-z_~]/.test(v[a + 2]!) && (nx === "(" || nx === "<" || nx === "=" || nx === ";" || nx === "[" || nx === "{")) ||
        v[a + 2] === "operator" ||
        v[a + 2] === "~")
    ) {
      const q = classQualifier(v, a, namespaces);
      if (q !== null) {
        ds = new Set([...ds, q]);
        if (v[a + 2] === "operator") {
          ds.delete("operator");
          ds.add("<member-operator>");
        }
        break;
      }
    }
  }
  return ds;
}

/** Whether the declaration's head declares a class, struct, union or enum (attributes skipped). */
function isClasslike(body: string[]): boolean {
  for (let a = 0; a < body.length; a++) {
    const s = body[a]!;
    if (ATTRIBUTE_WORDS.has(s) && body[a + 1] === "(") {
      a = skipGroup(body, a + 1, body.length) - 1;
      continue;
    }
    if (s === "(" || s === "{" || s === "=" || s === ";") break;
    if (s === "class" || s === "struct" || s === "union" || s === "enum") return true;
  }
  return false;
}

/**
 * A host-only function definition (no device mark, not constexpr, auto nor a class): its body is
 * taken out. stub: the token index of the body's '{' (the definition becomes a declaration), or
 * "drop" (a qualified definition: a member defined out of class); refEnd: where the references
 * end (the body's '{' when taken out).
 */
function hostOnlyBody(t: Tokens, it: Item, v: string[]): { stub: number | "drop" | undefined; refEnd: number } {
  let refEnd = it.b;
  let stub: number | "drop" | undefined;
  if (v[v.length - 1] === "}" && v.includes("(")) {
    let d = 0,
      bo = -1,
      afterParen = false,
      bad = false;
    for (let a = 0; a < v.length; a++) {
      const s = v[a]!;
      if (s === "(" || s === "[") {
        d++;
        afterParen = true;
      } else if (s === ")" || s === "]") d--;
      else if (d === 0 && s === ":" && afterParen && (v[a - 1] === ")" || v[a - 1] === "noexcept")) {
        bad = true;
        break;
      } // a constructor's initializers
      else if (d === 0 && s === "=" && v[a - 1] !== "operator") {
        bad = true;
        break;
      } else if (d === 0 && s === "{") {
        bo = a;
        break;
      }
    }
    if (bo > 0 && afterParen && !bad) {
      const headWords = v.slice(0, bo);
      const hs = new Set(headWords);
      const noDevice = ![...DEVICE_MARKS, "constexpr", "consteval", "auto", "decltype", "class", "struct", "union", "enum", "namespace"].some((w) => hs.has(w));
      const bodyHasDevice = v.slice(bo).some((w) => DEVICE_MARKS.has(w));
      if (noDevice && !bodyHasDevice) {
        // the token index of the body's '{'
        let seen = -1,
          ti = it.a;
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
  return { stub, refEnd };
}

/** The names tokens [a, refEnd) of a declaration refer to (see the module comment: members, template parameters, attributes' names and locals' names are not references). */
function references(t: Tokens, a0: number, refEnd: number, tparams: Set<string>, namespaces: Set<string>): Set<string> {
  const rs = new Set<string>();
  const localSeen = new Set<string>();
  // token indices, without directives and attribute groups: an attribute's name is not a
  // reference, its arguments are (launch_bounds(f()))
  const kept: number[] = [];
  const tx = t.text,
    tk = t.kind;
  for (let i = a0; i < refEnd; ) {
    if (tk[i] === K.Dir) {
      i++;
      continue;
    }
    const s = tx[i]!;
    if ((s === "__attribute__" || s === "__attribute") && tx[i + 1] === "(") {
      let d = 0;
      i++;
      while (i < refEnd) {
        const x = tx[i]!;
        if (tk[i] !== K.Dir) {
          if (x === "(") d++;
          else if (x === ")") d--;
          if (d >= 3) kept.push(i);
        }
        i++;
        if (d === 0) break;
      }
      continue;
    }
    if (s === "[" && tx[i + 1] === "[") {
      let d = 0;
      while (i < refEnd) {
        const x = tx[i]!;
        if (x === "[") d++;
        else if (x === "]") d--;
        i++;
        if (d === 0) break;
      }
      continue;
    }
    kept.push(i);
    i++;
  }
  for (let a = 0; a < kept.length; a++) {
    const wi = kept[a]!,
      ws = tx[wi]!,
      wk = tk[wi];
    if (wk === K.Num) {
      const m = /^[0-9.][0-9a-fA-FxX.']*?([g-zG-Z_]\w*)$/.exec(ws);
      if (m) rs.add(`<udl>${m[1]}`);
      continue;
    }
    if (wk !== K.Id) continue;
    const pi = a > 0 ? kept[a - 1]! : -1;
    if (pi >= 0 && (tk[pi] === K.Str || tk[pi] === K.Chr) && t.end[pi] === t.start[wi]) {
      rs.add(`<udl>${ws}`);
      continue;
    }
    if (KEYWORDS.has(ws) || tparams.has(ws)) continue;
    const ps = pi >= 0 ? tx[pi]! : "";
    if (ps === ".") continue; // a member
    if (ps === "->") {
      // a member (p->m, this->m, a[i]->m), or a trailing return type (`) -> T`, `const -> T`): a reference
      const bi = a > 1 ? kept[a - 2]! : -1,
        bs = bi >= 0 ? tx[bi]! : "";
      if (bs === "]" || bs === "this" || (bi >= 0 && tk[bi] === K.Id && !KEYWORDS.has(bs))) continue;
    }
    if (ps === "::" && a > 1) {
      const qi = kept[a - 2]!,
        qs = tx[qi]!;
      // Class::member, Class<…>::member; not `(float)::f(x)` nor `a > ::f(x)` (spaced): the global namespace's f
      if ((tk[qi] === K.Id && !KEYWORDS.has(qs) && !namespaces.has(qs)) || (qs === ">" && t.end[qi] === t.start[pi])) continue;
    }
    // `Type name(` / `Type name =` …: a local variable being declared, the first time
    const ns = a + 1 < kept.length ? tx[kept[a + 1]!]! : "";
    if (
      pi >= 0 &&
      (ns === "(" || ns === "{" || ns === "=" || ns === ";" || ns === "[" || ns === ",") &&
      (ps === ">" || (tk[pi] === K.Id && (!KEYWORDS.has(ps) || TYPE_KEYWORDS.has(ps)))) &&
      !localSeen.has(ws)
    ) {
      localSeen.add(ws);
      continue;
    }
    rs.add(ws);
  }
  return rs;
}

/** A namespace-scope __device__ or __constant__ variable defined here (not extern, constexpr, inline nor a template): DeclInfo.deviceVar. */
function isDeviceVariable(v: string[], classlike: boolean): boolean {
  if (
    v[0] !== "template" &&
    !classlike &&
    !v.includes("extern") &&
    !v.includes("constexpr") &&
    !v.includes("inline") &&
    !v.includes("typedef") &&
    !v.includes("using")
  ) {
    let marked = false,
      fn = false;
    for (let a = 0; a < v.length; a++) {
      const s = v[a]!;
      if ((s === "__attribute__" || s === "__attribute") && v[a + 1] === "(") {
        if (v[a + 2] === "(" && (v[a + 3] === "device" || v[a + 3] === "constant" || v[a + 3] === "__device__" || v[a + 3] === "__constant__")) marked = true;
        a = skipGroup(v, a + 1, v.length) - 1;
        continue;
      }
      if (s === "=" || s === "[" || s === ";") break; // an initializer, an array, the end: a variable
      if (s === "(") {
        if (v[a + 1] !== "*") fn = true;
        break;
      } // a function (not `T (*p)(…)`)
      if (s === "{") {
        fn = true;
        break;
      }
    }
    return marked && !fn;
  }
  return false;
}

/** A __global__ function defined outside a template, or an explicit instantiation of a kernel template (`template __global__ void k<int>(int*);`; not `extern template`): DeclInfo.kernel. */
function isKernel(v: string[], classlike: boolean): boolean {
  const instantiation = v[0] === "template" && v[1] !== "<";
  if ((v[0] !== "template" || instantiation) && !classlike && (v[v.length - 1] === "}" || instantiation)) {
    for (let a = 0; a < v.length; a++) {
      const s = v[a]!;
      if (s === "__global__") return true;
      if ((s === "__attribute__" || s === "__attribute") && v[a + 1] === "(") {
        if (v[a + 2] === "(" && v[a + 3] === "global") return true;
        a = skipGroup(v, a + 1, v.length) - 1;
        continue;
      }
      if (s === "(" || s === "{" || s === "=" || s === ";") break; // the head ends: the parameter list
    }
  }
  return false;
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
