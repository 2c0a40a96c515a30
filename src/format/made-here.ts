/**
 * The seal that makes a capture folder the user's own, made here: written at capture (and by demo)
 * beside the manifest as MADE_HERE_SEAL, an HMAC with the user's own key (./record-auth.ts ownKey:
 * the state folder's results key, else KERNCAP_RESULTS_KEY) over the user's
 * id and the folder itself (its device, inode and birth time: a rename on the same file system
 * keeps them; a copy, an unpacked archive or a folder extracted from another user's tar has
 * others). The seal vouches for the folder, not for what is put in it: what the user edits, copies
 * or extracts into a sealed folder is the user's (adversary 59: a tar extracted over one keeps its
 * seal; docs/security.md says so), and a folder others may write is received by its modes
 * (src/format/received.ts notYours). A manifest's host and machine id say where a capture was
 * made, but any local user can write them (/etc/machine-id is world-readable; the id kerncap makes
 * where there is none was in every manifest, adversary 57 #33): the seal is what no one without the
 * user's key can make, so a folder another user hands over with tar (its files then the
 * receiver's) counts as received whatever its manifest says (src/format/received.ts). Without a
 * key no seal is written and no capture counts as made here.
 */
import { closeSync, constants, fstatSync, openSync, readSync, rmSync, statSync, writeSync } from "node:fs";
import { writeFileAtomic } from "../util/write-file.ts";
import { join } from "node:path";
import { authenticatorOf, ownKey, recordAuthProblem, type ResultsKey } from "./record-auth.ts";
import { MADE_HERE_SEAL } from "./file-names.ts";

export { MADE_HERE_SEAL };

const SCHEMA = "kerncap.made-here/1";
/** The seal file's size bound (bytes): one JSON line of ~120 bytes. */
const SEAL_MAX_BYTES = 4096;

/** What the seal's MAC covers: the folder's identity (device, inode, birth time in ns; 0 where the file system keeps none) and the user's id. */
function sealBody(dir: string): Record<string, unknown> {
  const st = statSync(dir, { bigint: true });
  return {
    folder: { dev: st.dev.toString(), ino: st.ino.toString(), birth: st.birthtimeNs.toString() },
    uid: process.geteuid?.() ?? null,
  };
}

/**
 * Write the made-here seal of the complete capture folder `dir` (before the rename that puts it in place, which keeps the folder's identity), mode 0600, created anew
 * (O_EXCL|O_NOFOLLOW: `dir` is kerncap's own temporary folder). `key`: the user's own key (ownKey);
 * none (no state folder of the user's own, no KERNCAP_RESULTS_KEY) writes nothing, and the capture
 * counts as received.
 * @returns whether a seal was written
 * @throws the system error of a failed write
 */
export function sealMadeHere(dir: string, key: ResultsKey | undefined = ownKey()): boolean {
  if (!key) return false;
  const auth = authenticatorOf(SCHEMA, sealBody(dir), key);
  rmSync(join(dir, MADE_HERE_SEAL), { force: true }); // none but the one written here (a file of that name the run left)
  const fd = openSync(join(dir, MADE_HERE_SEAL), constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    writeSync(fd, `${JSON.stringify({ schema: SCHEMA, auth })}\n`);
  } finally {
    closeSync(fd);
  }
  return true;
}

/**
 * Seal `dir` anew as the user's own capture, made here (a copy of one of the user's captures, or one
 * made before seals, that the user has just trusted with --trust: src/format/trust.ts): the seal for
 * this folder written whole over any other (an unguessable temp renamed over the name, no link
 * followed), mode 0600.
 * @returns whether a seal was written (none without a key)
 * @throws KerncapError E_UNSAFE_PATH (the name a link), the system error of a failed write
 */
export function resealMadeHere(dir: string, key: ResultsKey | undefined = ownKey()): boolean {
  if (!key) return false;
  const auth = authenticatorOf(SCHEMA, sealBody(dir), key);
  // the old one removed first (a link removed, not followed): the new one's bits are 0600, not those of the file it replaces
  rmSync(join(dir, MADE_HERE_SEAL), { force: true });
  writeFileAtomic(join(dir, MADE_HERE_SEAL), `${JSON.stringify({ schema: SCHEMA, auth })}\n`, { mode: 0o600 });
  return true;
}

/**
 * Why the capture folder `dir` holds no made-here seal of this user's for this very folder (a phrase for inspect and E_UNTRUSTED), or undefined when it does. The seal
 * is read with no link followed (O_NOFOLLOW|O_NONBLOCK: a FIFO is refused, never waited on) and
 * taken only as a regular file of the user's that no one else may write.
 */
export function notSealedHere(dir: string, key: ResultsKey | undefined = ownKey()): string | undefined {
  if (!key) return "kerncap has no results key of yours to seal your captures with (no state folder of your own, no KERNCAP_RESULTS_KEY)";
  let text: string;
  try {
    const fd = openSync(join(dir, MADE_HERE_SEAL), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    try {
      const st = fstatSync(fd);
      const uid = process.geteuid?.();
      if (!st.isFile() || (uid !== undefined && st.uid !== uid) || st.mode & 0o022 || st.size > SEAL_MAX_BYTES)
        return `its ${MADE_HERE_SEAL} is not a file of yours only you may write`;
      const b = Buffer.alloc(st.size);
      const n = readSync(fd, b, 0, b.length, 0);
      text = b.subarray(0, n).toString("utf8");
    } finally {
      closeSync(fd);
    }
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === "ENOENT")
      return `it holds no seal of yours (${MADE_HERE_SEAL}: kerncap writes one where it captures; a folder from another user, an archive, or one made by a kerncap before seals has none)`;
    return `its ${MADE_HERE_SEAL} cannot be read (${code === "ELOOP" ? "a symbolic link" : (code ?? "error")})`;
  }
  let rec: unknown;
  try {
    rec = JSON.parse(text);
  } catch {
    return `its ${MADE_HERE_SEAL} is not one kerncap writes`;
  }
  if (!rec || typeof rec !== "object" || (rec as { schema?: unknown }).schema !== SCHEMA) return `its ${MADE_HERE_SEAL} is not one kerncap writes`;
  const problem = recordAuthProblem(SCHEMA, { ...sealBody(dir), schema: SCHEMA, auth: (rec as { auth?: unknown }).auth }, key);
  if (!problem) return undefined;
  if (problem.startsWith("it was written under another results key")) return `its seal was made under another results key than yours`;
  return "its seal is not for this folder (a copy: cp, tar, rsync; or a folder moved to another file system)";
}
