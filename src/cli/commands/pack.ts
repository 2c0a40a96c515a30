/**
 * `kerncap pack DIR [-o FILE] [--name NAME] [--dry-run]`: one zip of a capture folder, sparse memory
 * images kept sparse (src/format/archive.ts); every file packed is listed (and in --json), with what
 * is left out and why; --dry-run lists them and writes nothing. Exit 0; 2 error; 130/143 interrupted (the temp removed).
 */
import { defineCommand } from "citty";
import { statSync } from "node:fs";
import { basename, join, relative, resolve } from "node:path";
import { KerncapError } from "../../errors.ts";
import { EDITOR_LEFT_OUT, packCapture } from "../../format/archive.ts";
import { collectWarnings, log } from "../../log.ts";
import { escapeForTerminal } from "../../escape.ts";
import { dirArg, jsonArg, printJson, printText, verboseArg } from "../args.ts";
import type { PackResult } from "../../format/archive.ts";
import { formatBytes, leftOutLine, plural } from "../../util/format.ts";
import { archiveProgress } from "../format.ts";
import { shellPath } from "../../util/shell-quote.ts";
import { readManifest } from "../../format/capture-dir.ts";
import { sourcesChanged, sourceChangeText } from "../../frontends/source-changes.ts";

export default defineCommand({
  meta: { name: "pack", description: "Write a capture folder into one .zip to share (memory images stored, holes kept, text deflated)" },
  args: {
    ...dirArg,
    out: { type: "string", alias: "o", description: "Archive to write (default: DIR.zip next to the folder)", valueHint: "FILE" },
    force: { type: "boolean", alias: ["f"], description: "Replace an existing archive that kerncap pack wrote (never another file)", default: false },
    name: {
      type: "string",
      description:
        "The archive's root folder, what unpack creates (default: DIR's name; letters, digits and ._+-, not starting with . or -: for a folder named otherwise)",
      valueHint: "NAME",
    },
    redact: {
      type: "boolean",
      description:
        "Leave the private facts out of the archive's kerncap.json (host name, command line, job environment, GPU UUID and PCI id, the project's absolute paths) and replace them in its README.md; it still unpacks, verifies and replays (docs/archives.md)",
      default: false,
    },
    "dry-run": {
      type: "boolean",
      description:
        "Write nothing: list every file the archive would hold (path, bytes) and what it leaves out and why (build/ …), after the checks of the folder's files and names",
      default: false,
    },
    ...jsonArg,
    ...verboseArg,
  },
  async run({ args }) {
    if (args.out !== undefined && !String(args.out).trim())
      throw new KerncapError("E_USAGE", "-o is empty", { hint: "Give the archive to write, e.g. -o cap.zip." });
    const dir = resolve(String(args.dir));
    const dryRun = Boolean(args["dry-run"]);
    const progress = archiveProgress(basename(dir), Boolean(args.json) || dryRun);
    // every WARN line on stderr is also an entry of --json's warnings (nu10 #22: the private fields' one was not)
    const warned = collectWarnings();
    let r;
    try {
      r = await packCapture(dir, archivePath(args.out === undefined ? undefined : String(args.out), dir), {
        force: Boolean(args.force),
        onProgress: progress.update,
        dryRun,
        ...(args.name !== undefined ? { root: String(args.name) } : {}),
        redact: Boolean(args.redact),
      }).finally(progress.end);
      const temporaries = r.leftOut.filter((l) => l.why === EDITOR_LEFT_OUT).map((l) => l.path);
      if (temporaries.length && !dryRun) log.warn(leftOutLine(temporaries));
      if (r.privateFields.length)
        log.warn(`the archive's kerncap.json holds this capture's ${r.privateFields.join(", ")}; kerncap pack --redact leaves them out`);
      // an edited src/ ships as it is now, as export says it (nu12 #10: pack said nothing; the recipient's inspect lists the files)
      const changed = sourcesChanged(
        dir,
        readManifest(dir),
        r.leftOut.map((l) => l.path),
      );
      if (changed.length)
        log.warn(
          `src/ differs from the source the captured module was built from: ${changed
            .slice(0, 8)
            .map((c) => escapeForTerminal(sourceChangeText(c), { oneLine: true }))
            .join(", ")}${changed.length > 8 ? ", …" : ""}; the archive ships it as it is now (kerncap inspect lists it on the other side)`,
        );
      for (const w of r.warnings) log.warn(`the reproducer may not rebuild elsewhere: ${escapeForTerminal(w, { oneLine: true })}`); // names from the manifest: one line each
    } finally {
      warned.stop();
    }
    if (args.json) printJson("pack", { ...r, warnings: warned.list });
    else if (dryRun) {
      // the list is the answer: on stdout
      printText(
        `${contents(r, `would pack ${plural(r.files, "file")} of ${basename(dir)} into ${r.archive} (${formatBytes(r.bytes.files)}; --dry-run: nothing written)`)}\n`,
      );
    } else {
      log.success(`packed ${plural(r.files, "file")} of ${basename(dir)} into ${r.archive}`);
      log.info(
        `${formatBytes(r.bytes.archive)} archive for ${formatBytes(r.bytes.files)} of files (${formatBytes(r.bytes.data)} of data${r.sparseFiles ? `; ${r.sparseFiles} sparse, holes kept` : ""}) in ${r.seconds.toFixed(2)} s; unpack with: kerncap unpack ${shellPath(fromHere(r.archive))}`,
      );
      log.info(contents(r, "what went in:", SHOWN_AFTER_PACK));
    }
    return 0;
  },
});

