/**
 * The names `kerncap export` writes, checked before anything is written (planProject): each part
 * of every path portable (src/format/archive-common.ts unportableName), a Triton kernel's name a
 * Python identifier. The exported Makefile and build.sh hand the sources to make and a shell, where
 * a file named `saxpy.cu;CMD;#` is a command.
 */
import { lstatSync, readdirSync, realpathSync } from "node:fs";
import { join } from "node:path";
import { KerncapError } from "../errors.ts";
import { escapedForMessage, unportableName } from "../format/archive-common.ts";
import { escapeForTerminal } from "../escape.ts";
import { isLeftOutOfSources } from "../format/file-names.ts";
import { MANIFEST_FILE, type Manifest } from "../format/manifest.ts";
import { fileKind } from "../format/paths.ts";
import { tritonSourceOf } from "../frontends/triton/numerics.ts";

/** One entry of the exported project (planProject): a folder to make, or a regular file to copy with its mode. */
export interface ProjectEntry {
  rel: string;
  dir: boolean;
  mode: number;
}

/**
 * Refuse a name of the export that is not portable (unportableName: each part letters, digits and
 * `._+-`, none starting with `-`, no tool's own file such as `.git`): the exported Makefile and
 * build.sh hand the sources to make and a shell, where `saxpy.cu;CMD;#` is a command.
 * @param rel the path in the export (build.sh, src/…, data/…)
 * @throws KerncapError E_UNSAFE_PATH naming the path (escaped: src/format/archive-common.ts escapedForMessage)
 */
function assertExportedName(capDir: string, rel: string): void {
  const why = unportableName(rel);
  if (!why) return;
  throw new KerncapError(
    "E_UNSAFE_PATH",
    `${escapeForTerminal(capDir, { oneLine: true })}: ${escapedForMessage(rel)} ${why}; kerncap export writes only portable names (its Makefile and build.sh hand them to make and a shell), so nothing was exported`,
    {
      hint: "Rename it with letters, digits and ._+- only (no part starting with -), in the capture and wherever its sources name it, or remove it if the kernel does not need it; then export again. A capture you received: ask the sender to rename it (kerncap pack refuses such names too).",
    },
  );
}

/**
 * What the export will hold of the capture, its names checked (assertExportedName) before anything
 * is written: the data files (copyData's), a Triton capture's kernel file (src/<fnName>.py, which
 * repro.py imports: a Python identifier, never a path of its own), and the reproducer project
 * (build.sh, src/), walked without following links: folders and regular files, sorted. An editor's
 * temporary or backup, or a hidden name under src/, is left out (`leftOut`: isLeftOutOfSources, as
 * pack leaves them out) before its name is checked; anything else that is no regular file or folder
 * (a symbolic link, a FIFO) is refused, as pack and validate refuse it. The copy takes its names
 * from this plan only, so a file another user adds meanwhile is not exported.
 * @returns the project's entries, folders before what they hold, and the paths left out
 * @throws KerncapError E_UNSAFE_PATH (a name that is not portable, a link or other non-regular file), E_IO
 */
export function planProject(capDir: string, m: Manifest): { entries: ProjectEntry[]; leftOut: string[] } {
  for (const rel of [MANIFEST_FILE, ...m.files.map((f) => f.path), m.memory.before, m.memory.after]) assertExportedName(capDir, `data/${rel}`);
  const fn: unknown = m.device.vendor === "amd" ? undefined : tritonSourceOf(m)?.fnName; // the sender's to write in a received capture
  if (fn !== undefined && fn !== null && (typeof fn !== "string" || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(fn)))
    throw new KerncapError(
      "E_UNSAFE_PATH",
      `${escapeForTerminal(capDir, { oneLine: true })}: the Triton kernel's name ${escapedForMessage(String(fn))} in kerncap.json is not a Python identifier; the exported repro.py would import src/ followed by it as a file, so nothing was exported`,
      { hint: "The capture's kerncap.json was edited or damaged: capture the kernel again, or ask the sender for a clean capture (kerncap pack)." },
    );
  if (typeof fn === "string") assertExportedName(capDir, `src/${fn}.py`);
  const entries: ProjectEntry[] = [];
  const leftOut: string[] = [];
  const walk = (rel: string): void => {
    let st;
    try {
      st = lstatSync(join(capDir, rel));
    } catch {
      return;
    }
    if (isLeftOutOfSources(rel)) return void leftOut.push(rel); // a vim swap file holds the user, the host and the file's path
    if (!st.isDirectory() && !st.isFile())
      throw new KerncapError(
        "E_UNSAFE_PATH",
        `${escapeForTerminal(capDir, { oneLine: true })}: ${escapedForMessage(rel)} is ${fileKind(st)}; kerncap export copies only the regular files and folders of the reproducer (a link would ship what it points to), so nothing was exported`,
        {
          hint: "Replace the link with the file itself (cp -L) if the kernel needs it, or remove it; then export again. kerncap pack and validate refuse it too.",
        },
      );
    assertExportedName(capDir, rel);
    entries.push({ rel, dir: st.isDirectory(), mode: st.mode & 0o755 });
    if (st.isDirectory()) for (const n of readdirSync(join(capDir, rel)).sort()) walk(`${rel}/${n}`);
  };
  walk("build.sh");
  walk("src");
  return { entries, leftOut };
}

/**
 * Refuse, before any trust prompt, a capture that kerncap export would refuse for its names
 * (planProject: src/ops/export.ts runs it first, so no one is asked to trust what cannot be exported).
 * @throws KerncapError E_UNSAFE_PATH, E_IO
 */
export function assertExportableNames(dir: string, m: Manifest): void {
  planProject(realpathSync(dir), m);
}
