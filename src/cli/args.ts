/** Argument fragments shared by several verbs (typed through `as const satisfies`). */
import type { ArgsDef } from "citty";
import { KerncapError } from "../errors.ts";
import { documentId, type DocumentName } from "./documents.ts";

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

/** Parse a non-negative decimal integer option, at most `max`. @throws KerncapError E_USAGE */
export function intArg(name: string, v: unknown, def: number, max = 1_000_000): number {
  if (v === undefined) return def;
  const t = String(v);
  if (!/^[0-9]+$/.test(t) || Number(t) > max) {
    throw new KerncapError("E_USAGE", `--${name} must be a whole number from 0 to ${max}, got ${JSON.stringify(v)}`, {
      hint: `For example --${name} ${def}.`,
    });
  }
  return Number(t);
}

/**
 * Write a verb's JSON document on stdout, with its schema id first (`"schema": "kerncap.<verb>/N"`,
 * src/cli/documents.ts; `kerncap schema VERB` prints its JSON Schema). The one writer of documents.
 */
export function printJson(name: DocumentName, doc: object): void {
  process.stdout.write(JSON.stringify(jsonDocument(name, doc), null, 2) + "\n");
}

/** The document with its schema id (what printJson writes; the MCP server returns the same). */
export function jsonDocument(name: DocumentName, doc: object): Record<string, unknown> {
  return { schema: documentId(name), ...doc };
}
