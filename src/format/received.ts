/**
 * Whether a capture folder is **received** (not the user's own): one that `kerncap unpack` wrote (it
 * leaves RECEIVED_MARK in the folder, after the archive's own files, so an archive can neither carry
 * nor remove it), one inside such a folder, one with a file another user owns or may write, or one
 * whose manifest does not name this machine's id (manifest.host.machineId, /etc/machine-id recorded
 * at capture: another machine's, none, or no host at all; a host name is never enough, and on a
 * machine without a machine-id every capture is received). A received capture's build runs only
 * once the user trusts it (the gate: src/format/trust.ts requireTrustedBuild).
 */
import {
  accessSync,
  closeSync,
  constants,
  fstatSync,
  lstatSync,
  openSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  writeSync,
  type Stats,
} from "node:fs";
import { hostname } from "node:os";
import { randomBytes } from "node:crypto";
import { basename, dirname, join, posix } from "node:path";
import { MANIFEST_FILE, type Manifest } from "./manifest.ts";
import { MADE_HERE_SEAL, RECEIVED_MARK } from "./file-names.ts";
import { notSealedHere } from "./made-here.ts";
import { readInCapture, shownPath, treeEntries, writeInCapture } from "./paths.ts";
import { frontendRunFiles } from "./run-files.ts";
import { stateDir } from "./trust-records.ts";
import { TOOL_VERSION } from "../version.ts";
import { sharedParentRisk } from "../cache.ts";
import { log } from "../log.ts";
import { readEnv, receivedSetting } from "../env.ts";
import { KerncapError } from "../errors.ts";
import { escapeForTerminal, jsonText } from "../escape.ts";

/** The file `kerncap unpack` writes into every folder it unpacks. */
export { RECEIVED_MARK };

/**
 * This machine as a manifest records it: os.hostname() and its id: /etc/machine-id (machine-id(5)),
 * else /var/lib/dbus/machine-id, else an id kerncap made once for this user on this machine
 * (32 random hex digits in the user's own state folder, `machine-id`: containers often have no
 * machine-id, and without one no capture of theirs would count as made here); null where none of
 * them can be had (no state folder of the user's own); and the effective uid of the user who made it.
 */
