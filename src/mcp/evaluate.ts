/**
 * The candidates of `kerncap mcp`'s evaluate tool, written where `kerncap eval` reads them: an
 * agent sends each candidate's text (files that replace or add files of src/, a unified diff
 * against src/, or a Triton config), and the server writes them into a private temporary folder
 * (mode 0700, removed after the call), each as eval takes a candidate (src/eval/candidates.ts): an
 * overlay (a folder holding only the candidate's files, at src/…: never a copy of src/, which eval
 * makes only when the candidate's build starts), a `.patch` file, or the config text, listed with its name (its label, verbatim) in the candidate list eval reads
 * (--candidate-list). Paths of files go through the capture path rule (src/format/paths.ts
 * relativePathProblem): relative to the capture folder and under src/, as edit_file's, no `..`, no
 * absolute path; a candidate that breaks a rule is listed as its refusal only (never written).
 */
import { chmodSync, existsSync, lstatSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { privateTempFolder } from "../cache.ts";
import * as v from "valibot";
import { KerncapError } from "../errors.ts";
import { escapedForMessage } from "../format/archive-common.ts";
import { readManifest } from "../format/capture-dir.ts";
import type { Manifest } from "../format/manifest.ts";
import { relativePathProblem } from "../format/paths.ts";
import { CANDIDATE_FAULT_CODES, patchModeProblem } from "../eval/candidates.ts";
import { frontendOf } from "../frontends/index.ts";
import { parseConfigSpace } from "../frontends/tune.ts";
import { PATCH_NAMES_EXAMPLE, patchAsApplied, patchPaths, readPatch, stripRule } from "../eval/patch.ts";
import { assertEditableSource, SRC_MAX_FILES } from "./files.ts";

/** One candidate as the tool takes it. */
export const McpCandidate = v.strictObject({
  name: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$/), v.description("The candidate's name in the results (default c1, c2, …)"))),
  // the word of the candidate list and the results (nu14: an agent that read them sent label)
  label: v.optional(
    v.pipe(
      v.string(),
      v.regex(/^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$/),
      v.description("The same as name (the word the results and a candidate list use); give one of the two"),
    ),
  ),
  files: v.optional(
    v.pipe(
      v.record(v.string(), v.string()),
      v.description(
        "Files of the edited reproducer, path relative to the capture folder under src/ as for edit_file (e.g. src/kernel.cu) → whole new content; the other files of src/ stay as captured",
      ),
    ),
  ),
  patch: v.optional(
    v.pipe(
      v.string(),
      v.minLength(1),
      v.description("A unified diff against src/ (paths as git diff inside src/ writes them, or a/src/… from the capture folder)"),
    ),
  ),
  config: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z_]\w*=/), v.description("Triton: one config, e.g. 'BLOCK_M=64 num_warps=4'"))),
});
export type McpCandidate = v.InferOutput<typeof McpCandidate>;

/** A candidate refused before eval: its kind, code and reason (src/eval/candidates.ts CandidateList). */
type Refusal = { kind: "overlay" | "patch" | "config"; code: (typeof CANDIDATE_FAULT_CODES)[number]; reason: string };

/** The candidate-fault codes a check below throws (the rest, kerncap's own or an argument's, end the call). */
const FAULTS: ReadonlySet<string> = new Set(CANDIDATE_FAULT_CODES);

/**
 * Why a candidate does not fit the capture (a Refusal), or undefined: each path it would write held
 * to edit_file's rule (relative, under src/, a source file of the frontend, portable names), a
 * patch read whole as git apply reads it, a config only for a frontend that builds one (Triton),
 * one config only. Nothing is written here.
 */
