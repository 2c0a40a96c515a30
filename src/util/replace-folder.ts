/**
 * `--force` replacing a folder (a previous capture, demo or export; unpack's destination) in a
 * parent folder another user may write. Checking the folder by its name and then removing it by
 * that name again lets the other user swap another folder of yours in between (an exchange of two
 * names in a 2770 team folder emptied a folder of notes: adversary 28). So the folder found at the
 * name is moved, in one rename, into a private 0700 holder folder beside it, held open
 * (./write-file.ts makePrivateTemp); only there, where no one else can reach it, is it judged and,
 * when it may go, removed through the holder's fd.
 */
import { closeSync, lstatSync, renameSync } from "node:fs";
import { join } from "node:path";
import { KerncapError } from "../errors.ts";
import { tempFor } from "../leftovers.ts";
import { log } from "../log.ts";
import { makePrivateTemp } from "./write-file.ts";

/**
 * Replace the folder at `dest` by what `place(dest)` puts there (a rename of the new folder).
 * Whatever lies at `dest` is moved into a private holder; `refuse(old)` judges it there (a path
 * through the holder's fd) and returns why it may not go (not a previous capture, say), or
 * undefined; `before(old)` runs once it may go (the warnings of what is lost). A folder that may
 * not go is moved back to `dest` and E_UNSAFE_PATH thrown: nothing was removed. A placement that
 * fails moves the old folder back and throws its error. Nothing at `dest` (gone meanwhile): placed.
 * @throws KerncapError E_UNSAFE_PATH (what lay at `dest` was not what was checked before), the
 *   rename's and `place`'s errors
 */
export function replaceFolder(
  dest: string,
  o: { refuse: (old: string) => string | undefined; before?: (old: string) => void; place: (dest: string) => void },
): void {
  const holder = makePrivateTemp(tempFor(dest));
  const old = join(holder.at, "old");
  let moved = false;
  try {
    try {
      renameSync(dest, old);
      moved = true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw holder.unfd(e);
    }
    if (moved) {
      const st = lstatSync(old);
      const why = st.isDirectory() ? o.refuse(old) : "it is no folder";
      if (why) {
        renameSync(old, dest);
        moved = false;
        throw new KerncapError(
          "E_UNSAFE_PATH",
          `${dest}: what lies there now is not the folder kerncap checked (${holder.shown(why, dest)}); it was left as it was, nothing was removed`,
          {
            hint: "Another user can rename entries in its parent folder: write into a folder only you can write (or a sticky one such as /tmp), then move it.",
          },
        );
      }
      o.before?.(old);
    }
    try {
      o.place(dest);
    } catch (e) {
      if (moved) renameSync(old, dest);
      moved = false;
      throw e;
    }
  } catch (e) {
    if (moved) {
      try {
        renameSync(old, dest);
        moved = false;
      } catch {
        // `dest` taken meanwhile: the old folder stays in the holder (0700), kept and named, never removed
        closeSync(holder.fd);
        log.warn(`${dest}: the folder that was there is kept in ${holder.path}/old (its name was taken meanwhile)`);
        throw e;
      }
    }
    holder.dispose();
    throw e;
  }
  holder.dispose(); // the old folder, through the fd: never by a name another user may swap
}
