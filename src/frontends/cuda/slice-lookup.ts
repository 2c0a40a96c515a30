/**
 * What a prefix slice (./slice.ts) cannot see: declarations after the cut that a call before it
 * could still find. C++ looks a template's dependent call up again where the TU ends (the point of
 * instantiation of a function template, by argument-dependent lookup), so an overload defined after
 * the kernel can change the kernel the TU compiles while the slice, cut at the kernel, compiles
 * the one without it (adversary 39: `pick(s, 0)` in a template, `pick(const S&, int)` returning 7
 * defined after the kernel: the TU computed 7·a·x+y, the slice a·x+y).
 */

/** Words followed by `(` that declare nothing (statements, operators, attributes, specifiers). */
const NOT_DECLARED = new Set(
  "if for while switch return sizeof alignof alignas decltype static_assert __attribute__ __declspec noexcept throw catch typeid asm __asm__ __launch_bounds__ __align__ __cluster_dims__ __grid_constant__ explicit defined main".split(
    " ",
  ),
);

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

/** The words at namespace scope after `end` that are followed by `(` (declarations, macro calls), and `operator`, `using`. */
function namespaceScopeWords(mask: string, end: number): string[] {
  const found: string[] = [];
  const scope: boolean[] = []; // per open brace: whether it is a namespace's or an extern "C" block's
  let head = end; // where the current declaration began
  for (let i = end; i < mask.length; i++) {
    const c = mask[i]!;
    if (c === "{") {
      const h = mask.slice(head, i).trimEnd();
      scope.push(/\bnamespace\b[\w\s:]*$/.test(h) || /\bextern$/.test(h));
      head = i + 1;
    } else if (c === "}") {
      scope.pop();
      head = i + 1;
    } else if (c === ";") head = i + 1;
    else if (/[A-Za-z_]/.test(c) && !/\w/.test(mask[i - 1] ?? " ")) {
      const id = /^[A-Za-z_]\w*/.exec(mask.slice(i, i + 256))![0];
      const word = id === "operator" || id === "using" || (!NOT_DECLARED.has(id) && /^\s*\(/.test(mask.slice(i + id.length, i + id.length + 64)));
      if (scope.every(Boolean) && word && !found.includes(id)) found.push(id);
      i += id.length - 1;
    }
  }
  return found;
}

/**
 * Why a prefix slice of `tuText` cut at `end` could compile another kernel than the whole TU, or
 * undefined. Anywhere: a `friend` (a template's instantiation can define one, and with it change
 * overload resolution elsewhere). After the cut: a specialization (explicit or partial, of a
 * class, function or variable template the text before names: the TU's instantiation sees it,
 * the slice's does not); the definition of a variable declared `extern` before; an operator or a
 * `using` at namespace scope; a call of a function-like macro the TU defines, at namespace scope
 * (what it declares is not read here); a declaration of a function the text before names (a
 * redeclaration's attributes merge into the entity: `__launch_bounds__`, `__noinline__`; an overload
 * a template's dependent call finds where the TU ends); and, where the text before the cut holds a
 * template, an `#include "…"`. Not seen: a template of a header
 * included before the cut calling, by ADL, a function that only the TU's text after the cut names
 * in another spelling, or that a system header (`<…>`) after it declares.
 * Shapes: `mask` the TU's codeMask (comments, strings and preprocessor lines blanked), `end` an
 * offset into both.
 */
export function sliceHazard(tuText: string, mask: string, end: number): string | undefined {
  const before = mask.slice(0, end);
  const after = mask.slice(end);
  const named = (n: string) => new RegExp(`\\b${n}\\b`).test(before);
  // a friend defined by a template's instantiation changes what later overload resolution sees (stateful
  // metaprogramming): an instantiation after the kernel, or in another kernel's body the slice blanks (adversary 41)
  if (/\bfriend\b/.test(mask))
    return "declares a friend (a template's instantiation can define one, after the kernel or in a kernel body the slice leaves out)";
  const special = specializedAfter(mask, end).find(named);
  if (special) return `specializes \`${special}\` after the kernel, which the code before it names`;
  // a variable declared extern before and defined after: the slice's is zero-initialized (adversary 41: g = 5.0f lost)
  const external = [...before.matchAll(/(?:^|[;}])\s*extern\s+[^;{}"]*?\b([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)?;/g)].map((x) => x[1]!);
  const defined = external.find((n) => new RegExp(`\\b${n}\\b`).test(after));
  if (defined) return `defines \`${defined}\` after the kernel, declared extern before it`;
  const words = namespaceScopeWords(mask, end);
  if (words.includes("operator")) return "declares an operator after the kernel";
  if (words.includes("using")) return "has a using-declaration or directive after the kernel";
  const macros = new Set([...tuText.matchAll(/^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)\(/gm)].map((x) => x[1]!));
  const called = words.find((w) => macros.has(w));
  if (called) return `calls the macro \`${called}\` at namespace scope after the kernel`;
  // a redeclaration of a function the code before names: attributes (__launch_bounds__ on the kernel, __noinline__ on
  // a helper) merge into the one entity; with a template before, an overload its dependent calls find where the TU ends
  const again = words.filter(named);
  if (again.length)
    return `declares ${again
      .slice(0, 3)
      .map((n) => `\`${n}\``)
      .join(", ")} after the kernel, which the code before it names`;
  if (/\btemplate\b/.test(before) && /^[ \t]*#[ \t]*include[ \t]*"/m.test(tuText.slice(end)))
    return "includes a header after the kernel, where a template before it may find what it declares";
  return undefined;
}
