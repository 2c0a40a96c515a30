/**
 * When a slice of a CUDA TU (./slice.ts) could compile another kernel than the whole TU, so that
 * none is made. A prefix slice (sliceHazard, bodyStays): C++ looks a template's dependent call up
 * again where the TU ends, so an overload, a specialization, a class completed after the kernel can
 * change the kernel the TU compiles while the slice, cut at the kernel, compiles the one without it
 * (adversary 39: `pick(s, 0)` in a template, `pick(const S&, int)` returning 7 defined after the
 * kernel: the TU computed 7·a·x+y, the slice a·x+y; rounds 40 to 45 found the rest of the rules).
 * An instantiation slice (instantiationHazard): the TU's own code, which it leaves out, must add
 * nothing the kernel sees. What no rule here excludes (cicc's whole-program optimizations) is why
 * an agent's build compiles the whole TU (./slice-confined.ts; docs/design-notes.md).
 */
import { expandMacros, holdsDirective, includeClosure, includesOf, macroTable, type MacroTable, type SliceHeader } from "./slice-directives.ts";

export type { SliceHeader } from "./slice-directives.ts";

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
 * Names C++ looks up without the code spelling them: a range-for's `begin`/`end`, a structured
 * binding's `get`, `tuple_size`, `tuple_element`, `swap` of the standard algorithms, `size`/`data`
 * of the ranges: a declaration of one after the kernel counts as one the code before names.
 */
const IMPLICIT = new Set("begin end rbegin rend cbegin cend get tuple_size tuple_element swap size data iter_move iter_swap".split(" "));

/** What the declarations of a stretch of code name in their heads (declarationHeads). */
interface DeclarationHeads {
  declared: string[];
  words: string[];
  /** Reserved names (`__X`, `_X`) called in a head that are not CUDA's or the compiler's words: a system header's macro (`__CONCAT`). */
  reservedCalls: string[];
  /** The heads that declare something other than a host function or a host variable (a device entity, a type, a template, a specialization), trimmed. */
  notHost: string[];
}

/**
 * What the declarations at namespace scope after `end` name in their heads (from where a declaration
 * begins to its `{`, `;` or initializer `=`; template parameter lists, parenthesized groups and
 * brackets left out, so a parameter's type or an attribute's argument is not one): the declared name
 * (`struct Tag {…}`, `enum class E : int {…}`, `const int C::v = 2;`, `float g(W, int)`,
 * `Box(float) -> Box<double>;`), the classes it qualifies or derives from, and the macros that spell
 * one. The heads of `namespace` and `extern "C"` blocks name nothing; `operator` and `using` are
 * words of their own.
 */
