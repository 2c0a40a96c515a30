/**
 * Who besides this user may write a file or folder, from its mode bits and group: the one test of
 * "writable by others" for the folders kerncap writes into or runs from (src/cache.ts
 * privateFolderRisk and sharedParentRisk, src/format/what-runs.ts interpreterProblem).
 *
 * A group write bit counts unless the group is this user's private group. Debian's, Ubuntu's and
 * Fedora's useradd give each user a group of their own (USERGROUPS_ENAB), and with it umask 002
 * (pam_umask, login.defs): every folder such a user makes is 0775, group-writable by a group that
 * holds no one else.
 */
import { readFileSync, type Stats } from "node:fs";

const privateGroups = new Map<number, boolean>();

/**
 * Whether group `gid` is this user's private group: the process's own group (getgid), listing no
 * member but this user in /etc/group, and the primary group of no other user in /etc/passwd. A
 * group /etc/group does not list (a directory service's) counts only where its id is the user's id
 * (useradd's convention for a private group). Files that cannot be read: not private.
 * Source: getuid/getgid, /etc/group and /etc/passwd. Cached per gid for the process.
 */
export function isPrivateGroup(gid: number): boolean {
  const known = privateGroups.get(gid);
  if (known !== undefined) return known;
  let answer = false;
  const uid = process.getuid?.();
  const own = process.getgid?.();
  if (uid !== undefined && own !== undefined && gid === own) {
    try {
      answer = privateGroupIn(gid, uid, readFileSync("/etc/passwd", "utf8"), readFileSync("/etc/group", "utf8"));
    } catch {
      answer = false;
    }
  }
  privateGroups.set(gid, answer);
  return answer;
}

/**
 * isPrivateGroup's reading of the user table `passwd` and group table `group` (their /etc file
 * formats) for user `uid` and its own group `gid`: not root's group, no other user's primary
 * group, no member but the user; a group the table lacks only where gid equals uid.
 */
export function privateGroupIn(gid: number, uid: number, passwd: string, group: string): boolean {
  if (gid === 0) return false;
  const users = passwd
    .split("\n")
    .map((l) => l.split(":"))
    .filter((f) => f.length >= 4);
  const me = users.find((f) => Number(f[2]) === uid)?.[0];
  if (users.some((f) => Number(f[3]) === gid && Number(f[2]) !== uid)) return false;
  const entry = group
    .split("\n")
    .map((l) => l.split(":"))
    .find((f) => f.length >= 4 && Number(f[2]) === gid);
  if (!entry) return gid === uid;
  return entry[3]!.split(",").every((m) => !m || m === me);
}

/** How to tell whether a path carries an extended POSIX ACL (src/native/libc.ts hasAccessAcl, set by the CLI: this base module loads no library). */
let aclProbe: ((path: string) => boolean) | undefined;

/** Give othersMayWrite the way to see a path's POSIX ACL (src/cli/main.ts passes src/native/libc.ts hasAccessAcl). */
export function setAclProbe(probe: (path: string) => boolean): void {
  aclProbe = probe;
}

/**
 * Whether a user other than this one (and root) may write `st`: the other-write bit, or the
 * group-write bit of a group that is not this user's private group (isPrivateGroup). With `path`
 * and an extended POSIX ACL on it, the group bits are the ACL's mask, which covers the users and
 * groups it names: a group-write bit then counts whatever the group (a trial shared a 0770 folder
 * of the user's private group with another user through an ACL).
 */
export function othersMayWrite(st: Pick<Stats, "mode" | "gid">, path?: string): boolean {
  if ((st.mode & 0o002) !== 0) return true;
  if ((st.mode & 0o020) === 0) return false;
  return !isPrivateGroup(st.gid) || (path !== undefined && aclProbe !== undefined && aclProbe(path));
}

/**
 * Why a file another local user could have written is not this user's own to read as its records
 * or baseline (their records would be taken as judged), or undefined when it is: it belongs to
 * another user, or othersMayWrite. `st` from lstat or, better, fstat of the fd read (no swap between).
 * @returns "belongs to another user (uid U; you are uid V)" or "can be written by others (mode M)"; undefined off POSIX
 */
export function notOwnFile(st: Pick<Stats, "mode" | "gid" | "uid">, path?: string): string | undefined {
  const uid = process.geteuid?.();
  if (uid === undefined) return undefined;
  if (st.uid !== uid) return `belongs to another user (uid ${st.uid}; you are uid ${uid})`;
  if (othersMayWrite(st, path)) return `can be written by others (mode ${(st.mode & 0o777).toString(8)})`;
  return undefined;
}
