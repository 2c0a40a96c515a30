/**
 * The private copy a build executes (stageTrustedBuild), and the folders this process's trust gate
 * (src/format/trust.ts requireTrustedBuild) let run: a received capture's build runs exactly the
 * bytes the gate approved, never the capture's files read again.
 */
import { isEditorTemporary, isPythonBytecode } from "./file-names.ts";
import { closeSync, constants, futimesSync, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, realpathSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import { privateTempFolder } from "../cache.ts";
import { KerncapError } from "../errors.ts";
import { mkdirInCapture, readInCapture, resolveInCapture } from "./paths.ts";
import { runFileSpecs } from "./run-files.ts";
import { readWhatRuns } from "./what-runs.ts";
import { writeFileAtomic } from "../util/write-file.ts";

/** The folders this process's trust gate let run (real path → the approved digest and frontend): the builds of this process execute only those bytes (stageTrustedBuild). */
const approved = new Map<string, { digest: string; frontend: string }>();

/** Whether this process's trust gate let DIR's build run as a received capture's: its builds then execute a private copy (stageTrustedBuild), and only build.sh (no faster build that runs commands read from the folder). */
export function runsTrustedCopy(dir: string): boolean {
  try {
    return approved.has(realpathSync(dir));
  } catch {
    return false;
  }
}

/** The digest this process's trust gate approved for DIR's build (requireTrustedBuild), or undefined. */
export function approvedDigest(dir: string): string | undefined {
  try {
    return approved.get(realpathSync(dir))?.digest;
  } catch {
    return undefined;
  }
}

/** Remember that this process's trust gate let the capture at real path `dir` run with the files of `digest` (read as `frontend`'s): its builds execute only those bytes. */
export function approveBuild(dir: string, digest: string, frontend: string): void {
  approved.set(dir, { digest, frontend });
}

/** A private copy of the files a trusted build runs (stageTrustedBuild). */
export interface StagedBuild {
  /** The private folder: a fresh mkdtemp folder (0700, the user's), with the trusted files written O_EXCL and links to the capture's other entries. */
  folder: string;
  /** The capture folder's real path (the links' target). */
  dir: string;
  /** The digest of the files copied (for a received capture, the one the gate approved). */
  digest: string;
  /** Whether the trust gate approved these files (a received capture's build): what kerncap generates under src/ is then made anew. */
  received: boolean;
  /** `text` with the private folder's path read as the capture folder's (the build's messages, the module it printed). */
  unstage(text: string): string;
  /**
   * Move what the build wrote into the private build/ (every regular file, but Triton's cache
   * `triton-cache/`) into the capture's build/ with the one safe writer: an unguessable
   * O_EXCL|O_NOFOLLOW temp renamed over the name, a link at the name or on the way refused.
   * @returns the capture-relative paths written
   * @throws KerncapError E_UNSAFE_PATH naming a link (or other non-file) in the capture's build/
   */
  collect(): string[];
  /** Remove the private folder (the links only, never what they point at). */
  dispose(): void;
}

/**
 * For a capture the trust gate let run in this process (requireTrustedBuild): read what runs once
 * more, hold it to the approved digest, and write those bytes into a private folder that no one
 * else can write (src/cache.ts privateTempFolder: a fresh 0700 folder of the user's, in a TMPDIR no other user can swap it in; each file created O_EXCL|O_NOFOLLOW).
 * The build then executes that copy: a file of the capture replaced or rewritten after this read
 * (while the compiler runs) is never executed. The private folder holds nothing else of the
 * capture: the copies, `src/` (a private copy of the capture's src/, each file read once: the
 * compiler reads exactly the bytes a confined build's source scan read, whatever changes the
 * capture meanwhile; a Triton capture's src/ holds only the trusted kernel file, which repro.py
 * imports), and `build/`, a private folder the build writes into (seeded with the
 * capture's build/slice-failed.sha256), whose files collect() moves into the capture's build/.
 * The build runs with this folder as its working folder: nvcc gives its steps
 * LD_LIBRARY_PATH=`<cuda>/lib:` (the empty entry is the working folder) and Python puts a
 * script's folder first on sys.path, so no other top-level name of the capture may be there; and
 * nothing the build writes goes through a link someone planted in the capture's build/.
 * A capture made here is staged the same way, without a digest to hold it to: its build.sh's
 * outputs never go through a link in build/ either (a folder a group shares), and nvcc, which
 * pastes the source's absolute path (from its working folder) into the shell lines it runs, works
 * from the private folder's plain name whatever the capture folder is called.
 * `frontend`: the manifest's kernel.frontend (part of the digest, WhatRuns), for a capture the gate did not approve.
 * @returns undefined when the capture holds nothing that runs (no build.sh, pinned.json, repro.py)
 * @throws KerncapError E_TRUST_CHANGED (exit 2) when the files changed since the gate read them,
 *   E_UNSAFE_PATH (a link, FIFO … under src/, or a src/ too large to copy), E_TMPDIR (a TMPDIR others can write, not sticky)
 */
export function stageTrustedBuild(dirArg: string, frontend = ""): StagedBuild | undefined {
  let real: string;
  try {
    real = realpathSync(dirArg);
  } catch {
    return undefined;
  }
  const ok = approved.get(real);
  const runs = readWhatRuns(real, ok?.frontend ?? frontend, ok !== undefined); // a received capture the gate let run: read as the gate read it
  if (!runs) return undefined;
  if (ok && runs.digest !== ok.digest) {
    throw new KerncapError(
      "E_TRUST_CHANGED",
      `${dirArg}: the files its build runs changed since they were trusted (digest ${ok.digest}, now ${runs.digest}); nothing was run`,
      {
        hint: "Someone changed build.sh, pinned.json, repro.py or the Triton kernel file meanwhile. Run the command again without --trust to see them, then trust the digest it shows.",
      },
    );
  }
  mkdirInCapture(real, "build"); // outputs go through the link into the capture's build/
  // a fresh 0700 folder of the user's, in a TMPDIR where no other user can swap it (E_TMPDIR otherwise)
  const folder = privateTempFolder("kerncap-run-");
  try {
    const copied = new Set<string>();
    for (const f of runs.files) {
      const parts = f.name.split("/");
      copied.add(parts[0]!);
      for (let i = 1; i < parts.length; i++) {
        const d = join(folder, ...parts.slice(0, i));
        try {
          mkdirSync(d, { mode: 0o700 });
        } catch (e) {
          if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
        }
      }
      writeNew(join(folder, ...parts), f.bytes, f.name === "build.sh" ? 0o700 : 0o600);
    }
    // src/ (when no trusted file lies under it: the CUDA sources the compiler reads), copied once: the compiler reads the
    // bytes a confined build's scan read (src/frontends/confine-sources.ts scans this copy), whatever changes the capture meanwhile
    if (!copied.has("src") && lstatOrUndefined(join(real, "src"))?.isDirectory()) copySources(real, folder);
    mkdirSync(join(folder, "build"), { mode: 0o700 });
    const failed = readInCapture(real, SLICE_FAILED, 4096); // the slice that did not build for this TU text is not tried again
    if (failed) writeNew(join(folder, SLICE_FAILED), failed, 0o600);
  } catch (e) {
    rmSync(folder, { recursive: true, force: true });
    throw e;
  }
  return {
    folder,
    dir: real,
    digest: runs.digest,
    received: ok !== undefined,
    unstage: (text) => text.split(folder).join(real),
    collect: () => collectBuild(join(folder, "build"), real),
    dispose: () => rmSync(folder, { recursive: true, force: true }),
  };
}

/** The most files, and bytes in all, of a capture's src/ that a build's private copy holds (sources, not data). */
const SOURCES_MAX_FILES = 20000;
const SOURCES_MAX_BYTES = 512 << 20;

/**
 * Copy the capture's src/ into the private folder, each folder made 0700 and each file read once
 * through the path rule (src/format/paths.ts readInCapture: no link followed, a FIFO or device
 * never opened for reading) and written O_EXCL|O_NOFOLLOW.
 * @throws KerncapError E_UNSAFE_PATH naming a link, FIFO … under src/, or a src/ past SOURCES_MAX_FILES / SOURCES_MAX_BYTES
 */
function copySources(capture: string, folder: string): void {
  let files = 0;
  let bytes = 0;
  const walk = (rel: string) => {
    mkdirSync(join(folder, rel), { mode: 0o700 });
    for (const name of readdirSync(join(capture, rel)).sort()) {
      const r = `${rel}/${name}`;
      const st = lstatSync(join(capture, r));
      if (st.isDirectory()) {
        if (!isPythonBytecode(r)) walk(r);
        continue;
      }
      // an editor's temporary (Emacs' lock link .#x.cu, a vim swap file): no source, left out as pack and export leave it out
      if (isEditorTemporary(name) && (st.isFile() || st.isSymbolicLink())) continue;
      if (isPythonBytecode(r)) continue; // Python's bytecode cache: never run in place of a source (adversary 58)
      const b = readInCapture(capture, r, SOURCES_MAX_BYTES - bytes); // a link, a FIFO, a file past what is left: E_UNSAFE_PATH
      if (!b) continue; // gone meanwhile
      bytes += b.length;
      if (++files > SOURCES_MAX_FILES)
        throw new KerncapError("E_UNSAFE_PATH", `${capture}/src holds more than ${SOURCES_MAX_FILES} files; a build copies its sources, at most that many`, {
          hint: "src/ holds the reproducer's sources: move data and build outputs out of it.",
        });
      writeNew(join(folder, r), b, 0o600, st.mtime);
    }
  };
  walk("src");
}

/** build.sh's record of a slice that did not build (templates/cuda/build.sh.hbs), beside the default module. */
const SLICE_FAILED = "build/slice-failed.sha256";

/**
 * A new file at `path` (O_EXCL|O_NOFOLLOW: never an existing name, never through a link) holding
 * `bytes`, with the modification time `mtime` where given (a source's: its `__TIMESTAMP__` is the
 * capture's file's, as build.sh run in the capture reads it).
 */
function writeNew(path: string, bytes: Uint8Array, mode: number, mtime?: Date): void {
  const fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode);
  try {
    writeSync(fd, bytes);
    if (mtime) futimesSync(fd, mtime, mtime);
  } finally {
    closeSync(fd);
  }
}

