/**
 * Which compiler options in a received build.sh's flags slot are only compile settings: options
 * that choose what the compiler makes of the source (defines, include folders, language standard,
 * optimisation, floating-point and register settings, warnings) and nothing else. Anything else a
 * flag can do (write a file where it says: `-MF PATH`, `--keep-dir DIR`, `-Xptxas -o PATH`,
 * `-Xcompiler -fdump-…=PATH`; run or load a program: `-Xcompiler -wrapper`, `-fplugin`; read
 * options from a file: `@FILE`, `--options-file`) makes the build.sh one kerncap does not vouch for:
 * src/frontends/stock-build.ts then reads it as a script of the sender's, which plain `--trust` does
 * not run (docs/security.md, "What build.sh names").
 *
 * An allow list, not a list of what is known to be dangerous: a compiler has more options than any
 * list of its dangerous ones (each earlier list missed one), and an option this list does not know
 * costs only the user's reading of the script (`--trust=DIGEST`), never a wrong build.
 * Sources of the option names: `nvcc --help` (CUDA 13.0), `ptxas --help`, gcc's and clang's manuals.
 *
 * Values are held to what a shell line leaves alone: nvcc pastes a macro's value and an include
 * folder into the `sh -c` lines of its steps (`-DX=$(id)` ran `id` on CUDA 13.0), and a space
 * would split one value into more options of the host compiler's. A macro's value is letters,
 * digits and `_.+-/:,=@%"` (no `$`, backquote, `\`, `'`, space, `;|&<>()*?[]{}~#!`); a path the
 * same without `"`, and never a device or kernel file (`-include /dev/zero` read without end).
 *
 * No word names a response file in any spelling (readsResponseFile): nvcc splits an option's value
 * at commas and hands each element to gcc as a word of its own (`-isystem=@F`, `-DX=1,@F` and
 * `-I/usr,@F` give gcc the word `@F`), and gcc, nvcc, cicc and ptxas read the options of such a
 * word from the file (`-wrapper /bin/sh,-c,CMD` in a header under src/ ran CMD). A path value is
 * read element by element for the same reason (`-I/usr,/dev/stdin`), after the option's `=`
 * (`-isystem=/dev/stdin`), and never starts with gcc's sysroot mark `=`.
 */
import { realpathSync } from "node:fs";
import { tmpdir } from "node:os";
import { posix, resolve } from "node:path";

