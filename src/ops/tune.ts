/**
 * `kerncap tune`'s workflow (the verb, src/cli/commands/tune.ts, parses and prints; MCP's tune
 * tool runs that verb with --confine): the sweep of the capture's frontend (manifest
 * kernel.frontend): Triton's configs compiled by repro.py (src/tune/triton.ts), CUDA's macros,
 * -maxrregcount and nvcc flags built by build.sh (src/tune/cuda.ts). Options of the other frontend
 * are usage errors, said before anything runs. The gates (./gates.ts): confined, only the build
 * kerncap wrote, and a capture whose build runs its source only with --trust; a received
 * capture's build only after --trust (handed to the sweep, which asks it after its own usage
 * errors, before its first build); the whole tune inside the no-ASLR retry (tuneVerb).
 */
import { KerncapError } from "../errors.ts";
import { readManifest } from "../format/capture-dir.ts";
import { cudaFrontend } from "../frontends/cuda/index.ts";
import { frontendOf } from "../frontends/index.ts";
import { tritonFrontend } from "../frontends/triton/index.ts";
import { withAslrRetry } from "../replay/aslr.ts";
import { tuneCuda } from "../tune/cuda.ts";
import type { CudaConfig } from "../tune/cuda-space.ts";
import type { TuneConfig, TuneResult, TuneRunOptions } from "../tune/space.ts";
import { tuneTriton } from "../tune/triton.ts";
import { refuseUntrustedSource, requireRenderedBuild, trustGate } from "./gates.ts";

/** Every option of `kerncap tune`, both frontends'. */
export interface TuneOptions extends TuneRunOptions {
  /** --config specs (Triton: src/tune/space.ts parseConfigSpace; CUDA: src/tune/cuda-space.ts parseCudaSpace). */
  configs: string[];
  /** --grid (Triton only). */
  grid?: string;
  /** --define NAME=V1,V2 (CUDA only). */
  defines: string[];
  /** --maxrregcount V1,V2 (CUDA only). */
  maxrregcount?: string;
  /** --nvcc-flag alternatives (CUDA only). */
  nvccFlags: string[];
  /** --confine (kerncap mcp): CUDA builds confined as validate --confine's; a Triton capture (its build imports the edited source) only with trust. */
  confine?: boolean;
}

/**
 * Tune a capture with its frontend's sweep.
 * @throws KerncapError E_FRONTEND (a HIP capture), E_USAGE (an option of the other frontend), E_UNTRUSTED (confine: a Triton capture without trust), the frontend's tune errors
 */
export async function tuneCapture(dir: string, o: TuneOptions): Promise<TuneResult<TuneConfig> | TuneResult<CudaConfig>> {
  const m = readManifest(dir);
  const fe = frontendOf(m);
  if (o.confine) requireRenderedBuild(dir, m, "tune"); // confined: only the build kerncap wrote, before anything of the capture runs
  // each config's build runs the capture's build.sh (Triton: imports its Python under src/ with pinned.json's interpreter): code, as validate's build is
  const gate = trustGate(dir, m, o.trust ?? false, { command: `kerncap tune ${dir}` });
  const cudaOnly = [o.defines.length ? "--define" : "", o.maxrregcount !== undefined ? "--maxrregcount" : "", o.nvccFlags.length ? "--nvcc-flag" : ""].filter(Boolean);
  if (fe === tritonFrontend) {
    if (cudaOnly.length) throw new KerncapError("E_USAGE", `${cudaOnly.join(", ")}: options of a CUDA capture's tune; ${dir} is a Triton capture`, { hint: "A Triton config sets its constexprs and num_warps, num_stages, maxnreg in --config, e.g. --config 'BLOCK_M=64,128 maxnreg=128'." });
    refuseUntrustedSource(m, o, () => ({
      message: `${dir} is a Triton capture: each config's compile imports the kernel's source under src/, which runs as code with your rights, so a confined tune (kerncap mcp) runs it only with --trust`,
      hint: "Start the MCP server with kerncap mcp --trust-builds to let the agent's Triton tunes run, or tune on the command line.",
    }));
    return tuneTriton(dir, { ...o, gate });
  }
  if (fe === cudaFrontend) {
    if (o.grid !== undefined) throw new KerncapError("E_USAGE", `--grid is a Triton tune's option; ${dir} is a CUDA capture, whose configs keep the captured launch`, { hint: "Sweep macros and flags with --define, --maxrregcount, --nvcc-flag or --config." });
    return tuneCuda(dir, { space: { configs: o.configs, defines: o.defines, maxrregcount: o.maxrregcount, nvccFlags: o.nvccFlags }, iters: o.iters, flushL2: o.flushL2, atol: o.atol, rtol: o.rtol, jobs: o.jobs, trust: o.trust, confine: o.confine, onBuilt: o.onBuilt, gate });
  }
  throw new KerncapError("E_FRONTEND", `${dir} is a ${m.kernel.frontend} capture; kerncap tune sweeps CUDA and Triton captures`, { hint: "Rebuild it with its build.sh and compare with `kerncap replay DIR --against BUILT`." });
}

/**
 * `kerncap tune DIR`: tuneCapture inside the no-ASLR retry (src/replay/aslr.ts): a captured VA
 * range taken by this process's own mappings runs the whole command once more without ASLR.
 * @returns report's exit status (or the retried command's)
 */
export async function tuneVerb(dir: string, o: TuneOptions, report: (r: TuneResult<TuneConfig> | TuneResult<CudaConfig>) => number, stdout: number | "inherit"): Promise<number> {
  return withAslrRetry(async () => report(await tuneCapture(dir, o)), stdout);
}
