/**
 * The device-relevant flags of one compile command: what cudaFlagsFromCommand keeps of a
 * command's argv (defines, include folders made absolute, -std, -O, host-compiler options …)
 * without what only the original build needs (the compiler, the TU, -c/-o, dependency output, the
 * arch selection), the default set assumed when no command is known (defaultCudaFlags), and the
 * views of them that nvcc and the include search need (flagArgv, includeDirs). The commands
 * themselves come from compile-commands.ts.
 */
import { existsSync } from "node:fs";
import { dirname, isAbsolute, join, resolve } from "node:path";
import { PASS_THROUGH } from "./compile-commands.ts";

/** One flag word; `path` marks a word (or the part after `prefix`) that names a file or folder. */
export interface FlagWord {
  text: string;
  /** For include-path-like flags: the absolute folder/file, and the flag prefix ("-I", "-isystem "...). */
  path?: string;
  prefix?: string;
}

export interface CudaFlags {
  words: FlagWord[];
  /** Where they came from. */
  from: "compile-commands" | "default";
  /** Flags that were assumed (default set) and facts that could not be recovered. */
  assumed: string[];
  missing: string[];
  /** Relocatable device code (-rdc=true, -dc, --device-c). */
  rdc: boolean;
  /** The arch flags of the original compile (informational). */
  originalArch: string[];
}

const DROP_WITH_ARG = new Set([
  "-o",
  "--output-file",
  "-x",
  "--x",
  "-MF",
  "-MT",
  "-MQ",
  "-gencode",
  "--generate-code",
  "-arch",
  "--gpu-architecture",
  "-code",
  "--gpu-code",
  "--compress-mode",
  "-compress-mode",
  "-Xfatbin",
  "--dependency-output",
  "--run-args",
]);
const DROP = new Set([
  "-c",
  "--compile",
  "-MD",
  "-MMD",
  "-M",
  "-MM",
  "-MP",
  "--generate-dependencies-with-compile",
  "--generate-nonsystem-dependencies-with-compile",
  "-E",
  "-S",
  "-cubin",
  "-ptx",
  "-fatbin",
  "-lib",
  "-shared",
  "-dlink",
  "--device-link",
  "-v",
]);
const PATH_WITH_ARG: Record<string, string> = {
  "-I": "-I",
  "-isystem": "-isystem",
  "-iquote": "-iquote",
  "--include-path": "-I",
  "--system-include": "-isystem",
  "-include": "-include",
  "--pre-include": "-include",
  "-idirafter": "-idirafter",
};
/** Options whose value is another tool's words, kept as they are (a -Xcompiler -MD is the host's). */
const KEEP_WITH_ARG = new Set([...PASS_THROUGH].filter((o) => o !== "-Xfatbin" && o !== "--fatbin-options"));

/**
 * Device-relevant flags of a compile command: defines, include paths (absolute), -std, -O,
 * fast-math, -Xptxas, -maxrregcount, -rdc, host-compiler options and -ccbin (they affect
 * preprocessing; a relative -ccbin path made absolute) …; without the compiler, the TU, -c/-o,
 * dependency output and arch selection (build.sh sets -arch=sm_XX for the captured device).
 * argv as readCompileCommands gives it (launchers dropped, response files read).
 */
