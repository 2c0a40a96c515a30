/**
 * Compile commands as build tools write them, and the device-relevant flags of one.
 *
 * Sources of commands (readCompileCommands):
 * - a compile_commands.json (CMake's CMAKE_EXPORT_COMPILE_COMMANDS, bear, `ninja -t compdb`):
 *   entries with a `command` string or an `arguments` array; `directory` relative to the JSON
 *   file's folder, `file` relative to `directory`;
 * - a build folder: its compile_commands.json, else (Ninja) what `ninja -C DIR -t compdb` prints,
 *   which reads build.ninja and writes nothing;
 * - a build log (readBuildLog: `make -n -B TARGET`, `make V=1`, `ninja -v`).
 * Every command is normalized the same way: compiler launchers before nvcc are dropped (ccache,
 * sccache, distcc, `env VAR=…`, CMAKE_CUDA_COMPILER_LAUNCHER), and response files are read in
 * place (nvcc's `--options-file F[,G]` / `-optf F`, the host compilers' `@F`; relative to the
 * command's folder, nested), so that argv holds every flag the compiler saw.
 *
 * The device-relevant flags of a command are flags.ts's; the nvcc to run and its dependency
 * listing, nvcc.ts's.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { KerncapError } from "../../errors.ts";
import { whichAbsolute } from "../../env.ts";

export interface CompileCommand {
  /** Absolute path of the TU. */
  file: string;
  /** Working folder of the compile (absolute). */
  directory: string;
  /** argv of the compile, compiler first, launchers dropped and response files read in place. */
  argv: string[];
  /** The compile_commands.json, build folder or build log it came from. */
  from: string;
  /** Response files read into argv (absolute), for messages. */
  responseFiles?: string[];
}

/** Split a shell command line into words (POSIX quoting: '' "" and backslash). */
export function shellWords(cmd: string): string[] {
  const out: string[] = [];
  let cur = "";
  let have = false;
  for (let i = 0; i < cmd.length; i++) {
    const c = cmd[i]!;
    if (c === "'") {
      const j = cmd.indexOf("'", i + 1);
      cur += cmd.slice(i + 1, j < 0 ? undefined : j);
      i = j < 0 ? cmd.length : j;
      have = true;
    } else if (c === '"') {
      i++;
      for (; i < cmd.length && cmd[i] !== '"'; i++) {
        if (cmd[i] === "\\" && i + 1 < cmd.length && '"\\$`'.includes(cmd[i + 1]!)) i++;
        cur += cmd[i];
      }
      have = true;
    } else if (c === "\\" && i + 1 < cmd.length) {
      cur += cmd[++i];
      have = true;
    } else if (/\s/.test(c)) {
      if (have) out.push(cur);
      cur = "";
      have = false;
    } else {
      cur += c;
      have = true;
    }
  }
  if (have) out.push(cur);
  return out;
}

const DB_HINT = "Regenerate it (cmake -DCMAKE_EXPORT_COMPILE_COMMANDS=ON, or bear -- make).";

// ───────────────────────────── normalizing a command ─────────────────────────────

/** A compiler word (argv[0] after any launcher): nvcc, a cross or versioned nvcc, nvcc.exe. */
export const NVCC_WORD = /(^|\/)([\w.-]*-)?nvcc(-[\d.]+)?(\.exe)?$/;
/** Launchers that stand before the compiler (CMAKE_<LANG>_COMPILER_LAUNCHER and friends). */
const LAUNCHERS = new Set(["ccache", "sccache", "distcc", "icecc", "buildcache", "env", "time", "nice", "ionice"]);
/** Options whose next word goes to another tool unread: a response file there is not nvcc's. */
export const PASS_THROUGH = new Set([
  "-Xcompiler",
  "--compiler-options",
  "-Xlinker",
  "--linker-options",
  "-Xptxas",
  "--ptxas-options",
  "-Xnvlink",
  "--nvlink-options",
  "-Xcudafe",
  "-Xarchive",
  "--archive-options",
  "-Xfatbin",
  "--fatbin-options",
]);
const MAX_RESPONSE_DEPTH = 16;

/**
 * argv without the launcher words before the compiler: known launchers (ccache, sccache, distcc,
 * env, time …) and their `VAR=value` words, and any one other word directly before an nvcc word
 * (a launcher named by path, as CMAKE_CUDA_COMPILER_LAUNCHER may give it). Unchanged when no
 * nvcc word follows.
 */
