/**
 * The MCP server's local tools, read_file, list_files and edit_file: they touch only files under
 * a capture folder, all taking paths relative to it by the capture path rule
 * (src/format/paths.ts), no link followed, nothing under build/ read or listed; edit_file writes
 * only the frontend's source files under src/, which must itself resolve inside the folder; never
 * kerncap.json, build.sh, pinned.json, repro.py or a script, at any depth.
 */
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { existsSync, lstatSync, type Stats } from "node:fs";
import { isAbsolute, join, resolve } from "node:path";
import { isKerncapError, KerncapError } from "../errors.ts";
import { escapeForTerminal, jsonText } from "../escape.ts";
import { unportableName } from "../format/archive.ts";
import { readManifest } from "../format/capture-dir.ts";
import { jsonDocument } from "../format/documents.ts";
import { MANIFEST_FILE, type Manifest } from "../format/manifest.ts";
import { hostIdentity } from "../format/received.ts";
import { folderInCapture, readInCapture, resolveInCapture, shownPath, sourcePathProblem, treeEntries, writeInCapture } from "../format/paths.ts";
import { frontendOf, notAnEditableSource } from "../frontends/index.ts";
import { result } from "./children.ts";

/**
 * A capture folder and a path inside it, by the capture path rule (src/format/paths.ts: no link
 * followed, a regular file with one name when it exists); under `sub` when given (`sub/` must be a
 * real folder of the capture). `shown`: the path relative to the capture folder; `stats`: its
 * lstat, undefined when there is no such file yet.
 * @throws KerncapError E_NOT_CAPTURE / E_MANIFEST* (the folder), E_NO_REPRODUCER (no `sub`/),
 *   E_USAGE (outside, or not under `sub`/), E_NOT_SOURCE (a file of the capture's own outside
 *   `sub`/: build.sh, kerncap.json), E_UNSAFE_PATH (a link, a hard link, a FIFO, a NUL …)
 */
function capturePath(dirArg: string, rel: string, sub?: string): { dir: string; shown: string; stats?: Stats; manifest: Manifest } {
  const dir = resolve(dirArg);
  const manifest = readManifest(dir); // a capture folder of its own (not nested in another), or the reader's own error
  if (sub) {
    const s = lstatSync(join(dir, sub), { throwIfNoEntry: false });
    if (!s)
      throw new KerncapError("E_NO_REPRODUCER", `${dir} has no ${sub}/ folder: this capture has no reproducer sources to edit`, {
        hint: "Capture again with the kernel's source available (CUDA: --source-root or --compile-commands); read_file reads the rest of the folder.",
      });
    if (!s.isDirectory())
      throw new KerncapError(
        "E_USAGE",
        `${dir}/${sub} is ${s.isSymbolicLink() ? "a symbolic link" : "not a folder"}: edit_file edits only files inside the capture folder, reached through its own folders (no link followed)`,
        { hint: `Replace ${sub} with a folder holding the sources.` },
      );
  }
  // one rule for both file tools: `rel` is relative to the capture folder; under `sub`, it must start with sub/
  const norm = rel.replace(/^(\.\/)+/, "");
  if (sub && (norm === sub || norm === `${sub}/`))
    throw new KerncapError("E_USAGE", `${rel} names the ${sub}/ folder itself`, { hint: `Give a file under it, e.g. ${sub}/kernel.cu.` });
  if (isAbsolute(rel) || rel.split(/[\\/]/).includes(".."))
    throw new KerncapError("E_UNSAFE_PATH", `${shownPath(rel)} is not a path inside ${sub ? `${dir}/${sub}` : dir}`, {
      hint: sub
        ? `Give a path relative to the capture folder without .. (e.g. ${sub}/kernel.cu); only files under ${sub}/ can be edited.`
        : "Give a path relative to the capture folder, without .. (e.g. src/kernel.cu, build.sh).",
    });
  if (sub && !norm.startsWith(`${sub}/`)) {
    // the capture's own file (build.sh, kerncap.json): no source, E_NOT_SOURCE as evaluate's candidates that write one (nu7 #5: it was E_USAGE here)
    const own = !isAbsolute(rel) && !rel.split(/[\\/]/).includes("..") && existsSync(join(dir, norm)) && !existsSync(join(dir, sub, norm));
    throw new KerncapError(
      own ? "E_NOT_SOURCE" : "E_USAGE",
      `${shownPath(rel)} is not under ${sub}/: paths are relative to the capture folder, and only files under ${sub}/ can be edited`,
      {
        hint:
          isAbsolute(rel) || rel.split(/[\\/]/).includes("..")
            ? `Give a path such as ${sub}/kernel.cu.`
            : norm.split("/")[0]!.toLowerCase() === sub
              ? `Did you mean ${sub}/${norm.split("/").slice(1).join("/")}? (paths are case-sensitive)`
              : existsSync(join(dir, norm)) && !existsSync(join(dir, sub, norm))
                ? `${norm} is the capture's own file, not a reproducer source: read it with read_file; only the sources under ${sub}/ can be edited.`
                : `Did you mean ${sub}/${norm}? (build.sh, README.md and the rest of the folder can be read with read_file, not edited.)`,
      },
    );
  }
  const { stats } = resolveInCapture(dir, norm); // a folder is refused there too: not a regular file
  return {
    dir,
    shown: norm
      .split("/")
      .filter((x) => x && x !== ".")
      .join("/"),
    stats,
    manifest,
  };
}

