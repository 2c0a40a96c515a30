/**
 * A patch candidate applied to its private copy of src/ (git apply, as ./candidates.ts
 * materialise calls it): what a patch may hold (patchModeProblem), where it may write
 * (sourcePathProblem, patchWriteRefusal), and the apply itself (applyPatch).
 */
import { listForTerminal } from "../escape.ts";
import { existsSync, lstatSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { KerncapError } from "../errors.ts";
import { absolutePathList, buildChildEnv, whichAbsolute } from "../env.ts";
import { escapedForMessage, unportableName } from "../format/archive-common.ts";
import type { Manifest } from "../format/manifest.ts";
import { relativePathProblem } from "../format/paths.ts";
import { notAnEditableSource } from "../frontends/index.ts";
import { PATCH_NAMES_EXAMPLE, PatchProblem, patchAsApplied, patchPaths, readPatch, stripRule, type PatchRead } from "./patch.ts";

/**
 * Why a patch is not a candidate's (or undefined), read whole as git apply reads it
 * (./patch.ts readPatch): a header line not understood, a symbolic link (git's mode 120000 in any
 * spelling: a link out of src/ that a confined build would read through), a mode change or a new
 * file of any mode but 100644, a copy or rename (git apply reads a copy's source by the name
 * given, an absolute or `..` one included), a binary patch. The names it writes are checked where
 * the capture is known (sourcePathProblem).
 */
export function patchModeProblem(text: string): string | undefined {
  try {
    readPatch(text);
    return undefined;
  } catch (e) {
    if (e instanceof PatchProblem) return e.message;
    throw e;
  }
}

/**
 * Why a candidate may not write `rel` (a path relative to src/) in a capture of `m` (a phrase),
 * or undefined: edit_file's rule (a relative path inside src/ with no `..`, portable names, a
 * source file of the frontend, never a file kerncap reads as configuration or runs, at any depth).
 */
export function sourcePathProblem(m: Pick<Manifest, "kernel">, rel: string): string | undefined {
  const where = relativePathProblem(rel);
  if (where) return `${escapedForMessage(rel.startsWith("/") ? rel : `src/${rel}`)} ${where}`; // an absolute name as given, not src//tmp/…
  const unportable = unportableName(rel);
  if (unportable) return `${escapedForMessage(`src/${rel}`)} ${unportable}`;
  return notAnEditableSource(m, `src/${rel}`);
}

/** The regular files (relative paths) under `root`, or the first entry that is none (a link, a FIFO …: not followed). */
function regularFiles(root: string): { files: Set<string>; other?: string } {
  const files = new Set<string>();
  const walk = (rel: string): string | undefined => {
    for (const name of readdirSync(join(root, rel)).sort()) {
      const r = rel ? `${rel}/${name}` : name;
      const st = lstatSync(join(root, r));
      if (st.isDirectory()) {
        const bad = walk(r);
        if (bad) return bad;
      } else if (st.isFile()) files.add(r);
      else return r;
    }
    return undefined;
  };
  const other = walk("");
  return other === undefined ? { files } : { files, other };
}

/**
 * git's environment for `git apply` of a candidate's patch: no system, global or repository
 * configuration and no attributes file of the system (GIT_DIR names a path that cannot exist, so
 * git works outside any repository, whatever .git lies in or above the folder).
 */
export const GIT_ALONE = {
  GIT_DIR: "/dev/null/no-repository",
  GIT_CONFIG_NOSYSTEM: "1",
  GIT_CONFIG_GLOBAL: "/dev/null",
  GIT_ATTR_NOSYSTEM: "1",
} as const;

/**
 * Why a candidate's patch named `name` may not write `rel` (relative to src/), as the error its
 * record carries, or undefined: kerncap mcp's evaluate's codes (nu7 #5: build.sh was E_PATCH here,
 * E_NOT_SOURCE there): a path that leaves src/ E_PATCH, a name pack refuses E_PACK_NAME, a file
 * that is no source of the frontend (build.sh, kerncap.json, a script, at any depth) E_NOT_SOURCE.
 */
function patchWriteRefusal(name: string, rel: string, m: Pick<Manifest, "kernel">, verb: "writes" | "wrote"): KerncapError | undefined {
  const shown = escapedForMessage(`src/${rel}`);
  const where = relativePathProblem(rel);
  if (where) return new KerncapError("E_PATCH", `the patch ${name} ${verb} ${shown}, which ${where}`, { hint: PATCH_HINT });
  const unportable = unportableName(rel);
  if (unportable)
    return new KerncapError("E_PACK_NAME", `the patch ${name} ${verb} ${shown}, which ${unportable}: a name kerncap pack and unpack refuse`, {
      hint: "Name the file with letters, digits and ._+- only in each part (no part starting with -).",
    });
  const why = notAnEditableSource(m, `src/${rel}`);
  if (why)
    return new KerncapError("E_NOT_SOURCE", `the patch ${name} ${verb} ${shown}, which is not a source file of the reproducer: ${why}`, {
      hint: "A candidate edits the kernel's sources; build.sh, kerncap.json, pinned.json, repro.py and every script are the user's to change.",
    });
  return undefined;
}

/** What to do with a patch whose names or lines do not meet src/. */
export const PATCH_NAMES_HINT =
  "Make the patch against the capture's src/: `git diff` or `diff -u FILE EDITED` inside src/, or `diff -ru src edited` run where both folders sit side by side (both one level deep); or give the edited folder itself as the candidate.";

const PATCH_HINT = "Give the candidate as a tree (an edited copy of src/) or a patch of text edits of src/'s source files (diff -ru src edited, or git diff).";

/**
 * Apply a candidate's patch to `src` (the private copy's src/): read whole first (readPatch), every
 * name it writes held to patchWriteRefusal, then git apply, then the tree it left walked with no
 * link followed: only regular files and folders, each new name an allowed source path. `name`:
 * the candidate's label, as its messages name the patch (never a file kerncap mcp wrote it to).
 * @throws KerncapError E_PATCH, E_NOT_SOURCE, E_PACK_NAME (the candidate's own fault: the caller removes the copy)
 */
export async function applyPatch(src: string, name: string, text: Buffer, dest: string, m: Pick<Manifest, "kernel">): Promise<void> {
  const refuse = (why: string) => new KerncapError("E_PATCH", `the patch ${name} ${why}`, { hint: PATCH_HINT });
  // checked here, whoever made the candidate, so that no path to git apply skips it; git reads these
  // very bytes from a copy beside the private copy (never the candidate's file again: it could be swapped)
  let read: PatchRead;
  try {
    read = readPatch(text.toString("latin1"));
  } catch (e) {
    if (e instanceof PatchProblem) throw refuse(e.message);
    throw e;
  }
  if (!lstatSync(src, { throwIfNoEntry: false })?.isDirectory()) throw refuse("has no src/ folder to apply to");
  const before = regularFiles(src).files;
  const srcHoldsSrc = existsSync(join(src, "src"));
  const applied = patchAsApplied(text.toString("latin1"), read, srcHoldsSrc, (rel) => before.has(rel));
  text = Buffer.from(applied.text, "latin1");
  const { strip, paths } = patchPaths(applied.read.names, srcHoldsSrc, (rel) => before.has(rel));
  for (const rel of paths) {
    const refused = patchWriteRefusal(name, rel, m, "writes");
    // a name that ends outside src/'s files (empty, `..`): how the names were read, and what to do (nu10 #19)
    if (refused?.code === "E_PATCH")
      throw new KerncapError("E_PATCH", `${refused.message}; ${stripRule(strip)} ${PATCH_NAMES_EXAMPLE}`, { hint: PATCH_NAMES_HINT });
    if (refused) throw refused;
  }
  // git from an absolute PATH entry: a relative one (`.`, node_modules/.bin) would find a git in the candidate's copy
  const path = absolutePathList(process.env.PATH);
  const git = whichAbsolute("git", path);
  if (!git)
    throw new KerncapError("E_PATCH", "git was not found on PATH (its absolute entries): eval applies patches with git apply", {
      hint: "Install git, or give the candidate as an edited folder instead of a patch.",
    });
  const checked = `${dest}.patch`;
  rmSync(checked, { force: true });
  writeFileSync(checked, text, { flag: "wx", mode: 0o600 });
  const p = Bun.spawn([git, "apply", `-p${strip}`, "--whitespace=nowarn", checked], {
    cwd: src,
    stdout: "pipe",
    stderr: "pipe",
    // outside any repository: a .git/ in the copy (a received capture's, or one planted above it) names
    // filters and hooks that git would run (found by a trial: a filter's command ran as the user)
    // and no load path that names the working folder (the copy of src/: an empty LD_LIBRARY_PATH entry loaded a received
    // capture's src/libpcre2-8.so.0 into git, adversary 80 #22): builds' rule (buildChildEnv)
    env: buildChildEnv({ ...process.env, PATH: path, ...GIT_ALONE }, [dest, src]),
  });
  const [err, code] = await Promise.all([new Response(p.stderr).text(), p.exited]);
  rmSync(checked, { force: true });
  if (code !== 0) {
    // a path src/ does not hold: say how the patch's names were read (found by a new user: `diff -ru src ../elsewhere` names ../elsewhere's files)
    const missing = /No such file or directory|does not exist in index/.test(err) ? paths.filter((p) => !before.has(p)) : [];
    // always how the names were read (nu10 #19), and where they lead outside src/'s files, which
    // made from a folder above the capture (git diff at a repository's top names cap/src/kernel.cu: nu13)
    const above = missing.some((p) => p.includes("src/") && before.has(p.slice(p.lastIndexOf("src/") + 4)));
    const from = above ? "; it was made from a folder above the capture: make it with git diff --relative inside the capture folder (or src/)" : "";
    // every file it names is in src/ and a hunk's context is not what it holds: a diff made against other text, not a naming
    // matter (nu89 #9: the names' rule sent a generator to rewrite the headers)
    const stale = !missing.length && /patch failed:|patch does not apply/.test(err) && paths.every((p) => before.has(p));
    const read = stale
      ? "; its files are those of src/, but a hunk's lines are not what they hold now: make the diff against the capture's current src/ (read_file or the files themselves)"
      : `; ${stripRule(strip)}${missing.length ? `, so it names ${listForTerminal([...new Set(missing)].slice(0, 3), 3)}, which src/ does not hold` : ""}${from} ${PATCH_NAMES_EXAMPLE}`;
    throw new KerncapError("E_PATCH", `the patch ${name} does not apply to src/: ${err.trim().split("\n").slice(0, 3).join(" / ")}${read}`, {
      hint: PATCH_NAMES_HINT,
    });
  }
  // whatever git made of it: src/ holds regular files and folders only, each new one at an allowed name
  const after = regularFiles(src);
  if (after.other !== undefined) throw refuse(`left src/${after.other}, which is not a regular file (a link, a FIFO …)`);
  for (const rel of after.files) {
    const refused = before.has(rel) ? undefined : patchWriteRefusal(name, rel, m, "wrote");
    if (refused) throw refused;
  }
}