export function withoutLauncher(argv: string[]): string[] {
  let k = 0;
  while (k < argv.length && (LAUNCHERS.has(argv[k]!.split("/").pop()!) || /^[A-Za-z_]\w*=/.test(argv[k]!))) k++;
  if (k < argv.length && !NVCC_WORD.test(argv[k]!) && NVCC_WORD.test(argv[k + 1] ?? "")) k++;
  return k < argv.length && NVCC_WORD.test(argv[k]!) ? argv.slice(k) : argv;
}

/**
 * argv with every response file read in place: `--options-file F[,G…]`, `--options-file=F`,
 * `-optf F`, `-optf=F` (nvcc) and `@F` (gcc, clang); paths relative to `directory`, as the
 * compiler resolves them; files that name further response files are read too. A word after
 * -Xcompiler and the other pass-through options is left alone.
 * @param read test seam; default reads the file as UTF-8.
 * @throws KerncapError E_COMPILE_COMMANDS when a response file cannot be read or they nest more
 *   than 16 deep (a loop), naming the file and the command's folder.
 */
export function expandResponseFiles(
  argv: string[],
  directory: string,
  read: (p: string) => string = (p) => readFileSync(p, "utf8"),
): { argv: string[]; files: string[] } {
  const files: string[] = [];
  const expand = (words: string[], depth: number): string[] => {
    const out: string[] = [];
    for (let i = 0; i < words.length; i++) {
      const w = words[i]!;
      let names: string[] | undefined;
      if (PASS_THROUGH.has(w)) {
        out.push(w, ...(i + 1 < words.length ? [words[++i]!] : []));
        continue;
      }
      if ((w === "--options-file" || w === "-optf") && i + 1 < words.length) names = words[++i]!.split(",");
      else if (/^(--options-file|-optf)=/.test(w)) names = w.slice(w.indexOf("=") + 1).split(",");
      else if (w.length > 1 && w.startsWith("@")) names = [w.slice(1)];
      if (!names) {
        out.push(w);
        continue;
      }
      for (const n of names.filter(Boolean)) {
        const p = resolve(directory, n);
        if (depth >= MAX_RESPONSE_DEPTH)
          throw new KerncapError("E_COMPILE_COMMANDS", `response files nest more than ${MAX_RESPONSE_DEPTH} deep at ${p} (a file that names itself?)`, {
            hint: DB_HINT,
          });
        let text: string;
        try {
          text = read(p);
        } catch (e) {
          throw new KerncapError(
            "E_COMPILE_COMMANDS",
            `the compile command in ${directory} reads its flags from ${p}, which cannot be read: ${(e as Error).message}`,
            {
              hint: "The build folder must still hold its response files: configure it again (cmake -S SRC -B BUILD) or build it once, then run kerncap again.",
            },
          );
        }
        files.push(p);
        out.push(...expand(shellWords(text), depth + 1));
      }
    }
    return out;
  };
  return { argv: expand(argv, 0), files };
}

/** A command as the compiler ran it: launchers dropped, response files read. */
function normalized(argv: string[], directory: string): { argv: string[]; responseFiles?: string[] } {
  const e = expandResponseFiles(withoutLauncher(argv), directory);
  return e.files.length ? { argv: e.argv, responseFiles: e.files } : { argv: e.argv };
}

function isCudaTu(file: string, argv: string[]): boolean {
  const xi = argv.indexOf("-x");
  return file.endsWith(".cu") || (xi >= 0 && argv[xi + 1] === "cu");
}

// ───────────────────────────── where the commands are ─────────────────────────────

export type CompileDatabase = { kind: "json" | "log"; path: string } | { kind: "ninja"; dir: string };

/**
 * What a --compile-commands path names: a compile_commands.json or build log (a file), or a
 * build folder holding a compile_commands.json, or a Ninja build folder without one (build.ninja:
 * `ninja -t compdb` lists its commands).
 * @throws KerncapError E_USAGE for a missing path or a folder with neither, saying how to make one
 *   (a CMake build folder: the exact reconfigure command).
 */
