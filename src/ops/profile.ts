/**
 * `kerncap profile`'s workflow (the verb, src/cli/commands/profile.ts, parses and prints; MCP's
 * profile tool runs that verb, with --confine when it builds): an NVIDIA capture; confined, only
 * the build kerncap wrote (said before anything else is looked for or runs); with --build, a
 * confined build of a capture that runs its source only with --trust and a received capture's
 * build.sh only after --trust (./gates.ts), then the profiled replay (src/profile/profile.ts).
 */
import { shellPath } from "../util/shell-quote.ts";
import { resolve } from "node:path";
import { readManifest } from "../format/capture-dir.ts";
import { assertProfilable, profileReplay, type ProfileOptions, type ProfileResult } from "../profile/profile.ts";
import { refuseUntrustedSource, requireRenderedBuild, requireTrustedBuild } from "./gates.ts";

/**
 * Profile a capture's replay (see the file's comment).
 * @returns the report's path and, for ncu, its key figures
 * @throws KerncapError E_FRONTEND (an AMD capture), E_RENDERED (confined: a build kerncap did not
 *   write), E_UNTRUSTED, and profileReplay's
 */
export async function profileCapture(dirArg: string, o: ProfileOptions): Promise<ProfileResult> {
  const dir = resolve(dirArg);
  const m = readManifest(dir);
  assertProfilable(dir, m);
  // confined (kerncap mcp): only the build kerncap wrote, said before anything else is looked for or runs
  if (o.confine && o.build) requireRenderedBuild(dir, m, "profile --build");
  const gate = () => {
    refuseUntrustedSource(m, o, () => ({
      message: `${dir} is a ${m.kernel.frontend} capture: its build imports the edited source under src/, which runs as code with your rights, so a confined profile --build (kerncap mcp) runs it only with --trust`,
      hint: "Start the MCP server with kerncap mcp --trust-builds to let the agent's Triton builds run, or profile on the command line.",
    }));
    requireTrustedBuild(dir, m, o.trust ?? false, { command: `kerncap profile ${shellPath(dir)} --build`, inMessage: o.confine ?? false });
  };
  return profileReplay(dir, m, { ...o, gate });
}