/** The largest text read_file returns and edit_file writes (bytes): what one can write, the other reads back. */
const TEXT_MAX = 4 << 20;

/** Refuse a file that is not text: a NUL byte, or bytes that are not UTF-8 (an edit would replace them with U+FFFD). */
function assertText(b: Buffer, shown: string, verb: "read_file returns" | "edit_file edits"): void {
  let utf8 = true;
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(b);
  } catch {
    utf8 = false;
  }
  if (b.includes(0) || !utf8)
    throw new KerncapError("E_USAGE", `${shown} is a binary file${utf8 ? "" : " (not UTF-8)"}`, { hint: `${verb} text files (sources, build.sh, README.md).` });
}

/**
 * read_file: a text file of the capture folder, up to TEXT_MAX bytes, but none under build/: what
 * the builds write there (build.sh's slice-build.log, the fast build's TUs) is the compiler's
 * output, which quotes whatever the build read; a confined build that read outside the capture
 * is refused showing none of it (src/frontends/confine.ts), and so is its log.
 * @throws KerncapError E_USAGE (no such file, binary, too large), E_CONFINED (under build/)
 */
export function readFileTool(a: { dir: string; path: string }): CallToolResult {
  let found: ReturnType<typeof capturePath>;
  try {
    found = capturePath(a.dir, a.path);
  } catch (e) {
    // a folder of the capture (src): said as one, with the tool that lists it, not the rule for links
    if (isKerncapError(e) && e.code === "E_UNSAFE_PATH" && isCaptureFolder(a.dir, a.path)) {
      const shown = shownPath(a.path.replace(/^(\.\/)+/, "").replace(/\/+$/, ""));
      throw new KerncapError("E_USAGE", `${shown} is a folder of the capture; read_file reads files`, {
        hint: `List its files with list_files {dir, path: ${JSON.stringify(shown)}}, then read one of them.`,
      });
    }
    throw e;
  }
  const { dir, shown, stats } = found;
  refuseBuildOutputs(shown, "read_file does not read");
  if (!stats)
    throw new KerncapError("E_USAGE", `${shown} is not a file in ${dir}`, {
      hint: "List the reproducer's files with inspect (manifest source) or read README.md.",
    });
  const size = stats.size;
  if (size > TEXT_MAX)
    throw new KerncapError("E_USAGE", `${shown} has ${size} bytes; read_file returns text files up to 4 MiB`, {
      hint: "Read a smaller file; memory images and modules are not text (use inspect and replay for those).",
    });
  const b = readInCapture(dir, shown, TEXT_MAX)!;
  assertText(b, shown, "read_file returns");
  return result(jsonDocument("file", { dir, path: shown, bytes: size, content: withheldMachineId(b.toString("utf8"), shown) }));
}

