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
 * The decision is recorded outside every capture, in the user's state folder
 * ($XDG_STATE_HOME/kerncap/trusted-builds.json, else ~/.local/state/kerncap/), keyed by the
 * folder's real path, its device and inode numbers (a folder removed and made again by someone
 * else at that path is another folder) and the SHA-256 of its build.sh (a changed build.sh asks
 * again). A folder someone else made cannot carry that record; the state folder is used only when
 * it is the user's own and nobody else can write it.
 */
import { escapeForTerminal } from "../escape.ts";
import { lstatSync, mkdirSync, readFileSync, realpathSync, statSync } from "node:fs";
import { homedir, hostname } from "node:os";
import { dirname, isAbsolute, join } from "node:path";
import { KerncapError } from "../errors.ts";
import type { Manifest } from "./manifest.ts";
import { RECEIVED_MARK } from "./file-names.ts";
import { readInCapture, writeInCapture } from "./paths.ts";
import { log } from "../log.ts";
import { TOOL_VERSION } from "../version.ts";

/** The file `kerncap unpack` writes into every folder it unpacks. */
export { RECEIVED_MARK };
const TRUST_FILE = "trusted-builds.json";
/** build.sh is a short script: a larger one is not printed whole (bytes). */
const BUILD_SH_MAX = 1 << 20;

/** This machine as a manifest records it: os.hostname() and /etc/machine-id (machine-id(5); null where there is none). */
export function hostIdentity(): { name: string; machineId: string | null } {
  for (const f of ["/etc/machine-id", "/var/lib/dbus/machine-id"]) {
    try {
      const id = readFileSync(f, "utf8").trim();
      if (/^[0-9a-f]{32}$/.test(id)) return { name: hostname(), machineId: id };
    } catch {
      /* the next one */
    }
  }
  return { name: hostname(), machineId: null };
}

/** Write RECEIVED_MARK into `dir` (unpack, before its rename; replaces any file of that name the archive held). */
export function markReceived(dir: string, archive: string): void {
  writeInCapture(dir, RECEIVED_MARK, JSON.stringify({ schema: "kerncap.received/1", archive, at: new Date().toISOString(), by: hostIdentity(), kerncap: TOOL_VERSION }, null, 2) + "\n");
}

/**
 * What in the capture folder is not the user's own (a phrase), or undefined: each of OWNED that
 * exists must belong to the user running kerncap (the effective uid) and be writable by no one else. A folder another local user hands
 * over (in /tmp, say) is that user's, whatever its manifest says about the host: its build.sh is
 * theirs to write. Group-writable is left alone (a team's shared folder, umask 002).
 */
/** What a rebuild runs, imports or reads commands from: the folder, build.sh, src/, Triton's repro.py and pinned.json (it names the interpreter), the manifest, and build/ with the pruned build's plan (its commands run as written). */
const OWNED = [".", "build.sh", "src", "repro.py", "pinned.json", "kerncap.json", "build", "build/pruned", "build/pruned/plan.json"];

