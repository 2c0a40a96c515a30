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
 * The names the TU declares at namespace scope after `end` (a word followed by `(` outside any
 * function or class body: functions, function templates, operators as `operator`) that a call
 * before `end` could find where the TU ends: an operator, or, where the text before `end` holds a
 * template (whose dependent calls are looked up again at the TU's end, by argument-dependent
 * lookup), a name that text uses. A template of an included header calling a free function of the
 * TU's by ADL is not seen (the headers' text is not read here). `mask` is the TU's codeMask (comments, strings and preprocessor lines
 * blanked). Shapes: `end` an offset into mask; names in order, without repeats.
 */
export function redeclaredAfter(mask: string, end: number): string[] {
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
      if (
        scope.every(Boolean) &&
        !NOT_DECLARED.has(id) &&
        (id === "operator" || /^\s*\(/.test(mask.slice(i + id.length, i + id.length + 64))) &&
        !found.includes(id)
      )
        found.push(id);
      i += id.length - 1;
    }
  }
  const before = mask.slice(0, end);
  // a non-template call binds its name where it stands: only a template's dependent call (or an operator, which a
  // header's template may call on the TU's types) can see a declaration that comes after it
  const templates = /\btemplate\b/.test(before);
  return found.filter((n) => n === "operator" || (templates && new RegExp(`\\b${n}\\b`).test(before)));
}