/** A macro's value (-DX=VALUE): text a shell line leaves as it is (see the module's comment). */
const DEFINE_VALUE = /^[A-Za-z0-9_.+\-/:,=@%"]*$/;
/** A path value's characters (-I DIR, -include FILE, -ccbin DIR): DEFINE_VALUE's without a quote. */
const PATH_CHARS = /^[A-Za-z0-9_.+\-/:,=@%]+$/;
/** The kernel's files: a device (/dev/zero reads without end), /proc, /sys. */
const KERNEL_FILES = /^\/(dev|proc|sys)(\/|$)/;

/**
 * Whether a compiler argument word names a response file in any spelling: `@` at its start, after
 * `=` or `,` (nvcc splits option values at commas and passes each element as a word: `-isystem=@F`
 * and `-DX=1,@F` give gcc the word `@F`), after a quote or a space (`-DX=1,"@F"`, a value split by
 * the shell; a quote after it too: nvcc's shell line reads `-DX=1,@"F"` as `-D @F`), or right
 * after an option's name (`-I@F`, `-isystem@F`). gcc's driver, nvcc, cicc and
 * ptxas read more options from such a file (gcc's `-wrapper` among them), so a received build may
 * name none. A lone `@` is no file. An `@` inside a value (`-DMAIL=a@b.c`) is left.
 */
export function readsResponseFile(w: string): boolean {
  return /(?:^|[=,\s"'])@(?!$|[,\s])|^--?[A-Za-z][A-Za-z0-9_-]*@/.test(w);
}

/**
 * Whether `v` is a path value a received build may name: PATH_CHARS only; each of its
 * comma-separated elements (nvcc passes each as a folder or file of its own) neither empty, nor
 * starting with `@` (a response file) or `=` (gcc's sysroot mark), nor leaving the build's folder by `..`, nor lying under /dev, /proc or
 * /sys itself or where it resolves (relative to a private build folder under the temporary folder,
 * where builds run: src/format/staged-build.ts; links followed where it exists).
 */
function isSafePath(v: string): boolean {
  if (!PATH_CHARS.test(v)) return false;
  return v.split(",").every((e) => {
    if (e === "" || e.startsWith("@") || e.startsWith("=")) return false;
    // a relative path that leaves the build's folder names a file by where the build runs, which is not where this check
    // resolves it (an export builds in its own folder: ../../../dev/stdin read as <tmp>/dev/stdin here, adversary 61);
    // kerncap writes the include folders into src/ (./src/ggml/src/ggml-cuda/.. stays inside)
    if (!e.startsWith("/") && posix.normalize(e).split("/")[0] === "..") return false;
    const p = resolve(tmpdir(), "kerncap-run-x", e);
    let real = p;
    try {
      real = realpathSync(p);
    } catch {
      /* not there: the name alone */
    }
    return !KERNEL_FILES.test(p) && !KERNEL_FILES.test(real);
  });
}

/** isSafePath as a value rule of NVCC_VALUE. */
const PATH_VALUE = { test: isSafePath };

/** Whether `w` is `-DNAME`, `-DNAME=VALUE` or `-UNAME` with a value a shell line leaves alone (and no response file: `-DX=1,@F`). */
function isDefine(w: string): boolean {
  const m = /^-[DU][A-Za-z_][A-Za-z0-9_]*(?:=(.*))?$/s.exec(w);
  return m !== null && (m[1] === undefined || DEFINE_VALUE.test(m[1])) && !readsResponseFile(w);
}

/**
 * Whether `w` is an include option with its folder attached and a safe path, in each spelling:
 * `-I./src`, `-I=DIR`, `-isystem=DIR`, `-isystemDIR`, `--include-path=DIR`, `--system-include=DIR`
 * (nvcc reads `-opt=VALUE` as `-opt VALUE`; the `=` is not part of the folder).
 */
function isIncludeFolder(w: string): boolean {
  const m = /^(?:-(?:I|isystem|iquote|idirafter)=?|--(?:include-path|system-include)=)(.+)$/s.exec(w);
  return m !== null && isSafePath(m[1]!);
}

/** nvcc (and hipcc/clang) options that stand alone as one word. */
const NVCC_WORD = [
  /^-O[0-3s]?$/,
  /^--optimize=[0-3]$/,
  /^--?dopt=(on|off)$/,
  /^-(g|G|w|lineinfo)$/,
  /^--(device-debug|generate-line-info|debug)$/,
  /^--?std=[a-z0-9+]+$/,
  /^-W(?![lpa]$)(no-)?[a-z][a-z0-9-]*(=[a-z0-9-]+)?$/, // warnings (not -Wl, -Wp, -Wa)
  /^--?(Werror|Wreorder|Wno-deprecated-gpu-targets|Wno-deprecated-declarations|Wext-lambda-captures-this|Wdefault-stream-launch|Wmissing-launch-bounds)(=[a-z0-9,-]+)?$/,
  /^--?(use_fast_math|use-fast-math|extended-lambda|expt-extended-lambda|expt-relaxed-constexpr|restrict|allow-unsupported-compiler|forward-unknown-to-host-compiler|resource-usage|res-usage|source-in-ptx|disable-warnings|display-error-number|no-display-error-number|no-host-device-initializer-list|no-host-device-move-forward|keep-device-functions|extensible-whole-program|no-exceptions|dlink-time-opt|dlto)$/,
  /^--?(ftz|prec-div|prec-sqrt|fmad|static-global-template-stub|relocatable-device-code|rdc|device-c|device-w|use-local-env)=(true|false)$/,
  /^--?default-stream=(legacy|null|per-thread)$/,
  /^--?(maxrregcount|threads|split-compile|split-compile-extended)=\d+$/,
  /^-t\d+$/,
  /^--?diag-(suppress|warn|error)=[A-Za-z0-9_,-]+$/,
  /^-m(32|64)$/,
  // clang/hipcc (the HIP template's flags)
  /^--offload-arch=[a-z0-9:+-]+$/,
  /^-f(no-)?(gpu-rdc|fast-math|hip-new-launch-api|gpu-flush-denormals-to-zero|gpu-approx-transcendentals|gpu-allow-device-init|cuda-flush-denormals-to-zero|hip-fp32-correctly-rounded-divide-sqrt|unsafe-math-optimizations|finite-math-only|openmp|PIC|pic|exceptions|rtti)$/,
  /^-ffp-contract=(fast|on|off|fast-honor-pragmas)$/,
];

/** nvcc options followed by a value word, and what that value may be. */
const NVCC_VALUE: Record<string, { test(v: string): boolean }> = {
  "-maxrregcount": /^\d+$/,
  "--maxrregcount": /^\d+$/,
  "-t": /^\d+$/,
  "--threads": /^\d+$/,
  "--split-compile": /^\d+$/,
  "-default-stream": /^(legacy|null|per-thread)$/,
  "--default-stream": /^(legacy|null|per-thread)$/,
  "-diag-suppress": /^[A-Za-z0-9_,-]+$/,
  "--diag-suppress": /^[A-Za-z0-9_,-]+$/,
  "-diag-warn": /^[A-Za-z0-9_,-]+$/,
  "--diag-warn": /^[A-Za-z0-9_,-]+$/,
  "-diag-error": /^[A-Za-z0-9_,-]+$/,
  "--diag-error": /^[A-Za-z0-9_,-]+$/,
  "-Werror": /^[a-z0-9,-]+$/,
  "--Werror": /^[a-z0-9,-]+$/,
  "-std": /^[a-z0-9+]+$/,
  "--std": /^[a-z0-9+]+$/,
  "-O": /^[0-3]$/,
  "--optimize": /^[0-3]$/,
  "-dopt": /^(on|off)$/,
  "--dopt": /^(on|off)$/,
  "-I": PATH_VALUE,
  "-isystem": PATH_VALUE,
  "-iquote": PATH_VALUE,
  "-idirafter": PATH_VALUE,
  "--include-path": PATH_VALUE,
  "--system-include": PATH_VALUE,
  // a file compiled into the TU first: read, not run (a confined build checks where)
  "-include": PATH_VALUE,
  "--pre-include": PATH_VALUE,
  // the host compiler: a program, checked where it is (stock-build.ts codeLoadingWords, what-runs.ts programProblem)
  "-ccbin": PATH_VALUE,
  "--compiler-bindir": PATH_VALUE,
};

/** The host compiler's options inside -Xcompiler (gcc's, clang's): settings only. */
const HOST_WORD = [
  /^-O[0-3sgz]?$/,
  /^-g[0-3]?$/,
  /^-(w|pthread|pipe|pedantic|pedantic-errors|ansi|fPIC|fpic|fPIE|fpie)$/,
  /^-std=[a-z0-9+]+$/,
  /^-W(?![lpa]$)(no-)?[a-z][a-z0-9+-]*(=[a-z0-9+-]+)?$/, // not -Wl, -Wp, -Wa: options for the linker, preprocessor, assembler
  // a plugin of gcc's own plugin folder by its bare name (-fplugin=annobin, in Fedora's default flags);
  // a path is not a setting, and stock-build.ts codeLoadingWords names the plugin for the trust gate's check
  /^-fplugin=[A-Za-z0-9_-]+$/,
  /^-m(?!llvm)[a-z0-9][a-z0-9=.+-]*$/, // target settings (-march=native, -mavx2, -m64), not clang's -mllvm
  // -f settings with no value or a plain one, never a path: not -fplugin, -fdump-…, -fprofile-…, -fopt-info, -fcallgraph-info, …
  // (not -fcompare-debug=OPTS, whose value gcc reads as its own options: -fcompare-debug=-B.. ran ../cc1plus, adversary 62;
  // nor -fdiagnostics-add-output=…, -fdeps-file=, -fltrans-output-list=, -fresolution=: files written or read), and a
  // value never an option (`-…`) nor a path
  /^-f(no-)?(?!plugin|dump|profile|opt-info|callgraph|auto-profile|record|save|debug-prefix|file-prefix|macro-prefix|coverage|lto|stack-usage|sanitize|instrument|spec|test-coverage|diagnostics-format|diagnostics-plain|diagnostics-add-output|diagnostics-set-output|ident|asm|pass-plugin|crash|self-test|use-ld|module|exec-charset|input-charset|wide-exec-charset|compare-debug|deps|ltrans|wpa|resolution|embed|tmp|jobserver)[a-z][a-z0-9-]*(=[A-Za-z0-9_][A-Za-z0-9_.+-]*)?$/,
];

/** Linker settings after the host compiler's -Wl (a module build runs no host linker: inert, but only settings are let through). */
const LINKER_WORD =
  /^(-B(static|dynamic|symbolic)|-O[0-3]|--?(no-)?as-needed|--gc-sections|-z|relro|now|lazy|defs|noexecstack|-s|--strip-all|--?export-dynamic)$/;

/** ptxas options inside -Xptxas: settings only (not -o, --output-file, --input-as-string, --options-file, …); also what a tune config may pass (src/frontends/cuda/tune-space.ts). */
export const PTXAS_WORD =
  /^(-v|--verbose|-O[0-3]|--?opt-level=[0-3]|--?maxrregcount=\d+|-maxrregcount|\d+|-dlcm=\w+|-dscm=\w+|--?def-(load|store)-cache=\w+|--?warn-on-[a-z-]+|--?allow-expensive-optimizations(=(true|false))?|-Werror|--?warning-as-error|--?suppress-[a-z-]+|--?disable-optimizer-constants|--?fmad=(true|false)|--?preserve-relocs|--?sp-bound-check|-g|--?device-debug|-lineinfo|--?generate-line-info|--?position-independent-code=(true|false)|--?extensible-whole-program|--?register-usage-level=\d+|--?disable-warnings|--?device-function-maxrregcount=\d+)$/;

/**
 * cudafe++ options inside -Xcudafe: diagnostics only, and the bare values they take (a diagnostic's
 * number or name: never a word starting with `-`, which cudafe++ reads as an option of its own:
 * `--error_output,F` writes its messages over F and `--output_mode,sarif` makes them JSON; an
 * export's `./repro` so overwritten ran as a script, adversary 60).
 */
const CUDAFE_WORD =
  /^--?(diag_suppress|diag_warning|diag_error|diag_remark|display_error_number|no_display_error_number)(=[A-Za-z0-9_,-]+)?$|^[A-Za-z0-9_][A-Za-z0-9_-]*$/;

/** Whether `w` is a host compiler's setting (a macro and an include folder held to their values' rules). */
function isHostWord(w: string): boolean {
  return isDefine(w) || isIncludeFolder(w) || HOST_WORD.some((r) => r.test(w));
}

/** Options whose value is another tool's words: which words that tool may be given. */
const PASS: Record<string, (w: string) => boolean> = {
  "-Xcompiler": (w) => isHostWord(w),
  "--compiler-options": (w) => isHostWord(w),
  "-Xptxas": (w) => PTXAS_WORD.test(w),
  "--ptxas-options": (w) => PTXAS_WORD.test(w),
  "-Xcudafe": (w) => CUDAFE_WORD.test(w),
};

/**
 * The first of a compile command's option words that is not only a compile setting, or
 * undefined when all are. `words`: the flags slot's words with their shell quoting removed
 * (src/frontends/stock-build.ts flagWords), e.g. `["-O3", "-Xcompiler", "-fPIC,-Wall", "-I./src"]`.
 * `-Xcompiler`-style values are split at commas and spaces as nvcc and the shell split them, also
 * in their `-Xcompiler=…` form; a value-taking option with no value is not a setting.
 */
export function firstNonSetting(words: readonly string[]): string | undefined {
  for (let i = 0; i < words.length; i++) {
    const w = words[i]!;
    // a quoted word holding a line break: nvcc pastes -Xcompiler's value into the shell line of its step, where the break
    // starts a command; split at white space below, it read as settings (adversary 62: '-I⏎python3 -I src/p.py')
    if (/[\n\r\t\v\f]/.test(w)) return w;
    if (readsResponseFile(w)) return w;
    const eq = w.indexOf("=");
    const opt = w.startsWith("-") && eq > 0 ? w.slice(0, eq) : w;
    const pass = PASS[opt];
    if (pass) {
      const value = eq > 0 && opt !== w ? w.slice(eq + 1) : words[++i];
      if (value === undefined) return w;
      if (/[\n\r\t\v\f]/.test(value)) return value; // a line break there starts a command in nvcc's step (above)
      const bad = value.split(/[,\s]+/).filter(Boolean);
      // gcc's "-I" and "-isystem" with their folder as the next word inside one -Xcompiler value
      for (let j = 0; j < bad.length; j++) {
        if (/^-(I|isystem|iquote|idirafter|include)$/.test(bad[j]!) && opt !== "-Xptxas" && opt !== "--ptxas-options" && bad[j + 1]) {
          if (!isSafePath(bad[++j]!)) return `${opt} ${bad[j - 1]} ${bad[j]}`;
          continue;
        }
        if (bad[j] === "-Wl" && (opt === "-Xcompiler" || opt === "--compiler-options")) {
          // -Wl,A,B: the words up to the next option of the host compiler's own are the linker's
          for (j++; j < bad.length && !isHostWord(bad[j]!); j++) if (!LINKER_WORD.test(bad[j]!)) return `${opt} -Wl,${bad[j]}`;
          j--;
          continue;
        }
        if (!pass(bad[j]!)) return `${opt} ${bad[j]}`;
      }
      continue;
    }
    if (isDefine(w) || isIncludeFolder(w) || NVCC_WORD.some((r) => r.test(w))) continue;
    const valued = NVCC_VALUE[w];
    if (valued) {
      const v = words[++i];
      if (v === undefined || !valued.test(v)) return v === undefined ? w : `${w} ${v}`;
      continue;
    }
    const attached = NVCC_VALUE[opt];
    if (attached && eq > 0 && attached.test(w.slice(eq + 1))) continue;
    return w;
  }
  return undefined;
}
