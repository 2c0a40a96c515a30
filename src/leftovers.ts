/**
 * Temp folders and files named after the process that writes them and a random token
 * (`X.tmp-<pid>-<token>`), and the removal of those a killed kerncap left behind (kill -9, OOM
 * killer, a lost node): the pid in the name is the writer's; when no process has that pid any more,
 * nothing will ever complete the folder. The token (crypto random) makes the name unpredictable, so
 * that another user who can write the folder cannot plant a link under the next name.
 */
import { randomBytes } from "node:crypto";
import { closeSync, existsSync, lstatSync, openSync, readdirSync, readFileSync, readlinkSync, readSync, rmSync, statSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";

/**
 * Is there a process with this pid? kill(pid, 0) is ESRCH for none; EPERM means one exists
 * (another user's). A zombie (ended, not yet reaped by its parent: /proc/<pid>/stat's state Z)
 * is none: it holds no lock and writes nothing (a killed check's results lock refused --resume
 * while its parent had not reaped it: adversary 35). A pid reused by an unrelated process reads
 * as alive: its folder is kept, never wrongly removed.
 */
export function pidAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
  return !zombie(pid);
}

let pidNs: string | undefined;
/**
 * This process's pid namespace: the inode number of /proc/self/ns/pid ("4026531836"), "" where it
 * cannot be read. A pid names a process only inside its namespace: two containers (or `unshare
 * --pid`) sharing a TMPDIR see each other's pids as gone, or as some other process.
 */
export function pidNamespace(): string {
  if (pidNs === undefined) {
    try {
      pidNs = /\[(\d+)\]/.exec(readlinkSync("/proc/self/ns/pid"))?.[1] ?? "";
    } catch {
      pidNs = "";
    }
  }
  return pidNs;
}

/**
 * Whether the process `pid` of the pid namespace `ns` (pidNamespace's; undefined: a name written
 * before namespaces were recorded, taken as this one's) is known to be gone: false for a pid of
 * another namespace, whose processes this one cannot see (adversary 75: an eval in its own pid
 * namespace removed the private folders of a live eval outside it, sharing TMPDIR).
 */
export function processGone(pid: number, ns?: string): boolean {
  if (ns !== undefined && ns !== pidNamespace()) return false;
  return !pidAlive(pid);
}

/** Whether /proc says `pid` is a zombie (state Z after the command's closing parenthesis); false where /proc cannot tell. */
function zombie(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) === "Z";
  } catch {
    return false;
  }
}

/** The file kerncap puts in each temp folder it makes, so that only its own are ever removed. */
export const TEMP_MARKER = ".kerncap-temp";

/** Mark a temp folder as kerncap's (removed again before the folder gets its final name). */
export function markTemp(dir: string): void {
  writeFileSync(`${dir}/${TEMP_MARKER}`, `${process.pid}\n`);
}

/**
 * Was `p` (a stale `X.tmp-<pid>` / `X.old-<pid>`) made by kerncap? A folder: it holds the marker, or
 * it is a capture (kerncap.json) or a capture set; a file: a zip archive (pack's temp). A folder of
 * the user's that happens to have such a name is never removed.
 */
export function madeByKerncap(p: string): boolean {
  try {
    if (statSync(p).isDirectory()) return [TEMP_MARKER, "kerncap.json", "kerncap-captures.json"].some((f) => existsSync(join(p, f)));
    const fd = openSync(p, "r");
    const b = Buffer.alloc(2);
    readSync(fd, b, 0, 2, 0);
    closeSync(fd);
    return b.toString("latin1") === "PK";
  } catch {
    return false;
  }
}

const TOKEN_LETTERS = "0123456789abcdefghijklmnopqrstuvwxyz";

/** 16 letters of [0-9a-z] from the system's random source (about 82 bits): a temp name no one can guess. */
export function randomToken(): string {
  return Array.from(randomBytes(16), (b) => TOKEN_LETTERS[b % 36]).join("");
}

/** The longest file name (bytes) Linux file systems take, and the most a temp suffix (`.tmp-<pid>-<16 letters>`) adds. */
const NAME_MAX = 255;
const TEMP_SUFFIX_MAX = ".tmp-".length + 10 + 1 + 16;

/**
 * The stem of a temp name for the file name `name`: `name` itself, or, where `name` and a temp
 * suffix would pass NAME_MAX bytes, its longest prefix (whole characters) that leaves room for one
 * (adversary 35: an output named with 230–254 characters was refused, its temp name too long).
 */
export function tempStem(name: string): string {
  if (Buffer.byteLength(name) + TEMP_SUFFIX_MAX <= NAME_MAX) return name;
  let stem = "";
  for (const ch of name) {
    if (Buffer.byteLength(stem + ch) + TEMP_SUFFIX_MAX > NAME_MAX) break;
    stem += ch;
  }
  return stem;
}

/** A temp name beside `path`: `path.tmp-<pid>-<random token>` (a new token at each call; the name's stem shortened where it is too long: tempStem). */
export function tempFor(path: string, pid = process.pid): string {
  return join(dirname(path), `${tempStem(basename(path))}.tmp-${pid}-${randomToken()}`);
}

/** Whether a name ends like tempFor's (`.tmp-<pid>-<token>`), or a temp of kerncap before the token (`.tmp-<pid>`). */
export function isTempName(name: string): boolean {
  return /\.tmp-\d+(-[0-9a-z]{6,})?$/.test(name);
}

