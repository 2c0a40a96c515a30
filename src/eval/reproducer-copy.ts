/**
 * A candidate's private copy of the capture's reproducer (eval, tune's configs, the pruned build's
 * check): the capture folder's files but its memory images, build outputs, reports, kerncap's
 * temporaries and its seal, read through the one path rule and bounded, since the capture may be
 * someone else's (adversary 89 #01: a 4 GiB sparse file in a received capture, 132 KiB on disk,
 * was written out in full into every candidate's copy; a FIFO or an unreadable file ended the
 * evaluation as an internal error).
 */
import { accessSync, constants, lstatSync, mkdirSync, readdirSync, rmSync, type Stats, writeFileSync } from "node:fs";
import { join } from "node:path";
import { KerncapError, systemError, whileReading } from "../errors.ts";
import { escapeForTerminal } from "../escape.ts";
import { isPythonBytecode, MADE_HERE_SEAL } from "../format/file-names.ts";
import { isCaptureTemp, readInCapture } from "../format/paths.ts";

/**
 * The most bytes, and files, one copy holds: the reproducer outside memory/ is sources, a module
 * image and kerncap's documents (the largest seen: tens of MB); as much again as the 512 MiB and
 * 20 000 files a build's private copy of src/ takes (src/format/staged-build.ts).
 */
export const REPRODUCER_COPY_MAX_BYTES = 512 << 20;
export const REPRODUCER_COPY_MAX_FILES = 20000;

/** Top-level entries a copy leaves out: the memory images, build outputs, reports, and the seal (an HMAC over this folder, not the copy: pack leaves it out too). */
const NOT_COPIED = new Set(["memory", "build", "profile", MADE_HERE_SEAL]);

/** One file a copy holds: its capture-relative path, its lstat. */
export interface CopiedFile {
  rel: string;
  st: Stats;
}

/**
 * The regular files of the capture folder `capture` that a copy holds, folders first, each with
 * its lstat, and the folders to make: everything but NOT_COPIED and kerncap's temporaries at the
 * top, and Python's bytecode cache anywhere (Python would run it in place of the kernel file shown:
 * adversary 58); a link, FIFO, socket or device is no file of a reproducer and is left out (never
 * followed, never opened). Nothing is read (each file's readability is asked, access(2)).
 * @throws KerncapError E_UNSAFE_PATH when the files hold more than REPRODUCER_COPY_MAX_BYTES (by
 *   their sizes: a sparse file counts whole) or, with the folders, number more than REPRODUCER_COPY_MAX_FILES; E_IO
 *   naming a folder that cannot be listed or a file that cannot be read (access(2))
 */
export function reproducerFiles(capture: string): { folders: string[]; files: CopiedFile[] } {
  const folders: string[] = [];
  const files: CopiedFile[] = [];
  let bytes = 0;
  const tooMuch = (what: string) =>
    new KerncapError(
      "E_UNSAFE_PATH",
      `${escapeForTerminal(capture, { oneLine: true })} holds ${what} outside memory/, build/ and profile/; a candidate's copy of the reproducer holds at most ${REPRODUCER_COPY_MAX_BYTES >> 20} MiB in ${REPRODUCER_COPY_MAX_FILES} files and folders`,
      {
        hint: "The capture folder holds the reproducer (src/, build.sh, kernel/, kerncap's files): move data out of it. A capture made elsewhere: ask for a clean copy (kerncap pack), or kerncap unpack its archive.",
      },
    );
  const walk = (rel: string) => {
    let names: string[];
    try {
      names = readdirSync(join(capture, rel)).sort();
    } catch (e) {
      throw systemError(whileReading(e, join(capture, rel))) ?? e;
    }
    for (const name of names) {
      if (!rel && (NOT_COPIED.has(name) || isCaptureTemp(name))) continue;
      const r = rel ? `${rel}/${name}` : name;
      if (isPythonBytecode(r)) continue;
      let st: Stats;
      try {
        st = lstatSync(join(capture, r));
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === "ENOENT") continue; // gone meanwhile
        throw systemError(whileReading(e, join(capture, r))) ?? e; // a path past PATH_MAX (adversary 90 #01c: left out without a word)
      }
      if (st.isDirectory()) {
        folders.push(r);
        // folders count as files do (adversary 90 #01b: 300 000 empty folders took 197 s and 1.1 GiB for one candidate)
        if (files.length + folders.length > REPRODUCER_COPY_MAX_FILES) throw tooMuch(`more than ${REPRODUCER_COPY_MAX_FILES} files and folders`);
        walk(r);
      } else if (st.isFile()) {
        try {
          accessSync(join(capture, r), constants.R_OK); // one that cannot be read said once, before any copy (not each candidate's error)
        } catch (e) {
          throw new KerncapError(
            "E_IO",
            `cannot read ${escapeForTerminal(join(capture, r), { oneLine: true })} (${(e as NodeJS.ErrnoException).code ?? "error"}): each candidate's copy of the reproducer holds the capture folder's files`,
            {
              hint: "Make it readable, or move it out of the capture folder if the reproducer does not need it. A capture made elsewhere: ask for a clean copy (kerncap pack).",
            },
          );
        }
        files.push({ rel: r, st });
        bytes += st.size;
        if (bytes > REPRODUCER_COPY_MAX_BYTES) throw tooMuch(`more than ${REPRODUCER_COPY_MAX_BYTES >> 20} MiB of files`);
        if (files.length + folders.length > REPRODUCER_COPY_MAX_FILES) throw tooMuch(`more than ${REPRODUCER_COPY_MAX_FILES} files and folders`);
      }
    }
  };
  walk("");
  return { folders, files };
}

/**
 * Make `dest` (removed first, its parent the caller's) a copy of the capture's reproducer as it
 * is (reproducerFiles): each file read once through the path rule (src/format/paths.ts
 * readInCapture: no link followed on the way, a file swapped for a FIFO or a link refused, at most
 * what is left of REPRODUCER_COPY_MAX_BYTES), written with its permission bits and u+rw; each
 * folder 0700 (the copy is the user's to edit and remove, whatever the capture's modes: adversary
 * 69, a chmod -R a-w capture's copy could not be removed).
 * @throws KerncapError as reproducerFiles; E_UNSAFE_PATH (a file changed or grew past the bound
 *   while it was copied), E_IO naming a file that cannot be read (EACCES)
 */
export function copyReproducer(capture: string, dest: string): void {
  const { folders, files } = reproducerFiles(capture);
  rmSync(dest, { recursive: true, force: true });
  mkdirSync(dest, { mode: 0o700 });
  for (const f of folders) mkdirSync(join(dest, f), { mode: 0o700 });
  let left = REPRODUCER_COPY_MAX_BYTES;
  for (const { rel, st } of files) {
    const b = readInCapture(capture, rel, left);
    if (!b) continue; // gone meanwhile
    left -= b.length;
    writeFileSync(join(dest, rel), b, { mode: (st.mode & 0o777) | 0o600, flag: "wx" });
  }
}
