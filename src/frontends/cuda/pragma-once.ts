/**
 * Which headers hold `#pragma once`, for the incremental preprocessing (./incremental-pp.ts: the
 * #pragma once headers entered before the cut are included again before the synthetic TU's
 * sentinel, so that gcc skips them after it as it does in the whole TU).
 */
import { statSync } from "node:fs";

/**
 * Whether a file's text holds `#pragma once`, by path, size and mtime (the system headers of a TU
 * are read once a process; validate, one process per edit, keeps the answers beside the base:
 * pragmaOnceKnown, rememberPragmaOnce). A stale answer (a file rewritten with the same size in the
 * same mtime) costs an incremental preprocessing that the verification then refuses, never a
 * wrong build.
 */
const onceCache = new Map<string, boolean>();

/** The answers pragmaOnce has (key: path, size, mtime joined by NUL), for rememberPragmaOnce in the next process. */
export function pragmaOnceKnown(): [string, boolean][] {
  return [...onceCache];
}

/** Take the answers a previous process had (pragmaOnceKnown's); entries of another shape are left out. */
export function rememberPragmaOnce(known: unknown): void {
  if (!Array.isArray(known)) return;
  for (const e of known) if (Array.isArray(e) && typeof e[0] === "string" && typeof e[1] === "boolean") onceCache.set(e[0], e[1]);
}

export function pragmaOnce(path: string, readText: (path: string) => string): boolean {
  let key = path;
  try {
    const st = statSync(path);
    key = `${path}\0${st.size}\0${st.mtimeMs}`;
  } catch {
    return false;
  }
  let v = onceCache.get(key);
  if (v === undefined) {
    try {
      v = /^[ \t]*#[ \t]*pragma[ \t]+once\b/m.test(readText(path));
    } catch {
      v = false;
    }
    onceCache.set(key, v);
  }
  return v;
}
