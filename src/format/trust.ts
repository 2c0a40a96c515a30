/**
 * Whose build.sh `kerncap validate` runs. A capture made here by the user is theirs; a **received**
 * capture is not: one that `kerncap unpack` wrote (it leaves RECEIVED_MARK in the folder, after the
 * archive's own files, so an archive can neither carry nor remove it), or one whose manifest does
 * not name this machine's id (manifest.host.machineId, /etc/machine-id recorded at capture: another
 * machine's, none, or no host at all; a host name is never enough, and on a machine without a
 * machine-id every capture is received). A received capture's build.sh, and what it compiles and
 * runs, runs only once the user said `--trust` after reading it (validate prints it and refuses,
 * exit 2).
 *
 * What runs is what was trusted: the refusal shows every file the build would execute (build.sh;
 * for Triton pinned.json, repro.py, the kernel file under src/, the interpreter) and one digest of
 * them; a build let run executes a private copy of exactly those bytes (stageTrustedBuild), never
 * the capture's files read again. `--trust=DIGEST` runs only when the digest is still the one shown.
 *
 * The decision is recorded outside every capture, in the user's state folder
 * ($XDG_STATE_HOME/kerncap/trusted-builds.json, else ~/.local/state/kerncap/), keyed by the
 * folder's real path, its device and inode numbers (a folder removed and made again by someone
 * else at that path is another folder) and the digest of what runs (a change asks again). A
 * folder someone else made cannot carry that record; the state folder is used only when it is the
 * user's own and nobody else can write it.
 */
import { escapeForTerminal } from "../escape.ts";
import {
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeSync,
} from "node:fs";
import { homedir, hostname, tmpdir } from "node:os";
import { randomBytes } from "node:crypto";
import { dirname, isAbsolute, join } from "node:path";
import { KerncapError } from "../errors.ts";
import { privateFolderRisk } from "../cache.ts";
import type { Manifest } from "./manifest.ts";
import { RECEIVED_MARK } from "./file-names.ts";
import { mkdirInCapture, readInCapture, resolveInCapture, writeInCapture } from "./paths.ts";
import { frontendRunFiles, runFileSpecs, type RunFiles } from "./run-files.ts";
import { isPlainPath } from "../util/shell-quote.ts";
import { writeFileAtomic } from "../util/write-file.ts";
import { log } from "../log.ts";
import { TOOL_VERSION } from "../version.ts";

/** The file `kerncap unpack` writes into every folder it unpacks. */
export { RECEIVED_MARK };
const TRUST_FILE = "trusted-builds.json";
/** build.sh is a short script: a larger one is not printed whole (bytes). */
const BUILD_SH_MAX = 1 << 20;

/**
 * This machine as a manifest records it: os.hostname() and its id: /etc/machine-id (machine-id(5)),
 * else /var/lib/dbus/machine-id, else an id kerncap made once for this user on this machine
 * (32 random hex digits in the user's own state folder, `machine-id`: containers often have no
 * machine-id, and without one no capture of theirs would count as made here); null where none of
 * them can be had (no state folder of the user's own).
 */
export function hostIdentity(): { name: string; machineId: string | null } {
  for (const f of ["/etc/machine-id", "/var/lib/dbus/machine-id"]) {
    try {
      const id = readFileSync(f, "utf8").trim();
      if (/^[0-9a-f]{32}$/.test(id)) return { name: hostname(), machineId: id };
    } catch {
      /* the next one */
    }
  }
  return { name: hostname(), machineId: kerncapMachineId() };
}

/** The id kerncap keeps for this user on a machine without machine-id (hostIdentity), made on first use; null without a state folder of the user's own. */
export function kerncapMachineId(): string | null {
  const state = stateDir();
  if (!state) return null;
  const file = join(state, "machine-id");
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW);
      try {
        const st = fstatSync(fd);
        const id = readFileSync(fd, "utf8").trim();
        const uid = process.getuid?.();
        if (st.isFile() && (uid === undefined || st.uid === uid) && !(st.mode & 0o022) && /^[0-9a-f]{32}$/.test(id)) return id;
        return null;
      } finally {
        closeSync(fd);
      }
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") return null;
    }
    try {
      // O_EXCL: two kerncaps at once make one id (the loser reads the winner's)
      const fd = openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
      try {
        writeSync(fd, randomBytes(16).toString("hex") + "\n");
      } finally {
        closeSync(fd);
      }
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") return null;
    }
  }
  return null;
}