function notYours(dir: string): string | undefined {
  const uid = process.geteuid?.() ?? process.getuid?.();
  if (uid === undefined) return undefined;
  for (const name of OWNED) {
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
  if (!here.machineId) return "this machine has no machine-id (/etc/machine-id), so no capture counts as made here";
  if (!m.host) return m.process ? `its manifest records no host machine-id (the capturing process's host name ${JSON.stringify(m.process.hostname)} is not enough)` : "its manifest records no host";
  if (!m.host.machineId) return `its manifest names host ${JSON.stringify(m.host.name)} but no machine-id`;
  if (m.host.machineId !== here.machineId) return `its manifest says host ${JSON.stringify(m.host.name)} (machine-id ${JSON.stringify(m.host.machineId)}) made it, not this machine (machine-id ${here.machineId})`;
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

/** The state folder holding the trust record, when it is the user's own and nobody else can write it. */
function stateDir(env = process.env): string | undefined {
  const base = env.XDG_STATE_HOME && isAbsolute(env.XDG_STATE_HOME) ? env.XDG_STATE_HOME : join(env.HOME || homedir(), ".local", "state");
  const dir = join(base, "kerncap");
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const st = lstatSync(dir);
    const uid = process.getuid?.();
    if (!st.isDirectory() || (uid !== undefined && st.uid !== uid) || st.mode & 0o022) return undefined;
    return dir;
  } catch {
    return undefined;
  }
}

interface TrustRecord {
  dir: string;
  dev: number;
  ino: number;
  /** SHA-256 of what a rebuild runs (whatRuns): build.sh, pinned.json, repro.py and the frontend. Records without it (older kerncap) trust nothing. */
  runs?: string;
  at: string;
}

/**
 * What a rebuild of the capture runs, as the user is shown it and the record is keyed by: build.sh,
 * and for a Triton capture pinned.json (which names the interpreter kerncap runs repro.py with) and
 * the folder's repro.py; the manifest's frontend (which decides what runs). Undefined when the
 * capture holds none of these files: nothing of it runs.
 */
function whatRuns(dir: string, m: Manifest): { script: Buffer | undefined; pinned: Buffer | undefined; repro: Buffer | undefined; interpreter: string | null; hash: string } | undefined {
  const script = readInCapture(dir, "build.sh", BUILD_SH_MAX);
  const pinned = readInCapture(dir, "pinned.json", BUILD_SH_MAX);
  const repro = readInCapture(dir, "repro.py", BUILD_SH_MAX);
  if (!script && !pinned && !repro) return undefined;
  let interpreter: string | null = null;
  try {
    const py = pinned ? JSON.parse(pinned.toString("utf8"))?.python : undefined;
    interpreter = typeof py === "string" ? py : null;
  } catch {
    interpreter = null;
  }
  const h = new Bun.CryptoHasher("sha256");
  for (const [name, b] of [["frontend", Buffer.from(m.kernel.frontend ?? "")], ["build.sh", script], ["pinned.json", pinned], ["repro.py", repro]] as const) {
    h.update(`${name}\0${b ? b.length : -1}\0`);
    if (b) h.update(b);
  }
  return { script, pinned, repro, interpreter, hash: h.digest("hex") };
}

function readRecords(state: string): TrustRecord[] {
  try {
    const doc = JSON.parse(readInCapture(state, TRUST_FILE, 16 << 20)?.toString("utf8") ?? "{}");
    return Array.isArray(doc?.builds) ? doc.builds : [];
  } catch {
    return []; // a damaged record trusts nothing
  }
}

/** The most of build.sh an error message carries (bytes, kerncap mcp: its agent reads the message, not stderr); the rest is read with read_file. */
const BUILD_SH_IN_MESSAGE = 64 << 10;

/** build.sh as text to show: control characters but newline and tab escaped as \xNN (no terminal escapes). */
function shownScript(script: Buffer): string {
  return escapeForTerminal(script.toString("utf8")); // C0, C1, bidi overrides, U+2028/9 (src/escape.ts)
}

/**
 * Before validate (or the watch, or check --rebuild) runs DIR/build.sh: a received capture's build
 * runs only when the record says the user trusted this folder with this build.sh, or `trust`
 * (--trust) says so now (then recorded, unless `o.remember` is false: check's temp folder of an
 * unpacked archive is gone after its check). Otherwise the build is refused, and build.sh shown
 * (control characters escaped): printed to stderr above the error, or with `o.inMessage` (validate
 * --confine: kerncap mcp, whose agent reads the error document, not stderr) carried in the error's
 * message with its path and SHA-256 (at most BUILD_SH_IN_MESSAGE bytes of it). A capture made here
 * passes without a word.
 * `o.command`: the command line to run again with --trust, for the hint (default `kerncap validate DIR`).
 * @throws KerncapError E_UNTRUSTED (exit 2) naming why the capture counts as received
 */
export function requireTrustedBuild(dirArg: string, m: Manifest, trust: boolean, o: { remember?: boolean; command?: string; inMessage?: boolean } = {}): void {
  const why = receivedBecause(dirArg, m);
  if (!why) return;
  const runs = whatRuns(dirArg, m);
  if (!runs) return; // nothing of the capture runs: the build's own error (E_NO_REPRODUCER) says so
  const key = trustKey(dirArg, runs.hash);
  const state = stateDir();
  const records = state ? readRecords(state) : [];
  if (records.some((r) => r.dir === key.dir && r.dev === key.dev && r.ino === key.ino && r.runs === key.runs)) return;
  if (!trust) {
    const command = `${o.command ?? `kerncap validate ${dirArg}`} --trust`;
    const script = runs.script ?? Buffer.from("(no build.sh)\n");
    // a Triton capture's compile runs pinned.json's interpreter on repro.py: both are what the user trusts
    const interp = runs.pinned ? `\n──── the interpreter pinned.json names (run with ${runs.repro ? "the folder's" : "kerncap's"} repro.py) ────\n${shownScript(Buffer.from(runs.interpreter ?? "(none named: the capture's Python)"))}\n` : "";
    if (o.inMessage) {
      const cut = script.length > BUILD_SH_IN_MESSAGE;
      const shown = shownScript(script.subarray(0, BUILD_SH_IN_MESSAGE));
      throw new KerncapError(
        "E_UNTRUSTED",
        `${dirArg} is a received capture (${why}): its build.sh (${key.dir}/build.sh, ${script.length} bytes, sha256 ${sha256(script)}; below) and what it compiles would run with the user's rights, so kerncap runs it only once the user trusts it\n` +
          `──── build.sh ────\n${shown}${shown.endsWith("\n") ? "" : "\n"}${cut ? `… (${script.length - BUILD_SH_IN_MESSAGE} bytes more: read_file build.sh reads it whole)\n` : ""}──── end of build.sh ────${interp}`,
        { hint: `Show build.sh${runs.pinned ? ", pinned.json" : ""} and the sources under src/ to the user. If they trust them, they run ${command} once on the command line (remembered for this folder and these files, which this validate then runs), or start kerncap mcp with --trust-builds.` },
      );
    }
    const shown = shownScript(script);
    process.stderr.write(`──── ${key.dir}/build.sh (the build kerncap would run) ────\n${shown}${shown.endsWith("\n") ? "" : "\n"}──── end of build.sh ────\n${interp}`);
    throw new KerncapError("E_UNTRUSTED", `${dirArg} is a received capture (${why}): its build.sh${runs.pinned ? " and the interpreter pinned.json names" : ""} (printed above) and what it compiles would run with your rights, so kerncap runs it only once you pass --trust`, {
      hint: `Read build.sh${runs.pinned ? ", pinned.json" : ""} and the sources under src/; if you trust them, run ${command}${o.remember === false ? "" : " (remembered for this folder and these files: a change to any asks again)"}. An MCP agent's validate needs kerncap mcp --trust-builds.`,
    });
  }
  if (o.remember === false) return;
  if (!state) {
    log.warn("--trust: the state folder (~/.local/state/kerncap) is not yours alone or cannot be written: the trust is not remembered");
    return;
  }
  remember(state, records, key);
  log.info(`trusted ${key.dir}'s build (sha256 ${key.runs!.slice(0, 12)}… of build.sh${runs.pinned ? ", pinned.json" : ""}): recorded in ${join(state, TRUST_FILE)}`);
}

const sha256 = (b: Buffer) => new Bun.CryptoHasher("sha256").update(b).digest("hex");

/**
 * Record DIR's build.sh as trusted without asking: for a folder kerncap wrote from its own files
 * (`kerncap demo`: the build.sh embedded in this executable), which counts as received by its
 * manifest (no host recorded). Nothing is recorded where the state folder is unusable (then
 * validate asks, as for any received capture).
 */
export function trustOwnBuild(dir: string, m: Manifest): void {
  const runs = whatRuns(dir, m);
  const state = stateDir();
  if (!runs || !state) return;
  remember(state, readRecords(state), trustKey(dir, runs.hash));
}

/**
 * Whether the user's trust record holds DIR with exactly the bytes a rebuild of it would run now
 * (whatRuns): what `--trust` on the command line, or trustOwnBuild, recorded. A confined build
 * (src/format/rendered.ts) runs a build.sh kerncap did not write only then. False when nothing of
 * the capture runs or the state folder is unusable.
 */
export function trustRecorded(dir: string, m: Manifest): boolean {
  const runs = whatRuns(dir, m);
  const state = stateDir();
  if (!runs || !state) return false;
  const key = trustKey(dir, runs.hash);
  return readRecords(state).some((r) => r.dir === key.dir && r.dev === key.dev && r.ino === key.ino && r.runs === key.runs);
}

/** What a trust record is keyed by: the folder's real path, device and inode, and the SHA-256 of what runs (whatRuns). */
function trustKey(dir: string, runs: string): Omit<TrustRecord, "at"> {
  const st = statSync(dir);
  return { dir: realpathSync(dir), dev: st.dev, ino: st.ino, runs };
}

/** Write the record of `key` over any earlier one of its folder. */
function remember(state: string, records: TrustRecord[], key: Omit<TrustRecord, "at">): void {
  const kept = records.filter((r) => r.dir !== key.dir);
  writeInCapture(state, TRUST_FILE, JSON.stringify({ schema: "kerncap.trusted-builds/1", builds: [...kept, { ...key, at: new Date().toISOString() }] }, null, 1) + "\n", 0o600);
}
