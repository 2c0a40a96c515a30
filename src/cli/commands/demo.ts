/** `kerncap demo [DIR]`: write the built-in sample capture (src/capture/demo.ts), to try kerncap without a GPU. Exit 0; 2 error. */
import { defineCommand } from "citty";
import { writeDemo } from "../../capture/demo.ts";
import { KerncapError } from "../../errors.ts";
import { log } from "../../log.ts";
import { jsonArg, printJson, verboseArg } from "../args.ts";
import { formatBytes, plural } from "../../util/format.ts";
import { shellPath } from "../../util/shell-quote.ts";

export default defineCommand({
  meta: {
    name: "demo",
    description:
      "Write a small sample capture (a CUDA saxpy kernel with its reproducer project) to try inspect, pack, validate and the MCP tools without a GPU",
  },
  args: {
    dir: { type: "positional", description: "Capture folder to write (Default: kerncap-demo)", required: false },
    out: { type: "string", alias: "o", description: "Capture folder to write, as DIR (the other verbs that write a folder take -o too)", valueHint: "DIR" },
    force: { type: "boolean", alias: ["f"], description: "Replace a previous capture at DIR (never any other folder)", default: false },
    ...jsonArg,
    ...verboseArg,
  },
  run({ args }) {
    if (args.out !== undefined && args.dir !== undefined && String(args.out) !== String(args.dir))
      throw new KerncapError("E_USAGE", `two folders to write: ${JSON.stringify(String(args.dir))} and -o ${JSON.stringify(String(args.out))}`, {
        hint: "Give the folder once: kerncap demo DIR, or kerncap demo -o DIR.",
      });
    const out = args.out ?? args.dir;
    const { dir, manifest: m } = writeDemo(out === undefined ? "kerncap-demo" : String(out), Boolean(args.force));
    const next = [
      `kerncap inspect ${shellPath(dir)}`,
      `kerncap validate ${shellPath(dir)}`,
      `kerncap pack ${shellPath(dir)}`,
      `kerncap replay ${shellPath(dir)}`,
      `kerncap validate ${shellPath(dir)} --build-only`, // the rebuild alone: what a machine without a GPU can run (a new user's finding)
    ];
    if (args.json)
      printJson("demo", {
        dir,
        kernel: m.kernel.demangled,
        symbol: m.kernel.name,
        arch: m.device.arch,
        regions: m.regions.length,
        beforeBytes: m.memory.beforeBytes,
        next,
      });
    else {
      log.success(
        `wrote the demo capture of ${m.kernel.demangled} into ${dir}: ${plural(m.regions.length, "region")}, ${formatBytes(m.memory.beforeBytes)} live (made on the CPU: its after state is a CPU reference of the kernel)`,
      );
      log.info(
        `next: ${next[0]} ; ${next[1]} (rebuilds src/ with nvcc for ${m.device.arch}, whose replay needs that GPU; with --build-only it only compiles, no GPU needed; replay runs the captured module on any GPU from sm_80) ; ${next[2]}`,
      );
      log.info(`edit ${shellPath(`${dir}/src/saxpy.cu`)} and validate again; on a GPU, ${next[3]} checks the kernel against the after state`);
    }
    return 0;
  },
});
