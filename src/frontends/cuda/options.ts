/**
 * `kerncap run`'s CUDA options: where the kernel's source and its exact flags are (./locate.ts)
 * and how the reproducer is made (./repro.ts). Checked before the application runs, not found
 * out after it (found by a trial).
 */
import { existsSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { KerncapError } from "../../errors.ts";
import type { CaptureArg } from "../frontend.ts";
import { compileDatabase } from "./compile-commands.ts";
import type { CudaReproOptions } from "./repro.ts";

export const CUDA_CAPTURE_ARGS = {
  "source-root": {
    type: "string",
    description: "CUDA: the app's source tree (searched for the kernel's __global__ definition and for build*/compile_commands.json)",
  },
  "compile-commands": {
    type: "string",
    description: "CUDA: compile_commands.json (or its folder), or a build log such as `make -n -B TARGET` output, with the kernel TU's exact flags",
  },
  slice: {
    type: "boolean",
    default: true,
    description: "CUDA templated kernels: compile only the captured instantiation (--no-slice: whole TU)",
    negativeDescription: "Compile the kernel's whole translation unit in the reproducer",
  },
  overlay: { type: "boolean", default: false, description: "CUDA: copy only the edited files; the rest is read from the original tree" },
} as const satisfies Record<string, CaptureArg>;

/**
 * The CUDA reproducer's options from the verb's values (paths made absolute).
 * @throws KerncapError E_USAGE: an empty or missing path, a --source-root that is a file, a
 *   --compile-commands folder without a compile database (compileDatabase)
 */
export function cudaCaptureOptions(args: Readonly<Record<string, unknown>>): CudaReproOptions {
  const path = (opt: "source-root" | "compile-commands"): string | undefined => {
    if (args[opt] === undefined) return undefined;
    const p = String(args[opt]);
    if (!p.trim()) throw new KerncapError("E_USAGE", `--${opt} is empty`, { hint: `Give a path with --${opt}, or leave it out.` });
    if (!existsSync(resolve(p))) throw new KerncapError("E_USAGE", `--${opt} ${p} does not exist`, { hint: `Check the path given with --${opt}.` });
    const dir = statSync(resolve(p)).isDirectory();
    if (opt === "source-root" && !dir)
      throw new KerncapError("E_USAGE", `--source-root ${p} is a file, not the application's source folder`, {
        hint: "Give the folder the application was built from (its source tree).",
      });
    if (opt === "compile-commands") compileDatabase(p); // a build folder without a database: the reconfigure command to write one
    return resolve(p);
  };
  return { sourceRoot: path("source-root"), compileCommands: path("compile-commands"), slice: args.slice !== false, overlay: Boolean(args.overlay) };
}
