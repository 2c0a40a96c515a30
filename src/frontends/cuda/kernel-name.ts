/**
 * A demangled CUDA kernel name in parts (qualified name, base name, template arguments), read
 * from the demangler's output (cu++filt / the manifest's `kernel.demangled`). Its own module: the
 * locator, the includer search and the slice's metadata check all need it, and none of them may
 * import another in a cycle.
 */
import { absolutePathList, buildChildEnv, whichAbsolute } from "../../env.ts";

export interface KernelNameParts {
  /** Qualified name with template arguments, e.g. `ns::mul_mat_q<(ggml_type)2, 64, false>`. */
  qualified: string;
  /** Last component without template arguments, e.g. `mul_mat_q`. */
  base: string;
  /** Text between the outermost `<>` of the last component, or undefined for a non-template. */
  templateArgs?: string;
}

/** Index of the last top-level occurrence of `ch` in s, counting `<>` `()` `[]` nesting. */
function lastTopLevel(s: string, ch: string): number {
  let depth = 0;
  let found = -1;
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (depth === 0 && c === ch) found = i;
    if (c === "<" || c === "(" || c === "[") depth++;
    else if (c === ">" || c === ")" || c === "]") depth = Math.max(0, depth - 1);
  }
  return found;
}

/**
 * Split a demangled kernel name (`void ns::k<int, 4>(float*, int)`, or a plain `k` / `k(int)`)
 * into its qualified name, base name and template arguments.
 */
export function kernelNameParts(demangled: string): KernelNameParts {
  let s = demangled.trim();
  const paren = lastTopLevel(s, "(");
  if (paren > 0) s = s.slice(0, paren).trim();
  // return type of a function template: the name is the last top-level word
  const space = lastTopLevel(s, " ");
  if (space >= 0) s = s.slice(space + 1);
  // last component: after the last top-level "::"
  let start = 0;
  for (let i = 0, depth = 0; i < s.length; i++) {
    const c = s[i]!;
    if (c === "<" || c === "(") depth++;
    else if (c === ">" || c === ")") depth--;
    else if (depth === 0 && c === ":" && s[i + 1] === ":") start = i + 2;
  }
  const last = s.slice(start);
  const i = last.indexOf("<");
  return {
    qualified: s,
    base: i >= 0 ? last.slice(0, i) : last,
    templateArgs: i >= 0 ? last.slice(i + 1, last.lastIndexOf(">")) : undefined,
  };
}

/**
 * Mangled names through the demangler (c++filt of binutils, else the toolkit's cu++filt, found on
 * PATH's absolute entries only: none from the working folder), one output per name; a name that
 * is no mangled C++ name, or no demangler, or one that fails within 2 s: the name as given.
 */
export function demangledNames(names: string[]): string[] {
  const mangled = names.filter((n) => n.startsWith("_Z"));
  if (!mangled.length) return names;
  const PATH = absolutePathList(process.env.PATH);
  const filt = whichAbsolute("c++filt", PATH) ?? whichAbsolute("cu++filt", PATH);
  if (!filt) return names;
  // from `/`, with no load path naming the working folder (an empty LD_LIBRARY_PATH entry): no library of a folder kerncap was started in
  const p = Bun.spawnSync([filt, ...mangled], { cwd: "/", stdout: "pipe", stderr: "ignore", timeout: 2000, env: buildChildEnv({ ...process.env, PATH }, []) });
  const out = p.exitCode === 0 ? p.stdout.toString().split("\n") : [];
  const by = new Map(mangled.map((n, i) => [n, out[i]?.trim() || n]));
  return names.map((n) => by.get(n) ?? n);
}

/**
 * Whether `defined` (the rebuilt module's kernels, demangled, as E_KERNEL_NOT_FOUND's hint lists
 * them: "scale(float*, long) (_Z5scalePfl), …") holds the captured kernel `demangled` under another
 * parameter list: the same text before its parameter list (name, template arguments, return type).
 */
export function sameKernelOtherParams(demangled: string, defined: string): boolean {
  if (!demangled.endsWith(")")) return false;
  let depth = 0;
  let open = -1;
  for (let i = demangled.length - 1; i >= 0; i--) {
    if (demangled[i] === ")") depth++;
    else if (demangled[i] === "(" && --depth === 0) {
      open = i;
      break;
    }
  }
  if (open <= 0) return false;
  const head = demangled.slice(0, open + 1);
  return defined.startsWith(head) || defined.includes(`, ${head}`);
}