/** Write RECEIVED_MARK into `dir` (unpack, before its rename; replaces any file of that name the archive held). */
export function markReceived(dir: string, archive: string): void {
  writeInCapture(
    dir,
    RECEIVED_MARK,
    JSON.stringify({ schema: "kerncap.received/1", archive, at: new Date().toISOString(), by: hostIdentity(), kerncap: TOOL_VERSION }, null, 2) + "\n",
  );
}

/**
 * What in the capture folder is not the user's own (a phrase), or undefined: each of owned() that
 * exists must belong to the user running kerncap (the effective uid) and be writable by no one else
 * (neither group nor other write bit). A folder another local user hands over (in /tmp, say) is
 * that user's, whatever its manifest says about the host: its build.sh is theirs to write. A
 * group-writable one (a team's shared folder) is every group member's to write, so it is received
 * too: a member who appends a line to build.sh in place leaves its owner unchanged.
 */
/** What a rebuild runs, imports or reads commands from: the folder, build.sh, src/, every frontend's run files (src/format/run-files.ts: Triton's pinned.json, which names the interpreter, and repro.py), the manifest, and build/ with the pruned build's plan (its commands run as written). */
const owned = () => [".", "build.sh", "src", ...frontendRunFiles(), "kerncap.json", "build", "build/pruned", "build/pruned/plan.json"];

function notYours(dir: string): string | undefined {
  const uid = process.geteuid?.() ?? process.getuid?.();
  if (uid === undefined) return undefined;
  for (const name of owned()) {
    let st;
    try {
      // the folder itself through any link to it (a link of yours to another user's folder is theirs); what is inside, as it lies
      st = name === "." ? statSync(dir) : lstatSync(join(dir, name));
    } catch {
      continue; // absent: nothing of it runs
    }
    const what = name === "." ? "the folder" : name;
    if (st.uid !== uid) return `${what} belongs to another user (uid ${st.uid}; you are uid ${uid})`;
    if (st.mode & 0o002) return `${what} can be written by every user (mode ${(st.mode & 0o7777).toString(8)})`;
    if (st.mode & 0o020)
      return `${what} can be written by every member of its group (gid ${st.gid}, mode ${(st.mode & 0o7777).toString(8)}), who could change what the build runs`;
  }
  return undefined;
}

/**
 * The nearest folder above `dir` that holds RECEIVED_MARK: a capture nested inside an unpacked
 * archive (an archive of a folder of captures) is received too, though only the archive's top
 * folder was marked. Undefined when none is, up to the file system's root.
 */
function receivedAncestor(dir: string): string | undefined {
  let p: string;
  try {
    p = realpathSync(dir);
  } catch {
    return undefined;
  }
  for (let up = dirname(p); up !== p; p = up, up = dirname(up)) {
    try {
      if (lstatSync(join(up, RECEIVED_MARK)).isFile()) return up;
    } catch {
      /* none here */
    }
  }
  return undefined;
}

/**
 * Why the manifest does not show the capture was made on this machine (a phrase), or undefined when
 * it does: only the machine-id it recorded at capture (manifest.host.machineId, /etc/machine-id)
 * equal to this machine's makes a capture local. A host name (manifest.host.name, the capturing
 * process's process.hostname), a pid or a user name is easy to know and never enough; a machine with
 * no machine-id counts every capture as received. `here`: this machine (hostIdentity()).
 */
export function notMadeHere(m: Pick<Manifest, "host" | "process">, here: { name: string; machineId: string | null } = hostIdentity()): string | undefined {
  if (!here.machineId)
    return "this machine has no machine-id (/etc/machine-id) and kerncap keeps none for you (no state folder of your own), so no capture counts as made here";
  if (!m.host)
    return m.process
      ? `its manifest records no host machine-id (the capturing process's host name ${JSON.stringify(m.process.hostname)} is not enough)`
      : "its manifest records no host";
  if (!m.host.machineId) return `its manifest names host ${JSON.stringify(m.host.name)} but no machine-id`;
  if (m.host.machineId !== here.machineId)
    return `its manifest says host ${JSON.stringify(m.host.name)} (machine-id ${JSON.stringify(m.host.machineId)}) made it, not this machine (machine-id ${here.machineId})`;
  return undefined;
}

/**
 * Every reason `dir` counts as a received capture (phrases, in this order: the received mark, a
 * received folder above it, a file of it that is not the user's own, a manifest that does not name
 * this machine's id), empty when it was made here by this user. What `kerncap inspect` shows, and
 * what E_UNTRUSTED names. `here`: this machine (hostIdentity()).
 */