export function compileDatabase(given: string): CompileDatabase {
  const p = resolve(given);
  if (!existsSync(p))
    throw new KerncapError("E_USAGE", `--compile-commands ${given}: no such file or folder`, {
      hint: "Point it at a compile_commands.json, the build folder that holds one, or a build log (make -n -B TARGET > log).",
    });
  if (!statSync(p).isDirectory()) return { kind: /^\s*\[/.test(readFileSync(p, "utf8").slice(0, 4096)) ? "json" : "log", path: p };
  if (existsSync(join(p, "compile_commands.json"))) return { kind: "json", path: join(p, "compile_commands.json") };
  if (existsSync(join(p, "build.ninja"))) return { kind: "ninja", dir: p };
  const cmake = existsSync(join(p, "CMakeCache.txt"));
  throw new KerncapError(
    "E_USAGE",
    `--compile-commands ${given} is a folder without a compile_commands.json${cmake ? " (a CMake build folder configured without CMAKE_EXPORT_COMPILE_COMMANDS)" : ""}`,
    {
      hint: cmake
        ? `Write it without building: cmake -DCMAKE_EXPORT_COMPILE_COMMANDS=ON ${p}`
        : "Give the compile_commands.json file, or the build folder that holds it (cmake -DCMAKE_EXPORT_COMPILE_COMMANDS=ON writes it).",
    },
  );
}

/**
 * Read compile commands into absolute-path entries (only CUDA TUs: .cu, or -x cu). `path` is
 * anything compileDatabase accepts; a build log's relative paths are taken from o.logDir (the
 * source root, where a plain `make -n` ran) unless the log names its folders.
 * @throws KerncapError E_USAGE (see compileDatabase), E_COMPILE_COMMANDS for a file that is not
 *   valid JSON / a log without nvcc commands, a failed `ninja -t compdb`, an unreadable response file.
 */
export function readCompileCommands(path: string, o: { logDir?: string } = {}): CompileCommand[] {
  const db = compileDatabase(path);
  if (db.kind === "ninja") {
    const ninja = whichAbsolute("ninja") ?? whichAbsolute("ninja-build");
    if (!ninja)
      throw new KerncapError(
        "E_COMPILE_COMMANDS",
        `${db.dir} is a Ninja build folder without a compile_commands.json, and ninja is not on PATH to list its commands`,
        { hint: `Write it: cmake -DCMAKE_EXPORT_COMPILE_COMMANDS=ON ${db.dir} (or put ninja on PATH).` },
      );
    const p = Bun.spawnSync([ninja, "-C", db.dir, "-t", "compdb"], { stdout: "pipe", stderr: "pipe" });
    if (p.exitCode !== 0)
      throw new KerncapError("E_COMPILE_COMMANDS", `ninja -C ${db.dir} -t compdb failed: ${p.stderr.toString().trim().slice(-2000)}`, {
        hint: `Write the database instead: cmake -DCMAKE_EXPORT_COMPILE_COMMANDS=ON ${db.dir}`,
      });
    return fromJson(p.stdout.toString(), `${db.dir} (ninja -t compdb)`, db.dir);
  }
  let text: string;
  try {
    text = readFileSync(db.path, "utf8");
  } catch (e) {
    throw new KerncapError("E_COMPILE_COMMANDS", `cannot read ${db.path}: ${(e as Error).message}`, { hint: DB_HINT });
  }
  return db.kind === "log" ? readBuildLog(db.path, text, o.logDir) : fromJson(text, db.path, dirname(db.path));
}

/** Entries of a compile database text; `base` is the folder a relative `directory` is taken from. */
function fromJson(text: string, from: string, base: string): CompileCommand[] {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new KerncapError("E_COMPILE_COMMANDS", `cannot read ${from}: ${(e as Error).message}`, { hint: DB_HINT });
  }
  if (!Array.isArray(json)) throw new KerncapError("E_COMPILE_COMMANDS", `${from} is not a JSON array of compile commands`, { hint: DB_HINT });
  const out: CompileCommand[] = [];
  for (const e of json as { file?: unknown; directory?: unknown; command?: unknown; arguments?: unknown }[]) {
    if (!e || typeof e.file !== "string" || typeof e.directory !== "string") continue;
    const raw = Array.isArray(e.arguments) ? e.arguments.map(String) : typeof e.command === "string" ? shellWords(e.command) : [];
    if (!raw.length) continue; // ninja -t compdb lists phony edges with an empty command
    const directory = resolve(base, e.directory);
    const file = resolve(directory, e.file);
    if (!isCudaTu(file, raw)) continue;
    out.push({ file, directory, from, ...normalized(raw, directory) });
  }
  return out;
}

/** Linker-only words of a compile-and-link command: nothing of the device compile (with their argument when separate). */
const LINK_WITH_ARG = new Set(["-Xlinker", "--linker-options", "-L", "--library-path", "-l", "--library", "-Xnvlink", "--nvlink-options"]);
const LINK_WORD = /^(-l\S|-L\S|--library=|--library-path=|-Wl,|--linker-options=|-Xlinker=|-Xnvlink=|--nvlink-options=)/;
/** Inputs that are not sources: objects, archives, shared libraries. */
const NON_SOURCE_INPUT = /\.(o|obj|a|lib|so(\.\d+)*|dll|res)$/;

