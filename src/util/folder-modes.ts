/**
 * The modes and group of a folder kerncap wrote (a capture, a demo, an unpacked archive, an
 * export), settled once it is complete, before it is renamed into place: what the user's umask
 * and the parent folder ask of new files, applied the same by every writer.
 *
 * - The umask: every entry loses the bits the umask takes, with group and other write always
 *   taken (a group-writable capture counts as received: src/format/received.ts); nothing gains a
 *   bit (a 0600 build log stays 0600). Under umask 022 folders are 0755 and files 0644 (0755 for
 *   build.sh); under umask 077 the whole folder is private (0700, 0600).
 * - A setgid parent (a team folder, 2770 or 3770 root:team): every entry gets the parent's group
 *   and every folder the setgid bit, as mkdir and open give them in that folder. kerncap writes a
 *   folder into a private 0700 temp first, whose chmod clears the setgid bit its mkdir inherited,
 *   so without this only the top folder was the team's (trial 11 #9).
 */
import { chmodSync, lchownSync, lstatSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";

/** The permission bits kerncap takes from everything it writes: the umask's, and group and other write. */
export function writeMask(): number {
  return process.umask() | 0o022;
}

/**
 * Settle the modes (and, under a setgid parent, the group) of every entry of `folder`, its own
 * mode included, that this user owns; links and others' entries are left alone, none is followed.
 * `folder` is the complete temp folder (a path, or the /proc/self/fd path of a held one:
 * src/util/write-file.ts PrivateTemp.at), `parent` the folder it is about to be renamed into.
 * Best effort: an entry whose chmod or chown fails (a group the user is not in) keeps its mode.
 */
export function settleFolderModes(folder: string, parent: string): void {
  const mask = writeMask();
  let gid: number | undefined;
  try {
    const p = statSync(parent);
    if (p.mode & 0o2000) gid = p.gid;
  } catch {
    /* a parent we cannot stat: the umask alone */
  }
  const uid = process.geteuid?.();
  // the folder itself may be reached through /proc/self/fd/N (a magic link to it): stat'ed, its entries lstat'ed
  const settle = (path: string, top = false) => {
    const st = (top ? statSync : lstatSync)(path, { throwIfNoEntry: false });
    if (!st || st.isSymbolicLink() || (uid !== undefined && st.uid !== uid)) return;
    const dir = st.isDirectory();
    try {
      if (gid !== undefined && st.gid !== gid) lchownSync(path, -1, gid);
      chmodSync(path, (st.mode & 0o777 & ~mask) | (dir && gid !== undefined ? 0o2000 : 0));
    } catch {
      /* kept as it is */
    }
    if (dir) for (const name of readdirSync(path)) settle(join(path, name));
  };
  settle(folder, true);
}
