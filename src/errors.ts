/**
 * One error path for the whole tool: library code throws KerncapError (message + hint + exit code);
 * only the CLI entry (src/cli/main.ts) prints it and sets the process exit code.
 *
 * Exit codes: 0 success / match, 1 mismatch (replay, validate), 2 usage or runtime error, 130/143
 * interrupted. Every code, its exit status and its default hint are one row of ERROR_CODES
 * (src/error-codes.ts, listed in docs/errors.md); the codes of the trust model (E_UNSAFE_PATH,
 * E_PACK_LINK, E_UNTRUSTED, E_TRUST_CHANGED, E_CONFINED, E_NESTED_CAPTURE, E_NOT_SOURCE) are
 * described in docs/security.md.
 */
import { ERROR_CODES, type ErrorCode } from "./error-codes.ts";
import { escapeForTerminal } from "./escape.ts";

export { ERROR_CODES, type ErrorCode, isErrorCode } from "./error-codes.ts";

/**
 * A throw site's options. `exitCode` only for E_INTERRUPTED (the signal's own status, 128 + its
 * number: signalExitCode); every other code exits with its table's status.
 */
export type KerncapErrorOptions<C extends ErrorCode> = {
  /** Replaces the table's hint when the site knows better (the path, the option to change). */
  hint?: string;
  cause?: unknown;
  /** Structured facts behind the message, for --json and MCP readers (kerncap.error/1 `error.details`): tune's per-config builds. */
  details?: Record<string, unknown>;
} & (C extends "E_INTERRUPTED" ? { exitCode?: number } : { exitCode?: never });

export class KerncapError<C extends ErrorCode = ErrorCode> extends Error {
  /** What the user can do about it; printed under the message (the site's, else the table's). */
  readonly hint?: string;
  /** Process exit code the CLI uses for this error (the table's, src/error-codes.ts). */
  readonly exitCode: number;
  /** Stable machine-readable code for --json consumers, e.g. "E_CHECKSUM" (a key of ERROR_CODES). */
  readonly code: C;
  /** Structured facts behind the message (KerncapErrorOptions.details), or undefined. */
  readonly details?: Record<string, unknown>;

  constructor(code: C, message: string, opts: KerncapErrorOptions<C> = {} as KerncapErrorOptions<C>) {
    super(message, { cause: opts.cause });
    this.name = "KerncapError";
    this.code = code;
    const row = ERROR_CODES[code];
    this.hint = opts.hint ?? row?.hint;
    if (opts.details) this.details = opts.details;
    this.exitCode = (code === "E_INTERRUPTED" ? opts.exitCode : undefined) ?? row?.exit ?? 2;
  }
}

export function isKerncapError(e: unknown): e is KerncapError {
  return e instanceof KerncapError;
}

/** Whether `f` returns without a KerncapError (a check asked as a question); any other error is thrown on. */
export function passes(f: () => unknown): boolean {
  try {
    f();
    return true;
  } catch (e) {
    if (!isKerncapError(e)) throw e;
    return false;
  }
}

/** What each file-system errno means to the user (Node/Bun set `code` on system errors; see errno(3)). */
const SYSTEM_ERRORS: Record<string, string> = {
  EACCES: "permission denied",
  ENOENT: "no such file or folder (removed meanwhile, or a file system that does not allow creating it there, such as /proc)",
  EPERM: "operation not permitted",
  EROFS: "read-only file system",
  ENOTDIR: "a part of the path is not a folder (or is a dangling symbolic link)",
  EISDIR: "it is a folder",
  EEXIST: "it already exists",
  ENOTEMPTY: "the folder is not empty",
  ENOSPC: "no space left on the device",
  EFBIG: "file too large (the file-size limit, ulimit -f, or the file system's largest file)",
  EDQUOT: "disk quota exceeded",
  EIO: "input/output error",
  EMFILE: "too many open files",
  ENFILE: "too many open files in the system",
  ENAMETOOLONG: "the name is too long",
  ELOOP: "too many levels of symbolic links",
  EXDEV: "it is on another file system",
};

/** syscall → what kerncap was doing, in words (Node's `syscall` field). */
const SYSCALL_VERBS: Record<string, string> = {
  open: "open",
  write: "write",
  read: "read",
  mkdir: "create the folder",
  rmdir: "remove the folder",
  rm: "remove",
  unlink: "remove",
  rename: "rename",
  copyfile: "copy",
  symlink: "create the symbolic link",
  link: "link",
  scandir: "list the folder",
  opendir: "list the folder",
  stat: "read",
  lstat: "read",
  chmod: "change the permissions of",
  ftruncate: "resize",
  truncate: "resize",
  utime: "set the times of",
};

/**
 * `e` with `more` added to its details when it is a KerncapError (a new error of the same code,
 * message, hint and exit status: details are read-only), so that what the verb said on stderr
 * before it failed (its warnings) reaches a --json reader too; anything else as it is.
 * @returns the error to throw
 */
