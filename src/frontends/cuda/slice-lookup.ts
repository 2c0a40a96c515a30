/**
 * What a prefix slice (./slice.ts) cannot see: declarations after the cut that a call before it
 * could still find. C++ looks a template's dependent call up again where the TU ends (the point of
 * instantiation of a function template, by argument-dependent lookup), so an overload defined after
 * the kernel can change the kernel the TU compiles while the slice, cut at the kernel, compiles
 * the one without it (adversary 39: `pick(s, 0)` in a template, `pick(const S&, int)` returning 7
 * defined after the kernel: the TU computed 7·a·x+y, the slice a·x+y).
 */

/**
 * The names that a `template` declaration after `end` specializes: in the declaration's head (to
 * its `{`, `;` or `=`), past the template's own parameter list, a name followed by `<`
 * (`template<> struct Tr<Tag>`, `template<class U> struct Tr<Box<U>>`, `template<> float kv<Tag>`,
 * `template<> float scale<Tag>(…)`).
 */
function specializedAfter(mask: string, end: number): string[] {
  const out: string[] = [];
  for (const m of mask.slice(end).matchAll(/\btemplate\s*</g)) {
    let i = end + m.index! + m[0].length;
    for (let depth = 1; i < mask.length && depth > 0; i++) depth += mask[i] === "<" ? 1 : mask[i] === ">" ? -1 : 0;
    const head = /^[^{;=]*/.exec(mask.slice(i, i + 4096))![0];
    for (const n of head.matchAll(/\b([A-Za-z_]\w*)\s*</g)) if (!out.includes(n[1]!) && n[1] !== "template") out.push(n[1]!);
  }
  return out;
}

/** Words of a declaration's head that name no entity of the program: keywords, CUDA's specifiers and attributes. */
const NOT_A_NAME = new Set(
  `alignas alignof asm auto bool char char8_t char16_t char32_t class const consteval constexpr constinit decltype double enum explicit export extern
  final float friend inline int long mutable namespace noexcept operator override private protected public register restrict short signed sizeof static
  static_assert struct template thread_local throw typedef typename union unsigned using virtual void volatile wchar_t __attribute__ __declspec
  __global__ __device__ __host__ __constant__ __shared__ __managed__ __grid_constant__ __forceinline__ __noinline__ __inline__ __inline __restrict__
  __restrict __launch_bounds__ __cluster_dims__ __maxnreg__ __align__ __builtin_align__ __extension__ __thread __cudart_builtin__ __volatile__ __asm__
  __asm`.split(/\s+/),
);

/**
 * What the declarations at namespace scope after `end` name in their heads (from where a declaration
 * begins to its `{`, `;` or initializer `=`; template parameter lists, parenthesized groups and
 * brackets left out, so a parameter's type or an attribute's argument is not one): the declared name
 * (`struct Tag {…}`, `enum class E : int {…}`, `const int C::v = 2;`, `float g(W, int)`,
 * `Box(float) -> Box<double>;`), the classes it qualifies or derives from, and the macros that spell
 * one. The heads of `namespace` and `extern "C"` blocks name nothing; `operator` and `using` are
 * words of their own.
 */
function declarationHeads(mask: string, end: number, stop = mask.length): { declared: string[]; words: string[] } {
  const found = { declared: new Set<string>(), words: new Set<string>() };
  const scope: boolean[] = []; // per open brace: whether it is a namespace's or an extern "C" block's
  let head = end; // where the current declaration began
  let headEnd = -1; // where an initializer `=` ended the current head, or -1
  let depth = 0; // ( and [ opened in the current head
  const take = (to: number) => {
    if (!scope.every(Boolean)) return;
    const h = mask.slice(head, headEnd >= 0 ? headEnd : to);
    if (/^\s*(?:inline\s+)?namespace\b/.test(h) || /^\s*extern\s*$/.test(h)) return;
    const d = declaredIn(h);
    for (const w of d.declared) found.declared.add(w);
    for (const w of d.words) found.words.add(w);
  };
  for (let i = end; i < stop; i++) {
    const c = mask[i]!;
    if (c === "t" && mask.startsWith("template", i) && !/\w/.test(mask[i - 1] ?? " ")) {
      // past the parameter list: a default argument's `=` or `{` is not the head's
      const lt = /^template\s*</.exec(mask.slice(i, i + 64));
      if (lt) {
        let j = i + lt[0].length;
        for (let d = 1; j < mask.length && d > 0; j++) d += mask[j] === "<" ? 1 : mask[j] === ">" ? -1 : 0;
        i = j - 1;
        continue;
      }
    }
    if (c === "(" || c === "[") depth++;
    else if ((c === ")" || c === "]") && depth > 0) depth--;
    else if (c === "=" && depth === 0 && headEnd < 0 && mask[i + 1] !== "=" && !/[=!<>+\-*/%&|^]/.test(mask[i - 1] ?? "")) headEnd = i;
    else if (c === "{" && (depth === 0 || headEnd >= 0)) {
      const h = mask.slice(head, i).trimEnd();
      const ns = /\bnamespace\b[\w\s:]*$/.test(h) || /\bextern$/.test(h);
      take(i);
      scope.push(ns);
      head = i + 1;
      headEnd = -1;
      depth = 0;
    } else if (c === "}" && (depth === 0 || headEnd >= 0)) {
      scope.pop();
      head = i + 1;
      headEnd = -1;
      depth = 0;
    } else if (c === ";" && (depth === 0 || headEnd >= 0)) {
      take(i);
      head = i + 1;
      headEnd = -1;
      depth = 0;
    }
  }
  return { declared: [...found.declared], words: [...found.words] };
}

/**
 * The names a declaration's head declares or qualifies (`h`: from where it begins to its `{`, `;` or
 * initializer): the name after a class key (`struct Tag : Base`, `enum class E : int`), the
 * declarator's name and the classes that qualify it (`const int C::v` → C, v; `float g(W, int)` → g;
 * a deduction guide `Box(float) -> Box<double>` → Box; a specialization `struct Tr<T*>` → Tr),
 * `operator` and `using` as words of their own (none for a host variable that is neither constant
 * nor an array: device code cannot read it), and every other word of the head that is not a
 * keyword (sliceHazard asks which of them are macros: a macro can spell any name).
 */
function declaredIn(head: string): { declared: string[]; words: string[] } {
  let h = stripTemplateParameters(head);
  // a host variable that is neither constant nor an array (`cudaDeviceProp deviceProp;`, llm.c's, declared extern in a
  // header): device code cannot read it, nor see anything of it that its earlier declaration did not give
  const hostVariable =
    !/[([]/.test(h) &&
    !/\b(?:struct|class|union|enum|typedef|operator|using|__device__|__constant__|__managed__|__shared__|const|constexpr|constinit)\b/.test(h);
  for (let k = 0; k < 8 && /[()[\]]/.test(h); k++) h = h.replace(/\([^()]*\)|\[[^\[\]]*\]/g, " ");
  const words = [...h.matchAll(/[A-Za-z_]\w*/g)].map((m) => m[0]).filter((w) => w === "operator" || w === "using" || !NOT_A_NAME.has(w));
  const declared = new Set<string>();
  if (hostVariable) return { declared: [], words };
  for (const w of words) if (w === "operator" || w === "using") declared.add(w);
  const key = /\b(?:struct|class|union|enum(?:\s+(?:class|struct))?)\s+(?:__align__\s*|alignas\s*|__attribute__\s*)*([A-Za-z_]\w*)/.exec(h);
  if (key) declared.add(key[1]!);
  // the declarator: the last name of the head before a trailing return type, its template arguments left out
  let d = h.split("->")[0]!;
  for (let k = 0; k < 8 && /<[^<>]*>/.test(d); k++) d = d.replace(/<[^<>]*>/g, " ");
  const last = /((?:[A-Za-z_]\w*\s*::\s*)*)([A-Za-z_]\w*)[^A-Za-z_]*$/.exec(d);
  if (last && !NOT_A_NAME.has(last[2]!)) {
    declared.add(last[2]!);
    for (const q of last[1]!.matchAll(/[A-Za-z_]\w*/g)) declared.add(q[0]);
  }
  return { declared: [...declared], words };
}

/** A declaration's head without its `template <…>` parameter lists (their names are the template's own). */
function stripTemplateParameters(h: string): string {
  let out = h;
  for (let m = /\btemplate\s*</.exec(out); m; m = /\btemplate\s*</.exec(out)) {
    let i = m.index + m[0].length;
    for (let d = 1; i < out.length && d > 0; i++) d += out[i] === "<" ? 1 : out[i] === ">" ? -1 : 0;
    out = out.slice(0, m.index) + " " + out.slice(i);
  }
  return out;
}

/** A project header as sliceHazard reads it: its path under src/, its text and its code (codeMask). */
export interface SliceHeader {
  rel: string;
  text: string;
  /** The text with comments, strings and preprocessor lines blanked (src/frontends/cuda/slice.ts codeMask). */
  mask: string;
}

/** The project's headers under src/ (src/frontends/cuda/slice.ts projectHeaders); `incomplete`: some were not read. */
export interface SliceContext {
  headers: SliceHeader[];
  incomplete?: boolean;
}

/** The names a text `#include`s (`"…"` and `<…>`), and whether one is computed (`#include NAME`: a macro's). */
function includesOf(text: string): { names: string[]; computed: boolean } {
  const names: string[] = [];
  let computed = false;
  for (const m of text.matchAll(/^[ \t]*#[ \t]*include(?:_next)?\b[ \t]*(.*)$/gm)) {
    const q = /^(?:"([^"\n]+)"|<([^>\n]+)>)/.exec(m[1]!);
    if (q) names.push((q[1] ?? q[2])!);
    else computed = true;
  }
  return { names, computed };
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

/**
 * The headers under src/ that `text` includes, and theirs (every header a name can be: a system
 * header of the same name as one under src/ counts as that one), and whether an include among
 * them is computed. A name that is no header under src/ is a system header or one outside the
 * project (not read: outside src/, a confined build cannot read it either).
 */
function includeClosure(text: string, headers: SliceHeader[], seen = new Set<SliceHeader>()): { found: Set<SliceHeader>; computed: boolean } {
  let computed = false;
  const queue = [text];
  while (queue.length) {
    const inc = includesOf(queue.pop()!);
    computed ||= inc.computed;
    for (const name of inc.names)
      for (const h of headersNamed(name, headers))
        if (!seen.has(h)) {
          seen.add(h);
          queue.push(h.text);
        }
  }
  return { found: seen, computed };
}

/**
 * Why a prefix slice of `tuText` cut at `end` could compile another kernel than the whole TU, or
 * undefined. Read: the TU, and the project's headers (`context`) that the TU includes before the
 * cut (the code before) or only after it (code after the cut, like the TU's own tail).
 * Anywhere in them: a `friend` (a template's instantiation can define one, and with it change
 * overload resolution elsewhere). After the cut, at namespace scope: a declaration whose head
 * declares or qualifies a name the code before names (a class or enum completed, `struct Tag {…}`
 * where `Tag` was only declared: a trait sees it complete in the TU; a static member defined,
 * `const int C::v = 2`; an overload a template's dependent call finds where the TU ends; a
 * redeclaration whose attributes merge into the entity, `__launch_bounds__`, `__noinline__`; a
 * specialization; a deduction guide); a word in a declaration's head that is a macro of the TU or
 * a header (it can spell any name: `#define KN sax ## py`); an operator or a `using`; a call of one
 * of the TU's function-like macros at namespace scope (what it declares is not read here; a
 * variable declared `extern` before and defined after is a declaration of a name before too: the
 * slice's would be zero, adversary 41); an `#include` of a name a macro gives. Not seen: what a
 * header outside src/ (a system header, or one outside the project) included after the cut
 * declares.
 * Shapes: `mask` the TU's codeMask (comments, strings and preprocessor lines blanked), `end` an
 * offset into both; `context` the project's headers under src/ (none: none read).
 */
export function sliceHazard(tuText: string, mask: string, end: number, context: SliceContext = { headers: [] }): string | undefined {
  const before = mask.slice(0, end);
  if (context.incomplete) return "has more headers under src/ than kerncap reads to check a slice";
  const early = includeClosure(tuText.slice(0, end), context.headers);
  const late = includeClosure(tuText.slice(end), context.headers, new Set(early.found));
  if (late.computed) return "includes a file named by a macro after the kernel (what it declares is not read here)";
  const lateOnly = [...late.found].filter((h) => !early.found.has(h));
  const earlyMasks = [...early.found].map((h) => h.mask).join("\n");
  const beforeNames = new Set((before + "\n" + earlyMasks).match(/[A-Za-z_]\w*/g) ?? []);
  const named = (n: string) => beforeNames.has(n);
  // a friend defined by a template's instantiation changes what later overload resolution sees (stateful
  // metaprogramming): an instantiation after the kernel, or in another kernel's body the slice blanks (adversary 41)
  if (/\bfriend\b/.test(mask) || [...late.found].some((h) => /\bfriend\b/.test(h.mask)))
    return "declares a friend (a template's instantiation can define one, after the kernel or in a kernel body the slice leaves out)";
  const special = specializedAfter(mask, end).find(named);
  if (special) return `specializes \`${special}\` after the kernel, which the code before it names`;
  const defines = (t: string, fn: boolean) =>
    [...t.matchAll(fn ? /^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)\(/gm : /^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)/gm)].map((x) => x[1]!);
  const called = namespaceScopeCalls(mask, end).find((w) => defines(tuText, true).includes(w));
  if (called) return `calls the macro \`${called}\` at namespace scope after the kernel`;
  const macros = new Set([...defines(tuText, false), ...[...late.found].flatMap((h) => defines(h.text, false))]);
  // the TU's own text after the cut, then each header only it includes (all of that header: it comes after the cut)
  const tails = [
    { where: "after the kernel", mask, end },
    ...lateOnly.map((h) => ({ where: `in src/${h.rel}, included after the kernel`, mask: h.mask, end: 0 })),
  ];
  for (const t of tails) {
    const heads = declarationHeads(t.mask, t.end);
    if (heads.declared.includes("operator")) return `declares an operator ${t.where}`;
    if (heads.declared.includes("using")) return `has a using-declaration or directive ${t.where}`;
    const spelt = heads.words.find((w) => macros.has(w));
    if (spelt) return `declares something ${t.where} through the macro \`${spelt}\` (a macro can spell any name)`;
    const again = heads.declared.filter(named);
    if (again.length)
      return `declares ${again
        .slice(0, 3)
        .map((n) => `\`${n}\``)
        .join(", ")} ${t.where}, which the code before it names`;
  }
  return undefined;
}

/** The words at namespace scope after `end` that are followed by `(` (a declaration's name, a macro's call). */
function namespaceScopeCalls(mask: string, end: number): string[] {
  const found: string[] = [];
  let depth = 0; // braces that are not a namespace's or an extern "C" block's
  const open: boolean[] = [];
  for (let i = end; i < mask.length; i++) {
    const c = mask[i]!;
    if (c === "{") {
      const ns = /(?:\bnamespace\b[\w\s:]*|\bextern\s*)$/.test(mask.slice(Math.max(end, i - 256), i).trimEnd());
      open.push(ns);
      if (!ns) depth++;
    } else if (c === "}") {
      if (open.pop() === false) depth--;
    } else if (depth === 0 && /[A-Za-z_]/.test(c) && !/\w/.test(mask[i - 1] ?? " ")) {
      const id = /^[A-Za-z_]\w*/.exec(mask.slice(i, i + 256))![0];
      if (/^\s*\(/.test(mask.slice(i + id.length, i + id.length + 64)) && !found.includes(id)) found.push(id);
      i += id.length - 1;
    }
  }
  return found;
}

/**
 * Whether another kernel's body before the cut must stay in the slice (not blanked): the text
 * between its end (`close`, the offset past its `}`) and the cut (`end`) includes a file, or
 * declares, at namespace scope, a name the text up to the body's end names, through a macro too,
 * or an operator or a `using`. A body left out moves the point where the templates it uses are
 * first instantiated to the captured kernel's, past those declarations (a class it instantiates
 * with a type completed in between would see it complete in the slice and incomplete in the TU).
 * Shapes: `tuText` and `mask` (codeMask) the TU's, offsets into both.
 */
export function bodyStays(tuText: string, mask: string, close: number, end: number): boolean {
  if (/^[ \t]*#[ \t]*include\b/m.test(tuText.slice(close, end))) return true;
  const heads = declarationHeads(mask, close, end);
  if (heads.declared.includes("operator") || heads.declared.includes("using")) return true;
  const macros = new Set([...tuText.matchAll(/^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)/gm)].map((x) => x[1]!));
  if (heads.words.some((w) => macros.has(w))) return true;
  const names = new Set(mask.slice(0, close).match(/[A-Za-z_]\w*/g) ?? []);
  return heads.declared.some((n) => names.has(n));
}

/** The macros `#define`d in `text`: name → parameters (undefined: object-like) and replacement (continuation lines joined). */
function macroTable(text: string, into = new Map<string, { params?: string[]; body: string }>()): Map<string, { params?: string[]; body: string }> {
  const joined = text.replace(/\\\r?\n/g, " ");
  for (const m of joined.matchAll(/^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(\(([^)]*)\))?(.*)$/gm))
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
  return into;
}

/**
 * The TU's code with its macros expanded, as far as kerncap reads them: a function-like macro's call
 * (balanced parentheses) or an object-like macro's name replaced by its replacement, the
 * parameters by the arguments, up to `rounds` times; undefined where a replacement stringizes or
 * pastes (`#`, `##`) or a variadic one is called: what it makes is not read here.
 */
function expandMacros(code: string, macros: Map<string, { params?: string[]; body: string }>, rounds = 6): string | undefined {
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
  return /[A-Za-z_]\w*/.test(text) && [...text.matchAll(/[A-Za-z_]\w*/g)].some((m) => macros.has(m[0])) ? undefined : text;
}

/**
 * Why an instantiation slice (the TU's preprocessor lines, then an odr-use of the captured kernel
 * template's instantiation: ./slice.ts) could compile another kernel than the whole TU, or
 * undefined. The slice leaves the TU's own code out, so that code must add nothing the kernel
 * could see: with its macros expanded (those of the TU and of the project headers it includes,
 * `context`), it may hold explicit instantiations (`template void f<T>(…);`, `extern template …`,
 * as ggml's `DECL_MMQ_CASE(…)` expands to) and declarations of names no header it includes names,
 * nothing else; no `#include` may follow it (the slice instantiates the kernel after every
 * include, the TU where its code stands); a `friend` in the TU or those headers, or a macro kerncap
 * cannot expand, makes no slice.
 */
export function instantiationHazard(tuText: string, mask: string, context: SliceContext = { headers: [] }): string | undefined {
  if (context.incomplete) return "has more headers under src/ than kerncap reads to check a slice";
  const code = mask.replace(/\s+/g, " ").trim();
  if (!code) return undefined;
  const headers = [...includeClosure(tuText, context.headers).found];
  if (/\bfriend\b/.test(mask) || headers.some((h) => /\bfriend\b/.test(h.mask))) return "declares a friend (a template's instantiation can define one)";
  if (includeClosure(tuText, context.headers).computed) return "includes a file named by a macro (what it declares is not read here)";
  const firstCode = mask.search(/\S/);
  if (/^[ \t]*#[ \t]*include\b/m.test(tuText.slice(firstCode))) return "includes a file after its own code, which the slice instantiates the kernel after";
  const macros = macroTable(tuText);
  for (const h of headers) macroTable(h.text, macros);
  const expanded = expandMacros(mask, macros);
  if (expanded === undefined) return "has code whose macros kerncap does not expand (a variadic one, or one that stringizes or pastes)";
  // explicit instantiations name what they instantiate: they declare nothing new
  const declarations = expanded.replace(/(?:^|(?<=[;}]))\s*(?:extern\s+)?template\s+(?!<)[^;{}]*;/g, " ");
  const named = new Set(headers.flatMap((h) => h.mask.match(/[A-Za-z_]\w*/g) ?? []));
  const heads = declarationHeads(declarations, 0);
  if (heads.declared.includes("operator")) return "declares an operator in its own code";
  if (heads.declared.includes("using")) return "has a using-declaration or directive in its own code";
  const again = heads.declared.filter((n) => named.has(n));
  if (again.length)
    return `declares ${again
      .slice(0, 3)
      .map((n) => `\`${n}\``)
      .join(", ")} in its own code, which a header it includes names`;
  return undefined;
}
