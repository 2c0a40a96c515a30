/**
 * The words of a compile command and the environment that widen the include search (a header found
 * there may define a macro, or answer a `__has_include`, that nothing under src/ or the toolchain
 * does): one list for the slice's checks (./cuda/slice-directives.ts flagDefinesIn) and a confined
 * build's (./confine-sources.ts searchBeyondSandbox). nvcc's spellings and gcc's (through
 * -Xcompiler, --compiler-options), each with its value glued, after `=` or as the next word.
 */

/** The environment variables nvcc and gcc read that add flags or include folders to every compile. */
export const INCLUDE_SEARCH_ENV = [
  "NVCC_PREPEND_FLAGS",
  "NVCC_APPEND_FLAGS",
  "CPATH",
  "C_INCLUDE_PATH",
  "CPLUS_INCLUDE_PATH",
  "OBJC_INCLUDE_PATH",
  "OBJCPLUS_INCLUDE_PATH",
  "GCC_EXEC_PREFIX",
  "COMPILER_PATH",
] as const;

/** An option naming an include folder (or the root the system's are found under), and its value. */
const FOLDER =
  /(?:^|[\s'"=,])(?:-I|-isystem|-iquote|-idirafter|-iprefix|-iwithprefix|-iwithprefixbefore|-isysroot|--sysroot|--system-include|--include-path|--include-directory(?:-after)?|--include-with-prefix(?:-before|-after)?|--include-prefix)[\s'"=]*([^\s'"]*)/g;

/** The include folders `text` (shell words of a compile command, or EXTRA_FLAGS) names, as written ("" where the value is the next word's quoted text). */
export function includeFolderWords(text: string): string[] {
  return [...text.matchAll(FOLDER)].map((m) => m[1]!);
}

/** The first variable of INCLUDE_SEARCH_ENV set in `env`, or undefined. */
export function includeSearchVariable(env: Record<string, string | undefined> = process.env): string | undefined {
  return INCLUDE_SEARCH_ENV.find((k) => env[k]);
}