export function receivedReasons(dir: string, m: Manifest, here = hostIdentity()): string[] {
  const why: string[] = [];
  try {
    if (readInCapture(dir, RECEIVED_MARK, 1 << 16)) why.push("it was unpacked from an archive");
  } catch {
    why.push(`${RECEIVED_MARK} is there but is not a regular file`);
  }
  const inside = receivedAncestor(dir);
  if (inside) why.push(`it lies inside ${inside}, which was unpacked from an archive`);
  const theirs = notYours(dir);
  if (theirs) why.push(theirs);
  const elsewhere = notMadeHere(m, here);
  if (elsewhere) why.push(elsewhere);
  return why;
}

/** Why `dir` is a received capture (receivedReasons, joined with "; "), or undefined when it was made here by this user. */
export function receivedBecause(dir: string, m: Manifest): string | undefined {
  const why = receivedReasons(dir, m);
  return why.length ? why.join("; ") : undefined;
}

/** Why stateDir() last gave no folder (for the warning). */
let stateRisk: string | undefined;
/**
 * The state folder holding the trust record, when no other user can swap it: every folder from /
 * down to it the user's or root's, none that others can write on the way (a sticky one only above
 * a folder of the user's), the folder itself the user's alone. The same test as the cache folder's
 * (src/cache.ts privateFolderRisk), made before the folder is created and again after.
 */
function stateDir(env = process.env): string | undefined {
  const base = env.XDG_STATE_HOME && isAbsolute(env.XDG_STATE_HOME) ? env.XDG_STATE_HOME : join(env.HOME || homedir(), ".local", "state");
  const dir = join(base, "kerncap");
  try {
    stateRisk = privateFolderRisk(dir);
    if (stateRisk) return undefined;
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    stateRisk = lstatSync(dir).isDirectory() ? privateFolderRisk(dir) : `${dir} is not a folder`;
    return stateRisk ? undefined : dir;
  } catch (e) {
    stateRisk = `${dir} cannot be made (${(e as Error).message})`;
    return undefined;
  }
}

interface TrustRecord {
  dir: string;
  dev: number;
  ino: number;
  /** The folder's owner and its birth time (statx; 0 where the file system keeps none): a folder made later at the same path, even on a reused inode, is another folder. Records without them (older kerncap) match nothing. */
  uid?: number;
  birth?: number;
  /** The digest of what a rebuild runs (WhatRuns.digest). Records without it (older kerncap) trust nothing. */
  runs?: string;
  at: string;
}

/** One file a rebuild runs (or reads commands from), as read once: its name in the capture folder and its bytes. */
export interface RunFile {
  name: string;
  bytes: Buffer;
  /** Hashed and listed (name, size, SHA-256) but not printed whole: a file under src/ that a build.sh of its own can reach, which it does not name and which does not look like a program. */
  listedOnly?: boolean;
}

/** A program, plugin or option file a build names, with the option (or variable) that names it; `kind` "program": a bare name is looked up on PATH; "file": a path (relative: the build's folder); "run": an option a module build has no use for. */
export interface NamedProgram {
  flag: string;
  value: string;
  kind: "program" | "file" | "run";
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
    if (!reading.stock) {
      notStock = reading.why ?? "build.sh is not the one this kerncap writes";
      addReachable(dir, files, reading.named);
    }
  }
  return { frontend, files, interpreter, ...(interpreterNamed ? { interpreterNamed } : {}), notStock, digest: runsDigest(frontend, files, interpreter) };
}

/**
 * Why a build may not use the program, plugin or option file `p` names (a phrase), or undefined:
 * an option no module build needs; a relative path (the build's folder: the capture's src/, or
 * the copies of its files); an absolute path inside the capture, or one another user can change
 * (interpreterProblem). A bare program name (looked up on PATH, the user's) and a value that is
 * computed when the script runs (holding `$`) are left: the script is shown whole.
 */
function programProblem(dir: string, p: NamedProgram): string | undefined {
  const what = `names ${escapeForTerminal(JSON.stringify(p.value))} (${p.flag})`;
  if (p.kind === "run") return `passes an option that runs another program (${p.flag}): a module build has no use for it`;
  if (/[$\x60]/.test(p.value) || p.value === "") return undefined;
  // a bare program name is the user's PATH's; gcc's -fplugin=NAME (no slash, no .so) is its own plugin folder's
  if (!p.value.includes("/") && (p.kind === "program" || (p.flag === "-fplugin" && !p.value.endsWith(".so")))) return undefined;
  if (!isAbsolute(p.value)) return `${what}, a path inside the build's folder (the capture's src/ or its own files)`;
  const problem = interpreterProblem(dir, p.value);
  return problem ? `${what}, which ${problem}` : undefined;
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
  const src = lstatOrUndefined(join(dir, "src"));
  if (src?.isDirectory()) walk("src");
}