/**
 * A file's text as an agent may see it: this machine's id withheld (with it, a capture that
 * arrives by git or tar would count as made here: src/format/received.ts). kerncap.json comes
 * back as inspect --json shows it, `host.machineId` null; the id anywhere else, replaced.
 */
export function withheldMachineId(text: string, shown: string): string {
  const id = hostIdentity().machineId;
  if (shown === MANIFEST_FILE) {
    try {
      const m = JSON.parse(text);
      if (m && typeof m === "object" && m.host && typeof m.host === "object" && "machineId" in m.host) {
        m.host.machineId = null;
        return `${jsonText(m, 2)}\n`;
      }
    } catch {
      /* not JSON: replaced below as any text */
    }
  }
  return id ? text.replace(machineIdPattern(id), "(this machine's id, withheld)") : text;
}

/** The id in any case, with or without a UUID's dashes (8-4-4-4-12); an id that is no hex string: as it is. */
function machineIdPattern(id: string): RegExp {
  const hex = id.replace(/-/g, "");
  if (!/^[0-9a-f]{16,}$/i.test(hex)) return new RegExp(id.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), "g");
  return new RegExp(hex.split("").join("-?"), "gi");
}

/** Refuse a path under build/: what the builds write there quotes whatever they read. @throws KerncapError E_CONFINED */
function refuseBuildOutputs(shown: string, what: "read_file does not read" | "list_files does not list"): void {
  if (shown === "build" || shown.startsWith("build/"))
    throw new KerncapError("E_CONFINED", `${what} the build's outputs (${shownPath(shown)}): they quote what the build read, inside the capture or not`, {
      hint: "A build's errors come back in validate's error document; read the sources under src/, build.sh and README.md.",
    });
}

/** Whether `rel` names a real folder of the capture `dirArg` (no link followed); false for anything else or an error. */
function isCaptureFolder(dirArg: string, rel: string): boolean {
  try {
    return folderInCapture(resolve(dirArg), rel) !== undefined;
  } catch {
    return false;
  }
}

/** The most entries list_files returns (src/ itself may hold 2000 files an agent made: SRC_MAX_FILES). */
const LIST_MAX = 2000;

/**
 * One entry of list_files: its path relative to the capture folder, what it is, its bytes (a
 * file), whether an agent edits it (edit_file may write it, and kerncap does not generate it),
 * and, for a file kerncap generates from another (a CUDA slice, src/*.kerncap-slice.cu, made from
 * its TU), generated: true.
 */
type ListedEntry = { path: string; kind: "file" | "folder" | "link" | "other"; bytes: number | null; editable: boolean; generated?: true };

/**
 * list_files: the files and folders under a folder of the capture (`path`, default the capture
 * folder), depth first in sorted order, at most LIST_MAX (`truncated` when there were more). No
 * link is followed (a link is an entry of kind link, never a way in), nothing under build/ is
 * listed (its folder is an entry, its content not walked), and `editable` says whether edit_file
 * may write the file by its name (a regular file with one name that passes edit_file's rule,
 * assertEditableSource: under src/, of the frontend's sources, not generated by kerncap; its
 * content must still be text up to 4 MiB): a CUDA slice (src/*.kerncap-slice.cu) is
 * `editable: false, generated: true`.
 * @throws KerncapError E_NOT_CAPTURE / E_NESTED_CAPTURE / E_MANIFEST* (the folder), E_UNSAFE_PATH
 *   (a path that leaves the capture, passes through a link or a file), E_USAGE (no such folder),
 *   E_CONFINED (under build/)
 */
