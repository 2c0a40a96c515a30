/** `kerncap pack DIR [-o FILE] [--name NAME]`: one zip of a capture folder, sparse memory images kept sparse (src/format/archive.ts). Exit 0; 2 error; 130/143 interrupted (the temp removed). */
import { defineCommand } from "citty";
import { basename, relative, resolve } from "node:path";
import { KerncapError } from "../../errors.ts";
import { packCapture } from "../../format/archive.ts";
import { log } from "../../log.ts";
import { escapeForTerminal } from "../../escape.ts";
import { dirArg, jsonArg, printJson, verboseArg } from "../args.ts";
import { formatBytes, leftOutLine, plural } from "../../util/format.ts";
import { archiveProgress } from "../format.ts";
import { shellPath } from "../../util/shell-quote.ts";

export default defineCommand({
  meta: { name: "pack", description: "Write a capture folder into one .zip to share (memory images stored, holes kept, text deflated)" },
  args: {
    ...dirArg,
    out: { type: "string", alias: "o", description: "Archive to write (default: DIR.zip next to the folder)" },
    force: { type: "boolean", alias: ["f"], description: "Replace an existing archive that kerncap pack wrote (never another file)", default: false },
    name: {
      type: "string",
      description: "The archive's root folder, what unpack creates (default: DIR's name; letters, digits and ._+-: for a folder named otherwise)",
      valueHint: "NAME",
    },
    redact: {
      type: "boolean",
      description:
        "Leave the private facts out of the archive's kerncap.json (host name, command line, job environment, GPU UUID and PCI id, the project's absolute paths) and replace them in its README.md; it still unpacks, verifies and replays (docs/archives.md)",
      default: false,
    },
    ...jsonArg,
    ...verboseArg,
  },
  async run({ args }) {
    if (args.out !== undefined && !String(args.out).trim())
      throw new KerncapError("E_USAGE", "-o is empty", { hint: "Give the archive to write, e.g. -o cap.zip." });
    const dir = resolve(String(args.dir));
    const progress = archiveProgress(basename(dir), Boolean(args.json));
    const r = await packCapture(dir, args.out ? String(args.out) : `${dir}.zip`, {
      force: Boolean(args.force),
      onProgress: progress.update,
      ...(args.name !== undefined ? { root: String(args.name) } : {}),
      redact: Boolean(args.redact),
    }).finally(progress.end);
    if (r.leftOut.length) log.warn(leftOutLine(r.leftOut));
    if (r.privateFields.length)
      log.warn(`the archive's kerncap.json holds this capture's ${r.privateFields.join(", ")}; kerncap pack --redact leaves them out`);
    for (const w of r.warnings) log.warn(`the reproducer may not rebuild elsewhere: ${escapeForTerminal(w, { oneLine: true })}`); // names from the manifest: one line each
    if (args.json) printJson("pack", r);
    else {
      log.success(`packed ${plural(r.files, "file")} of ${basename(dir)} into ${r.archive}`);
      log.info(
        `${formatBytes(r.bytes.archive)} archive for ${formatBytes(r.bytes.files)} of files (${formatBytes(r.bytes.data)} of data${r.sparseFiles ? `; ${r.sparseFiles} sparse, holes kept` : ""}) in ${r.seconds.toFixed(2)} s; unpack with: kerncap unpack ${shellPath(fromHere(r.archive))}`,
      );
    }
    return 0;
  },
});

/** `path` as the user would type it from the current folder: relative below it, absolute elsewhere. */
function fromHere(path: string): string {
  const rel = relative(process.cwd(), path);
  return rel && !rel.startsWith("..") ? rel : path;
}