/**
 * Why the interpreter a Triton capture's pinned.json names may not run, or undefined: it lies
 * inside the capture folder, or it or a folder on its real path belongs to a user other than
 * root and this one, or is writable by its group or every user (a sticky folder such as /tmp
 * excepted: its entries are still checked). A bare name (found on PATH) or a missing
 * file is left to the build.
 */
export function interpreterProblem(dir: string, interpreter: string): string | undefined {
  if (!isAbsolute(interpreter)) return undefined;
  let real: string;
  try {
    real = realpathSync(interpreter);
  } catch {
    return undefined;
  }
  const cap = realpathSync(dir);
  if (real === cap || real.startsWith(cap + "/")) return "lies inside the capture folder";
  const uid = process.getuid?.();
  let p = real;
  for (;;) {
    const st = statSync(p);
    if (uid !== undefined && st.uid !== 0 && st.uid !== uid) return `is reached through ${p}, which belongs to another user (uid ${st.uid})`;
    const parent = dirname(p);
    // a sticky folder (/tmp) is writable by all, yet no one may replace another's entry in it
    if (st.mode & 0o022 && !(st.isDirectory() && st.mode & 0o1000))
      return `is reached through ${p}, which its group or every user can write (mode ${(st.mode & 0o7777).toString(8)})`;
    if (parent === p) return undefined;
    p = parent;
  }
}

function readRecords(state: string): TrustRecord[] {
  try {
    const doc = JSON.parse(readInCapture(state, TRUST_FILE, 16 << 20)?.toString("utf8") ?? "{}");
    return Array.isArray(doc?.builds) ? doc.builds : [];
  } catch {
    return []; // a damaged record trusts nothing
  }
}

/** The most of the files an error message carries (bytes, kerncap mcp: its agent reads the message, not stderr); the rest is read with read_file. */
const BUILD_SH_IN_MESSAGE = 64 << 10;

/** build.sh as text to show: control characters but newline and tab escaped as \xNN (no terminal escapes). */
function shownScript(script: Buffer): string {
  return escapeForTerminal(script.toString("utf8")); // C0, C1, bidi overrides, U+2028/9 (src/escape.ts)
}

/**
 * The files of `runs` as the user is shown them: each between `──── NAME (N bytes, sha256 H) ────` and
 * `──── end of NAME ────`, escaped (shownScript); `budget`: the most bytes shown in all (kerncap
 * mcp's message), the rest said as a count.
 */
function shownFiles(runs: WhatRuns, budget = Infinity): string {
  let out = "";
  let left = budget;
  for (const f of runs.files) {
    if (f.listedOnly) {
      out += `──── ${escapeForTerminal(f.name, { oneLine: true })} (${f.bytes.length} bytes, sha256 ${new Bun.CryptoHasher("sha256").update(f.bytes).digest("hex")}; build.sh can reach it: part of the digest, not printed) ────\n`;
      continue;
    }
    const n = Math.max(0, Math.min(f.bytes.length, left));
    left -= n;
    const shown = shownScript(f.bytes.subarray(0, n));
    out += `──── ${f.name} (${f.bytes.length} bytes, sha256 ${new Bun.CryptoHasher("sha256").update(f.bytes).digest("hex")}) ────\n${shown}${shown === "" || shown.endsWith("\n") ? "" : "\n"}${n < f.bytes.length ? `… (${f.bytes.length - n} bytes more: read_file ${f.name} reads it whole)\n` : ""}──── end of ${f.name} ────\n`;
  }
  return out;
}

/** What the refusal says first when build.sh is not kerncap's own: why, and that every file under src/ is part of what runs. */
function shownNotStock(runs: WhatRuns): string {
  if (runs.notStock === undefined) return "";
  return `──── NOT kerncap's own build: ${shownScript(Buffer.from(runs.notStock))}. It can run any file of src/: each is listed, part of the digest, and copied privately for the build; those it names or that look like programs are printed whole. Plain --trust is not enough: --trust=DIGEST ────\n`;
}

