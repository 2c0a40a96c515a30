/**
 * How a capture library gets into the application, beside the replay's ReplayBackend
 * (src/replay/backends/interface.ts): one Injector per vendor runtime, chosen once per run (`--runtime
 * cuda|hsa`, else by what the machine has). CUDA: libcuda loads the library named by
 * CUDA_INJECTION64_PATH at cuInit (and kerncap puts it on LD_PRELOAD: src/capture/coexist.ts).
 * HSA: ROCr loads the library named by HSA_TOOLS_LIB at hsa_init and calls its OnLoad with the
 * API table (c/hsa/kerncap_hsa.c). Both libraries then read the same KERNCAP_* settings
 * (src/env.ts captureLibraryEnv) and write the same raw capture (docs/raw-capture.md).
 */
import { existsSync } from "node:fs";
import { libcudaOverride } from "../env.ts";
import { KerncapError } from "../errors.ts";
import { libcudaCandidates, probeGpu } from "../native/libcuda.ts";
import { loadHsa } from "../native/libhsa.ts";
import { libraryLoads } from "../native/loader.ts";
import { findCupti } from "../native/libcupti-search.ts";
import { cudaCaptureLibrary, hsaCaptureLibrary } from "./lib.ts";
import { injectionEnv, launchingTool, SANITIZER_WAY_OUT } from "./coexist.ts";
import { captureEnv } from "../frontends/index.ts";

/** What the application needs to have a capture library injected, besides the KERNCAP_* settings. */
export interface Injection {
  /** CUDA_INJECTION64_PATH and LD_PRELOAD, or HSA_TOOLS_LIB; the Triton shim's PYTHONPATH and Inductor settings… */
  env: Record<string, string>;
  /** libcupti for the CUDA library (KERNCAP_CUPTI_PATH). */
  cuptiPath?: string;
  /** What to tell the user about the injection (another tool's injection variable replaced). */
  warnings?: string[];
}

/** Prepares the injection; run only once every input has been checked (it probes the GPU). */
export type PrepareInjection = () => Promise<Injection>;

export const RUNTIMES = ["cuda", "hsa"] as const;
export type Runtime = (typeof RUNTIMES)[number];

export interface Injector {
  readonly runtime: Runtime;
  /** The tool-interface variable the runtime reads the library's path from. */
  readonly variable: "CUDA_INJECTION64_PATH" | "HSA_TOOLS_LIB";
  /** The vendor's word for what the library counts, for messages ("CUDA", "HSA"). */
  readonly label: string;
  prepare: PrepareInjection;
}

/**
 * The CUDA capture library: GPU probe, libcupti, the library extracted from the executable
 * (CUDA_INJECTION64_PATH and LD_PRELOAD: src/capture/coexist.ts), the Triton shim.
 * @throws KerncapError E_NO_GPU, E_NO_CUPTI, E_LIB, E_CACHE, E_TOOL (run under nsys/ncu/compute-sanitizer)
 */
export async function cudaInjection(): Promise<Injection> {
  probeGpu();
  const cuptiPath = findCupti();
  const lib = await cudaCaptureLibrary();
  const tool = launchingTool();
  if (tool) {
    throw new KerncapError(
      "E_TOOL",
      `kerncap is running under ${tool}: that tool and kerncap's capture library both need CUDA's tool injection in the application, so the application cannot run under both`,
      {
        hint:
          tool === "compute-sanitizer"
            ? SANITIZER_WAY_OUT
            : "Capture without the tool, then run the tool on the replay: `ncu kerncap replay DIR`, `nsys profile kerncap replay DIR`.",
      },
    );
  }
  const inj = injectionEnv(lib);
  return { env: { ...inj.env, ...(await captureEnv()) }, cuptiPath, warnings: inj.warnings };
}

/**
 * The HSA capture library through HSA_TOOLS_LIB: the ROCm runtime must load here
 * (libhsa-runtime64, KERNCAP_HSA_PATH first: src/native/libhsa.ts); the library extracted from the
 * executable. A tool's HSA_TOOLS_LIB (rocprof…) is replaced, with a warning: ROCr would load
 * both, and two tools intercepting one queue is not something kerncap has tried.
 * @throws KerncapError E_HSA_NOT_FOUND, E_LIB, E_CACHE
 */
export async function hsaInjection(env: Record<string, string | undefined> = process.env): Promise<Injection> {
  loadHsa();
  const lib = await hsaCaptureLibrary();
  const prev = env.HSA_TOOLS_LIB;
  const warnings =
    prev && prev !== lib
      ? [`HSA_TOOLS_LIB was already set (${prev}); kerncap replaces it for the application, so that tool does not see the application's HSA work`]
      : [];
  return { env: { HSA_TOOLS_LIB: lib }, warnings };
}

export const INJECTORS: Record<Runtime, Injector> = {
  cuda: { runtime: "cuda", variable: "CUDA_INJECTION64_PATH", label: "CUDA", prepare: cudaInjection },
  hsa: { runtime: "hsa", variable: "HSA_TOOLS_LIB", label: "HSA", prepare: () => hsaInjection() },
};

/** Whether libcuda loads in this process (the machine has an NVIDIA driver), or KERNCAP_LIBCUDA names one. */
function hasLibcuda(): boolean {
  return Boolean(libcudaOverride()) || libraryLoads(libcudaCandidates(), "cuInit");
}

/**
 * Whether the machine has an AMD GPU to capture on: the kernel driver's /dev/kfd, and
 * libhsa-runtime64 (KERNCAP_HSA_PATH first) loads. The runtime alone is not enough: a machine with
 * Debian's ROCm packages and no GPU (CI's) must say that no NVIDIA driver is there, not try HSA.
 */
function hasAmdGpu(): boolean {
  if (!existsSync("/dev/kfd")) return false;
  try {
    loadHsa();
    return true;
  } catch {
    return false;
  }
}

/**
 * The runtime to capture on: the one asked for, else the one the machine has (libcuda first, then
 * an AMD GPU with its runtime; neither: CUDA, whose GPU probe then says what is missing). `has` is for tests.
 */
export function chooseRuntime(asked: Runtime | undefined, has: { cuda: () => boolean; hsa: () => boolean } = { cuda: hasLibcuda, hsa: hasAmdGpu }): Runtime {
  if (asked) return asked;
  if (has.cuda()) return "cuda";
  return has.hsa() ? "hsa" : "cuda";
}

/**
 * The injector for `--runtime` (undefined: detect).
 * @throws KerncapError E_USAGE for a runtime kerncap does not know.
 */
export function injectorFor(asked: string | undefined): Injector {
  if (asked !== undefined && !RUNTIMES.includes(asked as Runtime)) {
    throw new KerncapError("E_USAGE", `--runtime ${JSON.stringify(asked)} is not one kerncap captures on`, {
      hint: `Give --runtime ${RUNTIMES.join(" or ")}, or leave it out to use the runtime this machine has.`,
    });
  }
  return INJECTORS[chooseRuntime(asked as Runtime | undefined)];
}
