/**
 * The user's record of trusted builds, kept outside every capture, in the user's state folder
 * ($XDG_STATE_HOME/kerncap/trusted-builds.json, else ~/.local/state/kerncap/), keyed by the
 * folder's real path, its device and inode numbers (a folder removed and made again by someone
 * else at that path is another folder) and the digest of what runs (src/format/what-runs.ts: a
 * change asks again). A folder someone else made cannot carry that record; the state folder is
 * used only when it is the user's own and nobody else can write it.
 */
import { existsSync, lstatSync, mkdirSync, realpathSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { isAbsolute, join } from "node:path";
import { privateFolderRisk } from "../cache.ts";
import { readInCapture, writeInCapture } from "./paths.ts";
import { log } from "../log.ts";

/** The record's file name in the state folder. */
export const TRUST_FILE = "trusted-builds.json";

/** Why stateDir() last gave no folder (for the warning). */
let risk: string | undefined;
/**
 * The state folder holding the trust record, when no other user can swap it: every folder from /
 * down to it the user's or root's, none that others can write on the way (a sticky one only above
 * a folder of the user's), the folder itself the user's alone. The same test as the cache folder's
 * (src/cache.ts privateFolderRisk), made before the folder is created and again after.
 */
export function stateDir(env = process.env): string | undefined {
  const xdg = env.XDG_STATE_HOME && isAbsolute(env.XDG_STATE_HOME) ? env.XDG_STATE_HOME : undefined;
  const home = env.HOME || homedir();
  const base = xdg ?? join(home, ".local", "state");
  const dir = join(base, "kerncap");
  // a home folder that does not exist is not made (a service user's HOME=/nonexistent is meant not to exist: trial 8)
  if (!xdg && !existsSync(home)) {
    risk = `your home folder ${home} does not exist (HOME), and XDG_STATE_HOME is not set`;
    return undefined;
  }
  try {
    risk = privateFolderRisk(dir);
    if (risk) return undefined;
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    risk = lstatSync(dir).isDirectory() ? privateFolderRisk(dir) : `${dir} is not a folder`;
    return risk ? undefined : dir;
  } catch (e) {
    risk = `${dir} cannot be made (${(e as Error).message})`;
    return undefined;
  }
}

/** Why stateDir() last gave no folder (a phrase, for the warning), undefined when it gave one. */
export function stateFolderRisk(): string | undefined {
  return risk;
}

/** One trusted build as recorded: the folder (trustKey) and when it was trusted (ISO 8601). */
export interface TrustRecord {
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

/** Whether a record's folder is still the one it names (the same device and inode at its path): else it can match nothing again. */
function stillThere(r: TrustRecord): boolean {
  try {
    const st = statSync(r.dir);
    return st.dev === r.dev && st.ino === r.ino;
  } catch {
    return false;
  }
}

/** The state files whose refusal was said (once each per process). */
const saidRisk = new Set<string>();

/**
 * Why a record file of the state folder (`name`: the trust records, the accepted judging settings)
 * is not taken as the user's own, or undefined: it is not a regular file, another user owns it, or
 * another may write it: a group or others write bit, which an ACL granting another user write access
 * shows as its mask (adversary 52: a `user:attacker:rw` ACL on trusted-builds.json let that user
 * write a record that ran their build.sh). Said once as a warning when it is refused.
 */
export function stateFileRisk(state: string, name: string): string | undefined {
  const path = join(state, name);
  let risk: string | undefined;
  try {
    const st = lstatSync(path);
    const uid = process.geteuid?.();
    if (!st.isFile()) risk = `${path} is not a regular file`;
    else if (uid !== undefined && st.uid !== uid) risk = `${path} belongs to another user (uid ${st.uid})`;
    else if (st.mode & 0o022) risk = `${path} can be written by others (mode ${(st.mode & 0o777).toString(8)}, an ACL's mask included; 600 expected)`;
  } catch {
    return undefined; // absent: nothing to take
  }
  if (risk && !saidRisk.has(path)) {
    saidRisk.add(path);
    log.warn(`${risk}: none of its records is taken (fix: chmod 600 ${path}; setfacl -b ${path})`);
  }
  return risk;
}

/** The records in `state`'s record file; none when it is absent, damaged, or may be another user's (stateFileRisk). */
export function readRecords(state: string): TrustRecord[] {
  if (stateFileRisk(state, TRUST_FILE)) return [];
  try {
    const doc = JSON.parse(readInCapture(state, TRUST_FILE, 16 << 20)?.toString("utf8") ?? "{}");
    return Array.isArray(doc?.builds) ? doc.builds : [];
  } catch {
    return []; // a damaged record trusts nothing
  }
}

/** What a trust record is keyed by: the folder's real path, device and inode, and the digest of what runs (WhatRuns). */
export function trustKey(dir: string, runs: string): Omit<TrustRecord, "at"> {
  const st = statSync(dir);
  return { dir: realpathSync(dir), dev: st.dev, ino: st.ino, uid: st.uid, birth: Math.round(st.birthtimeMs || 0), runs };
}

/** Whether a stored record is the one of `key`: the same folder (path, device, inode, owner, birth time) and the same digest. */
export function sameTrustKey(r: TrustRecord, key: Omit<TrustRecord, "at">): boolean {
  return r.dir === key.dir && r.dev === key.dev && r.ino === key.ino && r.uid === key.uid && r.birth === key.birth && r.runs === key.runs;
}

/** Write the record of `key` over any earlier one of its folder. */
export function remember(state: string, records: TrustRecord[], key: Omit<TrustRecord, "at">): void {
  // a record of a folder that is gone, or is another folder now (another device or inode), trusts nothing: dropped
  // (trial 8: 1410 of 1865 records on a CI machine named folders long removed, and the file only grew)
  const kept = records.filter((r) => r.dir !== key.dir && stillThere(r));
  writeInCapture(
    state,
    TRUST_FILE,
    JSON.stringify({ schema: "kerncap.trusted-builds/1", builds: [...kept, { ...key, at: new Date().toISOString() }] }, null, 1) + "\n",
    0o600,
  );
}