/** What the refusal says about the interpreter, as each frontend shows it (RunFiles.interpreter.shown: a Triton compile runs it on repro.py). */
function shownInterpreter(runs: WhatRuns): string {
  const present = new Set(runs.files.map((f) => f.name));
  return runFileSpecs()
    .map((s) => s.interpreter?.shown(present, runs.interpreter) ?? "")
    .join("");
}

/** An interpreter's name as the refusal shows it: escaped, as a script's text is. */
export function shownInterpreterName(interpreter: string): string {
  return shownScript(Buffer.from(interpreter));
}

/** The folders this process's trust gate let run (real path → the approved digest and frontend): the builds of this process execute only those bytes (stageTrustedBuild). */
const approved = new Map<string, { digest: string; frontend: string }>();

/** Whether this process's trust gate let DIR's build run as a received capture's: its builds then execute a private copy (stageTrustedBuild), and only build.sh (no faster build that runs commands read from the folder). */
export function runsTrustedCopy(dir: string): boolean {
  try {
    return approved.has(realpathSync(dir));
  } catch {
    return false;
  }
}

/** `--trust=DIGEST` as the user may type it: with or without `sha256:`, any case. */
function normalDigest(d: string): string {
  return d
    .trim()
    .toLowerCase()
    .replace(/^sha256:/, "");
}

/**
 * Before validate (or the watch, tune, profile --build, check --rebuild) runs a received capture's
 * build: it runs only when the record says the user trusted this folder with these files (the
 * digest of WhatRuns), or `trust` says so now, then recorded (unless `o.remember` is false:
 * check's temp folder of an unpacked archive is gone after its check).
 *  - `trust` a string (`--trust=DIGEST`): the digest the refusal showed; a different current digest
 *    is refused (E_TRUST_CHANGED: the files changed since they were shown).
 *  - `trust` true (plain `--trust`): runs what is read now and says its digest; refused
 *    (E_UNTRUSTED) when another user owns or every user can write the folder or a file of it (they
 *    could change the files between the user's reading and --trust): --trust=DIGEST there.
 * Otherwise the build is refused, and every file it would execute shown (escaped) with the one
 * digest: printed to stderr above the error, or with `o.inMessage` (validate --confine: kerncap
 * mcp, whose agent reads the error document, not stderr) carried in the error's message (at most
 * BUILD_SH_IN_MESSAGE bytes of the files). A capture made here passes without a word.
 * A build let run is remembered for this process: buildReproducer and tune execute a private copy
 * of the files, read again and held to the same digest (stageTrustedBuild).
 * `o.command`: the command line to run again with --trust, for the hint (default `kerncap validate DIR`).
 * `o.name`: how messages name the capture (default DIR; check names the archive, never the
 * temporary folder it unpacked it into); `o.shown`: where the messages say the files were printed
 * (default "printed above"; check's outcome is read in its table and results file, far from them).
 * @throws KerncapError E_UNTRUSTED (exit 2) naming why the capture counts as received,
 *   E_TRUST_CHANGED (exit 2), E_UNSAFE_PATH (a Triton kernel file outside src/)
 */
