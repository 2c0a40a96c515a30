/**
 * `--force` replacing a folder (a previous capture, demo or export; unpack's destination) in a
 * parent folder another user may write. Checking the folder by its name and then removing it by
 * that name again lets the other user swap another folder of yours in between (an exchange of two
 * names in a 2770 team folder emptied a folder of notes: adversary 28). So the folder found at the
 * name is moved, in one rename, into a private 0700 holder folder beside it, held open
 * (./write-file.ts makePrivateTemp); only there, where no one else can reach it, is it judged and,
 * when it may go, removed through the holder's fd.
 */
import { closeSync, constants, fstatSync, lstatSync, openSync, renameSync, statSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { KerncapError } from "../errors.ts";
import { tempFor } from "../leftovers.ts";
import { log } from "../log.ts";
import { fdPath, makePrivateTemp } from "./write-file.ts";

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
  // the parent pinned: the holder is made, and the folder moved out, in the folder that held `dest` when this began;
  // the new one is placed only while the parent's name still leads there (a parent swapped for a link to another
  // folder of the user's between the move and the placement would otherwise have that folder's entry removed)
  const parentFd = openSync(dirname(dest), constants.O_RDONLY | constants.O_DIRECTORY);
  const parent = fstatSync(parentFd, { bigint: true });
  const pinned = (name: string) => fdPath(parentFd, name);
  const stillThere = () => {
    const now = statSync(dirname(dest), { bigint: true, throwIfNoEntry: false });
    return now !== undefined && now.dev === parent.dev && now.ino === parent.ino;
  };
  let holder: ReturnType<typeof makePrivateTemp>;
  try {
    const name = basename(tempFor(dest));
    holder = makePrivateTemp(pinned(name), join(dirname(dest), name));
  } catch (e) {
    closeSync(parentFd);
    throw e;
  }
  const old = join(holder.at, "old");
  const back = () => renameSync(old, pinned(basename(dest)));
  let moved = false;
  try {
    try {
      renameSync(pinned(basename(dest)), old);
      moved = true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ENOENT") throw holder.unfd(e);
    }
    if (moved) {
      const st = lstatSync(old);
      const why = st.isDirectory() ? o.refuse(old) : "it is no folder";
      if (why) {
        back();
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
    if (!stillThere())
      throw new KerncapError("E_UNSAFE_PATH", `${dest}: its parent folder was replaced while kerncap ran; nothing was placed or removed`, {
        hint: "Another user can rename entries above it: write into a folder only you can write (or a sticky one such as /tmp), then move it.",
      });
    try {
      o.place(dest);
    } catch (e) {
      throw takenMeanwhile(e, dest); // the old folder goes back below, or stays kept in the holder, said
    }
  } catch (e) {
    if (moved) {
      try {
        back();
        moved = false;
      } catch {
        // `dest` taken meanwhile: the old folder stays in the holder (0700), kept and named, never removed
        closeSync(holder.fd);
        closeSync(parentFd);
        log.warn(`${dest}: the folder that was there is kept in ${join(dirname(dest), basename(holder.path))}/old (its name was taken meanwhile)`);
        throw e;
      }
    }
    holder.dispose();
    closeSync(parentFd);
    throw e;
  }
  holder.dispose(); // the old folder, through the fd: never by a name another user may swap
  closeSync(parentFd);
}

/**
 * A placement at `dest` that failed because a folder appeared there meanwhile (ENOTEMPTY, EEXIST:
 * another kerncap replacing the same folder; adversary 35: four `export -f` at once, the losers'
 * E_IO named /proc/self/fd paths): E_EXISTS naming `dest`; any other error as it is.
 */
function takenMeanwhile(e: unknown, dest: string): unknown {
  const code = (e as NodeJS.ErrnoException)?.code;
  if (code !== "ENOTEMPTY" && code !== "EEXIST") return e;
  return new KerncapError("E_EXISTS", `${dest} was written by another process while kerncap replaced it; this run's folder was not placed`, {
    hint: "Another kerncap (or another program) writes the same folder: let it finish, then run this one again (--force replaces what is there).",
  });
}