export function cudaFlagsFromCommand(argv: string[], directory: string, tu: string): CudaFlags {
  const words: FlagWord[] = [];
  const originalArch: string[] = [];
  let rdc = false;
  const abs = (p: string) => (isAbsolute(p) ? p : resolve(directory, p));
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i]!;
    if (abs(a) === tu) continue;
    const eq = a.indexOf("=");
    const key = eq > 0 ? a.slice(0, eq) : a;
    if (/^(-arch|--gpu-architecture|-gencode|--generate-code|-code|--gpu-code)$/.test(key)) {
      originalArch.push(eq > 0 ? a : `${a} ${argv[i + 1]}`);
      if (eq < 0) i++;
      continue;
    }
    if (KEEP_WITH_ARG.has(a) && i + 1 < argv.length) {
      words.push({ text: a }, { text: argv[++i]! });
      continue;
    }
    if ((a === "-ccbin" || a === "--compiler-bindir") && i + 1 < argv.length) {
      const c = argv[++i]!;
      words.push({ text: a }, { text: c.includes("/") ? abs(c) : c });
      continue;
    }
    if (/^(-ccbin|--compiler-bindir)=/.test(a)) {
      const c = a.slice(eq + 1);
      words.push({ text: `${key}=${c.includes("/") ? abs(c) : c}` });
      continue;
    }
    if (DROP_WITH_ARG.has(a)) {
      i++;
      continue;
    }
    if (DROP.has(a) || /^-M[DFTQ]/.test(a) || /^--?(compress-mode|dependency-output|output-file)=/.test(a) || /^-o.+/.test(a)) continue;
    if (/^(-rdc|--relocatable-device-code)(=true)?$/.test(a) || a === "-dc" || a === "--device-c") {
      rdc = true;
      words.push({ text: "-rdc=true" });
      continue;
    }
    if (/^(-rdc|--relocatable-device-code)=false$/.test(a)) continue;
    const pa = PATH_WITH_ARG[a];
    if (pa && i + 1 < argv.length) {
      const p = abs(argv[++i]!);
      words.push({ text: `${pa} ${p}`, path: p, prefix: pa === "-I" ? "-I" : `${pa} ` });
      continue;
    }
    const m = /^(-I|-isystem=?|-iquote=?|--include-path=|--system-include=|-idirafter=?)(.+)$/.exec(a);
    if (m) {
      const flag = m[1]!.replace(/=$/, "");
      const prefix = flag === "--include-path" || flag === "-I" ? "-I" : flag === "--system-include" ? "-isystem " : `${flag} `;
      const p = abs(m[2]!);
      words.push({ text: `${prefix}${p}`, path: p, prefix });
      continue;
    }
    words.push({ text: a });
  }
  return { words, from: "compile-commands", assumed: [], missing: [], rdc, originalArch };
}

/** The flags assumed when no compile command is known, and what that leaves unknown. */
export function defaultCudaFlags(tu: string, sourceRoot?: string): CudaFlags {
  const dirs = [dirname(tu), ...(sourceRoot ? [resolve(sourceRoot), join(resolve(sourceRoot), "include")] : [])].filter(
    (d, i, a) => existsSync(d) && a.indexOf(d) === i,
  );
  const words: FlagWord[] = [{ text: "-O3" }, { text: "-std=c++17" }, ...dirs.map((d) => ({ text: `-I${d}`, path: d, prefix: "-I" }))];
  return {
    words,
    from: "default",
    assumed: words.map((w) => w.text),
    missing: [
      "-D defines",
      "include folders beyond the TU's and the source root's",
      "-std",
      "-O level",
      "--use_fast_math/--ftz/--prec-*",
      "-maxrregcount/-Xptxas",
      "-rdc",
      "host-compiler options",
    ],
    rdc: false,
    originalArch: [],
  };
}

/** argv words of flags for nvcc: a path flag with a separate value ("-isystem /x") as two words. */
export function flagArgv(flags: CudaFlags): string[] {
  return flags.words.flatMap((w) => (w.path && w.prefix?.endsWith(" ") ? [w.prefix.trim(), w.path] : [w.text]));
}

/** Include folders of the flags in search order: -iquote (quoted includes only), -I, -isystem, -idirafter. */
export function includeDirs(flags: CudaFlags): { quote: string[]; angled: string[]; preIncludes: string[] } {
  const by = (p: string) => flags.words.filter((w) => w.path && w.prefix?.trim() === p).map((w) => w.path!);
  const angled = [...by("-I"), ...by("-isystem"), ...by("-idirafter")];
  return { quote: [...by("-iquote"), ...angled], angled, preIncludes: by("-include") };
}
