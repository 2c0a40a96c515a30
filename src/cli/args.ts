/** Argument fragments shared by several verbs (typed through `as const satisfies`). */
import type { ArgsDef } from "citty";

export const jsonArg = {
  json: { type: "boolean", description: "Print machine-readable JSON on stdout (logs stay on stderr)", default: false },
} as const satisfies ArgsDef;

export const verboseArg = {
  verbose: { type: "boolean", description: "Debug logs and stack traces", default: false },
} as const satisfies ArgsDef;

export const dirArg = {
  dir: { type: "positional", description: "Capture folder (written by `kerncap run`)", required: true },
} as const satisfies ArgsDef;

/** The application command line: everything after `--`. */
export function appArgv(rawArgs: string[]): string[] {
  const i = rawArgs.indexOf("--");
  return i < 0 ? [] : rawArgs.slice(i + 1);
}

/** Parse a non-negative integer option. @throws KerncapError E_USAGE */
export function intArg(name: string, v: unknown, def: number): number {
  if (v === undefined || v === "") return def;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) {
    const { KerncapError } = require("../errors.ts") as typeof import("../errors.ts");
    throw new KerncapError("E_USAGE", `--${name} must be a non-negative integer, got ${JSON.stringify(v)}`);
  }
  return n;
}

/** Write a JSON document on stdout. */
export function printJson(x: unknown): void {
  process.stdout.write(JSON.stringify(x, null, 2) + "\n");
}
