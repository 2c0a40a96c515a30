/**
 * `kerncap tune`'s workflow (the verb, src/cli/commands/tune.ts, parses and prints; MCP's tune
 * tool runs that verb with --confine): the sweep of the capture's frontend (manifest
 * kernel.frontend, its Frontend.tune: Triton's configs compiled by repro.py,
 * src/frontends/triton/tune.ts; CUDA's macros, -maxrregcount and nvcc flags built by build.sh,
 * src/frontends/cuda/tune.ts). A frontend refuses the options of another's tune (and, confined, a
 * capture whose build runs its source without --trust) before anything runs. The gates
 * (./gates.ts): confined, only the build kerncap wrote; a received capture's build only after
 * --trust (handed to the sweep, which asks it after its own usage errors, before its first
 * build); each config a candidate of eval's machinery (src/tune/evaluate.ts tuneEvaluator: eval's
 * build pool, GPU worker and compare); the whole tune inside the no-ASLR retry (tuneVerb).
 */
import { shellPath } from "../util/shell-quote.ts";
import { KerncapError } from "../errors.ts";
import { readManifest } from "../format/capture-dir.ts";
import { assertRebuildWritable } from "../frontends/build.ts";
import { frontendOf, frontends } from "../frontends/index.ts";
import type { TuneResult, TuneSweepOptions } from "../frontends/tune.ts";
import { withAslrRetry } from "../replay/aslr.ts";
import { checkMultiset } from "../replay/tolerance-plan.ts";
import { tuneEvaluator } from "../tune/evaluate.ts";
import { commandAgain, requireRenderedBuild, trustGate } from "./gates.ts";

/** Every option of `kerncap tune`, every frontend's (src/frontends/tune.ts), but the gate and eval's machinery, which are this workflow's. */
export type TuneOptions = Omit<TuneSweepOptions, "gate" | "evaluate">;

/**
 * Tune a capture with its frontend's sweep.
 * @throws KerncapError E_FRONTEND (a frontend without a tune: HIP), E_USAGE (an option of another frontend's tune, a --multiset region the capture lacks), E_UNTRUSTED (confine: a capture whose build runs its source, without trust), the frontend's tune errors
 */
export async function tuneCapture(dir: string, o: TuneOptions): Promise<TuneResult<unknown>> {
  const m = readManifest(dir);
  const fe = frontendOf(m);
  checkMultiset(dir, m, o.multiset); // a --multiset region the capture lacks: a usage error before any build
  assertRebuildWritable(dir); // the configs build under DIR/build/tune: a read-only folder said as such, not as each config's failure
  if (o.confine) requireRenderedBuild(dir, m, "tune"); // confined: only the build kerncap wrote, before anything of the capture runs
  // each config's build runs the capture's build.sh (Triton: imports its Python under src/ with pinned.json's interpreter): code, as validate's build is
  // confined (kerncap mcp): the refusal carries what would run, for an agent that reads the error document, not stderr
  // the tune's own command line, every option kept (a refusal named `kerncap tune DIR` alone: adversary 66's lead)
  const gate = trustGate(dir, m, o.trust ?? false, {
    command: (o.confine ? undefined : commandAgain("tune")) ?? `kerncap tune ${shellPath(dir)}`,
    inMessage: o.confine ?? false,
  });
  if (fe.tune) return fe.tune.run(dir, { ...o, gate, evaluate: tuneEvaluator() });
  const tunable = frontends()
    .filter((f) => f.tune)
    .map((f) => f.label ?? f.name);
  throw new KerncapError(
    "E_FRONTEND",
    `${dir} is a ${m.kernel.frontend} capture; kerncap tune sweeps ${tunable.slice(0, -1).join(", ")}${tunable.length > 1 ? " and " : ""}${tunable.at(-1) ?? "no"} captures`,
    { hint: "Rebuild it with its build.sh and compare with `kerncap replay DIR --against BUILT`." },
  );
}

/**
 * `kerncap tune DIR`: tuneCapture inside the no-ASLR retry (src/replay/aslr.ts): a captured VA
 * range taken by this process's own mappings runs the whole command once more without ASLR.
 * @returns report's exit status (or the retried command's)
 */
export async function tuneVerb(dir: string, o: TuneOptions, report: (r: TuneResult<unknown>) => number, stdout: number | "inherit"): Promise<number> {
  return withAslrRetry(async () => report(await tuneCapture(dir, o)), stdout);
}