export function hostIdentity(): { name: string; machineId: string | null; uid?: number } {
  // the user who made it (effective uid): a copy of another user's capture (cp -r) is no capture made here by you
  const uid = process.geteuid?.();
  const who = uid === undefined ? {} : { uid };
  for (const f of ["/etc/machine-id", "/var/lib/dbus/machine-id"]) {
    try {
      const id = readFileSync(f, "utf8").trim();
      if (/^[0-9a-f]{32}$/.test(id)) return { name: hostname(), machineId: id, ...who };
    } catch {
      /* the next one */
    }
  }
  return { name: hostname(), machineId: kerncapMachineId(), ...who };
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

/**
 * Write RECEIVED_MARK into `dir` (unpack, before its rename; replaces any file of that name the
 * archive held): the archive's file name (not its folder: an MCP agent reads the mark, and the
 * user's folders outside the capture are none of its business), when, the host's name (never its
 * machine-id: a folder sent on with its mark would give the id that makes a capture count as made
 * here), kerncap's version; and the manifest's `host.machineId` set to null, as kerncap pack ships
 * it (a hand-made archive may name this machine's id: a copy of the folder without the mark would
 * then count as made here).
 */
export function markReceived(dir: string, archive: string): void {
  withoutMachineId(dir);
  rmSync(join(dir, MADE_HERE_SEAL), { force: true }); // a seal an archive carries is none of the recipient's (pack leaves the packer's out)
  // and a nested capture's (a set's member, an older capture kept inside): moved out, it would count as the recipient's copy
  // of their own (adversary 61: a member's manifest named this machine and user; plain --trust sealed it as theirs)
  for (const sub of nestedFolders(dir)) {
    try {
      withoutMachineId(sub);
    } catch {
      /* a kerncap.json that is no JSON: no capture, nothing to count as made here */
    }
    rmSync(join(sub, MADE_HERE_SEAL), { force: true });
  }
  writeInCapture(
    dir,
    RECEIVED_MARK,
    jsonText(
      { schema: "kerncap.received/1", archive: basename(archive), at: new Date().toISOString(), by: { name: hostIdentity().name }, kerncap: TOOL_VERSION },
      2,
    ) + "\n",
  );
}

/**
 * What in the capture folder is not the user's own (a phrase), or undefined: each of owned() that
 * exists must belong to the user running kerncap (the effective uid) and be writable by no one else
 * (neither group nor other write bit). A folder another local user hands over (in /tmp, say) is
 * that user's, whatever its manifest says about the host: its build.sh is theirs to write. A
 * group-writable one (a team's shared folder) is every group member's to write, so it is received
 * too: a member who appends a line to build.sh in place leaves its owner unchanged. The files and
 * folders under src/ are held to the same rule (notYoursUnderSrc): the build compiles them. So is
 * the way to the folder (src/cache.ts sharedParentRisk): a folder above it that others may rename
 * entries of (group- or world-writable, not sticky) lets them put their own folder at its name.
 */
/** What a rebuild runs, imports or reads commands from: the folder, build.sh, src/, every frontend's run files (src/format/run-files.ts: Triton's pinned.json, which names the interpreter, and repro.py), the manifest, and build/ with the pruned build's plan (its commands run as written). */
const owned = () => [".", "build.sh", "src", ...frontendRunFiles(), "kerncap.json", "build", "build/pruned", "build/pruned/plan.json"];

export function notYours(dir: string): string | undefined {
  const uid = process.geteuid?.() ?? process.getuid?.();
  if (uid === undefined) return undefined;
  // the folder is taken by its name again at every step of a build (the pruned build's dry run runs
  // DIR/build.sh by name): a folder above it that others may rename entries of lets them swap the
  // whole capture for theirs after every check here (trial 24: renameat2 RENAME_EXCHANGE in a 2770 team folder)
  const swap = sharedParentRisk(dir, uid);
  if (swap) return `another user could swap the folder for theirs by its name (${swap})`;
  for (const name of owned()) {
    let st;
    try {
      // the folder itself through any link to it (a link of yours to another user's folder is theirs); what is inside, as it lies
      st = name === "." ? statSync(dir) : lstatSync(join(dir, name));
    } catch {
      continue; // absent: nothing of it runs
    }
    const theirs = notOwnEntry(name === "." ? "the folder" : name, st, uid);
    if (theirs) return theirs;
  }
  return notYoursUnderSrc(dir, uid);
}

/** The most files and folders under src/ notYours looks at; past it the capture counts as received (not every one was seen to be the user's alone). */
export const SRC_OWNED_MAX_ENTRIES = 20000;

/**
 * Why one file or folder `what` (a phrase naming it) with lstat `st` is not the user's `uid` (default: the effective uid) alone, or
 * undefined: another user owns it, or every user or its group may write it. A link's own mode bits mean nothing (always 0777): its owner only.
 * `could`: what a group member could then do, said after "who could" (default: change what the build runs).
 */
export function notOwnEntry(
  what: string,
  st: Stats,
  uid: number | undefined = process.geteuid?.() ?? process.getuid?.(),
  could = "change what the build runs",
): string | undefined {
  if (uid === undefined) return undefined;
  if (st.uid !== uid) return `${what} belongs to another user (uid ${st.uid}; you are uid ${uid})`;
  if (st.isSymbolicLink()) return undefined;
  if (st.mode & 0o002) return `${what} can be written by every user (mode ${(st.mode & 0o7777).toString(8)})`;
  if (st.mode & 0o020) return `${what} can be written by every member of its group (gid ${st.gid}, mode ${(st.mode & 0o7777).toString(8)}), who could ${could}`;
  return undefined;
}

/**
 * notYours for every file and folder under `dir`/src (walked without following a link, at most
 * SRC_OWNED_MAX_ENTRIES): the build compiles them, so one a group member may edit in place (its
 * owner still the user) changes what the user compiles, and may `#include` a private file of the
 * user's that the compiler's messages then quote (trial 20). The first one that is not the user's
 * alone, named (src/…, escaped as shownPath does) with why; undefined when src/ is no folder.
 */
function notYoursUnderSrc(dir: string, uid: number): string | undefined {
  let src: Stats;
  try {
    src = lstatSync(join(dir, "src"));
  } catch {
    return undefined;
  }
  if (!src.isDirectory()) return undefined;
  let seen = 0;
  for (const { rel, st } of treeEntries(dir, "src")) {
    if (++seen > SRC_OWNED_MAX_ENTRIES) return `src/ holds more than ${SRC_OWNED_MAX_ENTRIES} files and folders, too many to check that each is yours alone`;
    const theirs = notOwnEntry(shownPath(rel), st, uid);
    if (theirs) return theirs;
  }
  return undefined;
}

/** The most files and folders of the capture's data (notYoursData) looked at; past it the capture counts as received. */
export const DATA_OWNED_MAX_ENTRIES = 20000;

/**
 * The top-level entries of the capture that kerncap reads as data, replays and judges against (a
 * build runs none of them): memory/ and kernel/, and the first part of every path the manifest
 * names (its parameter and module files, memory images, files[]), less those notYours covers.
 */
function dataEntries(m: Manifest): string[] {
  const named = [m.params?.file, m.module?.file, m.memory?.before, m.memory?.after, ...(m.files ?? []).map((f) => f.path)];
  const tops = new Set(["memory", "kernel"]);
  for (const p of named) {
    const top = typeof p === "string" ? posix.normalize(p).split("/")[0] : undefined;
    if (top && top !== "." && top !== "..") tops.add(top);
  }
  const run = new Set(owned());
  return [...tops].filter((t) => !run.has(t)).sort();
}

/**
 * What of the capture's data (dataEntries: memory/, kernel/, what the manifest names) is not the
 * user's alone, or undefined: each entry and every file and folder under it (walked without
 * following a link, lstat only: a memory image is never read here; at most DATA_OWNED_MAX_ENTRIES)
 * must be the user's and writable by no one else (notOwnEntry). memory/after.bin is the reference
 * every replay is judged against and kernel/ holds the module it runs: another user who may
 * replace them chooses what "correct" means (trial 22). The first one found, named (escaped as
 * shownPath does) with why.
 */
export function notYoursData(dir: string, m: Manifest, uid: number | undefined = process.geteuid?.() ?? process.getuid?.()): string | undefined {
  if (uid === undefined) return undefined;
  const could = "change what a replay runs or is judged against";
  let seen = 0;
  for (const top of dataEntries(m)) {
    let st: Stats;
    try {
      st = lstatSync(join(dir, top));
    } catch {
      continue; // absent: the replay's own checks say so
    }
    const theirs = notOwnEntry(shownPath(top), st, uid, could);
    if (theirs) return theirs;
    if (!st.isDirectory()) continue;
    for (const e of treeEntries(dir, top)) {
      if (++seen > DATA_OWNED_MAX_ENTRIES)
        return `the capture's data (${dataEntries(m).join(", ")}) holds more than ${DATA_OWNED_MAX_ENTRIES} files and folders, too many to check that each is yours alone`;
      const t = notOwnEntry(shownPath(e.rel), e.st, uid, could);
      if (t) return t;
    }
  }
  return undefined;
}

/**
 * The nearest folder above `dir` that holds RECEIVED_MARK: a capture nested inside an unpacked
 * archive (an archive of a folder of captures) is received too, though only the archive's top
 * folder was marked. Only a mark of the user's own counts (another user's says nothing of the
 * user's folders below it). Undefined when none is, up to the file system's root.
 */
function receivedAncestor(dir: string): string | undefined {
  let p: string;
  try {
    p = realpathSync(dir);
  } catch {
    return undefined;
  }
  const uid = process.getuid?.();
  for (let up = dirname(p); up !== p; p = up, up = dirname(up)) {
    try {
      const st = lstatSync(join(up, RECEIVED_MARK));
      // the user's own unpack wrote it; one of another user's (planted in a shared folder above the user's captures) says
      // nothing of them (adversary 61: every capture below read as received, its judging settings unused)
      if (st.isFile() && (uid === undefined || st.uid === uid)) return up;
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
export function notMadeHere(
  m: Pick<Manifest, "host" | "process">,
  here: { name: string; machineId: string | null; uid?: number } = hostIdentity(),
): string | undefined {
  if (!here.machineId)
    return "this machine has no machine-id (/etc/machine-id) and kerncap keeps none for you (no state folder of your own), so no capture counts as made here";
  if (!m.host)
    return m.process
      ? `its manifest records no host machine-id (the capturing process's host name ${JSON.stringify(m.process.hostname)} is not enough)`
      : "its manifest records no host";
  if (!m.host.machineId)
    return `its manifest names host ${JSON.stringify(m.host.name)} but no machine-id (an archive and an export carry none: pack leaves it out)`;
  if (m.host.machineId !== here.machineId) return `its manifest says host ${JSON.stringify(m.host.name)} made it, under another machine-id than this machine's`; // neither id printed: the id is what makes a capture local
  // another user of this machine made it: a copy of theirs (cp -r keeps the manifest, and makes every file yours) is theirs (trial 11)
  if (typeof m.host.uid === "number" && here.uid !== undefined && m.host.uid !== here.uid)
    return `its manifest says another user of this machine (uid ${m.host.uid}) made it: a copy of their capture`;
  return undefined;
}

/**
 * Every reason `dir` counts as a received capture (phrases, in this order: the received mark, a
 * received folder above it, a file its build runs that is not the user's own (notYours), a file of
 * its data that is not (notYoursData), a manifest that does not name
 * this machine's id; KERNCAP_RECEIVED=1, first: every capture, as a CI job over a pull request's
 * checkout wants), empty when it was made here by this user. What `kerncap inspect` shows, and
 * what E_UNTRUSTED names. `here`: this machine (hostIdentity()).
 */
export function receivedReasons(dir: string, m: Manifest, here = hostIdentity()): string[] {
  const why: string[] = [];
  // a CI job over a pull request's checkout: its files are the runner's and its manifest names the runner's machine, whoever wrote them (nu13 #5)
  const forced = receivedSetting();
  if ("invalid" in forced)
    throw new KerncapError(
      "E_USAGE",
      `KERNCAP_RECEIVED=${escapeForTerminal(JSON.stringify(forced.invalid), { oneLine: true })} is neither on (1, true, yes, on) nor off (0, false, no, off, empty)`,
      {
        hint: "Set KERNCAP_RECEIVED=1 to count every capture as received (a CI job over a pull request's checkout), or unset it.",
      },
    );
  if (forced.on)
    why.push(`KERNCAP_RECEIVED=${escapeForTerminal((readEnv("KERNCAP_RECEIVED") ?? "").trim(), { oneLine: true })} is set: every capture counts as received`);
  try {
    if (readInCapture(dir, RECEIVED_MARK, 1 << 16)) why.push("it was unpacked from an archive");
  } catch {
    why.push(`${RECEIVED_MARK} is there but is not a regular file`);
  }
  const inside = receivedAncestor(dir);
  if (inside) why.push(`it lies inside ${inside}, which was unpacked from an archive`);
  const theirs = notYours(dir);
  if (theirs) why.push(theirs);
  const data = notYoursData(dir, m);
  if (data) why.push(data);
  const elsewhere = notMadeHere(m, here);
  if (elsewhere) why.push(elsewhere);
  // what any local user can write (the host, the machine id, the uid) is not enough: the seal only the user's key makes (adversary 57 #33)
  const unsealed = elsewhere ? undefined : notSealedHere(dir);
  if (unsealed) why.push(`${SEAL_REASON}${unsealed}`);
  return why;
}

/** How receivedReasons begins the reason of a capture whose manifest names this machine and user but that holds no seal of the user's for its folder. */
const SEAL_REASON = "its manifest names this machine, but ";

/**
 * Whether the only reason `dir` counts as received is its seal (receivedReasons): its manifest
 * names this machine and the user, every file is the user's alone, no archive made it, but it
 * holds no seal of the user's for this very folder — a copy of a capture of the user's (cp -r), one
 * moved to another file system, one made before kerncap sealed captures, or a folder another user
 * handed over naming the user. Once the user trusts its build (--trust), kerncap seals it as the
 * user's (src/format/trust.ts requireTrustedBuild): later builds take it as made here.
 */
export function onlyUnsealed(dir: string, m: Manifest, here = hostIdentity()): boolean {
  const why = receivedReasons(dir, m, here);
  return why.length === 1 && why[0]!.startsWith(SEAL_REASON);
}

/** Why `dir` is a received capture (receivedReasons, joined with "; "), or undefined when it was made here by this user. */
export function receivedBecause(dir: string, m: Manifest): string | undefined {
  const why = receivedReasons(dir, m);
  return why.length ? why.join("; ") : undefined;
}

/** The folders whose --no-verify was overridden in this process (checksumsChecked warns once for each). */
const verifiedAnyway = new Set<string>();

/**
 * Whether a replay of `dir` (replay, validate, check, eval, kerncap mcp) checks the capture's
 * checksums (the small files' SHA-256, every memory chunk's kc64): `verify` as asked (false:
 * --no-verify, MCP noVerify), but always for a received capture (receivedReasons): its
 * memory/after.bin, the reference the replay is judged against, and its kernel/ are another's to
 * change, and the checksums are what notices. Where --no-verify is overridden, one warning per
 * folder and process says why, naming the capture `name` (default DIR; check names the archive).
 */
export function checksumsChecked(dir: string, m: Manifest, verify: boolean, name = dir): boolean {
  if (verify) return true;
  const why = receivedReasons(dir, m);
  if (!why.length) return false;
  if (!verifiedAnyway.has(dir)) {
    verifiedAnyway.add(dir);
    log.warn(
      `${name} is a received capture (${why.join("; ")}): its checksums are checked though --no-verify was given (it is honoured for your own captures only)`,
    );
  }
  return true;
}

/** Every folder below `dir` (not `dir`), no link followed: unpack's private folder, which it just wrote. */
function nestedFolders(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true }))
      if (e.isDirectory()) {
        out.push(join(d, e.name));
        walk(join(d, e.name));
      }
  };
  walk(dir);
  return out;
}