export function requireTrustedBuild(
  dirArg: string,
  m: Manifest,
  trust: boolean | string,
  o: { remember?: boolean; command?: string; inMessage?: boolean; name?: string; shown?: string } = {},
): void {
  const why = receivedBecause(dirArg, m);
  if (!why) return;
  const runs = readWhatRuns(dirArg, m.kernel.frontend ?? "", true);
  if (!runs) return; // nothing of the capture runs: the build's own error (E_NO_REPRODUCER) says so
  const key = trustKey(dirArg, runs.digest);
  const state = stateDir();
  const records = state ? readRecords(state) : [];
  const approve = () => approved.set(key.dir, { digest: runs.digest, frontend: runs.frontend });
  const base = o.command ?? `kerncap validate ${dirArg}`;
  const names = runs.files.map((f) => f.name).join(", ");
  const name = o.name ?? dirArg;
  const shown = o.shown ?? "printed above";
  const show = () => {
    if (!o.inMessage)
      process.stderr.write(
        `──── ${o.name ?? key.dir}: what the build would run (sha256 ${runs.digest}) ────\n${shownNotStock(runs)}${shownFiles(runs)}${shownInterpreter(runs)}`,
      );
  };
  if (typeof trust === "string") {
    if (normalDigest(trust) !== runs.digest) {
      show();
      throw new KerncapError(
        "E_TRUST_CHANGED",
        `${name}: the files its build runs (${names}) changed since they were shown: their digest is now ${runs.digest}, --trust gave ${trust}`,
        {
          hint: `Nothing was run. Read the files again (${shown}); if you trust them, run ${base} --trust=${runs.digest}.`,
        },
      );
    }
  } else if (records.some((r) => sameTrustKey(r, key))) {
    approve();
    return;
  } else if (!trust) {
    const command = `${base} --trust=${runs.digest}`;
    if (o.inMessage) {
      throw new KerncapError(
        "E_UNTRUSTED",
        `${dirArg} is a received capture (${why}): what its build runs (${names} in ${key.dir}; sha256 ${runs.digest}; below) and what it compiles would run with the user's rights, so kerncap runs it only once the user trusts it\n` +
          `${shownNotStock(runs)}${shownFiles(runs, BUILD_SH_IN_MESSAGE)}${shownInterpreter(runs)}`.replace(/\n$/, ""),
        {
          hint: `Show ${names} and the sources under src/ to the user. If they trust them, they run ${command} once on the command line (remembered for this folder and these files, which this validate then runs), or start kerncap mcp with --trust-builds.`,
        },
      );
    }
    show();
    throw new KerncapError(
      "E_UNTRUSTED",
      `${name} is a received capture (${why}): what its build runs (${names}${runs.interpreter !== null ? `, ${runs.interpreterNamed ?? "the interpreter"}` : ""}: ${shown}, sha256 ${runs.digest}) and what it compiles would run with your rights, so kerncap runs it only once you pass --trust`,
      {
        hint: `Read ${names} and the sources under src/; if you trust them, run ${command}${o.remember === false ? "" : " (remembered for this folder and these files: a change to any asks again)"}. An MCP agent's validate needs kerncap mcp --trust-builds.`,
      },
    );
  } else {
    if (runs.notStock !== undefined) {
      show();
      throw new KerncapError(
        "E_UNTRUSTED",
        `${name}: plain --trust is not enough here: ${runs.notStock}, so what it runs is build.sh and every file under src/ (${runs.files.length} files, ${shown}), not only what kerncap's own build.sh runs`,
        {
          hint: `Read build.sh and the files marked as run (${shown}, sha256 ${runs.digest}); if you trust them all, run ${base} --trust=${runs.digest}. Every change under src/ then asks again; ask the sender for a capture whose build.sh kerncap wrote to edit it freely.`,
        },
      );
    }
    const theirs = notYours(dirArg);
    if (theirs) {
      show();
      throw new KerncapError(
        "E_UNTRUSTED",
        `${name}: plain --trust is not enough here: ${theirs}, so the files its build runs (${names}) could have changed since you read them`,
        {
          hint: `Read them (${shown}, sha256 ${runs.digest}); if you trust them, run ${base} --trust=${runs.digest}: kerncap then runs those bytes only, or refuses if they changed.`,
        },
      );
    }
  }
  approve();
  if (o.remember === false) {
    log.info(`trusted ${name}'s build for this run only: ${names} (sha256 ${runs.digest}; not recorded)`);
    return;
  }
  log.info(`trusted ${key.dir}'s build: ${names} (sha256 ${runs.digest})`);
  if (!state) {
    log.warn(`--trust: the state folder is not used (${stateRisk ?? "it is not yours alone or cannot be written"}): the trust is not remembered`);
    return;
  }
  remember(state, records, key);
  log.info(`recorded in ${join(state, TRUST_FILE)}`);
}

/** A private copy of the files a trusted build runs (stageTrustedBuild). */
export interface StagedBuild {
  /** The private folder: a fresh mkdtemp folder (0700, the user's), with the trusted files written O_EXCL and links to the capture's other entries. */
  folder: string;
  /** The capture folder's real path (the links' target). */
  dir: string;
  /** The digest of the files copied (for a received capture, the one the gate approved). */
  digest: string;
  /** `text` with the private folder's path read as the capture folder's (the build's messages, the module it printed). */
  unstage(text: string): string;
  /**
   * Move what the build wrote into the private build/ (every regular file, but Triton's cache
   * `triton-cache/`) into the capture's build/ with the one safe writer: an unguessable
   * O_EXCL|O_NOFOLLOW temp renamed over the name, a link at the name or on the way refused.
   * @returns the capture-relative paths written
   * @throws KerncapError E_UNSAFE_PATH naming a link (or other non-file) in the capture's build/
   */
  collect(): string[];
  /** Remove the private folder (the links only, never what they point at). */
  dispose(): void;
}

