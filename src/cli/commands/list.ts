/** `kerncap list -- <app>`: every kernel the application launches, with count, grid, block, module. */
import { defineCommand } from "citty";
import { listKernels } from "../../capture/session.ts";
import { log } from "../../log.ts";
import { appArgv, jsonArg, printJson, verboseArg } from "../args.ts";
import { kernelTable } from "../format.ts";

export default defineCommand({
  meta: { name: "list", description: "List the kernels an application launches (name, count, grid, block, module). Usage: kerncap list [OPTIONS] -- APP [ARGS…]" },
  args: { ...jsonArg, ...verboseArg },
  async run({ args, rawArgs }) {
    const argv = appArgv(rawArgs);
    const r = await listKernels({ argv, verbose: Boolean(args.verbose), stdoutToStderr: Boolean(args.json) });
    if (args.json) printJson({ app: argv, exitCode: r.app.exitCode, launches: r.launches, kernels: r.kernels });
    else {
      process.stdout.write(kernelTable(r.kernels) + "\n");
      log.info(`${r.kernels.length} kernels, ${r.launches} launches; app exit code ${r.app.exitCode}`);
    }
    return 0;
  },
});