function refusalOf(captureDir: string, manifest: Manifest, c: McpCandidate, name: string): Refusal | undefined {
  const refuse = (kind: Refusal["kind"], code: Refusal["code"], reason: string): Refusal => ({ kind, code, reason });
  const check = (kind: Refusal["kind"], f: () => void): Refusal | undefined => {
    try {
      f();
      return undefined;
    } catch (e) {
      if (e instanceof KerncapError && FAULTS.has(e.code)) return refuse(kind, e.code as Refusal["code"], e.message);
      throw e;
    }
  };
  if (c.config !== undefined) {
    if (!frontendOf(manifest).tune?.candidates)
      return refuse(
        "config",
        "E_CANDIDATE",
        `candidate ${name} is a config (${escapedForMessage(c.config)}), which needs a Triton capture; this is a ${manifest.kernel.frontend} capture, whose candidates are files or a patch`,
      );
    try {
      const n = parseConfigSpace([c.config]).length;
      if (n !== 1)
        return refuse(
          "config",
          "E_CANDIDATE",
          `candidate ${name}'s config ${escapedForMessage(c.config)} is ${n} configs; a candidate is one (one value per name)`,
        );
    } catch (e) {
      if (e instanceof KerncapError && e.code === "E_USAGE") return refuse("config", "E_CANDIDATE", `candidate ${name}'s config: ${e.message}`);
      throw e;
    }
    return undefined;
  }
  if (c.patch !== undefined) {
    // read whole as git apply reads it (src/eval/patch.ts): any header line not understood, a link, a mode, a copy or rename refused
    const why = patchModeProblem(c.patch);
    if (why) return refuse("patch", "E_PATCH", `candidate ${name}'s patch ${why}`);
    // every name it writes, decoded as git decodes it and stripped as eval strips it: edit_file's rule
    const holds = (rel: string) =>
      relativePathProblem(rel) === undefined && lstatSync(join(captureDir, "src", rel), { throwIfNoEntry: false })?.isFile() === true;
    // the names as eval gives them to git apply (a `diff -u FILE EDITED` pair patches FILE)
    const srcHoldsSrc = existsSync(join(captureDir, "src", "src"));
    const { read } = patchAsApplied(c.patch, readPatch(c.patch), srcHoldsSrc, holds);
    const { strip, paths } = patchPaths(read.names, srcHoldsSrc, holds);
    for (const rel of paths) {
      const problem = relativePathProblem(rel);
      if (problem)
        return refuse(
          "patch",
          "E_PATCH",
          `candidate ${name}'s patch writes ${escapedForMessage(rel.startsWith("/") ? rel : `src/${rel}`)}, which ${problem}; ${stripRule(strip)} ${PATCH_NAMES_EXAMPLE}`,
        );
      const r = check("patch", () => assertEditableSource(manifest, `src/${rel}`, `candidate ${name}'s patch`));
      if (r) return r;
    }
    // the tree a patch writes held as a files candidate's is (a 872 KB patch made 93 000 files and folders: adversary 62)
    const shape = overlayShapeProblem([...paths]);
    return shape ? refuse("patch", "E_CANDIDATE", `candidate ${name}'s patch ${shape}`) : undefined;
  }
  const paths = Object.keys(c.files!);
  // more files than src/ may hold: refused before each is looked at (one call may name hundreds of thousands)
  if (paths.length > SRC_MAX_FILES)
    return refuse(
      "overlay",
      "E_CANDIDATE",
      `candidate ${name} writes ${paths.length} files: more than the ${SRC_MAX_FILES} files and folders edit_file lets src/ hold`,
    );
  for (const path of paths) {
    const rel = path.replace(/^(\.\/)+/, "").replace(/^src\//, "");
    const underSrc = path.replace(/^(\.\/)+/, "").startsWith("src/");
    // the capture's own file (build.sh, kerncap.json): E_NOT_SOURCE, as edit_file and a patch that writes one say it (nu7 #5)
    if (!underSrc && relativePathProblem(rel) === undefined && lstatSync(join(captureDir, rel), { throwIfNoEntry: false })?.isFile())
      return refuse(
        "overlay",
        "E_NOT_SOURCE",
        `candidate ${name} writes ${escapedForMessage(rel)}, the capture's own file, which is not a source file of the reproducer (paths are relative to the capture folder and under src/, as for edit_file: src/kernel.cu)`,
      );
    const problem = underSrc ? relativePathProblem(rel) : "is not under src/";
    if (problem)
      return refuse(
        "overlay",
        "E_CANDIDATE",
        `candidate ${name}'s path ${escapedForMessage(path)} ${problem} (paths are relative to the capture folder and under src/, as for edit_file: src/kernel.cu)`,
      );
    const r = check("overlay", () => assertEditableSource(manifest, `src/${rel}`, `candidate ${name}`)); // edit_file's own rule: the frontend's source files only, portable names
    if (r) return r;
  }
  const shape = overlayShapeProblem(paths.map((p) => p.replace(/^(\.\/)+/, "").replace(/^src\//, "")));
  return shape ? refuse("overlay", "E_CANDIDATE", `candidate ${name} ${shape}`) : undefined;
}

/** The most files and folders one evaluate call's candidates may write together (each candidate: SRC_MAX_FILES). */
const CALL_MAX_FILES = 20_000;

/** A candidate's path as a path under src/ (`./src/k.cu` → `k.cu`). */
const underSrc = (p: string) => p.replace(/^(\.\/)+/, "").replace(/^src\//, "");

/** The files of `paths` (under src/) and the folders they make. */
function treeOf(paths: string[]): { files: Set<string>; folders: Set<string> } {
  const files = new Set(paths);
  const folders = new Set<string>();
  for (const f of files) {
    const parts = f.split("/");
    for (let i = 1; i < parts.length; i++) folders.add(parts.slice(0, i).join("/"));
  }
  return { files, folders };
}

/** How many files and folders writing `paths` (under src/) makes. */
function treeEntries(paths: string[]): number {
  const { files, folders } = treeOf(paths);
  return files.size + folders.size;
}

/**
 * Why a files candidate's paths (under src/) cannot be written as one tree, or undefined: a path
 * that is a file and another's folder (`k.cuh`, `k.cuh/x.cuh`: the whole call ended E_IO naming
 * the server's private folder, adversary 61), or more files and folders than edit_file lets src/
 * hold (SRC_MAX_FILES: a 200 KB call made 232 000 inodes, adversary 61).
 */
function overlayShapeProblem(paths: string[]): string | undefined {
  const { files, folders } = treeOf(paths);
  const both = [...files].find((f) => folders.has(f));
  if (both) return `names ${escapedForMessage(`src/${both}`)} both as a file and as a folder of another of its files`;
  if (files.size + folders.size > SRC_MAX_FILES)
    return `writes ${files.size} files in ${folders.size} folders: more than the ${SRC_MAX_FILES} files and folders edit_file lets src/ hold`;
  return undefined;
}

/**
 * Check an evaluate call's candidates before anything is written or the call waits for a slot:
 * names (given or c1, c2, …: a name is the key the agent reads its record by, so two of one name
 * end the call), and the call's files and folders together within CALL_MAX_FILES. A candidate of
 * the wrong shape (none or several of files/patch/config, no files, a name and a label that
 * differ) is its own refusal (`unfit`, E_CANDIDATE): its record says why, the others are evaluated
 * (nu89 #3: one such candidate ended a call of fifty).
 * @throws KerncapError E_USAGE (two candidates of one name; too many files in all)
 */
export function checkCandidates(list: McpCandidate[]): { c: McpCandidate; name: string; unfit?: Refusal }[] {
  const names = new Set<string>();
  // a candidate with no name is c<its place>, or, where the agent gave that name to another, c<place>_2 … (adversary 90: "two
  // candidates are named c2" of a call that named one)
  const givenNames = new Set(list.map((c) => c.name ?? c.label).filter((n): n is string => n !== undefined));
  const byPlace = (i: number) => {
    let n = `c${i + 1}`;
    for (let k = 2; givenNames.has(n); k++) n = `c${i + 1}_${k}`;
    return n;
  };
  const named = list.map((c, i) => {
    const name = c.name ?? c.label ?? byPlace(i);
    if (names.has(name))
      throw new KerncapError("E_USAGE", `two candidates are named ${name}`, { hint: "Give each candidate its own name: the results name each by it." });
    names.add(name);
    const unfit = (reason: string): { c: McpCandidate; name: string; unfit: Refusal } => ({
      c,
      name,
      unfit: { kind: c.patch !== undefined ? "patch" : c.config !== undefined ? "config" : "overlay", code: "E_CANDIDATE", reason },
    });
    if (c.name !== undefined && c.label !== undefined && c.name !== c.label)
      return unfit(`candidate ${i + 1} gives name ${c.name} and label ${c.label}: give one of the two (the same thing)`);
    const kinds = (["files", "patch", "config"] as const).filter((k) => c[k] !== undefined);
    if (kinds.length !== 1)
      return unfit(
        `candidate ${name} gives ${kinds.length ? kinds.join(" and ") : "none of files, patch, config"}; give exactly one (files: the edited files of src/; patch: a diff against src/; config: a Triton config)`,
      );
    if (c.files !== undefined && !Object.keys(c.files).length)
      return unfit(`candidate ${name} gives no files (files: {"src/kernel.cu": "…"}, paths relative to the capture folder)`);
    return { c, name };
  });
  // and the call's candidates together, files and the folders they make: 1024 candidates of 2000 files each made 2 million
  // inodes from one call, 312 of 64 files 30 folders deep 619 000 (adversary 62)
  const given = named.reduce((n, { c }) => n + (c.files ? treeEntries(Object.keys(c.files).map(underSrc)) : 0), 0);
  if (given > CALL_MAX_FILES)
    throw new KerncapError("E_USAGE", `the candidates give ${given} files and folders in all: one evaluate call writes at most ${CALL_MAX_FILES}`, {
      hint: "Split the candidates over several calls.",
    });
  return named;
}

/**
 * Write the candidates into a fresh private folder, with the candidate list eval reads
 * (`kerncap eval --candidate-list`, src/eval/candidates.ts CandidateList): each labelled by its
 * name verbatim. A candidate that does not fit the capture (refusalOf: a path no candidate may
 * write, a patch git apply would refuse, a config for a capture that is not Triton's) is written
 * as its refusal only, none of its content: eval gives it its record (verdict error, with the
 * code) and builds the others. The list is checked first (checkCandidates). kerncap mcp writes
 * them only once the call holds its slot: a call queued behind running ones holds no files.
 * @returns the folder (remove it after the call) and eval's arguments for the candidates
 * @throws KerncapError E_USAGE (checkCandidates), E_NO_REPRODUCER (no src/ for a files candidate)
 */
export function writeCandidates(captureDir: string, list: McpCandidate[]): { folder: string; args: string[] } {
  const manifest = readManifest(captureDir);
  const named = checkCandidates(list);
  const folder = privateTempFolder("kerncap-evaluate-");
  chmodSync(folder, 0o700);
  try {
    // each written under its index (its label is its name, in the list): no name of one can be another's file
    const entries = named.map(({ c, name, unfit }, i) => {
      const refused = unfit ?? refusalOf(captureDir, manifest, c, name);
      if (refused) return { label: name, refused }; // nothing of it is written
      if (c.config !== undefined) return { label: name, config: c.config };
      if (c.patch !== undefined) {
        const p = join(folder, `${i}.patch`); // eval reads a .patch file as a patch
        writeFileSync(p, c.patch);
        return { label: name, spec: p };
      }
      const st = lstatSync(join(captureDir, "src"), { throwIfNoEntry: false });
      if (!st?.isDirectory())
        throw new KerncapError("E_NO_REPRODUCER", `${captureDir} has no src/ folder: no reproducer sources to edit`, {
          hint: "Capture again with the kernel's source available (CUDA: --source-root or --compile-commands).",
        });
      // only the candidate's files (an overlay): eval copies src/ for it when its build starts, never all of them up front
      const overlay = join(folder, String(i));
      for (const [path, text] of Object.entries(c.files!)) {
        const rel = path.replace(/^(\.\/)+/, "").replace(/^src\//, ""); // held to edit_file's rule above (refusalOf)
        const file = join(overlay, "src", rel);
        mkdirSync(dirname(file), { recursive: true });
        rmSync(file, { force: true }); // two paths of one file (a path with and without a leading "./"): the last one's text
        writeFileSync(file, text);
      }
      return { label: name, overlay };
    });
    const listFile = join(folder, "candidates.json");
    writeFileSync(listFile, JSON.stringify({ candidates: entries }));
    return { folder, args: [`--candidate-list=${listFile}`] };
  } catch (e) {
    rmSync(folder, { recursive: true, force: true });
    throw e;
  }
}