/** The `<base>.tmp-<pid>[-<token>]` and `<base>.old-<pid>` folders beside `base` (none when its folder cannot be read). */
function tempSiblings(base: string): { path: string; kind: "tmp" | "old"; pid: number }[] {
  const dir = dirname(base);
  const name = tempStem(basename(base));
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  return names.flatMap((n) => {
    const m = n.startsWith(`${name}.`) ? /^\.(tmp|old)-(\d+)(?:-[0-9a-z]{6,})?$/.exec(n.slice(name.length)) : null;
    // a number no process can have (above the kernel's pid_max) is no pid of kerncap's: a date, a version (adversary 53:
    // a user's backup cap.old-20240611 was removed by pack --force)
    return m && Number(m[2]) <= pidMax() ? [{ path: join(dir, n), kind: m[1] as "tmp" | "old", pid: Number(m[2]) }] : [];
  });
}

let pidMaxRead: number | undefined;
/** The largest pid this system gives (/proc/sys/kernel/pid_max; 4194304, Linux's bound, where it does not read). */
function pidMax(): number {
  if (pidMaxRead === undefined) {
    try {
      pidMaxRead = Number(readFileSync("/proc/sys/kernel/pid_max", "utf8").trim()) || 4194304;
    } catch {
      pidMaxRead = 4194304;
    }
  }
  return pidMaxRead;
}

/**
 * Another live kerncap process writing `<base>.tmp-<pid>[-<token>]` (its marker says kerncap made
 * it): its pid and that folder, or undefined. Two runs to one --out would otherwise race, and the
 * one that finished second would lose its capture at the rename.
 */
export function liveTempWriter(base: string): { pid: number; path: string } | undefined {
  const t = tempSiblings(base).find((t) => t.kind === "tmp" && t.pid !== process.pid && pidAlive(t.pid) && madeByKerncap(t.path));
  return t && { pid: t.pid, path: t.path };
}

/**
 * Remove every `<base>.tmp-<pid>` (and `<base>.old-<pid>` when `<base>` itself exists, i.e. the
 * replacement it was kept for is in place) whose pid is gone and that kerncap made (madeByKerncap). Never this process's own, never one
 * whose pid is alive. Errors (a folder that cannot be read or removed) are skipped.
 * @returns the paths removed.
 */
export function removeStaleTemps(base: string, baseExists: boolean): string[] {
  const removed: string[] = [];
  for (const { path: p, kind, pid } of tempSiblings(base)) {
    if (pid === process.pid || pidAlive(pid)) continue;
    // an .old- folder is the previous capture while its replacement is renamed in; without <base> it is the only copy
    if (kind === "old" && !baseExists) continue;
    if (!madeByKerncap(p)) continue; // the user's own folder with a look-alike name
    if (processesWritingInto(p).length) continue; // the application of a killed run still runs and writes there
    try {
      rmSync(p, { recursive: true, force: true });
      removed.push(p);
    } catch {
      /* not ours to remove (permissions): left alone */
    }
  }
  return removed;
}

/**
 * Pids of the processes whose environment names `folder` as the capture library's output
 * (KERNCAP_OUT=folder, as src/env.ts libraryEnv sets it): an application that outlived a killed
 * `kerncap run` (kill -9 leaves its process group running) and may still write there. Read from
 * /proc/<pid>/environ (Linux; processes of other users are unreadable and not counted). [] where
 * /proc is absent.
 */
export function processesWritingInto(folder: string): number[] {
  let pids: string[];
  try {
    pids = readdirSync("/proc").filter((n) => /^\d+$/.test(n));
  } catch {
    return [];
  }
  const want = Buffer.from(`KERNCAP_OUT=${folder}\0`);
  const found: number[] = [];
  for (const pid of pids) {
    if (Number(pid) === process.pid) continue;
    let env: Buffer;
    try {
      env = readFileSync(`/proc/${pid}/environ`);
    } catch {
      continue; // gone, or another user's
    }
    // at the start or after the NUL that ends the previous variable
    if (env.subarray(0, want.length).equals(want) || env.includes(Buffer.concat([Buffer.from([0]), want]))) found.push(Number(pid));
  }
  return found;
}

/** The holder `kerncap clean` moves the part `part` into before removing it: `<part>.tmp-<pid>-<12 hex>` beside it (staleCleanHolder reads it back). */
export function cleanHolderName(part: string): string {
  return `${part}.tmp-${process.pid}-${randomBytes(6).toString("hex")}`;
}

/** The parts a clean's holder is named after at the top of a capture folder (pack leaves a stale one out). */
export const CLEAN_PARTS = ["build", "profile"] as const;

/** The largest pid Linux gives (PID_MAX_LIMIT, 2^22): a name holding a larger one, or one written with a leading zero, is no process's. */
const PID_MAX = 4194304;

/**
 * Whether `path` is the holder a killed `kerncap clean` left beside the part `part` (`build`,
 * `profile`, `eval`): named `<part>.tmp-<pid>-<12 hex>` with a pid as kerncap writes it (no leading
 * zero, at most PID_MAX), whose process is gone (pidAlive), a folder (lstat: no link) of the
 * effective user's with no bit for group or others, as makePrivateTemp makes it. Anything else of
 * such a name is the user's (adversary 36: folders numbered 0, 0099993 or past any pid were removed).
 */
export function staleCleanHolder(path: string, part: string): boolean {
  const m = new RegExp(`^${part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}\\.tmp-([1-9]\\d{0,6})-[0-9a-f]{12}$`).exec(basename(path));
  if (!m || Number(m[1]) > PID_MAX || Number(m[1]) === process.pid || pidAlive(Number(m[1]))) return false;
  const st = lstatSync(path, { throwIfNoEntry: false });
  const uid = process.geteuid?.();
  return st?.isDirectory() === true && (uid === undefined || st.uid === uid) && (st.mode & 0o077) === 0;
}
