/**
 * The CUDA C++ frontend: at capture, locate the kernel's source and render a reproducer project
 * (./repro.ts: flags, header closure, slice, render); before a rebuild, remake a stale slice; after
 * it, check the rebuilt cubin (kernel present, parameter layout unchanged).
 */
import { remakeStaleSlice } from "../build.ts";
import type { Frontend } from "../frontend.ts";
import { checkRebuiltModule, cudaReproducerHook } from "./repro.ts";

export const cudaFrontend: Frontend = {
  name: "cuda",
  validates: true,
  enrich: (ctx) => ({ beforeRename: cudaReproducerHook(ctx.cuda) }), // the hook returns at once for other frontends' captures
  beforeBuild: remakeStaleSlice,
  checkRebuiltModule,
};
