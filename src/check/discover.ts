/**
 * The captures under the folders given to `kerncap check`: capture folders (a kerncap.json
 * inside), archives written by `kerncap pack`, and folders holding either at any depth (a capture
 * set, a corpus tree). A folder or archive being written (`X.tmp-<pid>`: src/leftovers.ts) and other files are
 * passed over; a `.zip` that kerncap did not write is named among the passed-over. Symbolic links
 * are followed, each folder visited once (a link loop ends), but only links of the user's own or
 * root's: another user's link in a shared corpus (a 1777 folder) would lead the walk into the
 * user's private folders, and their captures' names into the results (a trial); it is passed over.
 *
 * A capture's identity is the base name of the argument it was found under, then its path below
 * it ('/'-separated), an archive's `.zip` dropped: the same on every node that holds the corpus
 * under the same layout, whatever the mount point, and unchanged by packing a capture. It keys the
 * shard (src/check/shard.ts), the baseline and the results. Of copies of one identity that differ
 * in owner the user's own is kept (another user's `.zip` beside the user's folder is passed over,
 * with a warning); two of the user's own are refused; copies none of which is the user's are all
 * passed over with a warning. A folder whose kerncap.json belongs to another user (not root) is
 * their capture, and the folders and archives of the user's own inside it are walked too: another
 * user's kerncap.json at the root of a shared corpus hides none of the user's captures.
 */
