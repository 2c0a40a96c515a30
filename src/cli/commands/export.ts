/** `kerncap export DIR -o OUT`: a reproducer folder that builds and runs with the CUDA toolkit alone, or for an AMD capture the HSA runtime (src/export/export.ts). Exit 0; 2 error. */
import { defineCommand } from "citty";
import { basename, resolve } from "node:path";
import { KerncapError } from "../../errors.ts";
import { exportOp } from "../../ops/export.ts";
import { collectWarnings, log } from "../../log.ts";
import { dirArg, jsonArg, printJson, toleranceArgs, toleranceOptions, trustArg, verboseArg } from "../args.ts";
import { formatBytes } from "../../util/format.ts";
import { oneLine } from "../format.ts";
import { shellPath } from "../../util/shell-quote.ts";

export default defineCommand({
  meta: {
    name: "export",
    description:
      "Write a reproducer that needs no kerncap: a CUDA driver-API C program (an HSA one for an AMD capture; and a Triton script for Triton kernels) with the capture's data",
  },
  args: {
    ...dirArg,
    out: {
      type: "string",
      alias: "o",
      description: "Folder to write: a new or empty one (--force replaces a previous export, never another folder); required",
      valueHint: "DIR",
    },
    force: {
      type: "boolean",
      alias: ["f"],
      description: "Replace a previous export at OUT (a folder holding kerncap-export.json); any other non-empty folder is refused even so",
      default: false,
    },
    // the exported programs judge as replay does: the capture's judging settings (kerncap judge), each option given here over its setting
    ...toleranceArgs,
    trust: {
      type: "boolean",
      description:
        "Export a received capture (unpacked, made on another machine, copied, or not yours alone: docs/security.md) after you read what its build runs: the exported make run-src runs that build.sh (a Triton export's repro.py, the kernel file); --trust=DIGEST for a build.sh of its own or a folder another user can write (docs/security.md)",
      default: false,
    },
    ...jsonArg,
    ...verboseArg,
  },
  run({ args, rawArgs }) {
    if (args.out === undefined)
      throw new KerncapError("E_USAGE", "kerncap export needs the folder to write: -o OUT", {
        hint: `Give a new folder, e.g. kerncap export ${oneLine(String(args.dir))} -o ${oneLine(basename(resolve(String(args.dir))))}-repro.`,
      });
    if (!String(args.out).trim()) throw new KerncapError("E_USAGE", "-o is empty", { hint: "Give the folder to write, e.g. -o repro." });
    // every WARN line on stderr is also an entry of --json's warnings (nu10 #22: changed sources, left-out files, judging not applied)
    const warned = collectWarnings();
    let r;
    try {
      r = exportOp(String(args.dir), String(args.out), {
        trust: trustArg(args.trust, rawArgs),
        force: Boolean(args.force),
        ...toleranceOptions(args, rawArgs),
      });
    } finally {
      warned.stop();
    }
    if (args.json) printJson("export", { ...r, warnings: warned.list });
    else {
      const shared = r.bytes.reflinked
        ? `${formatBytes(r.bytes.reflinked)} reflinked, ${formatBytes(r.bytes.copied)} copied`
        : `${formatBytes(r.bytes.copied)} copied`;
      // the kernel name and paths come from the manifest (a received capture): one line each, whatever they hold
      log.success(`exported ${oneLine(r.kernel)} into ${oneLine(r.out)}: ${formatBytes(r.bytes.export)} (data ${shared})`);
      log.info(
        `run it: cd ${oneLine(shellPath(r.out))} && ${r.commands.build} && ${r.commands.run}${r.commands.runSource ? ` ; after an edit of ${oneLine(r.editable ?? "")}: ${r.commands.runSource}` : ""}`,
      );
      if (r.triton)
        log.info(
          `Triton: ${r.commands.triton} (TRITON_INTERPRET=1 for the interpreter)${r.triton.storedPointer ? `; the memory holds captured VAs (${oneLine(r.triton.storedPointer.va)} in region ${oneLine(r.triton.storedPointer.region)}): a kernel that follows them needs ./repro` : ""}`,
        );
      // an AMD code object is for one architecture by design: nothing to say of PTX there
      const nvidia = ["cubin", "fatbin", "ptx"].includes(r.module.kind);
      if (nvidia && !r.module.ptx)
        log.info(
          `the module holds machine code for ${oneLine(r.module.sass.join(", ")) || "no architecture"} only (no PTX): other GPUs need the kernel rebuilt from its source`,
        );
    }
    return 0;
  },
});
