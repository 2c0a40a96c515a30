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
 *
 * Trust (another local user may write a shared cache or /tmp): a cache folder is used only when
 * every folder from / down to it is the user's or root's, and none that others can write is on the
 * way (a sticky one, such as a 1777 /tmp, only above a folder of the user's); the cache folder
 * itself and each <name>-<hash> folder are the user's and written by no one else (privateFolderRisk).
 * A file found there is used only when it is a regular file of the user's with the embedded bytes
 * and mode (compared whole, before each use); one that differs is written again. A cache folder
 * that fails goes to the fallback, and if that fails too, to a new private folder (mkdtemp, 0700)
 * for this process, each time with a warning naming the folder and why.
 */
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { dirname, isAbsolute, join, parse, resolve, sep } from "node:path";
import { cacheOverride, type Env } from "./env.ts";
import { KerncapError } from "./errors.ts";
import { othersMayWrite } from "./user-group.ts";
import { log } from "./log.ts";
import { escapeForTerminal } from "./escape.ts";
import { markTemp, pidNamespace, processGone, removeStaleTemps, TEMP_MARKER, tempFor } from "./leftovers.ts";

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
  return env.HOME
    ? { dir: join(env.HOME, ".cache", "kerncap"), from: "HOME" }
    : { dir: join(homedir(), ".cache", "kerncap"), from: "the home folder of the user (HOME is unset)" };
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
    mkdirSync(tmp); // never through a link at the name
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
 * Why files under `dir` could be swapped by another user, or undefined when they cannot: a folder
 * on the way from / (the path as written, and its real path) owned by someone other than the user
 * or root; a folder that others can write (group or other write bit), unless it is sticky and the
 * next folder down is the user's or root's (a 1777 /tmp above a 0700 folder of the user's); `dir`
 * itself (existing) not the user's, or writable by others, sticky or not. Folders of `dir` that do
 * not exist yet are fine (kerncap creates them, mode 0700). Source: lstat/stat owner and mode bits.
 * The one test for every folder kerncap keeps its own files in: the cache folder, and the state
 * folder of the trust records (src/format/trust-records.ts).
 * @returns e.g. "/srv/cache is writable by other users (mode 1777)"
 */
export function privateFolderRisk(dir: string, uid = process.getuid?.()): string | undefined {
  if (uid === undefined) return undefined; // no users to tell apart (not POSIX)
  const chains = [dir];
  try {
    const head = longestExisting(dir);
    chains.push(join(realpathSync(head), dir.slice(head.length)));
  } catch {
    /* nothing of it exists yet */
  }
  for (const chain of chains) {
    const parts = chain.split(sep).filter(Boolean);
    let path = parse(chain).root;
    let prevOpen: string | undefined; // a sticky folder others can write, above this one
    for (let i = 0; i <= parts.length; i++) {
      if (i > 0) path = join(path, parts[i - 1]!);
      let st;
      try {
        st = lstatSync(path);
      } catch {
        break; // the rest does not exist yet
      }
      const mode = (st.mode & 0o7777).toString(8).padStart(4, "0");
      if (st.uid !== uid && st.uid !== 0) return `${path} belongs to another user (uid ${st.uid})`;
      if (prevOpen && st.uid !== uid && !st.isSymbolicLink()) return `${path} is not yours, inside ${prevOpen}, which others can write`;
      if (prevOpen && st.isSymbolicLink() && st.uid !== uid) return `${path} is a symbolic link that is not yours, inside ${prevOpen}, which others can write`;
      prevOpen = undefined;
      if (st.isSymbolicLink()) continue; // its target's folders are the real path's chain
      const othersWrite = othersMayWrite(st, path); // a group write bit of the user's private group is the user's own (but through an ACL)
      const last = i === parts.length;
      if (last && st.uid !== uid) return `${path} belongs to another user (uid ${st.uid})`;
      if (othersWrite && (last || (st.mode & 0o1000) === 0)) return `${path} is writable by other users (mode ${mode})`;
      if (othersWrite) prevOpen = `${path} (mode ${mode})`;
    }
  }
  return undefined;
}

/** The longest prefix of `p` that exists (at worst the root). */
function longestExisting(p: string): string {
  let head = p;
  while (!existsSync(head) && dirname(head) !== head) head = dirname(head);
  return head;
}

/**
 * Why the folder `p` (a <name>-<hash> cache folder) does not hold exactly `files`, or undefined when
 * it does: each a regular file (not a link) of the user's, written by no one else, with the
 * embedded bytes and mode. Reads every file whole (the capture library: ~1 MB).
 */
function cachedCopyRisk(p: string, files: CacheFile[], uid = process.getuid?.()): string | undefined {
  const own = (st: { uid: number; mode: number }) => (uid === undefined || st.uid === uid) && (st.mode & 0o022) === 0;
  if (!own(lstatSync(p))) return `${p} is not yours alone`;
  for (const f of files) {
    const path = join(p, f.path);
    const st = lstatSync(path, { throwIfNoEntry: false });
    if (!st?.isFile() || !own(st)) return `${path} is ${st ? "not a regular file of yours alone" : "missing"}`;
    if ((st.mode & 0o7777) !== f.mode) return `${path} has mode ${(st.mode & 0o7777).toString(8)}, not ${f.mode.toString(8)}`;
    const want = typeof f.bytes === "string" ? Buffer.from(f.bytes) : f.bytes;
    if (st.size !== want.length || Buffer.compare(readFileSync(path), want) !== 0) return `${path} differs from the copy embedded in kerncap`;
  }
  return undefined;
}

/** Warn once per folder and reason. */
function warnOnce(key: string, text: string): void {
  if (warned.has(key)) return;
  warned.add(key);
  log.warn(text);
}

/**
 * `files` in `<root>/<leaf>`, when `root` is safe (privateFolderRisk): the copy there when it holds
 * exactly the files, else written (again). @returns the folder, or the reason it is not used
 * @throws the file system's error when it cannot be written
 */
function useCache(root: string, leaf: string, files: CacheFile[]): { dir: string } | { risk: string } {
  const risk = privateFolderRisk(root);
  if (risk) return { risk };
  const p = join(root, leaf);
  if (existsSync(p)) {
    const copy = cachedCopyRisk(p, files);
    if (!copy) return { dir: p };
    warnOnce(p, `${copy}; writing it again`);
    rmSync(p, { recursive: true, force: true });
  }
  mkdirSync(root, { recursive: true, mode: 0o700 });
  writeFolderAtomically(p, files);
  return { dir: p };
}

/**
 * The folder `<cache>/<name>-<hash>` holding `files`, written on first use, used only where no
 * other user can have written it (module comment).
 * @returns its absolute path.
 * @throws KerncapError E_CACHE when neither the cache folder, nor the TMPDIR fallback, nor a new
 *   private temp folder can be written (a fallback another user made or planted is not written
 *   into: the private temp folder is used instead).
 */
export function cachedFolder(name: string, files: CacheFile[], env: Env = process.env): string {
  const leaf = `${name}-${contentHash(files)}`;
  const pref = preferredCacheDir(env);
  const fallback = fallbackCacheDir(env);
  const failures: string[] = [];
  let unsafe = false; // said already: the preferred folder is not used because others could write it
  // the preferred cache: already there (even read-only) or written now
  try {
    const home = dirname(dirname(pref.dir));
    if (pref.from !== "KERNCAP_CACHE" && pref.from !== "XDG_CACHE_HOME" && !existsSync(home)) throw new Error(`the home folder ${home} does not exist`);
    const r = useCache(pref.dir, leaf, files);
    if ("dir" in r) return r.dir;
    unsafe = true;
    warnOnce(
      `risk ${pref.dir}`,
      `cache folder ${pref.dir} (from ${pref.from}) is not used: ${r.risk}, so another user could plant a file kerncap would load; fix: chmod go-w the folder, or set KERNCAP_CACHE to a folder of your own`,
    );
    failures.push(`${pref.dir} (from ${pref.from}; ${r.risk})`);
  } catch (e) {
    failures.push(`${pref.dir} (from ${pref.from}; ${reason(e)})`);
  }
  const f = join(fallback, leaf);
  try {
    ensureOwnFolder(fallback);
    const r = useCache(fallback, leaf, files);
    if ("risk" in r) {
      // the fallback is unsafe too: a folder of this process's own, left behind at exit as Bun's temp copies were
      const own = privateTempFolder("kerncap-private-", env.TMPDIR || tmpdir());
      writeFolderAtomically(join(own, leaf), files);
      warnOnce(`risk ${fallback}`, `the fallback cache ${fallback} is not used either: ${r.risk}; using a private copy in ${own}`);
      return join(own, leaf);
    }
  } catch (e) {
    failures.push(`${fallback} (${reason(e)})`);
    // the fallback is another user's (planted in a shared /tmp) or cannot be made: a private copy of this process's own,
    // as for an unsafe one (adversary 34: a planted /tmp/kerncap-cache-UID left kerncap-confine unwritten, and a
    // received capture's build ran with no sandbox)
    try {
      const own = privateTempFolder("kerncap-private-", env.TMPDIR || tmpdir());
      writeFolderAtomically(join(own, leaf), files);
      warnOnce(`private ${fallback}`, `cache folders not usable: tried ${failures.join(", then ")}; using a private copy in ${own}`);
      return join(own, leaf);
    } catch (e2) {
      failures.push(`a private temp folder (${reason(e2)})`);
    }
    throw new KerncapError("E_CACHE", `kerncap cannot write its cache folder: tried ${failures.join(", then ")}`, {
      hint: "Set KERNCAP_CACHE to a folder you can write (or TMPDIR to a writable temp folder).",
    });
  }
  if (unsafe) warnOnce(`fallback ${pref.dir}`, `using ${fallback} instead`);
  else warnOnce(pref.dir, `cache folder ${failures[0]} cannot be written; using ${fallback} instead (set KERNCAP_CACHE to choose the cache folder)`);
  return f;
}

/** `base\0prefix` pairs already swept by this process. */
const swept = new Set<string>();

/**
 * Remove, once per process for each `base` and `prefix`, the folders `prefix<pid>-[n<pid namespace>-]*`
 * in `base` that privateTempFolder made for a process that is gone (processGone: none with that pid
 * in this pid namespace; a folder of another namespace is left alone). Only a folder
 * (lstat: no link) of the effective user with no bit for group or others is removed, as
 * privateTempFolder makes them; anything else of that name is left. Never throws.
 */
export function sweepDeadFolders(base: string, prefix: string): void {
  const key = `${base}\0${prefix}`;
  if (swept.has(key)) return;
  swept.add(key);
  const uid = process.geteuid?.();
  const named = new RegExp(`^${prefix.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}(\\d+)-(?:n(\\d+)-)?[^/-]+$`);
  let names: string[];
  try {
    names = readdirSync(base);
  } catch {
    return;
  }
  for (const n of names) {
    const m = named.exec(n);
    if (!m || !processGone(Number(m[1]), m[2])) continue;
    const p = join(base, n);
    try {
      const st = lstatSync(p);
      if (!st.isDirectory() || (uid !== undefined && st.uid !== uid) || (st.mode & 0o077) !== 0) continue;
      rmSync(p, { recursive: true, force: true });
      log.debug(`removed ${p}: left by kerncap process ${m[1]}, which is gone`);
    } catch {
      // another kerncap removed it first, or it cannot be removed: left as it is
    }
  }
}

/**
 * A new private folder under TMPDIR (os.tmpdir(), or `base`) for this process:
 * mkdtemp(`prefix<pid>-n<pid namespace>-`XXXXXX), mode 0700, checked after it is made to be a folder (not a link) of the effective user with no
 * bit for group or others. TMPDIR is vetted first (privateFolderRisk of a name inside it): in a
 * TMPDIR that others can write and that is not sticky (or that belongs to another user), another
 * user could rename kerncap's folder away and put one of theirs at its name (rename(2),
 * RENAME_EXCHANGE) between the mkdtemp and its use (a build.sh run from it), so it is refused.
 * The one way kerncap makes a scratch folder under TMPDIR; the caller removes it. A kerncap killed
 * before it could (kill -9, the OOM killer, an MCP server killed during a call) leaves its folder:
 * the first call of each prefix in a process removes the user's own `prefix<pid>-*` folders whose
 * process is gone (sweepDeadFolders).
 * @returns the folder's absolute path
 * @throws KerncapError E_TMPDIR naming TMPDIR and why (writable by others and not sticky, another
 *   user's, mkdtemp failing: missing, read-only)
 */
export function privateTempFolder(prefix: string, base = tmpdir()): string {
  const hint = "Set TMPDIR to a folder of your own that no other user can write (e.g. mkdir -m 700 ~/tmp && export TMPDIR=~/tmp).";
  // nvcc pastes its temporary files' paths, in double quotes, into the shell lines of its steps (adversary 49: a TMPDIR
  // named with $(…) ran it in every build)
  if (/[$`"\\\n]/.test(base))
    throw new KerncapError("E_TMPDIR", `TMPDIR ${JSON.stringify(base)} holds $, \`, ", \\ or a newline, which a compiler's shell steps would read as code`, {
      hint: "Set TMPDIR to a folder of your own whose path has none of them (e.g. mkdir -m 700 ~/tmp && export TMPDIR=~/tmp).",
    });
  // TMPDIR and the folders above it, judged through a name no one can have made beforehand (adversary 69: another user's
  // empty /tmp/kerncap-eval-x, at the fixed name judged, made every other user's eval refuse TMPDIR); mkdtemp's folder is checked below
  const risk = privateFolderRisk(join(base, `${prefix}${randomBytes(9).toString("hex")}`));
  if (risk)
    throw new KerncapError("E_TMPDIR", `TMPDIR ${base} is not safe for kerncap's private folders: ${risk}; another user could swap them`, {
      hint,
    });
  sweepDeadFolders(base, prefix);
  let dir: string;
  try {
    // the pid namespace in the name: a kerncap in another one (a container sharing TMPDIR) leaves the folder alone
    const ns = pidNamespace();
    dir = mkdtempSync(join(base, `${prefix}${process.pid}-${ns ? `n${ns}-` : ""}`));
  } catch (e) {
    throw new KerncapError("E_TMPDIR", `cannot make a private folder in TMPDIR ${base}: ${reason(e)}`, {
      hint: "Set TMPDIR to a writable folder of your own.",
    });
  }
  const st = lstatSync(dir);
  const uid = process.geteuid?.();
  if (!st.isDirectory() || (uid !== undefined && st.uid !== uid) || (st.mode & 0o077) !== 0) {
    throw new KerncapError(
      "E_TMPDIR",
      `${dir}, made by mkdtemp in TMPDIR ${base}, is ${st.isDirectory() ? `a folder of uid ${st.uid} with mode ${(st.mode & 0o7777).toString(8)}` : "not a folder"}: not kerncap's private folder`,
      { hint },
    );
  }
  return dir;
}

/**
 * TMPDIR checked once, before work that makes private folders in it item after item (each of
 * eval's builds): one private folder made and removed, so that a TMPDIR kerncap refuses is said
 * once, with its hint, not as every item's failure.
 * @throws KerncapError E_TMPDIR (privateTempFolder's)
 */
export function assertTmpdirUsable(base = tmpdir()): void {
  rmSync(privateTempFolder("kerncap-tmpdir-", base), { recursive: true, force: true });
}

/**
 * Why an output folder `out` that a process other than kerncap writes into by name (the capture
 * library writes `kerncap run`'s temp folder) could be redirected by another user, or undefined:
 * `out`'s parent folder, or a folder above it, is writable by group or others (othersMayWrite: not a group of this user's alone) and
 * not sticky, so another user could rename the temp folder kerncap made there, or a link on the
 * way, and put a folder of links at its name. Both chains are walked: the path as given (a link in
 * such a folder can be re-pointed), the parent's real path, and, where `out` exists, the folder its
 * own real path lies in (`out` named through a link). A sticky folder (a 1777 /tmp) lets
 * no one rename another user's entries but its owner: one owned by another user than `uid` or root
 * is a risk too, as is any folder on the way that another user than `uid` or root owns, whatever
 * its mode (its owner may rename what is in it). Source: lstat mode bits and owner; a parent that does not exist is
 * left to the callers' own checks (undefined).
 * @returns e.g. "/srv/shared is writable by other users (mode 0777) and not sticky"
 */
export function sharedParentRisk(out: string, uid = process.geteuid?.()): string | undefined {
  const parent = dirname(resolve(out));
  let real: string;
  try {
    real = realpathSync(parent);
  } catch {
    return undefined;
  }
  // `out` itself through a link (a capture named by a link of yours to a folder elsewhere): the folders above where it lies (trial 26)
  let outReal: string | undefined;
  try {
    outReal = dirname(realpathSync(out));
  } catch {
    outReal = undefined; // not there yet: an output about to be made
  }
  for (const start of new Set([parent, real, ...(outReal ? [outReal] : [])])) {
    for (let p = start; ; p = dirname(p)) {
      const st = lstatSync(p, { throwIfNoEntry: false });
      // a folder's owner renames its entries whatever its mode: another user's folder (not root's) on the way is theirs to swap (trial 25)
      if (st && !st.isSymbolicLink() && st.isDirectory() && uid !== undefined && st.uid !== uid && st.uid !== 0)
        return st.mode & 0o1000
          ? `${p} is sticky (mode ${(st.mode & 0o7777).toString(8).padStart(4, "0")}) but belongs to another user (uid ${st.uid}), who may rename what others put in it`
          : `${p} belongs to another user (uid ${st.uid}), who may rename what is in it`;
      if (!st || st.isSymbolicLink() || !othersMayWrite(st, p)) {
        if (dirname(p) === p) break;
        continue;
      }
      const mode = (st.mode & 0o7777).toString(8).padStart(4, "0");
      if (!(st.mode & 0o1000)) return `${p} is writable by ${st.mode & 0o002 ? "other users" : "its group"} (mode ${mode}) and not sticky`;
      // the sticky bit keeps others from renaming your entries, but not the folder's owner
      if (uid !== undefined && st.uid !== uid && st.uid !== 0)
        return `${p} is sticky (mode ${mode}) but belongs to another user (uid ${st.uid}), who may rename what others put in it`;
      if (dirname(p) === p) break;
    }
  }
  return undefined;
}

/**
 * Warn when a results file a merge reads lies under a folder another user may rename entries of
 * (sharedParentRisk): your own file, but another user could have moved another file of yours (an
 * older run's folder) to its name. A warning, not a refusal: a team's shared folder is the usual
 * place of a job's shards; the file itself must still be yours alone (the merges refuse otherwise).
 */
export function warnSharedParent(file: string, verb: string): void {
  const risk = sharedParentRisk(file);
  if (risk)
    log.warn(
      `${escapeForTerminal(file, { oneLine: true })}: ${escapeForTerminal(risk, { oneLine: true })}: another user could have put another of your files at this name; ${verb} takes it as this run's`,
    );
}