/**
 * The unpacked manifest as kerncap pack ships one: `host.machineId` null. An archive kerncap packs
 * has it so already; one made by hand may name this machine's id, and a copy of the folder without
 * unpack's mark would then count as made here (trial 19). `dir` is unpack's private folder.
 */
function withoutMachineId(dir: string): void {
  const text = readInCapture(dir, MANIFEST_FILE, 64 << 20);
  if (!text) return;
  const m = JSON.parse(text.toString("utf8"));
  if (m?.host && typeof m.host === "object" && m.host.machineId != null) {
    m.host.machineId = null;
    writeInCapture(dir, MANIFEST_FILE, `${jsonText(m, 2)}\n`);
  }
}

/**
 * The first of the capture folder `dir` and its build/ that this process may not write (a
 * read-only copy or mount, another user's folder), with access(2)'s code (EACCES, EROFS), or
 * undefined when both may be written (or build/ is not there yet). A rebuild writes under build/:
 * validate and tune refuse such a folder (src/frontends/build.ts assertRebuildWritable), eval
 * builds its candidates in a private folder instead (src/eval/copies.ts).
 */
export function unwritableFolder(dir: string): { path: string; code: string } | undefined {
  for (const path of [dir, join(dir, "build")]) {
    try {
      accessSync(path, constants.W_OK);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code ?? "EACCES";
      if (code !== "ENOENT") return { path, code };
    }
  }
  return undefined;
}