/**
 * For a capture the trust gate let run in this process (requireTrustedBuild): read what runs once
 * more, hold it to the approved digest, and write those bytes into a private folder that no one
 * else can write (mkdtemp: a fresh 0700 folder of the user's; each file created O_EXCL|O_NOFOLLOW).
 * The build then executes that copy: a file of the capture replaced or rewritten after this read
 * (while the compiler runs) is never executed. The private folder holds nothing else of the
 * capture: the copies, `src` (a link to the capture's src/ with the sources the compiler reads;
 * a Triton capture's src/ is a private folder holding only the trusted kernel file, which
 * repro.py imports), and `build/`, a private folder the build writes into (seeded with the
 * capture's build/slice-failed.sha256), whose files collect() moves into the capture's build/.
 * The build runs with this folder as its working folder: nvcc gives its steps
 * LD_LIBRARY_PATH=`<cuda>/lib:` (the empty entry is the working folder) and Python puts a
 * script's folder first on sys.path, so no other top-level name of the capture may be there; and
 * nothing the build writes goes through a link someone planted in the capture's build/.
 * A capture made here is staged the same way, without a digest to hold it to: its build.sh's
 * outputs never go through a link in build/ either (a folder a group shares), and nvcc, which
 * pastes the source's absolute path (from its working folder) into the shell lines it runs, works
 * from the private folder's plain name whatever the capture folder is called.
 * `frontend`: the manifest's kernel.frontend (part of the digest, WhatRuns), for a capture the gate did not approve.
 * @returns undefined when the capture holds nothing that runs (no build.sh, pinned.json, repro.py)
 * @throws KerncapError E_TRUST_CHANGED (exit 2) when the files changed since the gate read them
 */
export function stageTrustedBuild(dirArg: string, frontend = ""): StagedBuild | undefined {
  let real: string;
  try {
    real = realpathSync(dirArg);
  } catch {
    return undefined;
  }
  const ok = approved.get(real);
  const runs = readWhatRuns(real, ok?.frontend ?? frontend, ok !== undefined); // a received capture the gate let run: read as the gate read it
  if (!runs) return undefined;
  if (ok && runs.digest !== ok.digest) {
    throw new KerncapError(
      "E_TRUST_CHANGED",
      `${dirArg}: the files its build runs changed since they were trusted (digest ${ok.digest}, now ${runs.digest}); nothing was run`,
      {
        hint: "Someone changed build.sh, pinned.json, repro.py or the Triton kernel file meanwhile. Run the command again without --trust to see them, then trust the digest it shows.",
      },
    );
  }
  mkdirInCapture(real, "build"); // outputs go through the link into the capture's build/
  const folder = mkdtempSync(join(tmpdir(), "kerncap-run-"));
  try {
    const st = lstatSync(folder);
    const uid = process.geteuid?.();
    if (!st.isDirectory() || (uid !== undefined && st.uid !== uid) || st.mode & 0o077)
      throw new Error(`mkdtemp made ${folder} with mode ${(st.mode & 0o7777).toString(8)}`);
    const copied = new Set<string>();
    for (const f of runs.files) {
      const parts = f.name.split("/");
      copied.add(parts[0]!);
      for (let i = 1; i < parts.length; i++) {
        const d = join(folder, ...parts.slice(0, i));
        try {
          mkdirSync(d, { mode: 0o700 });
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
        }
      }
      writeNew(join(folder, ...parts), f.bytes, f.name === "build.sh" ? 0o700 : 0o600);
    }
    // src/ (when no trusted file lies under it: the CUDA sources the compiler reads) and nothing else of the capture's top level
    if (!copied.has("src") && lstatOrUndefined(join(real, "src"))?.isDirectory()) symlinkSync(join(real, "src"), join(folder, "src"));
    mkdirSync(join(folder, "build"), { mode: 0o700 });
    const failed = readInCapture(real, SLICE_FAILED, 4096); // the slice that did not build for this TU text is not tried again
    if (failed) writeNew(join(folder, SLICE_FAILED), failed, 0o600);
  } catch (e) {
    rmSync(folder, { recursive: true, force: true });
    throw e;
  }
  return {
    folder,
    dir: real,
    digest: runs.digest,
    unstage: (text) => text.split(folder).join(real),
    collect: () => collectBuild(join(folder, "build"), real),
    dispose: () => rmSync(folder, { recursive: true, force: true }),
  };
}

/** build.sh's record of a slice that did not build (templates/cuda/build.sh.hbs), beside the default module. */
const SLICE_FAILED = "build/slice-failed.sha256";