function lstatOrUndefined(p: string) {
  try {
    return lstatSync(p);
  } catch {
    return undefined;
  }
}

/** StagedBuild.collect: the regular files under the private `from` (the build's output folder) written into `capture`'s build/, through no link. */
function collectBuild(from: string, capture: string): string[] {
  const written: string[] = [];
  const uncollected = new Set(runFileSpecs().flatMap((s) => s.uncollected ?? []));
  const walk = (rel: string) => {
    for (const name of readdirSync(join(from, rel))) {
      const r = rel ? `${rel}/${name}` : name;
      if (uncollected.has(r)) continue; // a frontend's compile cache of this build (RunFiles.uncollected: Triton's triton-cache): not worth copying
      const st = lstatSync(join(from, r));
      if (st.isDirectory()) walk(r);
      else if (st.isFile()) {
        const target = `build/${r}`;
        const { path } = resolveInCapture(capture, target); // a link, a hard link or a non-file at the name: E_UNSAFE_PATH
        // walked from the capture's real path, each folder opened with no link followed: build/ swapped for a link meanwhile is refused
        writeFileAtomic(path, readFileSync(join(from, r)), {
          mode: st.mode & 0o777,
          sync: false,
          what: `the build's output ${target}`,
          root: capture,
          create: true,
        });
        written.push(target);
      }
    }
  };
  walk("");
  return written;
}