import { existsSync, lstatSync, readdirSync, realpathSync, statSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { KerncapError } from "../errors.ts";
import { isTempName } from "../leftovers.ts";
import { beginsAsPackArchive, isPackArchive } from "../format/archive.ts";
import { MANIFEST_FILE } from "../format/manifest.ts";
import { assertNotNested } from "../format/capture-dir.ts";
import { didYouMean } from "../format/near-names.ts";

export interface CaptureRef {
  id: string;
  /** Absolute path of the capture folder or archive. */
  path: string;
  kind: "folder" | "archive";
}

export interface Discovery {
  /** Sorted by identity. */
  captures: CaptureRef[];
  /** What was passed over, and why (junk a user may want to know about); `warn`: said as a warning (another user's copy of a capture of the user's). */
  passedOver: { path: string; reason: string; warn?: boolean }[];
}

const ARCHIVE_SUFFIX = ".zip";
/** `X.tmp-<pid>` / `X.old-<pid>` (src/leftovers.ts tempFor): being written, or left by a killed kerncap. */
const isTemp = (name: string) => isTempName(name) || /\.old-\d+$/.test(name);
const idName = (name: string) => (name.endsWith(ARCHIVE_SUFFIX) ? name.slice(0, -ARCHIVE_SUFFIX.length) : name);

/**
 * The names in folder `dir`, each read as bytes: a name that is not UTF-8 is passed over, said so
 * (Bun reads names as UTF-8 and puts U+FFFD for each byte that is not: the name it gives is another
 * file's, or none; adversary 68: a capture so named was called "a dangling symbolic link").
 * @throws the listing's error (EACCES…)
 */
function utf8Names(dir: string, passedOver: Discovery["passedOver"]): string[] {
  const names: string[] = [];
  const utf8 = new TextDecoder("utf-8", { fatal: true });
  for (const raw of readdirSync(dir, { encoding: "buffer" })) {
    try {
      names.push(utf8.decode(raw));
    } catch {
      passedOver.push({
        path: join(dir, raw.toString("latin1")),
        reason: "its name is not UTF-8 (the bytes shown as Latin-1): kerncap cannot name it; rename it to a UTF-8 name",
        warn: true,
      });
    }
  }
  return names;
}

/**
 * Every capture under `roots` (folders, capture folders or archives).
 * @throws KerncapError E_USAGE for a root that does not exist or is neither a folder nor an
 *   archive, for two captures with one identity of one owner (naming both; oneOfEachIdentity)
 */
export async function discoverCaptures(roots: string[]): Promise<Discovery> {
  const captures: CaptureRef[] = [];
  const passedOver: Discovery["passedOver"] = [];
  const seen = new Set<string>();
  const walk = async (dir: string, id: string) => {
    let real: string;
    try {
      real = realpathSync(dir);
    } catch {
      return void passedOver.push({ path: dir, reason: "a dangling symbolic link" });
    }
    if (seen.has(real)) return;
    seen.add(real);
    let mineOnly = false;
    if (existsSync(join(dir, MANIFEST_FILE))) {
      captures.push({ id, path: dir, kind: "folder" });
      // another user's kerncap.json makes the folder their capture, not a wall over yours: a team
      // member who drops one at the root of a shared corpus would hide every capture of yours below
      // it (trial 23); the folders of yours in it are still walked, theirs are their capture's
      if (!manifestOfAnother(join(dir, MANIFEST_FILE))) return;
      mineOnly = true;
    }
    let names: string[];
    try {
      names = utf8Names(dir, passedOver).sort();
    } catch (e) {
      return void passedOver.push({ path: dir, reason: `cannot list it (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})` });
    }
    for (const name of names) {
      if (isTemp(name)) continue;
      const p = join(dir, name);
      let st;
      let l;
      try {
        l = lstatSync(p);
      } catch (e) {
        passedOver.push({ path: p, reason: `gone while the folder was read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})` });
        continue;
      }
      const uid = process.geteuid?.();
      if (l.isSymbolicLink() && uid !== undefined && l.uid !== uid && l.uid !== 0) {
        passedOver.push({ path: p, reason: `a symbolic link of another user (uid ${l.uid}): not followed` });
        continue;
      }
      try {
        st = statSync(p);
      } catch {
        passedOver.push({ path: p, reason: "a dangling symbolic link" });
        continue;
      }
      if (mineOnly && st.uid !== process.geteuid?.()) continue;
      if (st.isDirectory()) await walk(p, `${id}/${name}`);
      else if (st.isFile() && name.endsWith(ARCHIVE_SUFFIX)) {
        // an archive cut short still begins as pack writes one: a capture whose unpack says what is wrong, not some other .zip passed over
        if ((await isPackArchive(p)) || beginsAsPackArchive(p)) captures.push({ id: `${id}/${idName(name)}`, path: p, kind: "archive" });
        else passedOver.push({ path: p, reason: "a .zip that `kerncap pack` did not write" });
      }
    }
  };
  for (const r of roots) {
    const root = resolve(r);
    const name = basename(root);
    if (!existsSync(root))
      throw new KerncapError("E_NOT_CAPTURE", `no such folder or archive: ${root}`, {
        hint: `Give capture folders, archives from \`kerncap pack\`, or folders holding them.${didYouMean(r)}`,
      });
    const st = statSync(root);
    // a folder inside a capture (cap/src) is its content, as every verb says (E_NESTED_CAPTURE), not a corpus without captures
    if (st.isDirectory()) assertNotNested(root);
    if (st.isDirectory()) await walk(root, name);
    else if (st.isFile() && ((await isPackArchive(root)) || beginsAsPackArchive(root))) captures.push({ id: idName(name), path: root, kind: "archive" });
    else
      throw new KerncapError("E_NOT_CAPTURE", `${root} is neither a folder nor an archive written by \`kerncap pack\``, {
        hint: "Give capture folders, archives from `kerncap pack`, or folders holding them.",
      });
  }
  captures.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return { captures: oneOfEachIdentity(captures, passedOver), passedOver };
}

/** Whether the kerncap.json at `file` (lstat: a link is not followed) belongs to a user other than the one running kerncap and root. */
function manifestOfAnother(file: string): boolean {
  const uid = process.geteuid?.();
  if (uid === undefined) return false;
  try {
    const st = lstatSync(file);
    return st.uid !== uid && st.uid !== 0;
  } catch {
    return false;
  }
}

/** The owner (uid) of a capture folder or archive, undefined when it cannot be read. */
function ownerOf(path: string): number | undefined {
  try {
    return statSync(path).uid;
  } catch {
    return undefined;
  }
}

/**
 * `sorted` (by identity) with one capture of each identity. Copies of one identity that differ in
 * owner: the user's own copy is kept and the others are passed over with a warning (`warn`), so that
 * another user's `NAME.zip` dropped beside the user's `NAME/` in a shared corpus does not stop the
 * whole check (trial 20); none of them the user's: all passed over with a warning (another user's
 * pair stops nothing of the user's). Two copies of the user's own: refused.
 * @throws KerncapError E_USAGE naming two captures of one identity
 */
function oneOfEachIdentity(sorted: CaptureRef[], passedOver: Discovery["passedOver"]): CaptureRef[] {
  const uid = process.geteuid?.();
  const kept: CaptureRef[] = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i + 1;
    while (j < sorted.length && sorted[j]!.id === sorted[i]!.id) j++;
    const same = sorted.slice(i, j);
    i = j;
    if (same.length === 1) {
      kept.push(same[0]!);
      continue;
    }
    const owners = same.map((c) => ownerOf(c.path));
    const mine = same.filter((_, k) => uid !== undefined && owners[k] === uid);
    if (mine.length === 1) {
      const own = mine[0]!;
      kept.push(own);
      for (const [k, c] of same.entries())
        if (c !== own)
          passedOver.push({
            path: c.path,
            reason: `it has the identity ${c.id} of your own ${own.path}, and belongs to another user (uid ${owners[k] ?? "unknown"}): yours is checked`,
            warn: true,
          });
      continue;
    }
    if (mine.length === 0 && uid !== undefined && owners.every((o) => o !== undefined)) {
      // none of them yours: another user's pair in a shared corpus stops nothing of yours (trial 23); neither is checked
      for (const [k, c] of same.entries())
        passedOver.push({
          path: c.path,
          reason: `${same.length} captures of other users have its identity ${c.id} (this one uid ${owners[k]}): none of them is checked`,
          warn: true,
        });
      continue;
    }
    const [a, b] = mine.length > 1 ? (mine as [CaptureRef, CaptureRef, ...CaptureRef[]]) : (same as [CaptureRef, CaptureRef, ...CaptureRef[]]);
    throw new KerncapError("E_USAGE", `${a.path} and ${b.path} have one identity, ${a.id}: a shard, the baseline and the results could not tell them apart`, {
      hint: "Keep one of them (a folder and its packed .zip are the same capture), or give the two roots different names.",
    });
  }
  return kept;
}