export function listFilesTool(a: { dir: string; path?: string }): CallToolResult {
  const dir = resolve(a.dir);
  const manifest = readManifest(dir); // a capture folder of its own, or the reader's own error
  const given = a.path ?? ".";
  const folder = folderInCapture(dir, given); // no link followed, nothing outside: E_UNSAFE_PATH
  const rel = given
    .split("/")
    .filter((x) => x && x !== ".")
    .join("/");
  refuseBuildOutputs(rel, "list_files does not list");
  const root = folderInCapture(dir, ".")!;
  if (!folder)
    throw new KerncapError("E_USAGE", `${shownPath(rel)} is not a folder in ${dir}`, {
      hint: "Give a folder of the capture (src, or leave path out for the whole capture folder); list_files {dir} lists them.",
    });
  const entries: ListedEntry[] = [];
  let truncated = false;
  // what kerncap writes under src/ itself (the frontend's generated sources: CUDA's slice, made from its TU)
  const generatedFiles = new Set((frontendOf(manifest).generatedSources?.(manifest) ?? []).map((f) => `src/${f}`));
  for (const { rel: r, st } of treeEntries(root, rel, (f) => f !== "build")) {
    if (entries.length === LIST_MAX) {
      truncated = true;
      break;
    }
    const kind = st.isFile() ? "file" : st.isDirectory() ? "folder" : st.isSymbolicLink() ? "link" : "other";
    // a slice is made from its TU: an edit of it is compiled as it is, then refused (E_SLICE_EDITED) once the TU changes
    const generated = kind === "file" && generatedFiles.has(r);
    entries.push({
      path: r,
      kind,
      bytes: kind === "file" ? st.size : null,
      editable: kind === "file" && st.nlink === 1 && editableName(manifest, r), // edit_file's own rule: a generated file is not editable
      ...(generated ? { generated: true as const } : {}),
    });
  }
  return result(jsonDocument("files", { dir, path: rel || ".", entries, truncated }));
}

/** Whether edit_file's name rule lets an agent write `shown` (a path relative to the capture folder). */
function editableName(manifest: Manifest, shown: string): boolean {
  if (!shown.startsWith("src/")) return false;
  try {
    assertEditableSource(manifest, shown);
    return true;
  } catch {
    return false;
  }
}

/**
 * A source path within the source path limits (src/format/paths.ts sourcePathProblem: 255 bytes a
 * name, 1024 the path, 32 parts): a longer one would be written, then make every later read of
 * the capture (pack, validate) fail.
 * @throws KerncapError E_PACK_NAME
 */
export function assertSourcePathLimits(path: string, who?: string): void {
  const why = sourcePathProblem(path);
  if (why) {
    const shown = path.length > 120 ? `${path.slice(0, 100)}…` : path;
    throw new KerncapError("E_PACK_NAME", `${who ? `${who}: ` : ""}the source path ${escapeForTerminal(JSON.stringify(shown), { oneLine: true })} ${why}`, {
      hint: "Name sources with a shorter path (a few folders, short names), e.g. src/include/util.h.",
    });
  }
}

/**
 * The one rule for what an agent may write under src/ (edit_file, and evaluate's `files` and
 * patches; list_files' `editable` is its answer): a path within the source path limits, a portable
 * name, a source file of the frontend's source set (never kerncap.json, build.sh, pinned.json,
 * repro.py or a script, at any depth), and not one kerncap generates from another (CUDA's slice
 * src/*.kerncap-slice.cu, made from its TU: an edit of it would be compiled as it is, then refused,
 * E_SLICE_EDITED, once the TU changes).
 * @param shown the path relative to the capture folder (src/…)
 * @param who what writes it, for the message (evaluate's "candidate v1's patch"); default edit_file
 * @throws KerncapError E_PACK_NAME, E_NOT_SOURCE (also a generated source, naming the file to edit)
 */
