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
 * shard (src/check/shard.ts), the baseline and the results.
 */
import { existsSync, lstatSync, readdirSync, realpathSync, statSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { KerncapError } from "../errors.ts";
import { isTempName } from "../leftovers.ts";
import { isPackArchive } from "../format/archive.ts";
import { MANIFEST_FILE } from "../format/manifest.ts";

export interface CaptureRef {
  id: string;
  /** Absolute path of the capture folder or archive. */
  path: string;
  kind: "folder" | "archive";
}

export interface Discovery {
  /** Sorted by identity. */
  captures: CaptureRef[];
  /** What was passed over, and why (junk a user may want to know about). */
  passedOver: { path: string; reason: string }[];
}

const ARCHIVE_SUFFIX = ".zip";
/** `X.tmp-<pid>` / `X.old-<pid>` (src/leftovers.ts tempFor): being written, or left by a killed kerncap. */
const isTemp = (name: string) => isTempName(name) || /\.old-\d+$/.test(name);
const idName = (name: string) => (name.endsWith(ARCHIVE_SUFFIX) ? name.slice(0, -ARCHIVE_SUFFIX.length) : name);

/**
 * Every capture under `roots` (folders, capture folders or archives).
 * @throws KerncapError E_USAGE for a root that does not exist or is neither a folder nor an
 *   archive, for two captures with one identity (naming both)
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
    if (existsSync(join(dir, MANIFEST_FILE))) return void captures.push({ id, path: dir, kind: "folder" });
    let names: string[];
    try {
      names = readdirSync(dir).sort();
    } catch (e) {
      return void passedOver.push({ path: dir, reason: `cannot list it (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})` });
    }
    for (const name of names) {
      if (isTemp(name)) continue;
      const p = join(dir, name);
      let st;
      try {
        const l = lstatSync(p);
        const uid = process.geteuid?.();
        if (l.isSymbolicLink() && uid !== undefined && l.uid !== uid && l.uid !== 0) {
          passedOver.push({ path: p, reason: `a symbolic link of another user (uid ${l.uid}): not followed` });
          continue;
        }
        st = statSync(p);
      } catch {
        passedOver.push({ path: p, reason: "a dangling symbolic link" });
        continue;
      }
      if (st.isDirectory()) await walk(p, `${id}/${name}`);
      else if (st.isFile() && name.endsWith(ARCHIVE_SUFFIX)) {
        if (await isPackArchive(p)) captures.push({ id: `${id}/${idName(name)}`, path: p, kind: "archive" });
        else passedOver.push({ path: p, reason: "a .zip that `kerncap pack` did not write" });
      }
    }
  };
  for (const r of roots) {
    const root = resolve(r);
    const name = basename(root);
    if (!existsSync(root))
      throw new KerncapError("E_USAGE", `no such folder or archive: ${root}`, {
        hint: "Give capture folders, archives from `kerncap pack`, or folders holding them.",
      });
    const st = statSync(root);
    if (st.isDirectory()) await walk(root, name);
    else if (st.isFile() && (await isPackArchive(root))) captures.push({ id: idName(name), path: root, kind: "archive" });
    else
      throw new KerncapError("E_USAGE", `${root} is neither a folder nor an archive written by \`kerncap pack\``, {
        hint: "Give capture folders, archives from `kerncap pack`, or folders holding them.",
      });
  }
  captures.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  for (let i = 1; i < captures.length; i++) {
    const [a, b] = [captures[i - 1]!, captures[i]!];
    if (a.id === b.id) {
      throw new KerncapError("E_USAGE", `${a.path} and ${b.path} have one identity, ${a.id}: a shard, the baseline and the results could not tell them apart`, {
        hint: "Keep one of them (a folder and its packed .zip are the same capture), or give the two roots different names.",
      });
    }
  }
  return { captures, passedOver };
}