/** A new file at `path` (O_EXCL|O_NOFOLLOW: never an existing name, never through a link) holding `bytes`. */
function writeNew(path: string, bytes: Uint8Array, mode: number): void {
  const fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode);
  try {
    writeSync(fd, bytes);
  } finally {
    closeSync(fd);
  }
}

function lstatOrUndefined(p: string) {
  try {
    return lstatSync(p);
  } catch {
    return undefined;
  }
}

/** StagedBuild.collect: the regular files under the private `from` (the build's output folder) written into `capture`'s build/, through no link. */
function collectBuild(from: string, capture: string): string[] {
  const written: string[] = [];
  const uncollected = new Set(runFileSpecs().flatMap((s) => s.uncollected ?? []));
  const walk = (rel: string) => {
    for (const name of readdirSync(join(from, rel))) {
      const r = rel ? `${rel}/${name}` : name;
      if (uncollected.has(r)) continue; // a frontend's compile cache of this build (RunFiles.uncollected: Triton's triton-cache): not worth copying
      const st = lstatSync(join(from, r));
      if (st.isDirectory()) walk(r);
      else if (st.isFile()) {
        const target = `build/${r}`;
        const { path } = resolveInCapture(capture, target); // a link, a hard link or a non-file at the name: E_UNSAFE_PATH
        // walked from the capture's real path, each folder opened with no link followed: build/ swapped for a link meanwhile is refused
        writeFileAtomic(path, readFileSync(join(from, r)), {
          mode: st.mode & 0o777,
          sync: false,
          what: `the build's output ${target}`,
          root: capture,
          create: true,
        });
        written.push(target);
      }
    }
  };
  walk("");
  return written;
}

/**
 * Record DIR's build.sh as trusted without asking: for a folder kerncap wrote from its own files
 * (`kerncap demo`: the build.sh embedded in this executable), which counts as received by its
 * manifest (no host recorded). Nothing is recorded where the state folder is unusable (then
 * validate asks, as for any received capture).
 */
export function trustOwnBuild(dir: string, m: Manifest): void {
  const runs = readWhatRuns(dir, m.kernel.frontend ?? "", receivedBecause(dir, m) !== undefined);
  const state = stateDir();
  if (!runs || !state) return;
  remember(state, readRecords(state), trustKey(dir, runs.digest));
}

/**
 * Whether the user's trust record holds DIR with exactly the bytes a rebuild of it would run now
 * (readWhatRuns): what `--trust` on the command line, or trustOwnBuild, recorded. A confined build
 * (src/format/rendered.ts) runs a build.sh kerncap did not write only then. False when nothing of
 * the capture runs or the state folder is unusable. `digest`: of the bytes a build will run (a
 * private copy's, StagedBuild.digest) instead of the folder's read now.
 */
export function trustRecorded(dir: string, m: Manifest, digest?: string): boolean {
  let runs: string | undefined;
  try {
    runs = digest === undefined ? readWhatRuns(dir, m.kernel.frontend ?? "", receivedBecause(dir, m) !== undefined)?.digest : digest;
  } catch {
    return false; // what the gate refuses (a program in the capture, a link) was never trusted; the gate says why
  }
  const state = stateDir();
  if (!runs || !state) return false;
  const key = trustKey(dir, runs);
  return readRecords(state).some((r) => sameTrustKey(r, key));
}

/** What a trust record is keyed by: the folder's real path, device and inode, and the digest of what runs (WhatRuns). */
function trustKey(dir: string, runs: string): Omit<TrustRecord, "at"> {
  const st = statSync(dir);
  return { dir: realpathSync(dir), dev: st.dev, ino: st.ino, uid: st.uid, birth: Math.round(st.birthtimeMs || 0), runs };
}

/** Whether a stored record is the one of `key`: the same folder (path, device, inode, owner, birth time) and the same digest. */
function sameTrustKey(r: TrustRecord, key: Omit<TrustRecord, "at">): boolean {
  return r.dir === key.dir && r.dev === key.dev && r.ino === key.ino && r.uid === key.uid && r.birth === key.birth && r.runs === key.runs;
}

/** Write the record of `key` over any earlier one of its folder. */
function remember(state: string, records: TrustRecord[], key: Omit<TrustRecord, "at">): void {
  const kept = records.filter((r) => r.dir !== key.dir);
  writeInCapture(
    state,
    TRUST_FILE,
    JSON.stringify({ schema: "kerncap.trusted-builds/1", builds: [...kept, { ...key, at: new Date().toISOString() }] }, null, 1) + "\n",
    0o600,
  );
}