export function assertEditableSource(manifest: Manifest, shown: string, who?: string): void {
  assertSourcePathLimits(shown, who);
  // names are data: a name pack and unpack refuse (a space, $(…), U+202E…) would make the whole capture unpackable, and can reach nvcc's shell
  const unportable = unportableName(shown);
  if (unportable) {
    const quoted = escapeForTerminal(JSON.stringify(shown), { oneLine: true });
    throw new KerncapError(
      "E_PACK_NAME",
      who
        ? `${who} writes ${quoted}, which ${unportable}: a name kerncap pack and unpack refuse`
        : `edit_file writes only portable names, and ${quoted} ${unportable}, which kerncap pack and unpack refuse`,
      {
        hint: "Name the file with letters, digits and ._+- only in each part (no part starting with -), e.g. src/kernel_v2.cu.",
      },
    );
  }
  // only the frontend's sources: never a file kerncap reads as configuration or runs, at any depth (a planted src/x/kerncap.json + build.sh)
  const why = notAnEditableSource(manifest, shown);
  if (why) {
    const message = who
      ? `${who} writes ${shownPath(shown)}, which is not a source file of the reproducer: ${why}`
      : `edit_file writes only the reproducer's source files under src/, and ${shownPath(shown)} is not one: ${why}`;
    throw new KerncapError("E_NOT_SOURCE", message, {
      hint: "Edit the kernel's sources (the files README.md names); build.sh, kerncap.json, pinned.json, repro.py and every script are the user's to change, not an agent's.",
    });
  }
  const fe = frontendOf(manifest); // known: notAnEditableSource refused any other frontend's capture
  // in any case: on a file system that folds case (macOS's, a mounted share), src/x.KERNCAP-slice.cu is the slice itself (adversary 76)
  const generated = (fe.generatedSources?.(manifest) ?? []).find((g) => g.toLowerCase() === shown.slice("src/".length).toLowerCase());
  if (generated !== undefined) {
    const rel = generated;
    const from = fe.generatedFrom?.(manifest, rel);
    const what = `which kerncap generates${from ? ` from src/${from}` : ""} (list_files: editable false, generated true)`;
    throw new KerncapError("E_NOT_SOURCE", who ? `${who} writes ${shownPath(shown)}, ${what}` : `edit_file does not write ${shownPath(shown)}, ${what}`, {
      hint: `Edit ${from ? `src/${from}` : "the file it is made from"} instead: validate remakes ${shownPath(shown)} from it.`,
    });
  }
}

export function editFileTool(a: { dir: string; path: string; oldText?: string; newText?: string; content?: string }): CallToolResult {
  if (typeof a.path === "string") assertSourcePathLimits(a.path); // before any lstat of it (past PATH_MAX: ENAMETOOLONG)
  const { dir, shown, stats, manifest } = capturePath(a.dir, a.path, "src");
  assertEditableSource(manifest, shown);
  let text: string;
  if (a.content !== undefined) {
    if (a.oldText !== undefined)
      throw new KerncapError("E_USAGE", "give content, or oldText and newText, not both", {
        hint: "content replaces the whole file; oldText/newText one passage.",
      });
    text = a.content;
  } else {
    if (a.oldText === undefined || a.newText === undefined)
      throw new KerncapError("E_USAGE", "give oldText and newText (or content)", { hint: "oldText must occur exactly once in the file." });
    if (!stats) throw new KerncapError("E_USAGE", `${shown} does not exist`, { hint: "Create it with content, or check the path with read_file." });
    if (stats.size > TEXT_MAX) throw new KerncapError("E_USAGE", `${shown} is larger than 4 MiB`, { hint: "edit_file edits text files up to 4 MiB." });
    const raw = readInCapture(dir, shown, TEXT_MAX)!;
    assertText(raw, shown, "edit_file edits");
    const old = raw.toString("utf8");
    // the id withheld from read_file is no oracle either: a match of oldText would say the guess was right
    if (withheldMachineId(old, shown) !== old)
      throw new KerncapError("E_USAGE", `${shown} holds this machine's id, which read_file withholds: edit it with content (the whole new file)`, {
        hint: "Give content: the whole new text of the file.",
      });
    const n = old.split(a.oldText).length - 1;
    if (n !== 1)
      throw new KerncapError("E_USAGE", `oldText occurs ${n} times in ${shown}; it must occur exactly once`, {
        hint: n ? "Include more surrounding lines to make it unique." : "Read the file again (read_file); the text differs.",
      });
    text = old.replace(a.oldText, () => a.newText!);
  }
  if (Buffer.byteLength(text) > TEXT_MAX)
    throw new KerncapError("E_USAGE", `the new ${shown} would have ${Buffer.byteLength(text)} bytes; edit_file writes text files up to 4 MiB`, {
      hint: "read_file reads back at most 4 MiB: keep sources under that.",
    });
  if (a.content !== undefined && stats) {
    if (stats.size > TEXT_MAX) throw new KerncapError("E_USAGE", `${shown} is larger than 4 MiB`, { hint: "edit_file edits text files up to 4 MiB." });
    assertText(readInCapture(dir, shown, TEXT_MAX)!, shown, "edit_file edits"); // never replace a binary file wholesale either
  }
  // every write, a rewrite included: a file rewritten larger grows src/ as a new one does (a trial grew it 4 MiB a file)
  assertSourcesRoom(dir, Buffer.byteLength(text), stats ? stats.size : undefined, missingFolders(dir, shown));
  writeInCapture(dir, shown, text); // a temporary file renamed over the name: nothing written through a link
  return result(jsonDocument("edit", { dir, path: shown, bytes: Buffer.byteLength(text) }));
}