function declarationHeads(mask: string, end: number, stop = mask.length): DeclarationHeads {
  const found = { declared: new Set<string>(), words: new Set<string>(), reservedCalls: new Set<string>(), notHost: [] as string[] };
  const scope: boolean[] = []; // per open brace: whether it is a namespace's or an extern "C" block's
  let head = end; // where the current declaration began
  let headEnd = -1; // where an initializer `=` ended the current head, or -1
  let depth = 0; // ( and [ opened in the current head
  const take = (to: number) => {
    if (!scope.every(Boolean)) return;
    const h = mask.slice(head, headEnd >= 0 ? headEnd : to);
    if (/^\s*(?:inline\s+)?namespace\b/.test(h) || /^\s*extern\s*$/.test(h)) return;
    const d = declaredIn(h);
    if (!d.host && h.trim()) found.notHost.push(h.trim().replace(/\s+/g, " ").slice(0, 80));
    for (const w of d.declared) found.declared.add(w);
    for (const w of d.words) found.words.add(w);
    for (const m of h.matchAll(/\b(_[_A-Z]\w*)\s*\(/g)) if (!NOT_A_NAME.has(m[1]!)) found.reservedCalls.add(m[1]!);
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
  return { declared: [...found.declared], words: [...found.words], reservedCalls: [...found.reservedCalls], notHost: found.notHost };
}

/**
 * The names a declaration's head declares or qualifies (`h`: from where it begins to its `{`, `;` or
 * initializer): the name after a class key (`struct Tag : Base`, `enum class E : int`), the
 * declarator's name and the classes that qualify it (`const int C::v` → C, v; `float g(W, int)` → g;
 * a deduction guide `Box(float) -> Box<double>` → Box; a specialization `struct Tr<T*>` → Tr),
 * `operator` and `using` as words of their own (none for a host variable that is neither constant
 * nor an array, nor for a host function: device code cannot use them), and every other word of the head that is not a
 * keyword (sliceHazard asks which of them are macros: a macro can spell any name).
 */
function declaredIn(head: string): { declared: string[]; words: string[]; host: boolean } {
  let h = stripTemplateParameters(head);
  // a host variable that is neither constant nor an array (`cudaDeviceProp deviceProp;`, llm.c's, declared extern in a
  // header): device code cannot read it, nor see anything of it that its earlier declaration did not give
  const hostVariable =
    !/[([]/.test(h) &&
    !/\b(?:struct|class|union|enum|typedef|operator|using|__device__|__constant__|__managed__|__shared__|const|constexpr|constinit)\b/.test(h);
  // a host function (no __device__, __global__, __host__, constexpr or deduced type outside its parameter list): device
  // code cannot call it (ggml's `bool ggml_cuda_should_use_mmq(enum ggml_type type, …)`)
  let outer = h;
  for (let k = 0; k < 8 && /[()]/.test(outer); k++) outer = outer.replace(/\([^()]*\)/g, " ");
  const hostFunction =
    /\(/.test(h) &&
    !/->/.test(h) &&
    !/\)\s*\(/.test(h) &&
    !/\b(?:struct|class|union|enum|typedef|operator|using|__device__|__global__|__host__|constexpr|consteval|auto|decltype)\b/.test(outer);
  /\(/.test(h) &&
    !/->/.test(h) &&
    !/\b(?:struct|class|union|enum|typedef|operator|using|__device__|__global__|__host__|constexpr|consteval|auto|decltype)\b/.test(h) &&
    !/\)\s*\(/.test(h);
  for (let k = 0; k < 8 && /[()[\]]/.test(h); k++) h = h.replace(/\([^()]*\)|\[[^\[\]]*\]/g, " ");
  const words = [...h.matchAll(/[A-Za-z_]\w*/g)].map((m) => m[0]).filter((w) => w === "operator" || w === "using" || !NOT_A_NAME.has(w));
  const declared = new Set<string>();
  if (hostVariable || hostFunction) return { declared: [], words, host: true };
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
  return { declared: [...declared], words, host: false };
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

/** The project's headers under src/ (src/frontends/cuda/slice.ts projectHeaders); `incomplete`: some were not read. */
export interface SliceContext {
  headers: SliceHeader[];
  incomplete?: boolean;
  /**
   * The toolchain's and the system's headers (src/frontends/cuda/slice.ts systemHeaders): whether an
   * include name outside src/ is one (it exists in their include folders), and the names it
   * includes; absent: every such name is taken for one, including nothing. A name that is neither
   * was not found by the compile (under an #if not taken, as llm.c's `#include "llmc/cudnn_att.h"`
   * without ENABLE_CUDNN) or lies outside the project root.
   */
  system?: { has(name: string): boolean; includes(name: string): string[]; defines(name: string): string[] };
  /**
   * Whether the compile's flags may define a macro (build.sh's `-D` words and EXTRA_FLAGS'; true for
   * every name where they name a file of definitions, `-include`, `@file`). Absent: an `#include`
   * counts whatever `#if` it is in.
   */
  flagDefines?: (name: string) => boolean;
  /** Set by sliceHazard itself (undefinedMacroOf): the names certainly not macros, whose `#ifdef` groups include nothing. */
  undefinedMacro?: (name: string) => boolean;
}

/**
 * The names that are certainly not macros where the TU is compiled: a name of capitals, digits and
 * `_` not starting with `_` (neither gcc nor nvcc predefines one), which no flag may define
 * (context.flagDefines), no `#define` of the TU or of a header under src/ names (in any group), and
 * no system header the TU or those headers could include defines (their closure, over every #if).
 */
function undefinedMacroOf(tuText: string, context: SliceContext): (name: string) => boolean {
  const project = macroTable(tuText);
  for (const h of context.headers) macroTable(h.text, project);
  let fromSystem: Set<string> | undefined;
  return (name) => {
    if (!/^[A-Z][A-Z0-9_]*$/.test(name) || !context.flagDefines || !context.system || context.flagDefines(name) || project.has(name)) return false;
    if (!fromSystem) {
      fromSystem = new Set();
      const system = context.system;
      const seen = new Set<string>();
      const queue = [...includeClosure(tuText, context.headers).outside];
      for (const h of context.headers) queue.push(...includesOf(h.text).names);
      while (queue.length) {
        const n = queue.pop()!;
        if (seen.has(n) || !system.has(n)) continue;
        seen.add(n);
        for (const d of system.defines(n)) fromSystem.add(d);
        queue.push(...system.includes(n));
      }
    }
    return !fromSystem.has(name);
  };
}

/**
 * Of the system headers `wanted`, those that the system headers `from` do not include, following
 * their own includes breadth first (over every #if: what they could include) and stopping once
 * every wanted one is found (the closure of libstdc++ and the CUDA headers is some 300 files,
 * about 0.1 s to read cold, on every validate: what is looked for is usually a few steps away).
 */
function notIncludedBy(from: Iterable<string>, wanted: string[], system: NonNullable<SliceContext["system"]>): string[] {
  const left = new Set(wanted);
  const seen = new Set<string>();
  let level = [...from].filter((n) => system.has(n));
  while (level.length && left.size) {
    const next: string[] = [];
    for (const n of level) {
      if (seen.has(n)) continue;
      seen.add(n);
      left.delete(n);
      for (const m of system.includes(n)) if (!seen.has(m) && system.has(m)) next.push(m);
    }
    level = next;
  }
  return [...left];
}

/** A hazard in a list of declaration heads (declarationHeads), `where` they are, or undefined. */
function headHazard(heads: DeclarationHeads, where: string, named: (n: string) => boolean, macros: MacroTable): string | undefined {
  if (heads.declared.includes("operator")) return `declares an operator ${where}`;
  if (heads.declared.includes("using")) return `has a using-declaration or directive ${where}`;
  const spelt = heads.words.find((w) => macros.has(w)) ?? heads.reservedCalls[0];
  if (spelt) return `declares something ${where} through the macro \`${spelt}\` (a macro can spell any name)`;
  const again = heads.declared.filter(named);
  if (again.length)
    return `declares ${again
      .slice(0, 3)
      .map((n) => `\`${n}\``)
      .join(", ")} ${where}, which the code before it names`;
  return undefined;
}

/**
 * Why a prefix slice of `tuText` cut at `end` could compile another kernel than the whole TU, or
 * undefined. Read: the TU, and the project's headers (`context`) that the TU includes before the
 * cut (the code before) or after it (code after the cut, like the TU's own tail: a header entered
 * before is entered again only where it has no include guard).
 * Anywhere in them: a `friend` (a template's instantiation can define one, and with it change
 * overload resolution elsewhere). After the cut, at namespace scope: a declaration whose head
 * declares or qualifies a name the code before names (a class or enum completed, `struct Tag {…}`
 * where `Tag` was only declared: a trait sees it complete in the TU; a static member defined,
 * `const int C::v = 2`; an overload a template's dependent call finds where the TU ends; a
 * redeclaration whose attributes merge into the entity, `__launch_bounds__`, `__noinline__`; a
 * specialization; a deduction guide; a device, constant or array variable declared `extern`
 * before, adversary 41); a word in a declaration's head that is a macro of the TU or a header, or a
 * reserved name called there (`__CONCAT(se, l)`: a system header's macro), which can spell any
 * name; an operator or a `using`; a call of one of the TU's function-like macros at namespace
 * scope; an `#include` named by a macro; and, where the code before holds a template, an include
 * after the cut of a system header (or one outside the project) that the code before does not
 * include (what it declares is not read: `<cuComplex.h>`'s `cuCabsf(float2)`, adversary 43).
 * Host functions and host variables (neither constant nor arrays) declare nothing device code can
 * use; not seen: a host overload a device template's call would pick (nvcc then fails the TU).
 * Shapes: `mask` the TU's codeMask (comments, strings and preprocessor lines blanked), `end` an
 * offset into both; `context` the project's headers under src/ (none: none read).
 */
export function sliceHazard(tuText: string, mask: string, end: number, context: SliceContext = { headers: [] }): string | undefined {
  const before = mask.slice(0, end);
  if (context.incomplete) return "has more headers under src/ than kerncap reads to check a slice";
  const early = includeClosure(tuText.slice(0, end), context.headers, [], context.undefinedMacro);
  const late = includeClosure(tuText.slice(end), context.headers, early.found, context.undefinedMacro);
  if (early.computed || late.computed) return "includes a file named by a macro (what it declares is not read here)";
  const earlyMasks = [...early.found].map((h) => h.mask).join("\n");
  const beforeNames = new Set((before + "\n" + earlyMasks).match(/[A-Za-z_]\w*/g) ?? []);
  const named = (n: string) => beforeNames.has(n) || IMPLICIT.has(n);
  // a line spliced outside a directive or a comment: the text's tokens are not the ones read here
  if (/\\\r?\n/.test(mask)) return "splices a line (a backslash at its end) outside a directive";
  // a friend defined by a template's instantiation changes what later overload resolution sees (stateful
  // metaprogramming): an instantiation after the kernel, or in another kernel's body the slice blanks (adversary 41)
  if (/\bfriend\b/.test(mask) || [...early.found, ...late.found].some((h) => /\bfriend\b/.test(h.mask)))
    return "declares a friend (a template's instantiation can define one, after the kernel or in a kernel body the slice leaves out)";
  // any specialization after the kernel: C++ looks some names up without their being spelt (a structured binding's
  // std::tuple_size and get, adversary 44)
  const special = specializedAfter(mask, end)[0];
  if (special) return `specializes \`${special}\` after the kernel`;
  // a call after the cut of a function the code before declares __noinline__: cicc specialises such a function for the
  // calls it sees (a constant argument propagated into it), so the slice, without that call, could compile the kernel's
  // call of it otherwise (adversary 48)
  const tuMacros = macroTable(tuText);
  const noinline = noinlineFunctions(`${before}\n${earlyMasks}`, tuMacros);
  const lateCall = namedIn(mask.slice(end), noinline) ?? [...late.found].map((h) => namedIn(h.mask, noinline)).find(Boolean);
  if (lateCall) return `calls \`${lateCall}\`, declared __noinline__ before it, after the kernel (cicc specialises such a function for the calls it sees)`;
  const called = namespaceScopeCalls(mask, end).find((w) => tuMacros.get(w)?.params !== undefined);
  if (called) return `calls the macro \`${called}\` at namespace scope after the kernel`;
  const macros: MacroTable = new Map(tuMacros);
  for (const h of [...early.found, ...late.found]) macroTable(h.text, macros);
  // the TU's own text after the cut, then each header it includes there (all of that header: it comes after the cut)
  const tails = [
    { where: "after the kernel", mask, end },
    ...[...late.found].map((h) => ({ where: `in src/${h.rel}, included after the kernel`, mask: h.mask, end: 0 })),
  ];
  for (const t of tails) {
    const hazard = headHazard(declarationHeads(t.mask, t.end), t.where, named, macros);
    if (hazard) return hazard;
  }
  const added = [...late.outside].filter((n) => !early.outside.has(n) && (context.system?.has(n) ?? true));
  const system = added.length && context.system ? notIncludedBy(early.outside, added, context.system) : added;
  if (system.length && (/\btemplate\b/.test(before) || /\btemplate\b/.test(earlyMasks))) {
    // read again without the includes of groups that are certainly not compiled (an #ifdef of a macro nothing defines)
    if (context.flagDefines && !context.undefinedMacro)
      return sliceHazard(tuText, mask, end, { ...context, undefinedMacro: undefinedMacroOf(tuText, context) });
    return `includes <${system[0]}> after the kernel, which the code before it does not (what it declares is not read here; a template before it may find it)`;
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

/** The functions a text (a codeMask) declares `__noinline__` (`__attribute__((noinline))`, `[[gnu::noinline]]`): the ones cicc keeps as calls, and specialises for the calls it sees. */
function noinlineFunctions(mask: string, macros: MacroTable = new Map()): Set<string> {
  // a macro that spells the attribute (`#define NOINL __attribute__((noinline))`: adversary 51) is one more spelling
  const spelt = [...macros].filter(([, m]) => m.params === undefined && /\bnoinline\b|__noinline__/.test(m.body)).map(([name]) => `\\b${name}\\b`);
  const attr = ["\\b__noinline__\\b", "__attribute__\\s*\\(\\(\\s*(?:__)?noinline(?:__)?\\s*\\)\\)", "\\[\\[\\s*gnu::noinline\\s*\\]\\]", ...spelt].join("|");
  const re = new RegExp(`(?:${attr})[^;{}()]*?\\b([A-Za-z_]\\w*)\\s*\\(`, "g");
  return new Set([...mask.matchAll(re)].map((m) => m[1]!));
}

/** The first of `names` that `mask` names (a call, an address taken), or undefined. */
const namedIn = (mask: string, names: Set<string>): string | undefined =>
  names.size ? (mask.match(/[A-Za-z_]\w*/g) ?? []).find((w) => names.has(w)) : undefined;

/**
 * Whether another kernel's body before the cut must stay in the slice (not blanked): the body
 * holds a preprocessor directive or `__COUNTER__` (left out, its `#define`, `#undef`, `#include`,
 * `#pragma pop_macro` would be lost, its counter values too: adversary 43), or the text between
 * its end (`close`, the offset past its `}`) and the cut (`end`) includes a file, or declares, at
 * namespace scope, a name the text up to the body's end names, through a macro too, or an operator
 * or a `using`. A body left out moves the point where the templates it uses are first instantiated
 * to the captured kernel's, past those declarations (a class it instantiates with a type completed
 * in between would see it complete in the slice and incomplete in the TU).
 * Shapes: `tuText` and `mask` (codeMask) the TU's, offsets into both; `open` the body's `{`.
 */
export function bodyStays(tuText: string, mask: string, open: number, close: number, end: number): boolean {
  if (holdsDirective(tuText.slice(open, close))) return true;
  const macros = macroTable(tuText);
  // a call of a __noinline__ function: left out, cicc would see fewer calls of it (adversary 48)
  if (namedIn(mask.slice(open, close), noinlineFunctions(mask.slice(0, end), macros))) return true;
  const between = includeClosure(tuText.slice(close, end), []);
  if (between.outside.size || between.computed) return true;
  const names = new Set(mask.slice(0, close).match(/[A-Za-z_]\w*/g) ?? []);
  return headHazard(declarationHeads(mask, close, end), "", (n) => names.has(n), macros) !== undefined;
}

/**
 * `mask` with every brace-enclosed body blanked but a namespace's or an `extern "C"` block's (the
 * braces themselves kept): the TU's code at namespace scope, where a macro's call can declare.
 */
function namespaceScope(mask: string): string {
  const out = mask.split("");
  const open: boolean[] = [];
  let blankFrom = -1;
  for (let i = 0; i < mask.length; i++) {
    const c = mask[i]!;
    if (c === "{") {
      const ns = open.every(Boolean) && /(?:\bnamespace\b[\w\s:]*|\bextern\s*)$/.test(mask.slice(Math.max(0, i - 256), i).trimEnd());
      if (!ns && open.every(Boolean)) blankFrom = i + 1;
      open.push(ns);
    } else if (c === "}") {
      open.pop();
      if (blankFrom >= 0 && open.every(Boolean)) {
        for (let k = blankFrom; k < i; k++) if (out[k] !== "\n") out[k] = " ";
        blankFrom = -1;
      }
    }
  }
  return out.join("");
}

/**
 * Why an instantiation slice (the TU's preprocessor lines, then an odr-use of the captured kernel
 * template's instantiation: ./slice.ts) could compile another kernel than the whole TU, or
 * undefined. The slice leaves the TU's own code out, so that code must add nothing the kernel
 * could see: its code at namespace scope, the macros called there expanded (those of the TU and of
 * the project headers it includes, `context`), may hold explicit instantiations (`template void
 * f<T>(…);`, `extern template …`, as ggml's `DECL_MMQ_CASE(…)` expands to), host functions and
 * host variables (ggml's mmq.cu) whose names no header it includes names, nothing else (no device
 * variable, type, template or specialization: adversary 45); no `#include` may follow it (the slice instantiates the kernel after every include, the TU
 * where its code stands); a `friend` in the TU or those headers, an include named by a macro, or a
 * macro kerncap cannot expand at namespace scope, makes no slice.
 */
export function instantiationHazard(tuText: string, mask: string, context: SliceContext = { headers: [] }): string | undefined {
  if (context.incomplete) return "has more headers under src/ than kerncap reads to check a slice";
  if (!mask.trim()) return undefined;
  const included = includeClosure(tuText, context.headers);
  if (included.computed) return "includes a file named by a macro (what it declares is not read here)";
  const headers = [...included.found];
  if (/\bfriend\b/.test(mask) || headers.some((h) => /\bfriend\b/.test(h.mask))) return "declares a friend (a template's instantiation can define one)";
  const firstCode = mask.search(/\S/);
  const after = includeClosure(tuText.slice(firstCode), []);
  if (after.outside.size || after.computed) return "includes a file after its own code, which the slice instantiates the kernel after";
  const macros = macroTable(tuText);
  for (const h of headers) macroTable(h.text, macros);
  const expanded = expandMacros(namespaceScope(mask), macros);
  if (expanded === undefined) return "has code at namespace scope whose macros kerncap does not expand (a variadic one, or one that stringizes or pastes)";
  // explicit instantiations name what they instantiate: they declare nothing new
  const declarations = expanded.replace(/(?:^|(?<=[;}]))\s*(?:extern\s+)?template\s+(?!<)[^;{}]*;/g, " ");
  const named = new Set(headers.flatMap((h) => h.mask.match(/[A-Za-z_]\w*/g) ?? []));
  const heads = declarationHeads(declarations, 0);
  const hazard = headHazard(heads, "in its own code", (n) => named.has(n), macros)?.replace(
    "which the code before it names",
    "which a header it includes names",
  );
  if (hazard) return hazard;
  // anything else than host code and explicit instantiations: a device variable moves the module's constant-bank slots,
  // a specialization of std::tuple_size changes a structured binding in the kernel without its name being spelt (adversary 45)
  if (heads.notHost.length) return `declares \`${heads.notHost[0]}\` in its own code, which is neither host code nor an explicit instantiation`;
  return undefined;
}
