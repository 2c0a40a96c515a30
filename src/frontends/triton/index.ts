/**
 * The Triton frontend: at capture, the Python shim (./shim.ts, ./sitecustomize.py) records what
 * Triton compiled and launched; its records are joined with the captured cubin (./join.ts), the
 * capture is marked Triton, manifest.source is stored and a Python reproducer rendered
 * (./repro.ts, ./templates.ts). At replay, the signature gives each region's element type (./numerics.ts).
 */
import type { Frontend } from "../frontend.ts";
import { checkPython } from "./doctor.ts";
import { TRITON_ENV_VARS } from "./env.ts";
import { tritonKernelFile, tritonRunFiles } from "./runs.ts";
import { tritonRebuiltLaunch } from "./launch.ts";
import { regionTypesFromSignature } from "./numerics.ts";
import { TRITON_RECORDS, TRITON_SOURCE_COPIES, tritonEnv, tritonFinalize } from "./shim.ts";
import { TRITON_TEMPLATES } from "./templates.ts";
import { tritonTune } from "./tune.ts";

export const tritonFrontend: Frontend = {
  name: "triton",
  label: "Triton",
  env: TRITON_ENV_VARS,
  doctor: checkPython,
  captureFiles: [TRITON_RECORDS, TRITON_SOURCE_COPIES],
  runFiles: tritonRunFiles,
  validates: true,
  buildRunsSource: true,
  templates: TRITON_TEMPLATES,
  sourceSuffixes: [".py"], // the kernel's module (pinned.json kernelFile) and what it imports
  captureEnv: tritonEnv,
  enrich: (ctx) => tritonFinalize(ctx.tmpDir, ctx.raw, ctx.pattern, ctx.command),
  regionTypes: regionTypesFromSignature,
  rebuiltLaunch: tritonRebuiltLaunch,
  tune: tritonTune,
  builtSources: (dir) => tritonKernelFile(dir),
};
