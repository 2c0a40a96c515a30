/**
 * `kerncap tune DIR`: the sweep of the capture's frontend (manifest kernel.frontend): Triton's
 * configs compiled by repro.py (./triton.ts), CUDA's macros, -maxrregcount and nvcc flags built by
 * build.sh (./cuda.ts). Options of the other frontend are usage errors, said before anything runs.
 */
import { KerncapError } from "../errors.ts";
import { readManifest } from "../format/capture-dir.ts";
import { requireRenderedBuild } from "../format/rendered.ts";
import { cudaFrontend } from "../frontends/cuda/index.ts";
import { frontendOf } from "../frontends/index.ts";
import { tritonFrontend } from "../frontends/triton/index.ts";
import { tuneCuda } from "./cuda.ts";
import type { CudaConfig } from "./cuda-space.ts";
import type { TuneConfig, TuneResult, TuneRunOptions } from "./space.ts";
import { tuneTriton } from "./triton.ts";

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
  const cudaOnly = [o.defines.length ? "--define" : "", o.maxrregcount !== undefined ? "--maxrregcount" : "", o.nvccFlags.length ? "--nvcc-flag" : ""].filter(Boolean);
  if (fe === tritonFrontend) {
    if (cudaOnly.length) throw new KerncapError("E_USAGE", `${cudaOnly.join(", ")}: options of a CUDA capture's tune; ${dir} is a Triton capture`, { hint: "A Triton config sets its constexprs and num_warps, num_stages, maxnreg in --config, e.g. --config 'BLOCK_M=64,128 maxnreg=128'." });
    if (o.confine && fe.buildRunsSource && !o.trust) {
      throw new KerncapError("E_UNTRUSTED", `${dir} is a Triton capture: each config's compile imports the kernel's source under src/, which runs as code with your rights, so a confined tune (kerncap mcp) runs it only with --trust`, {
        hint: "Start the MCP server with kerncap mcp --trust-builds to let the agent's Triton tunes run, or tune on the command line.",
      });
    }
    return tuneTriton(dir, o);
  }
  if (fe === cudaFrontend) {
    if (o.grid !== undefined) throw new KerncapError("E_USAGE", `--grid is a Triton tune's option; ${dir} is a CUDA capture, whose configs keep the captured launch`, { hint: "Sweep macros and flags with --define, --maxrregcount, --nvcc-flag or --config." });
    return tuneCuda(dir, { space: { configs: o.configs, defines: o.defines, maxrregcount: o.maxrregcount, nvccFlags: o.nvccFlags }, iters: o.iters, flushL2: o.flushL2, atol: o.atol, rtol: o.rtol, jobs: o.jobs, trust: o.trust, confine: o.confine, onBuilt: o.onBuilt });
  }
  throw new KerncapError("E_FRONTEND", `${dir} is a ${m.kernel.frontend} capture; kerncap tune sweeps CUDA and Triton captures`, { hint: "Rebuild it with its build.sh and compare with `kerncap replay DIR --against BUILT`." });
}