/** What an agent's writes may bring src/ to: files and folders, and bytes in all (a build copies src/ whole, every eval candidate too). */
export const SRC_MAX_FILES = 2000;

/** How many folders writing `rel` (a path under src/) would make: the parts of its folder that do not exist yet. */
function missingFolders(dir: string, rel: string): number {
  const parts = rel.split("/").slice(0, -1);
  let n = 0;
  for (let i = parts.length; i > 0; i--) {
    if (existsSync(join(dir, ...parts.slice(0, i)))) break;
    n++;
  }
  return n;
}
const SRC_MAX_BYTES = 64 << 20;

/**
 * Refuse a write of `bytes` that would take DIR/src/ past SRC_MAX_FILES files and folders or SRC_MAX_BYTES
 * (a trial's agent grew src/ without bound, 4 MiB a call, and every later build copied it whole;
 * another grew it by rewriting files it had made small). A new file (`oldBytes` undefined) counts
 * one file more and its bytes; a rewrite counts its size change (bytes - oldBytes), and one that
 * does not grow src/ is never refused, so a project's src/ already past the bound can still be
 * edited. Counts every entry (no link followed) and the bytes of regular files.
 * @param oldBytes the size of the file the write replaces, undefined for a new file
 * @param newFolders the folders a new file's path makes (missingFolders)
 * @throws KerncapError E_USAGE
 */
function assertSourcesRoom(dir: string, bytes: number, oldBytes?: number, newFolders = 0): void {
  const isNew = oldBytes === undefined;
  const delta = bytes - (oldBytes ?? 0);
  if (!isNew && delta <= 0) return;
  // entries, folders too: a trial made 18 001 folders with 600 writes of 3 bytes (each path 30 folders deep)
  let entries = isNew ? 1 + newFolders : 0;
  let total = delta;
  for (const { st } of treeEntries(dir, "src")) {
    entries++;
    if (st.isFile()) total += st.size;
    if ((isNew && entries > SRC_MAX_FILES) || total > SRC_MAX_BYTES)
      throw new KerncapError(
        "E_USAGE",
        `${isNew ? "a new file" : `this rewrite (${delta} bytes more)`} would take src/ past ${SRC_MAX_FILES} files and folders or ${SRC_MAX_BYTES >> 20} MiB, what edit_file lets an agent bring it to`,
        { hint: "Edit the existing sources, or ask the user to remove files of src/ that are not needed." },
      );
  }
}
