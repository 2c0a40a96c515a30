/**
 * The frontend registry (./frontend.ts): the one list of frontends, and the lookups callers use
 * instead of switching on manifest.kernel.frontend.
 */
import type { FinalizeOptions } from "../capture/finalize.ts";
import { KerncapError } from "../errors.ts";
import type { Manifest } from "../format/manifest.ts";
import { cudaFrontend } from "./cuda/index.ts";
import type { CaptureContext, Frontend } from "./frontend.ts";
import { hipFrontend } from "./hip/index.ts";
import { tritonFrontend } from "./triton/index.ts";

export type { CaptureContext, Frontend } from "./frontend.ts";

/** Every frontend, in the order their capture enrichment runs (Triton first: it claims the cubins it compiled before CUDA renders a C++ reproducer). */
export const FRONTENDS: readonly Frontend[] = [tritonFrontend, cudaFrontend, hipFrontend];

/** The frontend of a capture (manifest.kernel.frontend). @throws KerncapError E_FRONTEND for a name no frontend has */
export function frontendOf(m: Pick<Manifest, "kernel">): Frontend {
  const f = FRONTENDS.find((x) => x.name === m.kernel.frontend);
  if (!f) throw new KerncapError("E_FRONTEND", `unknown frontend ${JSON.stringify(m.kernel.frontend)}`, { hint: `This kerncap knows ${FRONTENDS.map((x) => x.name).join(", ")}.` });
  return f;
}

/** The capture-time environment of every frontend, merged. */
export async function captureEnv(): Promise<Record<string, string>> {
  const env: Record<string, string> = {};
  for (const f of FRONTENDS) Object.assign(env, (await f.captureEnv?.()) ?? {});
  return env;
}

/**
 * Every frontend's enrichment of one capture, in registry order: the first manifest.source, and a
 * beforeRename hook that runs each frontend's in order with the final folder's name.
 */
export function captureEnrichment(ctx: CaptureContext): { source?: Record<string, unknown>; beforeRename: (dir: string, m: Manifest, finalDir: string) => Promise<void> } {
  const parts = FRONTENDS.map((f) => f.enrich?.(ctx) ?? ({} as Pick<FinalizeOptions, "source" | "beforeRename">));
  const source = parts.find((p) => p.source)?.source;
  return {
    ...(source ? { source } : {}),
    beforeRename: async (dir, m, finalDir) => {
      for (const p of parts) await p.beforeRename?.(dir, m, finalDir);
    },
  };
}
