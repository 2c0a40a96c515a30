/**
 * A confined fast build's steps (FastBuildOptions.confined): what kerncap eval needs to build its
 * candidates from the pruned TU (src/eval/pruned.ts) with the confinement its build.sh builds
 * have (./build.ts runBuildSh with `confine`, docs/security.md):
 * - before anything runs (prepareConfinedFast): build.sh is the one kerncap rendered
 *   (src/format/rendered.ts), the generated sources (CUDA's slice) are made anew, and no source of
 *   src/ asks the preprocessor about a file outside (./confine-sources.ts assertNoProbes);
 * - each step (build.sh --dryrun for the plan, gcc -E, cicc and ptxas) runs in the same sandbox
 *   (./sandbox.ts: the namespace tree and Landlock where the kernel has them) under the same data,
 *   file-size and wall-clock limits, with a private TMPDIR;
 * - the preprocessor's dependency list is judged by the same rule (./confine.ts outsideReads).
 * The fast build's messages are never shown: where it fails, the candidate's confined build.sh
 * gives the verdict and the compiler's message (only the capture's own diagnostics), except a
 * step past the time limit, which ends the candidate's build as build.sh's would (FastBuildTimedOut).
 */
import { rmSync } from "node:fs";
import { privateTempFolder } from "../cache.ts";
import type { Manifest } from "../format/manifest.ts";
import { requireRenderedBuild } from "../format/rendered.ts";
import { buildTimeout, CONFINED_DATA_KIB, CONFINED_FILE_KIB, FastBuildUnavailable, remakeGeneratedSources, runBuildCommand } from "./build.ts";
import { outsideReads, recordedSources } from "./confine.ts";
import { assertNoProbes } from "./confine-sources.ts";
import type { ConfinedSteps } from "./frontend.ts";
import { confinementFor, SANDBOX_EXIT_CODES, sandboxedArgv, sandboxPaths } from "./sandbox.ts";

/** A confined fast build's step that ran past the confined build's time limit (buildTimeout(true)): the candidate does not build (./build.ts pastTimeLimit). */
export class FastBuildTimedOut extends FastBuildUnavailable {
  constructor(readonly limit: { seconds: number; set: boolean }) {
    super(`a step ran past ${limit.seconds} s`);
  }
}

/**
 * The gates a confined build passes before anything of the folder `dir` runs (./build.ts's, for
 * a folder that is the build's own private copy: kerncap eval's candidate copies): build.sh is
 * kerncap's, the generated sources remade, no probe of a path outside.
 * @throws KerncapError E_NOT_RENDERED, E_CONFINED, E_UNSAFE_PATH (the caller's confined build.sh then says them)
 */
export function prepareConfinedFast(dir: string, m: Manifest): void {
  requireRenderedBuild(dir, m, "eval");
  remakeGeneratedSources(dir, m);
  assertNoProbes(dir, m, dir);
}

/**
 * The steps of a confined fast build of the folder `dir` (a private copy of the capture whose
 * manifest is `m`): ConfinedSteps for FastBuildOptions.confined. The confined build's time limit
 * (buildTimeout) bounds all its steps together, from this call on: a step that would start past
 * it, or runs past it, is FastBuildTimedOut.
 */
export function confinedStepsFor(dir: string, m: Manifest): ConfinedSteps {
  const recorded = recordedSources(dir, m);
  // one time limit for all the steps of the build, as build.sh's one run has (KERNCAP_BUILD_TIMEOUT, --build-timeout)
  const limit = buildTimeout(true);
  const start = performance.now();
  const elapsed = () => (performance.now() - start) / 1000;
  return {
    async run(argv, cwd, env, signal) {
      const left = limit ? Math.ceil(limit.seconds - elapsed()) : 0;
      if (limit && left <= 0) throw new FastBuildTimedOut(limit);
      const timeout = limit ? `timeout -k 5 ${left} ` : "";
      const bounded = ["bash", "-c", `ulimit -d ${CONFINED_DATA_KIB} -f ${CONFINED_FILE_KIB} && exec ${timeout}"$0" "$@"`, ...argv];
      const tmp = privateTempFolder("kerncap-tmp-");
      try {
        const confinement = confinementFor(m.kernel.frontend);
        const run = confinement === "scan" ? bounded : sandboxedArgv(bounded, confinement, sandboxPaths({ folder: dir, tmp, recorded, env }));
        const ran = await runBuildCommand(run, cwd, env, signal, { tmp });
        if (run !== bounded && SANDBOX_EXIT_CODES.includes(ran.code)) throw new FastBuildUnavailable("the sandbox could not be made");
        if (limit && (ran.code === 124 || (ran.code === 137 && elapsed() >= limit.seconds))) throw new FastBuildTimedOut(limit);
        return ran;
      } finally {
        rmSync(tmp, { recursive: true, force: true });
      }
    },
    outside: (depsText) => outsideReads(dir, m, depsText, { cwd: dir }),
  };
}
