/**
 * One error path for the whole tool: library code throws KerncapError (message + hint + exit code);
 * only the CLI entry (src/cli/main.ts) prints it and sets the process exit code.
 *
 * Exit codes: 0 success / match, 1 mismatch (replay, validate), 2 usage or runtime error.
 */
export class KerncapError extends Error {
  /** What the user can do about it; printed under the message. */
  readonly hint?: string;
  /** Process exit code the CLI uses for this error (2 unless a verb says otherwise). */
  readonly exitCode: number;
  /** Stable machine-readable code for --json consumers, e.g. "E_CHECKSUM". */
  readonly code: string;

  constructor(code: string, message: string, opts: { hint?: string; exitCode?: number; cause?: unknown } = {}) {
    super(message, { cause: opts.cause });
    this.name = "KerncapError";
    this.code = code;
    this.hint = opts.hint;
    this.exitCode = opts.exitCode ?? 2;
  }
}

export function isKerncapError(e: unknown): e is KerncapError {
  return e instanceof KerncapError;
}
