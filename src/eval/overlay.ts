/**
 * An overlay candidate of `kerncap eval` (./candidates.ts overlayCandidate, what kerncap mcp's
 * evaluate writes for its `files` candidates): only the files that replace or add files of src/,
 * written over the candidate's private copy when its build starts.
 */
import { lstatSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { KerncapError } from "../errors.ts";
import { escapedForMessage, unportableName } from "../format/archive-common.ts";
import { readManifest } from "../format/capture-dir.ts";
import { relativePathProblem } from "../format/paths.ts";
import { notAnEditableSource } from "../frontends/index.ts";
import type { Candidate } from "./candidates.ts";

/**
 * An overlay's files (paths as read: src/…) as paths relative to src/, each held to edit_file's
 * rule (sourcePathProblem: under src/, no `..`, portable names, a source file of the frontend).
 * @throws KerncapError E_NOT_SOURCE (a file no candidate may write), E_CANDIDATE (a path outside src/ or not portable)
 */
export function overlayPaths(capture: string, c: Candidate, files: string[]): string[] {
  const m = readManifest(capture);
  return files.map((f) => {
    const rel = f.startsWith("src/") ? f.slice(4) : "";
    const where = rel ? (relativePathProblem(rel) ?? unportableName(rel)) : "is not under src/";
    if (where) throw new KerncapError("E_CANDIDATE", `candidate ${c.label}'s path ${escapedForMessage(f)} ${where}`, { hint: OVERLAY_HINT });
    const notSource = notAnEditableSource(m, `src/${rel}`);
    if (notSource) throw new KerncapError("E_NOT_SOURCE", `candidate ${c.label}: ${notSource}`, { hint: OVERLAY_HINT });
    return rel;
  });
}

const OVERLAY_HINT = "A candidate's files are source files of src/ (as edit_file writes them): src/kernel.cu, src/include/util.h.";

/**
 * Write an overlay's files over the private copy's `src` (made by materialise: regular files and
 * folders only, no link), each at its path: a file replaced, a new one added with its folders.
 * @throws KerncapError E_CANDIDATE: no src/ to write over, a path whose file is a folder of src/ or under one of its files
 */
export function writeOverlay(src: string, c: Candidate, rels: string[], bytes: Buffer[]): void {
  const refuse = (why: string) =>
    new KerncapError("E_CANDIDATE", `candidate ${c.label}: ${why}`, {
      hint: "A candidate's files replace files of src/ or add new ones beside them; a folder of src/ is not replaced by a file.",
    });
  if (!lstatSync(src, { throwIfNoEntry: false })?.isDirectory()) throw refuse("the capture has no src/ folder to write its files over");
  rels.forEach((rel, i) => {
    const parts = rel.split("/");
    for (let k = 1; k < parts.length; k++) {
      const st = lstatSync(join(src, ...parts.slice(0, k)), { throwIfNoEntry: false });
      if (st && !st.isDirectory())
        throw refuse(`src/${escapedForMessage(parts.slice(0, k).join("/"))} is a file of src/, so src/${escapedForMessage(rel)} cannot be under it`);
    }
    const st = lstatSync(join(src, rel), { throwIfNoEntry: false });
    if (st && !st.isFile()) throw refuse(`src/${escapedForMessage(rel)} is a folder of src/, not a file`);
    mkdirSync(join(src, rel, ".."), { recursive: true });
    writeFileSync(join(src, rel), bytes[i]!);
  });
}
