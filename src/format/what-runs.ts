/**
 * What a rebuild of a capture runs (WhatRuns): every file the build would execute (build.sh; for
 * Triton pinned.json, repro.py, the kernel file under src/, the interpreter), read once through the
 * path rule, and one digest of them. The trust gate (src/format/trust.ts) shows these bytes and
 * holds a build to their digest; a build let run executes a private copy of exactly those bytes
 * (src/format/staged-build.ts), never the capture's files read again.
 */
import { escapeForTerminal } from "../escape.ts";
import { existsSync, lstatSync, readdirSync, realpathSync, rmSync, statSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { dirname, isAbsolute, join } from "node:path";
import { privateTempFolder } from "../cache.ts";
import { KerncapError } from "../errors.ts";
import { readInCapture } from "./paths.ts";
import { frontendRunFiles, runFileSpecs, type RunFiles } from "./run-files.ts";
import { othersMayWrite } from "../user-group.ts";
import { whichAbsolute } from "../env.ts";

/** build.sh is a short script: a larger one is not printed whole (bytes). */
const BUILD_SH_MAX = 1 << 20;

/** One file a rebuild runs (or reads commands from), as read once: its name in the capture folder and its bytes. */
export interface RunFile {
  name: string;
  bytes: Buffer;
  /** Hashed and listed (name, size, SHA-256) but not printed whole: a file under src/ that a build.sh of its own can reach, which it does not name and which does not look like a program. */
  listedOnly?: boolean;
}

/** A program, plugin or option file a build names, with the option (or variable) that names it; `kind` "program": a bare name is looked up on PATH; "file": a path (relative: the build's folder); "options": a file of more options (`@file` in every spelling, `--options-file`, `-specs`); "run": an option a module build has no use for. */
export interface NamedProgram {
  flag: string;
  value: string;
  kind: "program" | "file" | "options" | "run";
}

/**
 * A frontend's reading of the files a build runs (src/frontends/stock-build.ts): `stock` when build.sh
 * (and Triton's repro.py) is what this kerncap's templates write, so that it runs only the
 * template's commands and what its slots name (`programs`); otherwise `why`, and what a lexical
 * reading of build.sh names (`programs`, and `named`: words that may be paths in the build's folder).
 */
export interface BuildScriptReading {
  stock: boolean;
  why?: string;
  /** A stock build.sh's compile flags (its template's flags slot, as written), which the refusal shows in place of its text. */
  flags?: string;
  /** The interpreter a stock build.sh runs (Triton's `captured_py` slot), which must be the one the run files name and the refusal shows. */
  interpreter?: string;
  programs: NamedProgram[];
  named: string[];
}

type BuildScriptReader = (frontend: string, files: readonly RunFile[]) => BuildScriptReading;
let reader: BuildScriptReader | undefined;
/**
 * Set by the frontend registry (src/frontends/index.ts), which this layer may not import: how a
 * received capture's build.sh is read against its frontend's templates. Without one, no build.sh
 * counts as the stock one (the safe side: what the build can reach is hashed, --trust=DIGEST).
 */
export function setBuildScriptReader(r: BuildScriptReader): void {
  reader = r;
}
/** The most files, and bytes in all, of src/ that a build.sh of its own makes part of what runs. */
const REACHABLE_MAX_FILES = 20000;
const REACHABLE_MAX_BYTES = 512 << 20;

/**
 * What a rebuild of the capture runs, read once: the user is shown these bytes, the digest is
 * computed over them, and a trusted build executes a private copy of them (stageTrustedBuild).
 * `files`: build.sh; for a Triton capture also pinned.json (it names the interpreter, and its
 * constexpr expressions are evaluated), repro.py and the kernel file pinned.json names
 * (`src/<kernelFile>`, which repro.py imports), each present one in that order.
 * `digest`: TRUST_DIGEST_SCHEME, lower-case hex SHA-256 (see runsDigest).
 */
export interface WhatRuns {
  frontend: string;
  files: RunFile[];
  /**
   * For a received capture: build.sh (and repro.py) is what this kerncap's templates write (true),
   * or not, and why (a phrase): then `files` holds every file under src/ too (the build can run any
   * of them), and plain --trust is not enough. Undefined for a capture of the user's own.
   */
  notStock?: string;
  /** A received capture's build.sh that is kerncap's own (notStock undefined): its compile flags as written, the one part of it not the template's. */
  stockFlags?: string;
  /** The interpreter a frontend's run file names (Triton: pinned.json's), null where none. */
  interpreter: string | null;
  /** How the refusal speaks of it (RunFiles.interpreter.named: "the interpreter pinned.json names"). */
  interpreterNamed?: string;
  digest: string;
}

/** The name of the digest's canonical listing, said in docs/security.md. */
export const TRUST_DIGEST_SCHEME = "kerncap.trust-digest/1";

/**
 * The digest of what runs: SHA-256 over a canonical listing, entries sorted by name, each
 * `NAME\n<byte count>\n<bytes>\n`, with two entries that are no file: `(frontend)` (the manifest's
 * frontend, which decides what runs) and `(interpreter)` (the path pinned.json names, when it names one).
 */
function runsDigest(frontend: string, files: RunFile[], interpreter: string | null): string {
  const entries: [string, Buffer][] = [["(frontend)", Buffer.from(frontend)], ...files.map((f) => [f.name, f.bytes] as [string, Buffer])];
  if (interpreter !== null) entries.push(["(interpreter)", Buffer.from(interpreter)]);
  entries.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const h = new Bun.CryptoHasher("sha256");
  h.update(`${TRUST_DIGEST_SCHEME}\n`);
  for (const [name, b] of entries) {
    h.update(`${name}\n${b.length}\n`);
    h.update(b);
    h.update("\n");
  }
  return h.digest("hex");
}

/**
 * Read what a rebuild of the capture runs (WhatRuns), each file once, through the path rule
 * (src/format/paths.ts): build.sh, every registered frontend's run files (src/format/run-files.ts,
 * whatever `frontend` the manifest names), then what those name (RunFiles.follow: a Triton capture
 * runs only files under src/, so pinned.json's kernelFile is a relative path that stays under
 * src/, else E_UNSAFE_PATH before anything runs), then the interpreter's check.
 * @returns undefined when the capture holds none of build.sh and the run files: nothing of it runs
 * @throws KerncapError E_UNSAFE_PATH (a link, a FIFO…, a kernelFile outside src/), E_MANIFEST (a frontend run file that breaks its schema: Triton's pinned.json, src/frontends/triton/pinned.ts)
 */
export function readWhatRuns(dir: string, frontend: string, received = false): WhatRuns | undefined {
  const files: RunFile[] = [];
  const read = new Map<string, Buffer>();
  const add = (name: string) => {
    const b = readInCapture(dir, name, BUILD_SH_MAX);
    if (b) files.push({ name, bytes: b }), read.set(name, b);
    return b;
  };
  const specs = runFileSpecs();
  add("build.sh");
  for (const name of frontendRunFiles()) add(name);
  if (!files.length) return undefined;
  // what those files name that runs too (Triton: the kernel file and the interpreter pinned.json names), each checked by its frontend before anything is shown or trusted
  let interpreter: string | null = null;
  let by: RunFiles | undefined;
  for (const s of specs) {
    const more = s.follow?.(dir, read);
    if (!more) continue;
    for (const f of more.files) add(f);
    if (interpreter === null && more.interpreter !== null) (interpreter = more.interpreter), (by = s);
  }
  if (interpreter !== null) by?.interpreter?.check(dir, interpreter);
  const interpreterNamed = interpreter !== null ? by?.interpreter?.named : undefined;
  let notStock: string | undefined;
  let stockFlags: string | undefined;
  if (received) {
    const reading = reader?.(frontend, files) ?? { stock: false, why: "no frontend could read it", programs: [], named: [] };
    const refused = reading.programs.map((p) => programProblem(dir, p)).filter((p): p is string => !!p);
    if (refused.length) {
      throw new KerncapError(
        "E_UNSAFE_PATH",
        `${dir}/build.sh ${refused.join("; ")}: a received capture's build runs no program, plugin or option file of the capture (its bytes would not be the ones shown and hashed) nor one that another user can change`,
        {
          hint: "Nothing was run. Edit build.sh to name the compiler (and any plugin) of your own toolchain, outside the capture, or ask the sender for a capture whose build.sh kerncap wrote.",
        },
      );
    }
    // a stock build.sh runs the Python of its own slot: shown as the run files' interpreter only when it is that one (adversary 79 #02)
    if (reading.stock && reading.interpreter !== undefined && reading.interpreter !== interpreter)
      Object.assign(reading, {
        stock: false,
        why: `build.sh runs the interpreter ${escapeForTerminal(JSON.stringify(reading.interpreter), { oneLine: true })}, not ${interpreter === null ? "the one the capture's run files name (none)" : `${escapeForTerminal(JSON.stringify(interpreter), { oneLine: true })}, ${interpreterNamed ?? "the interpreter"}`}`,
      });
    if (!reading.stock) {
      notStock = reading.why ?? "build.sh is not the one this kerncap writes";
      addReachable(dir, files, reading.named);
    } else stockFlags = reading.flags;
  }
  return {
    frontend,
    files,
    interpreter,
    ...(interpreterNamed ? { interpreterNamed } : {}),
    notStock,
    ...(stockFlags !== undefined ? { stockFlags } : {}),
    digest: runsDigest(frontend, files, interpreter),
  };
}

/**
 * Why a build may not use the program, plugin or option file `p` names (a phrase), or undefined:
 * an option no module build needs; a file of more options, wherever it lies; a relative path (the build's folder: the capture's src/, or
 * the copies of its files); an absolute path inside the capture, or one another user can change
 * (interpreterProblem). A bare program name (looked up on PATH, the user's) and a value that is
 * computed when the script runs (holding `$`) are left: the script is shown whole.
 */
function programProblem(dir: string, p: NamedProgram): string | undefined {
  const what = `names ${escapeForTerminal(JSON.stringify(p.value))} (${p.flag})`;
  if (p.kind === "run") return `passes an option that runs another program (${p.flag}): a module build has no use for it`;
  // the file's words become options (gcc's -wrapper runs a program): none is part of what was shown, wherever it lies
  if (p.kind === "options")
    return `${what}, a file of more options (gcc, nvcc, cicc and ptxas read them from it, -wrapper among them): a received build names none`;
  if (/[$\x60]/.test(p.value) || p.value === "") return undefined;
  // a bare program name is the user's PATH's; gcc's -fplugin=NAME (no slash, no .so) is its own plugin folder's. Not `.`, `..`
  // or a name the build's folder holds (its copies, src/, build/): relative to it, and `..` is the temporary folder every user writes
  const bare = !p.value.includes("/") && p.value !== "." && p.value !== ".." && !existsSync(join(dir, p.value));
  // nvcc takes -ccbin NAME from the folder it runs in first, PATH only where that has none: an export runs build.sh in a
  // folder of the capture's files (adversary 61: its data/gcc ran). A host compiler is named by its absolute path.
  if (bare && /^(-ccbin|--compiler-bindir|NVCC_CCBIN=)$/.test(p.flag))
    return `${what}, a bare name nvcc looks up in the folder the build runs in before PATH (an export's folder holds the capture's files): give the compiler's absolute path (command -v ${escapeForTerminal(p.value)})`;
  if (bare && (p.kind === "program" || (p.flag === "-fplugin" && !p.value.endsWith(".so")))) return undefined;
  if (p.value === ".." || p.value.startsWith("../"))
    return `${what}, a path relative to the build's private folder that leaves it (the temporary folder above it, which other users can write)`;
  if (!isAbsolute(p.value)) return `${what}, a path inside the build's folder (the capture's src/ or its own files)`;
  // /proc/self/cwd, /proc/thread-self, /dev/fd/…: the kernel resolves them per process, and the
  // compiler's working folder is the build's private folder (the capture's src/ is reachable there)
  if (PER_PROCESS.test(p.value))
    return `${what}, a path the kernel resolves per process (under /proc, /dev or /sys): in the compiler it names the build's own folder`;
  let real: string;
  try {
    real = realpathSync(p.value);
  } catch {
    return `${what}, which does not exist here`;
  }
  // a link (anywhere on the path) to one of those resolves to another file in another process
  if (PER_PROCESS.test(real) || resolvedElsewhere(p.value) !== real) return `${what}, which resolves through a per-process link (/proc/self, /dev/fd)`;
  const problem = interpreterProblem(dir, p.value);
  return problem ? `${what}, which ${problem}` : undefined;
}

/** Paths the kernel resolves for the process that opens them. */
const PER_PROCESS = /^\/+(proc|dev|sys)(\/|$)/;

/** `path`'s real path as another process sees it, from an empty folder of its own (undefined when it does not resolve there). */
function resolvedElsewhere(path: string): string | undefined {
  const cwd = privateTempFolder("kerncap-resolve-");
  try {
    const r = spawnSync(whichAbsolute("realpath") ?? "/usr/bin/realpath", ["-e", "--", path], { cwd, encoding: "utf8", timeout: 10_000 });
    return r.status === 0 ? r.stdout.replace(/\n$/, "") : undefined;
  } finally {
    rmSync(cwd, { recursive: true, force: true });
  }
}

/** Whether `b` looks like something that runs: an ELF image or a script with #!. */
const looksLikeProgram = (b: Buffer) => (b[0] === 0x7f && b.subarray(1, 4).toString() === "ELF") || b.subarray(0, 2).toString() === "#!";

/**
 * A build.sh of its own can run any file of what its folder holds (the copies and src/): add every
 * regular file under src/ to `files` (each read once, through the path rule), printed whole when
 * the script names it (`named`, relative to the build's folder) or it looks like a program (mode
 * with an x bit, #!, ELF), listed otherwise.
 * @throws KerncapError E_UNSAFE_PATH (a link, a FIFO… under src/), E_UNTRUSTED (src/ past REACHABLE_MAX_FILES or REACHABLE_MAX_BYTES)
 */
function addReachable(dir: string, files: RunFile[], named: string[]): void {
  const have = new Set(files.map((f) => f.name));
  const names = new Set(named.map((n) => n.replace(/\/+$/, "")));
  let count = 0;
  let bytes = 0;
  const walk = (rel: string) => {
    let entries: string[];
    try {
      entries = readdirSync(join(dir, rel)).sort();
    } catch {
      return;
    }
    for (const name of entries) {
      const r = `${rel}/${name}`;
      const st = lstatSync(join(dir, r));
      if (st.isDirectory()) {
        walk(r);
        continue;
      }
      if (have.has(r)) continue;
      const b = readInCapture(dir, r, REACHABLE_MAX_BYTES)!; // a link, a hard link, a FIFO: E_UNSAFE_PATH
      count += 1;
      bytes += b.length;
      if (count > REACHABLE_MAX_FILES || bytes > REACHABLE_MAX_BYTES) {
        throw new KerncapError(
          "E_UNTRUSTED",
          `${dir}: its build.sh is not the one kerncap writes, so every file under src/ is part of what it runs, and src/ holds more than ${REACHABLE_MAX_FILES} files or ${REACHABLE_MAX_BYTES >> 20} MiB`,
          {
            hint: "Nothing was run. Ask the sender for a capture whose build.sh kerncap wrote, or build it yourself outside kerncap.",
          },
        );
      }
      const shown = names.has(r) || names.has(r.slice(4)) || (st.mode & 0o111) !== 0 || looksLikeProgram(b);
      files.push({ name: r, bytes: b, listedOnly: !shown });
    }
  };
  let src;
  try {
    src = lstatSync(join(dir, "src"));
  } catch {
    return;
  }
  if (src.isDirectory()) walk("src");
}

/**
 * Why an absolute path as named (not resolved) may not be trusted to name the same file at its
 * use, or undefined: a folder or a link on it (lstat of each prefix) that belongs to a user other
 * than root and `uid`, or a folder its group or every user can write (sticky folders excepted: no
 * one may replace another's entry in /tmp). A missing part ends the walk (the caller decides).
 */
function givenPathProblem(path: string, uid: number | undefined): string | undefined {
  let at = "/";
  for (const part of path.split("/").filter(Boolean)) {
    at = join(at, part);
    let st;
    try {
      st = lstatSync(at);
    } catch {
      return undefined;
    }
    const what = st.isSymbolicLink() ? "a link" : st.isDirectory() ? "a folder" : "a file";
    if (uid !== undefined && st.uid !== 0 && st.uid !== uid)
      return `is named through ${at}, ${what} that belongs to another user (uid ${st.uid}), who could make it name another file`;
    // a sticky folder keeps others from replacing its entries, not from adding one: the folder named last (-ccbin's, where
    // nvcc runs `gcc`) is no safer sticky (adversary 60: another user's gcc dropped into a sticky folder ran)
    if (st.isDirectory() && othersMayWrite(st, at) && (!(st.mode & 0o1000) || at === join("/", path)))
      return `is named through ${at}, a folder its group or every user can write (mode ${(st.mode & 0o7777).toString(8)})`;
  }
  return undefined;
}

/**
 * Why the interpreter a Triton capture's pinned.json names may not run, or undefined: it lies
 * inside the capture folder, or a folder or link on the path as named (givenPathProblem), or it or a folder on its real path belongs to a user other than
 * root and this one, or is writable by its group (not the user's private group) or every user (a sticky folder such as /tmp
 * excepted: its entries are still checked); or it is a relative path with a folder in it (the
 * build runs from a private folder under TMPDIR, so `../../x/python3` names a file by where that
 * folder lies, past every check here). A bare name (found on the user's PATH) or a missing
 * absolute file is left to the build.
 */
export function interpreterProblem(dir: string, interpreter: string): string | undefined {
  if (!isAbsolute(interpreter))
    return interpreter.includes("/")
      ? "is a relative path with a folder in it (it names a file by where the build runs, a private folder under TMPDIR): give an absolute path or a bare name on your PATH"
      : undefined;
  // /proc/self/cwd/… is the build's own folder in the build, this process's here (a trial ran a file of the capture that way)
  if (PER_PROCESS.test(interpreter)) return "lies under /proc, /dev or /sys, which name another file in every process";
  // its folder through a link to /proc/self/…: another folder in the build's process (checked also when the file is not here)
  const folder = dirname(interpreter);
  let folderReal: string | undefined;
  try {
    folderReal = realpathSync(folder);
  } catch {
    folderReal = undefined;
  }
  if (folderReal !== undefined && (PER_PROCESS.test(folderReal) || resolvedElsewhere(folder) !== folderReal))
    return "resolves through a per-process link (/proc/self, /dev/fd)";
  let real: string;
  try {
    real = realpathSync(interpreter);
  } catch {
    // the path as named first: a link of another user's on it is followed by stat below, and they may point it
    // elsewhere between this check and the run (adversary 61: SHARED/lnk/nope/python3, lnk theirs, flipped for tune)
    return givenPathProblem(interpreter, process.getuid?.()) ?? missingProblem(interpreter);
  }
  // a link on the way to /proc/self/… resolves to another file in the build's process
  if (PER_PROCESS.test(real) || resolvedElsewhere(interpreter) !== real) return "resolves through a per-process link (/proc/self, /dev/fd)";
  const cap = realpathSync(dir);
  if (real === cap || real.startsWith(cap + "/")) return "lies inside the capture folder";
  const uid = process.getuid?.();
  // the path as named, each folder and link on it: one another user owns could be swapped between this check and the
  // build's exec by name (adversary 39: a link /tmp/x/py of theirs flipped from python3 to their program after --trust)
  const given = givenPathProblem(interpreter, uid);
  if (given) return given;
  let p = real;
  for (;;) {
    const st = statSync(p);
    if (uid !== undefined && st.uid !== 0 && st.uid !== uid) return `is reached through ${p}, which belongs to another user (uid ${st.uid})`;
    const parent = dirname(p);
    // a sticky folder (/tmp) is writable by all, yet no one may replace another's entry in it; but anyone may add one to
    // it, so the folder itself (-ccbin DIR: nvcc runs DIR/gcc) may be neither
    if (othersMayWrite(st, p) && !(st.isDirectory() && st.mode & 0o1000 && p !== real))
      return `is reached through ${p}, which its group or every user can write (mode ${(st.mode & 0o7777).toString(8)})`;
    if (parent === p) break;
    p = parent;
  }
  return statSync(real).isDirectory() ? hostCompilerProblem(dir, real) : undefined;
}

/** The programs nvcc and hipcc look for in a host compiler folder (`-ccbin DIR`). */
const HOST_COMPILERS = ["gcc", "g++", "cc", "c++", "cpp", "clang", "clang++", "cl"];

/** Why a host compiler folder's programs may not run (interpreterProblem of each present), or undefined. */
function hostCompilerProblem(dir: string, folder: string): string | undefined {
  for (const name of HOST_COMPILERS) {
    const path = join(folder, name);
    try {
      lstatSync(path);
      // a folder of that name (or a link back to this one) runs nothing: nvcc fails on it
      if (statSync(path).isDirectory()) continue;
    } catch {
      continue;
    }
    const problem = interpreterProblem(dir, path);
    if (problem) return `holds ${name}, which ${problem}`;
  }
  return undefined;
}

/**
 * Why an absolute path that does not exist may not be named, or undefined: the first folder above
 * it that exists lets another user create it (its group or every user may write it, sticky or not:
 * a sticky folder lets anyone add an entry), between this check and the build's exec (adversary 60).
 */
function missingProblem(path: string): string | undefined {
  for (let p = dirname(path); ; p = dirname(p)) {
    let st;
    try {
      st = statSync(p);
    } catch {
      if (dirname(p) === p) return undefined;
      continue;
    }
    const uid = process.getuid?.();
    if (othersMayWrite(st, p) || (uid !== undefined && st.uid !== 0 && st.uid !== uid))
      return `does not exist, and ${p}, where it would be made, can be written by another user (mode ${(st.mode & 0o7777).toString(8)}, uid ${st.uid})`;
    return undefined;
  }
}
