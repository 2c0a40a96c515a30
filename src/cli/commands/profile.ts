/**
 * `kerncap profile DIR [-- NCU OPTIONS…]`: Nsight Compute on the replay of the captured launch
 * only (src/profile/profile.ts); report in DIR/profile/NAME.ncu-rep, key figures printed or in
 * --json. --build profiles the reproducer's rebuilt kernel; --nsys takes a timeline instead.
 * Exit 0 when a report was written, 2 otherwise.
 */
import { defineCommand } from "citty";
import { profileCapture } from "../../ops/profile.ts";
import { describeProfile } from "../../profile/profile.ts";
import { appArgv, dirArg, intArg, jsonArg, printJson, trustArg, verboseArg, printText, allowVersionMismatchArg } from "../args.ts";

export default defineCommand({
  meta: { name: "profile", description: "Nsight Compute on the replayed launch only (no application): report in DIR/profile/, key figures printed" },
  args: {
    ...dirArg,
    name: { type: "string", description: "Report name: DIR/profile/NAME.ncu-rep (default replay, or build with --build)" },
    export: {
      type: "string",
      alias: ["o"],
      description: "Write the report to FILE instead (ncu's -o/--export: .ncu-rep or .nsys-rep added when missing)",
      valueHint: "FILE",
    },
    force: { type: "boolean", alias: ["f"], description: "Replace an existing report at --export (ncu's -f)", default: false },
    build: { type: "boolean", description: "Profile the reproducer's rebuilt kernel (validate's build of the edited source)", default: false },
    nsys: { type: "boolean", description: "Nsight Systems timeline of the replay instead (DIR/profile/NAME.nsys-rep)", default: false },
    iters: { type: "string", description: "With --nsys: timed launches of the replay", default: "10" },
    ...allowVersionMismatchArg("With --build: "),
    trust: {
      type: "boolean",
      description:
        "With --build: run the build of a received capture (unpacked, made on another machine, copied, or not yours alone: docs/security.md) after you read it, as validate --trust does; --trust=DIGEST: only if the files are the ones the refusal showed (docs/security.md)",
      default: false,
    },
    confine: {
      type: "boolean",
      description:
        "With --build: what kerncap mcp's profile uses, the rebuild of validate --confine (build.sh alone, reading nothing outside the capture, its source root and the toolchain)",
      default: false,
    },
    ...jsonArg,
    ...verboseArg,
  },
  async run({ args, rawArgs }) {
    const iters = intArg("iters", args.iters, 10, 100_000);
    const r = await profileCapture(String(args.dir), {
      name: args.name === undefined ? undefined : String(args.name),
      ...(args.export !== undefined ? { export: String(args.export), overwrite: Boolean(args.force) } : {}),
      build: Boolean(args.build),
      nsys: Boolean(args.nsys),
      iters,
      force: Boolean(args["allow-version-mismatch"]),
      trust: trustArg(args.trust, rawArgs),
      confine: Boolean(args.confine),
      toolOptions: appArgv(rawArgs),
      quiet: !args.verbose,
    });
    if (args.json) printJson("profile", r);
    else printText(describeProfile(r) + "\n");
    return 0;
  },
});