/** The files a pack lists after it packed (its --dry-run and --json list them all). */
const SHOWN_AFTER_PACK = 40;

/**
 * The archive's contents in words: `head`, then each file (its bytes, its path; names escaped, one
 * line each; the first `max`, then how many more), then each thing left out with why.
 */
export function contents(r: Pick<PackResult, "list" | "leftOut">, head: string, max = Infinity): string {
  const shown = r.list.slice(0, max);
  const w = Math.max(0, ...shown.map((f) => formatBytes(f.bytes).length));
  const more = r.list.length - shown.length;
  return [
    head,
    ...shown.map((f) => `  ${formatBytes(f.bytes).padStart(w)}  ${escapeForTerminal(f.path, { oneLine: true })}`),
    ...(more > 0 ? [`  … ${plural(more, "file")} more (kerncap pack --dry-run, or --json, lists them all)`] : []),
    ...r.leftOut.map((l) => `  left out: ${escapeForTerminal(l.path, { oneLine: true })} (${l.why})`),
  ].join("\n");
}

/** `path` as the user would type it from the current folder: relative below it, absolute elsewhere. */
function fromHere(path: string): string {
  const rel = relative(process.cwd(), path);
  return rel && !rel.startsWith("..") ? rel : path;
}

/**
 * The archive `kerncap pack DIR -o OUT` writes: DIR.zip beside the folder without -o; inside OUT
 * when OUT names a folder (an existing one, or any name ending in `/`: nu83 #6, `-o outdir/` wrote
 * a file named outdir), as DIR's name + .zip; else OUT itself, with a warning when its name does
 * not end in .zip (the archive is a zip whatever its name; unpack reads it by its content).
 * @throws KerncapError E_USAGE when OUT ends in `/` and no such folder exists
 */
export function archivePath(out: string | undefined, dir: string): string {
  if (out === undefined) return `${dir}.zip`;
  let folder = false;
  try {
    folder = statSync(out, { throwIfNoEntry: false })?.isDirectory() === true;
  } catch {
    // a path through a file, a loop: not a folder; packCapture says what it is
  }
  if (out.endsWith("/") && !folder)
    throw new KerncapError("E_USAGE", `-o ${JSON.stringify(out)} names a folder (it ends in /), and there is none`, {
      hint: `Create the folder first (mkdir -p ${shellPath(out)}), or give the archive's file name, e.g. -o ${shellPath(basename(dir))}.zip.`,
    });
  if (folder) return join(out, `${basename(dir)}.zip`);
  if (!/\.zip$/i.test(out))
    log.warn(`-o ${escapeForTerminal(JSON.stringify(out))}: the archive is a .zip whatever its name; kerncap unpack reads it by its content`);
  return out;
}
