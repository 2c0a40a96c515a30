/**
 * The CUDA C++ frontend: at capture, locate the kernel's source and render a reproducer project
 * (./options.ts: run's options; ./repro.ts: flags, header closure, slice, render; ./locate.ts);
 * before a rebuild, remake a stale slice (./slice.ts); after it, check the rebuilt cubin (kernel
 * present, parameter layout unchanged); once checked, rebuild from the pruned TU's device-only
 * build (./fast-build.ts over ./prune/ and ./incremental-pp.ts).
 */
import type { FastBuilder, Frontend } from "../frontend.ts";
import { fastBuild, FastBuildState, sameKernelCode } from "./fast-build.ts";
import { CUDA_CAPTURE_ARGS, cudaCaptureOptions } from "./options.ts";
import { checkRebuiltModule, cudaReproducerHook, rdcLinkError, type CudaReproOptions } from "./repro.ts";
import { builtCudaSources, remakeStaleSlice, sliceMetaOf } from "./slice.ts";
import { cudaBuildNotes, sliceStateInCapture, foreignSlice, remakeSliceForConfinedBuild } from "./slice-confined.ts";
import { CUDA_TEMPLATES } from "./templates.ts";
import { cudaTune } from "./tune.ts";
import { buildShNvcc } from "./nvcc.ts";
import { cudaDeclaredRegionTypes } from "./declared-types.ts";

/** What a CUDA C++ reproducer's src/ holds: the TU, its project headers (every spelling nvcc and the host compiler read), the slice. */
export const CUDA_SOURCE_SUFFIXES = [
  ".cu",
  ".cuh",
  ".h",
  ".hh",
  ".hpp",
  ".hxx",
  ".h++",
  ".c",
  ".cc",
  ".cpp",
  ".cxx",
  ".c++",
  ".inc",
  ".inl",
  ".ipp",
  ".tcc",
  ".tpp",
  ".def",
] as const;

const prunedBuild: FastBuilder<FastBuildState> = {
  series: (work, sharing) => (work ? FastBuildState.load(work) : FastBuildState.sharing(sharing)),
  build: fastBuild,
  differs: sameKernelCode,
  buildShModule: "build/kernel.cubin", // templates/cuda/build.sh.hbs's default OUTPUT
};

export const cudaFrontend: Frontend<CudaReproOptions> = {
  name: "cuda",
  declaredRegionTypes: cudaDeclaredRegionTypes,
  label: "CUDA",
  validates: true,
  retargets: true,
  captureArgs: CUDA_CAPTURE_ARGS,
  captureOptions: cudaCaptureOptions,
  templates: CUDA_TEMPLATES,
  sourceSuffixes: CUDA_SOURCE_SUFFIXES,
  enrich: (_ctx, o) => ({ beforeRename: cudaReproducerHook(o ?? {}) }), // the hook returns at once for other frontends' captures
  beforeBuild: remakeStaleSlice,
  remakeGenerated: remakeSliceForConfinedBuild,
  confinedCompilesOtherwise: (m) => sliceMetaOf(m)?.kind === "prefix",
  generatedProblem: foreignSlice,
  generatedState: sliceStateInCapture,
  buildNotes: cudaBuildNotes,
  explainBuildFailure: rdcLinkError,
  checkRebuiltModule,
  buildCompiler: buildShNvcc,
  fastBuild: prunedBuild as FastBuilder,
  tune: cudaTune,
  generatedSources: (m) => {
    const meta = sliceMetaOf(m);
    return meta ? [meta.slice] : [];
  },
  generatedFrom: (m, rel) => {
    const meta = sliceMetaOf(m);
    return meta?.slice === rel ? meta.tu : undefined;
  },
  builtSources: (_dir, m) => builtCudaSources(m),
};
