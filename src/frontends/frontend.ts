/**
 * The frontend interface: what kerncap does differently for kernels from CUDA C++, Triton and HIP.
 * One folder per frontend (src/frontends/<name>/) exports one `Frontend` object; the registry
 * (./index.ts) is the only place that lists them, and every caller looks its frontend up there
 * (`frontendOf(manifest)`) instead of switching on the name. Adding a frontend: a new folder and
 * one line in the registry.
 */
import type { FinalizeOptions } from "../capture/finalize.ts";
import type { Raw } from "../capture/raw.ts";
import type { Manifest } from "../format/manifest.ts";
import type { ElementType } from "../replay/tolerance.ts";
import type { CudaReproOptions } from "./cuda/repro.ts";

/** What a frontend sees of a finished capture before finalize (the raw capture in its temporary folder). */
export interface CaptureContext {
  tmpDir: string;
  raw: Raw;
  /** The --kernel pattern that selected the launch, and the application's command line. */
  pattern: string;
  command: string[];
  /** kerncap run's reproducer options for CUDA sources (--source-root, --compile-commands, --slice, --overlay). */
  cuda: CudaReproOptions;
}

export interface Frontend {
  /** manifest.kernel.frontend */
  readonly name: Manifest["kernel"]["frontend"];
  /** `kerncap validate` (rebuild + replay) is supported for its captures. */
  readonly validates: boolean;
  /**
   * Environment the capture adds to the application's (Triton: its shim first on PYTHONPATH).
   * Every frontend's is added: which frontend a launch belongs to is known only after it.
   */
  captureEnv?(): Promise<Record<string, string>>;
  /**
   * Enrichment at capture: claim the raw capture (Triton recognises the cubins it compiled and
   * sets raw.frontend) and return what finalize stores (manifest.source) and the hook that
   * renders the reproducer project into the folder before its rename. {} when the capture is not
   * this frontend's. Never throws for a missing source: the reason is logged or recorded.
   */
  enrich?(ctx: CaptureContext): Pick<FinalizeOptions, "source" | "beforeRename">;
  /** Before the reproducer's build.sh runs (CUDA: remake a slice whose TU was edited). */
  beforeBuild?(dir: string, m: Manifest): void;
  /** Check a rebuilt module before anything launches (CUDA: cubin, kernel present, parameter layout). @throws KerncapError (exit 2) */
  checkRebuiltModule?(modulePath: string, m: Manifest): void;
  /**
   * Element types of the captured regions this frontend knows (Triton: the signature's pointer
   * types, through the parameter buffer); undefined entries fall back to --dtype / fp32.
   * `written(region, offset)`: whether the app changed the 64 bytes at offset.
   */
  regionTypes?(m: Manifest, params: Uint8Array, written?: (ri: number, offset: number) => boolean): (ElementType | undefined)[];
}
