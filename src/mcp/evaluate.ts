/**
 * The candidates of `kerncap mcp`'s evaluate tool, written where `kerncap eval` reads them: an
 * agent sends each candidate's text (files that replace or add files of src/, a unified diff
 * against src/, or a Triton config), and the server writes them into a private temporary folder
 * (mode 0700, removed after the call), each as eval takes a candidate (src/eval/candidates.ts): a
 * tree (a copy of the capture's src/ with the files written over it: its name is the candidate's),
 * a `.patch` file, or the config text. Paths of files go through the capture path rule
 * (src/format/paths.ts relativePathProblem): relative to the capture folder and under src/, as
 * edit_file's, no `..`, no absolute path.
 */
import { chmodSync, cpSync, existsSync, lstatSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { privateTempFolder } from "../cache.ts";
import * as v from "valibot";
import { KerncapError } from "../errors.ts";
import { escapedForMessage } from "../format/archive-common.ts";
import { readManifest } from "../format/capture-dir.ts";
import { relativePathProblem } from "../format/paths.ts";
import { patchModeProblem } from "../eval/candidates.ts";
import { patchPaths, readPatch } from "../eval/patch.ts";
import { assertEditableSource } from "./files.ts";

/** One candidate as the tool takes it. */
export const McpCandidate = v.strictObject({
  name: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}$/), v.description("The candidate's name in the results (default c1, c2, …)"))),
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

/**
 * Write the candidates into a fresh private folder.
 * @returns the folder (remove it after the call) and eval's candidate arguments, in order
 * @throws KerncapError E_USAGE (a candidate with none or several of files/patch/config, a bad path, two of one name)
 */
export function writeCandidates(captureDir: string, list: McpCandidate[]): { folder: string; args: string[] } {
  const manifest = readManifest(captureDir);
  const folder = privateTempFolder("kerncap-evaluate-");
  chmodSync(folder, 0o700);
  try {
    const names = new Set<string>();
    const args = list.map((c, i) => {
      const name = c.name ?? `c${i + 1}`;
      if (names.has(name)) throw new KerncapError("E_USAGE", `two candidates are named ${name}`, { hint: "Give each candidate its own name." });
      names.add(name);
      const kinds = (["files", "patch", "config"] as const).filter((k) => c[k] !== undefined);
      if (kinds.length !== 1)
        throw new KerncapError("E_USAGE", `candidate ${name} gives ${kinds.length ? kinds.join(" and ") : "none of files, patch, config"}; give exactly one`, {
          hint: "files: the edited files of src/; patch: a diff against src/; config: a Triton config.",
        });
      if (c.config !== undefined) return c.config;
      if (c.patch !== undefined) {
        // read whole as git apply reads it (src/eval/patch.ts): any header line not understood, a link, a mode, a copy or rename refused
        const why = patchModeProblem(c.patch);
        if (why)
          throw new KerncapError("E_USAGE", `candidate ${name}: the patch ${why}`, {
            hint: "A candidate patch edits the text of source files of src/: no links, no mode changes.",
          });
        // every name it writes, decoded as git decodes it and stripped as eval strips it: edit_file's rule
        const { paths } = patchPaths(readPatch(c.patch).names, existsSync(join(captureDir, "src", "src")));
        for (const rel of paths) {
          const problem = relativePathProblem(rel);
          if (problem)
            throw new KerncapError("E_USAGE", `candidate ${name}: the patch writes ${escapedForMessage(`src/${rel}`)}, which ${problem}`, {
              hint: "Paths are relative to src/ (git diff inside src/) or a/src/… (git diff from the capture folder), as for edit_file.",
            });
          assertEditableSource(manifest, `src/${rel}`);
        }
        const p = join(folder, `${name}.patch`);
        writeFileSync(p, c.patch);
        return p;
      }
      const tree = join(folder, name);
      const src = join(captureDir, "src");
      const st = lstatSync(src, { throwIfNoEntry: false });
      if (!st?.isDirectory())
        throw new KerncapError("E_NO_REPRODUCER", `${captureDir} has no src/ folder: no reproducer sources to edit`, {
          hint: "Capture again with the kernel's source available (CUDA: --source-root or --compile-commands).",
        });
      cpSync(src, tree, { recursive: true, filter: (s) => !lstatSync(s).isSymbolicLink() });
      const files = Object.entries(c.files!);
      if (!files.length) throw new KerncapError("E_USAGE", `candidate ${name} gives no files`, { hint: 'files: {"kernel.cu": "…"}, paths relative to src/.' });
      for (const [path, text] of files) {
        const rel = path.replace(/^(\.\/)+/, "").replace(/^src\//, "");
        const problem = path.replace(/^(\.\/)+/, "").startsWith("src/") ? relativePathProblem(rel) : "is not under src/";
        if (problem)
          throw new KerncapError("E_USAGE", `candidate ${name}: the path ${JSON.stringify(path)} ${problem}`, {
            hint: "Paths are relative to the capture folder and under src/, as for edit_file: src/kernel.cu, src/include/util.h.",
          });
        assertEditableSource(manifest, `src/${rel}`); // edit_file's own rule: the frontend's source files only, portable names
        mkdirSync(dirname(join(tree, rel)), { recursive: true });
        rmSync(join(tree, rel), { force: true });
        writeFileSync(join(tree, rel), text);
      }
      return tree;
    });
    return { folder, args };
  } catch (e) {
    rmSync(folder, { recursive: true, force: true });
    throw e;
  }
}
