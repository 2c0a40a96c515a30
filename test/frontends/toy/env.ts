/**
 * The toy frontend's own variable (Frontend.env): declared here, listed by the registry's
 * envVars() beside the core's while the toy is registered, and read only through the getter
 * below, as a real frontend's are (src/frontends/triton/env.ts).
 */
import type { Env, EnvVarDoc } from "../../../src/env.ts";

export const TOY_ENV_VARS = {
  KERNCAP_TOY_LEVEL: { readers: ["kerncap"], setBy: "user", meaning: "the toy reproducer's level when --toy-level is not given (default 1)" },
} as const satisfies Record<`KERNCAP_${string}`, EnvVarDoc>;

/** $KERNCAP_TOY_LEVEL, else "1": the level --toy-level defaults to. */
export const toyLevelDefault = (env: Env = process.env): string => env.KERNCAP_TOY_LEVEL || "1";