export function withDetails(e: unknown, more: Record<string, unknown>): unknown {
  if (!(e instanceof KerncapError)) return e;
  const x = new KerncapError(e.code, e.message, { hint: e.hint, details: { ...e.details, ...more }, cause: e.cause, exitCode: e.exitCode } as never);
  x.stack = e.stack;
  return x;
}

/**
 * `e` with `path` recorded when it is a system error that names none (writeSync's ENOSPC, EFBIG
 * carry no path: the message would say "while writing the output"); anything else as it is.
 * @returns e, for `throw withPath(e, p)`
 */
export function withPath(e: unknown, path: string): unknown {
  const err = e as NodeJS.ErrnoException;
  if (err && typeof err === "object" && typeof err.code === "string" && !err.path) err.path = path;
  return e;
}

/**
 * `e` marked as a failed read of `path` when it is a system error that names no call or path
 * (Bun's ENAMETOOLONG from lstat and readdir carries neither): systemError then says "cannot read
 * PATH", as it was.
 * @returns e, for `throw whileReading(e, p)`
 */
export function whileReading(e: unknown, path: string): unknown {
  const err = e as NodeJS.ErrnoException;
  if (err && typeof err === "object" && typeof err.code === "string") {
    if (!err.syscall) err.syscall = "read";
    if (!err.path) err.path = path;
  }
  return e;
}

/**
 * An expected file-system failure (a read-only or full folder, a path through a file or a dangling
 * symbolic link, too many open files…) as a KerncapError E_IO naming the operation and the path,
 * e.g. "cannot open /tmp/ro/x.zip.tmp-123: permission denied"; a full disk (ENOSPC, EDQUOT) or a
 * file-size limit (EFBIG) in words of its own that put the fault on the output, e.g. "no space
 * left on device while writing PATH; free space or choose another --out". Undefined for anything
 * else (a genuine bug stays E_INTERNAL). `e`: a Node/Bun system error (`code`, `syscall`, `path`, `dest`).
 */
export function systemError(e: unknown): KerncapError | undefined {
  const err = e as NodeJS.ErrnoException & { dest?: string };
  if (!err || typeof err !== "object" || typeof err.code !== "string") return undefined;
  const what = SYSTEM_ERRORS[err.code];
  if (!what) return undefined;
  // no syscall (Bun leaves it out of some errors, ENAMETOOLONG among them): a neutral verb, never "write" for what may be a read
  const verb = (err.syscall && SYSCALL_VERBS[err.syscall]) ?? (err.syscall ? err.syscall : "reach");
  // a path on one line, its controls escaped: a folder named by someone else (`x\n[kerncap] ✔ …`) prints no line of its own (adversary 90 #01a)
  const shown = (p: string) => escapeForTerminal(p, { oneLine: true });
  const path = err.path ? ` ${shown(err.path)}${err.dest ? ` to ${shown(err.dest)}` : ""}` : "";
  const message = path ? `cannot ${verb}${path}: ${what}` : `cannot ${verb}: ${what} (${err.message})`;
  // a full disk or a size limit is the output's, never the input's (the archive, the capture): its own words; a copy's
  // error names its source as path and the file written as dest (adversary 35: export blamed the capture's memory image)
  const written = err.dest !== undefined ? shown(err.dest) : err.path !== undefined ? shown(err.path) : "the output";
  if (err.code === "ENOSPC" || err.code === "EDQUOT") {
    return new KerncapError(
      "E_IO",
      `${err.code === "ENOSPC" ? "no space left on device" : "disk quota exceeded"} while writing ${written}; free space or choose another --out`,
      { hint: "What was written is removed; nothing is wrong with the input.", cause: e },
    );
  }
  if (err.code === "EFBIG") {
    return new KerncapError("E_IO", `file too large while writing ${written}: past the file-size limit (ulimit -f) or the largest file its file system holds`, {
      hint: "Raise the limit (ulimit -f unlimited) or choose another --out on a file system that holds larger files; nothing is wrong with the input.",
      cause: e,
    });
  }
  const hint =
    err.code === "EIO"
      ? "The disk read or written is failing; write elsewhere (choose another --out / -o) or check the device."
      : err.code === "ENAMETOOLONG"
        ? "A path is longer than the system takes (4096 bytes, 255 a name); move or rename what lies that deep, or work in a folder with a shorter path."
        : err.code === "EMFILE" || err.code === "ENFILE"
          ? "Raise the open-file limit (ulimit -n) or close other programs, then try again."
          : err.syscall === "read" || err.syscall === "stat" || err.syscall === "lstat" || err.syscall === "scandir" || err.syscall === "opendir"
            ? "Check that you may read it (its permissions and its folders'), or work on a copy you can read."
            : "If kerncap was reading it, check that you may read it (or work on a copy); if writing, choose another --out / -o or check the folder's permissions and that every part of the path is a folder.";
  return new KerncapError("E_IO", message, { hint, cause: e });
}
