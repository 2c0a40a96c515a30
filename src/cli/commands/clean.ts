/**
 * `kerncap clean DIR… [--eval] [--profile] [--dry-run] [--json]`: remove what kerncap made from
 * captures and can make again (src/ops/clean.ts): build/ (or only eval's candidate copies), and
 * profile/ with --profile. Prints each capture's freed bytes; --dry-run removes nothing.
 */
import { defineCommand } from "citty";
import { KerncapError } from "../../errors.ts";
import { cleanCaptures, cleanTargetsUnder } from "../../ops/clean.ts";
import { formatBytes, plural } from "../../util/format.ts";
import { resolve } from "node:path";
import { jsonArg, printJson, printText, verboseArg } from "../args.ts";
import { printable } from "../format.ts";

export default defineCommand({
  meta: {
    name: "clean",
    description:
      "Remove what kerncap made from captures and makes again when needed: build/ (rebuilt modules, the pruned TU's cache, eval's candidate copies), never what was captured or your source",
  },
  args: {
    dir: {
      type: "positional",
      description: "Capture folders, capture sets (run -c N): each member, or folders that hold captures (searched at any depth, as check finds them)",
      required: false,
    },
    eval: {
      type: "boolean",
      description: "Only build/eval/: eval's candidate copies and their kept modules (the pruned build's cache, which keeps validate fast, stays)",
      default: false,
    },
    profile: { type: "boolean", description: "Also profile/: kerncap profile's ncu and nsys reports", default: false },
    "dry-run": { type: "boolean", description: "Say what would be removed and its size; remove nothing", default: false },
    ...jsonArg,
    ...verboseArg,
  },
  async run({ args }) {
    const paths = (args._ as string[]).map(String);
    if (!paths.length)
      throw new KerncapError("E_USAGE", "clean needs at least one capture folder", { hint: "kerncap clean DIR… [--eval] [--profile] [--dry-run]" });
    const dryRun = Boolean(args["dry-run"]);
    const cleaned = cleanCaptures(await cleanTargetsUnder(paths), { eval: Boolean(args.eval), profile: Boolean(args.profile), dryRun });
    const bytes = cleaned.reduce((a, c) => a + c.bytes, 0);
    // each capture's folder absolute, as every other verb's document gives it (a new user's finding: clean gave it as typed)
    if (args.json) printJson("clean", { dryRun, captures: cleaned.map((c) => ({ ...c, dir: resolve(c.dir) })), bytes });
    else {
      const verb = dryRun ? "would remove" : "removed";
      const lines = cleaned.map((c) =>
        c.removed.length
          ? `${printable(c.dir)}: ${verb} ${c.removed.map((r) => `${r.path}/ (${formatBytes(r.bytes)}, ${plural(r.files, "file")})`).join(", ")}`
          : `${printable(c.dir)}: nothing to remove`,
      );
      printText(
        `${lines.join("\n")}\n${plural(cleaned.length, "capture")}: ${formatBytes(bytes)} ${dryRun ? "to free (--dry-run: nothing removed)" : "freed"}\n`,
      );
    }
    return 0;
  },
});
