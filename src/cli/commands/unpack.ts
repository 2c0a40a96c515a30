/** `kerncap unpack FILE [-o DIR]`: a capture folder back from `kerncap pack`'s zip, holes recreated, checksums checked. Exit 0; 2 error; 130/143 interrupted (the temp removed). */
import { defineCommand } from "citty";
import { KerncapError } from "../../errors.ts";
import { unpackArchive } from "../../format/archive.ts";
import { collectWarnings, log } from "../../log.ts";
import { escapeForTerminal } from "../../escape.ts";
import { jsonArg, printJson, verboseArg } from "../args.ts";
import { formatBytes, plural } from "../../util/format.ts";
import { basename } from "node:path";
import { archiveProgress } from "../format.ts";
import { shellPath } from "../../util/shell-quote.ts";
import { frontendOf } from "../../frontends/index.ts";

export default defineCommand({
  meta: { name: "unpack", description: "Unpack a capture archive (from `kerncap pack`) into a capture folder and check it" },
  args: {
    file: { type: "positional", description: "Archive written by `kerncap pack`", required: true },
    out: { type: "string", alias: "o", description: "Capture folder to write (default: the packed folder's name, in the current folder)", valueHint: "DIR" },
    force: {
      type: "boolean",
      alias: ["f"],
      description:
        "Replace a previous capture at the target (never any other folder): its files and edits are lost (each warned of) and it becomes a received capture; a copy beside it needs another name (-o)",
      default: false,
    },
    ...jsonArg,
    ...verboseArg,
  },
  async run({ args }) {
    if (args.out !== undefined && !String(args.out).trim())
      throw new KerncapError("E_USAGE", "-o is empty", { hint: "Give the folder to write, e.g. -o cap." });
    const progress = archiveProgress(basename(String(args.file)), Boolean(args.json));
    // every WARN line on stderr is also an entry of --json's warnings (--force's losses among them)
    const warned = collectWarnings();
    let r;
    try {
      r = await unpackArchive(String(args.file), args.out ? String(args.out) : undefined, {
        force: Boolean(args.force),
        onProgress: progress.update,
        generated: (m) => (frontendOf(m).generatedSources?.(m) ?? []).map((rel) => `src/${rel}`),
      }).finally(progress.end);
      for (const w of r.warnings) log.warn(`noted at pack time: ${escapeForTerminal(w, { oneLine: true })}`); // the archive's text: one line each
    } finally {
      warned.stop();
    }
    if (args.json) printJson("unpack", { ...r, warnings: warned.list });
    else {
      log.success(
        `unpacked ${plural(r.files, "file")} into ${escapeForTerminal(r.dir, { oneLine: true })} (${formatBytes(r.bytes.files)}${r.sparseFiles ? `, ${r.sparseFiles} sparse` : ""}); checksums of the files match`,
      );
      // unpack checked every checksum (no --verify), and the capture is received: its build shows what it runs before it runs (nu12 #13)
      log.info(
        `next: kerncap inspect ${shellPath(r.dir)} ; kerncap replay ${shellPath(r.dir)} (a GPU) ; kerncap validate ${shellPath(r.dir)} --build-only (shows what its build runs first)`,
      );
    }
    return 0;
  },
});