/**
 * The nvcc commands of a build log (the output of `make -n -B TARGET VARS…`, `make V=1`, `ninja
 * -v`, or any verbose build log): one entry per `.cu` file an nvcc command names (a command that
 * compiles several names each with the others left out). Lines continued with a backslash are
 * joined; a line is split at `&&`, `||` and `;` words, and `cd DIR` before the compiler sets its
 * folder for that line; `make[N]: Entering directory 'DIR'` (make -w, or a recursive make) and the
 * matching Leaving line set it for the lines between; otherwise `dir` (locateKernelSource passes
 * --source-root: where a plain `make -n` ran) or else the log's own folder. Launchers (ccache,
 * env VAR=…) before the compiler are skipped and response files read (withoutLauncher,
 * expandResponseFiles); link-only words (-l, -L, -Wl,, -Xlinker) and object/library inputs are
 * left out, so a compile-and-link line (`nvcc … app.cu -lcublas -o app`, as llm.c's Makefile runs
 * it) gives the device compile's flags.
 * @throws KerncapError E_COMPILE_COMMANDS when the log has no nvcc command naming a .cu file.
 */
export function readBuildLog(path: string, text: string, dir0?: string): CompileCommand[] {
  const out: CompileCommand[] = [];
  const dirs: string[] = [resolve(dir0 ?? dirname(resolve(path)))];
  const lines = text.replace(/\\\r?\n/g, " ").split(/\r?\n/);
  for (const line of lines) {
    const enter = /^\S*make(\[\d+\])?: Entering directory [`'"](.+)['"]\s*$/.exec(line);
    if (enter) {
      dirs.push(resolve(enter[2]!));
      continue;
    }
    if (/^\S*make(\[\d+\])?: Leaving directory /.test(line)) {
      if (dirs.length > 1) dirs.pop();
      continue;
    }
    if (!line.includes("nvcc")) continue;
    let dir = dirs[dirs.length - 1]!;
    const words = shellWords(line);
    const segments: string[][] = [[]];
    for (const w of words) {
      if (w === "&&" || w === "||" || w === ";") segments.push([]);
      else segments[segments.length - 1]!.push(w);
    }
    for (const seg0 of segments) {
      if (seg0[0] === "cd" && seg0[1]) {
        dir = resolve(dir, seg0[1]);
        continue;
      }
      const launched = withoutLauncher(seg0);
      if (!launched.length || !NVCC_WORD.test(launched[0]!)) continue;
      const { argv: seg, responseFiles } = normalized(launched, dir);
      const argv: string[] = [seg[0]!];
      const sources: string[] = [];
      for (let i = 1; i < seg.length; i++) {
        const a = seg[i]!;
        if (LINK_WITH_ARG.has(a)) {
          i++;
          continue;
        }
        if (LINK_WORD.test(a)) continue;
        if (a === "-o" || a === "--output-file") {
          argv.push(a, seg[++i] ?? "");
          continue;
        }
        if (!a.startsWith("-") && NON_SOURCE_INPUT.test(a)) continue;
        if (!a.startsWith("-") && a.endsWith(".cu")) sources.push(a);
        argv.push(a);
      }
      for (const src of sources) {
        const file = resolve(dir, src);
        out.push({
          file,
          directory: dir,
          argv: argv.filter((a) => a === src || !sources.includes(a)),
          from: path,
          ...(responseFiles ? { responseFiles } : {}),
        });
      }
    }
  }
  if (!out.length) {
    throw new KerncapError("E_COMPILE_COMMANDS", `${path} is neither a compile_commands.json nor a build log with an nvcc command that compiles a .cu file`, {
      hint: "For a Makefile project: `make -n -B TARGET VARS… > build-commands.txt` (the build's own variables, e.g. NO_MULTI_GPU=1), then --compile-commands build-commands.txt; for CMake: -DCMAKE_EXPORT_COMPILE_COMMANDS=ON.",
    });
  }
  return out;
}

/** Build folders where a compile_commands.json usually sits, relative to a source root. */
export const COMPILE_COMMANDS_PLACES = [
  "",
  "build",
  "out",
  "cmake-build-release",
  "cmake-build-debug",
  "build/release",
  "build/Release",
  "build/debug",
  "_build",
  "builddir",
];

/** The compile_commands.json files found under root's usual build folders (and build* folders). */
export function findCompileCommands(root: string): { found: string[]; looked: string[] } {
  const looked: string[] = [];
  const places = new Set(COMPILE_COMMANDS_PLACES);
  try {
    for (const n of readdirSync(root)) if (/^(build|cmake-build)/i.test(n)) places.add(n);
  } catch {
    /* root unreadable: nothing found */
  }
  const found: string[] = [];
  for (const p of places) {
    const f = join(root, p, "compile_commands.json");
    looked.push(f);
    if (existsSync(f)) found.push(f);
  }
  return { found, looked };
}
