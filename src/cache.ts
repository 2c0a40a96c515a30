/**
 * The one cache of files that kerncap writes out of its own executable (the capture library, the
 * Triton shim, the reproducer templates): an injected process or a renderer needs a real file, and
 * Bun would otherwise leave a copy in the temp folder at every launch. Each set of files lives in a
 * content-hashed folder `<cache>/<name>-<sha256[:16]>`, written once (a temp folder renamed into
 * place, so a reader never sees half of it; a lost race with another kerncap is fine) and reused.
 *
 * The cache folder is $KERNCAP_CACHE, else $XDG_CACHE_HOME/kerncap, else ~/.cache/kerncap (only
 * when the home folder exists: HOME=/nonexistent means "no home"). When that folder cannot be
 * written (read-only, /proc, no home) and does not already hold the files, they go to
 * $TMPDIR/kerncap-cache-<uid> (mode 0700, ours only), and a warning says so once per process.
 */
import { chmodSync, existsSync, lstatSync, mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { dirname, isAbsolute, join } from "node:path";
import { cacheOverride, type Env } from "./env.ts";
import { KerncapError } from "./errors.ts";
import { log } from "./log.ts";
import { markTemp, removeStaleTemps, TEMP_MARKER, tempFor } from "./leftovers.ts";

export interface CacheFile {
  /** Path inside the folder ("a/b.txt"). */
  path: string;
  bytes: Uint8Array | string;
  /** Mode bits, e.g. 0o755. */
  mode: number;
}

/**
 * The cache folder kerncap prefers, and where that choice came from. A relative KERNCAP_CACHE is
 * refused (it would name a different folder in every working folder, the doctor's included:
 * `doctor` created it in the current folder); a relative XDG_CACHE_HOME is ignored, as the XDG
 * Base Directory specification says.
 * @throws KerncapError E_CACHE for a KERNCAP_CACHE that is not an absolute path
 */
export function preferredCacheDir(env: Env = process.env): { dir: string; from: string } {
  const own = cacheOverride(env);
  if (own && !isAbsolute(own)) {
    throw new KerncapError("E_CACHE", `KERNCAP_CACHE must be an absolute path, got ${JSON.stringify(own)}`, {
      hint: `Set it to an absolute folder, e.g. KERNCAP_CACHE=$PWD/${own.replace(/^\.\//, "")}, or unset it (default ~/.cache/kerncap).`,
    });
  }
  if (own) return { dir: own, from: "KERNCAP_CACHE" };
  if (env.XDG_CACHE_HOME && isAbsolute(env.XDG_CACHE_HOME)) return { dir: join(env.XDG_CACHE_HOME, "kerncap"), from: "XDG_CACHE_HOME" };
  return env.HOME ? { dir: join(env.HOME, ".cache", "kerncap"), from: "HOME" } : { dir: join(homedir(), ".cache", "kerncap"), from: "the home folder of the user (HOME is unset)" };
}

/** The fallback: $TMPDIR/kerncap-cache-<uid>. */
export function fallbackCacheDir(env: Env = process.env): string {
  return join(env.TMPDIR || tmpdir(), `kerncap-cache-${process.getuid?.() ?? "user"}`);
}

/** sha256 over every file's path, mode and bytes, first 16 hex digits. */
export function contentHash(files: CacheFile[]): string {
  const h = new Bun.CryptoHasher("sha256");
  for (const f of files) h.update(`${f.path}\0${f.mode}\0`).update(f.bytes).update("\0");
  return h.digest("hex").slice(0, 16);
}

/**
 * Write `files` into a new folder at `dir`, atomically: into `dir.tmp-<pid>`, then renamed. When
 * another process renamed its copy first, that one is kept. Stale temp folders of killed writers
 * are removed first.
 * @throws the file system's error (EACCES, EROFS, ENOENT, ENOTDIR…) when the folder cannot be written.
 */
export function writeFolderAtomically(dir: string, files: CacheFile[]): void {
  mkdirSync(dirname(dir), { recursive: true });
  removeStaleTemps(dir, existsSync(dir));
  const tmp = tempFor(dir);
  rmSync(tmp, { recursive: true, force: true });
  try {
    mkdirSync(tmp, { recursive: true });
    markTemp(tmp); // a killed writer's folder is then known as kerncap's (src/leftovers.ts)
    for (const f of files) {
      const p = join(tmp, f.path);
      mkdirSync(dirname(p), { recursive: true });
      writeFileSync(p, f.bytes);
      chmodSync(p, f.mode);
    }
    rmSync(join(tmp, TEMP_MARKER), { force: true });
    renameSync(tmp, dir);
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    if (!existsSync(dir)) throw e; // else another kerncap won the race: its copy is the same content
  }
}

const warned = new Set<string>();

/** "EACCES: permission denied, mkdir '/x'" (Node's message names the code, the call and the path). */
function reason(e: unknown): string {
  const x = e as NodeJS.ErrnoException;
  return String(x.message ?? x);
}

/** A fallback folder must be a real folder of ours (not a symlink or another user's folder in a shared /tmp). */
function ensureOwnFolder(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = lstatSync(dir);
  const uid = process.getuid?.();
  if (!st.isDirectory() || (uid !== undefined && st.uid !== uid)) {
    throw Object.assign(new Error(`${dir} is not a folder owned by this user`), { code: "ENOTOURS" });
  }
}

/**
 * The folder `<cache>/<name>-<hash>` holding `files`, written on first use.
 * @returns its absolute path.
 * @throws KerncapError E_CACHE when neither the cache folder nor the TMPDIR fallback can be written.
 */
export function cachedFolder(name: string, files: CacheFile[], env: Env = process.env): string {
  const leaf = `${name}-${contentHash(files)}`;
  const pref = preferredCacheDir(env);
  const fallback = fallbackCacheDir(env);
  const failures: string[] = [];
  // the preferred cache: already there (even read-only) or written now
  const p = join(pref.dir, leaf);
  if (existsSync(p)) return p;
  try {
    const home = dirname(dirname(pref.dir));
    if (pref.from !== "KERNCAP_CACHE" && pref.from !== "XDG_CACHE_HOME" && !existsSync(home)) throw new Error(`the home folder ${home} does not exist`);
    writeFolderAtomically(p, files);
    return p;
  } catch (e) {
    failures.push(`${pref.dir} (from ${pref.from}; ${reason(e)})`);
  }
  const f = join(fallback, leaf);
  try {
    ensureOwnFolder(fallback);
    if (!existsSync(f)) writeFolderAtomically(f, files);
  } catch (e) {
    failures.push(`${fallback} (${reason(e)})`);
    throw new KerncapError("E_CACHE", `kerncap cannot write its cache folder: tried ${failures.join(", then ")}`, {
      hint: "Set KERNCAP_CACHE to a folder you can write (or TMPDIR to a writable temp folder).",
    });
  }
  if (!warned.has(pref.dir)) {
    warned.add(pref.dir);
    log.warn(`cache folder ${failures[0]} cannot be written; using ${fallback} instead (set KERNCAP_CACHE to choose the cache folder)`);
  }
  return f;
}
