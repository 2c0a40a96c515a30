/**
 * The Triton frontend's `KERNCAP_*` variables (Frontend.env; src/env.ts holds the core's, and
 * src/frontends/index.ts envVars() both): the shim's switches at capture, and the Python a
 * Triton reproducer runs. kerncap's TypeScript reads them only through the getters below.
 */
import type { Env, EnvVarDoc } from "../../env.ts";

export const TRITON_ENV_VARS = {
  KERNCAP_TRITON: { readers: ["kerncap", "Triton shim"], setBy: "user", meaning: "`0`: no Triton shim on the application's PYTHONPATH" },
  KERNCAP_TRITON_CACHES: {
    readers: ["kerncap"],
    setBy: "user",
    meaning:
      "`1`: keep Inductor's compile workers and caches (kerncap otherwise sets TORCHINDUCTOR_COMPILE_THREADS=1 and TORCHINDUCTOR_FORCE_DISABLE_CACHES=1)",
  },
  KERNCAP_TRITON_SHIM: { readers: ["kerncap"], setBy: "user", meaning: "folder holding a sitecustomize.py to use instead of the embedded shim" },
  KERNCAP_TRITON_LAUNCHES: { readers: ["Triton shim"], setBy: "user", meaning: "`0`: the shim records compiles only, no launch events" },
  KERNCAP_PYTHON: {
    readers: ["Triton reproducer", "kerncap"],
    setBy: "user",
    meaning: "the Python a Triton reproducer's build.sh (and `kerncap tune`) runs (default: the application's, recorded at capture)",
  },
  KERNCAP_PYTHON_USED: { readers: ["Triton reproducer"], setBy: "build.sh", meaning: "set by a Triton build.sh for repro.py's messages: the Python it ran" },
} as const satisfies Record<`KERNCAP_${string}`, EnvVarDoc>;

/** $KERNCAP_TRITON_SHIM: a folder with sitecustomize.py instead of the embedded shim. */
export const tritonShimOverride = (env?: Env) => nonEmpty((env ?? process.env).KERNCAP_TRITON_SHIM);
/** The Triton shim goes on PYTHONPATH unless KERNCAP_TRITON=0. */
export const tritonShimEnabled = (env: Env = process.env) => env.KERNCAP_TRITON !== "0";
/** KERNCAP_TRITON_CACHES=1: leave Inductor's compile workers and caches on. */
export const tritonKeepCaches = (env?: Env) => (env ?? process.env).KERNCAP_TRITON_CACHES === "1";

/** The value, or undefined when unset or empty (as src/env.ts readEnv). */
function nonEmpty(v: string | undefined): string | undefined {
  return v === undefined || v === "" ? undefined : v;
}

/**
 * Environment of the Triton reproducer's repro.py when kerncap runs it itself (`kerncap tune`):
 * the Python it runs (KERNCAP_PYTHON, else `captured`, the application's), named in its messages
 * as build.sh names it (KERNCAP_PYTHON_USED), and its Triton cache.
 */
export function tritonReproducerEnv(captured: string, cacheDir: string, env: Env = process.env): { python: string; env: Record<string, string | undefined> } {
  const python = env.KERNCAP_PYTHON || captured;
  // PYTHONDONTWRITEBYTECODE: no __pycache__ written beside the capture's sources (repro.py runs the kernel file from its bytes, never from a cache)
  return { python, env: { ...env, KERNCAP_PYTHON_USED: python, TRITON_CACHE_DIR: cacheDir, PYTHONDONTWRITEBYTECODE: "1" } };
}
