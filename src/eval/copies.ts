/**
 * Where `kerncap eval`'s candidates are built (./eval.ts): each candidate's private copy of the
 * first input's reproducer, kept under DIR/build/eval for the user, or in a private folder where
 * each copy lives only while its build runs (candidateFolders).
 */
import {
  chmodSync,
  closeSync,
  constants,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  writeSync,
} from "node:fs";
import { basename, join, resolve } from "node:path";
import { randomBytes } from "node:crypto";
import { privateTempFolder } from "../cache.ts";
import { pidAlive } from "../leftovers.ts";
import { log } from "../log.ts";
import { mkdirInCapture, readInCapture } from "../format/paths.ts";
import type { EvalRecord } from "../format/eval-record.ts";
import { notYours, unwritableFolder } from "../format/received.ts";
import type { BuildOutcome, BuiltModule } from "./build.ts";
import type { Candidate } from "./candidates.ts";

/** Where the private copies go, under the first input's capture folder. */
export const EVAL_WORK_DIR = "build/eval";

/**
 * Where the candidates' private copies go (candidateFolders): `dest` gives a candidate's copy;
 * `settle` is asked after each build, `judged` once a candidate's last record is written,
 * `dispose` at the end.
 */
export interface CandidateFolders {
  dest: (c: Candidate) => string;
  /** Whether the copies are in a private folder removed after the eval (not kept for the user). */
  private: boolean;
  /** After a candidate's build: in a private folder, what the GPU worker reads kept (keptModule), its copy removed; the outcome with the module's new path. */
  settle: (c: Candidate, b: BuildOutcome) => BuildOutcome;
  /** After a candidate's last record: its kept module removed (a private folder only). */
  judged: (id: string) => void;
  /** Remove the private folder, or give DIR/build/eval's lock back; safe to call more than once, and from a signal handler. */
  dispose: () => void;
}

/**
 * Where the candidates' private copies go: DIR/build/eval/<copyName> (or the caller's buildDir),
 * made with no link followed and kept after the eval; but when the capture folder is not the
 * user's alone (src/format/received.ts notYours: another user owns it, or can write it or its
 * build/), a fresh mkdtemp folder (0700) removed after the eval: a copy inside that folder could
 * be swapped between its trust gate and the compile that imports it (a Triton candidate's
 * repro.py imports the kernel file by name from its copy); and for a confined eval (kerncap mcp's
 * evaluate; `confine` false for one that keeps records, --jsonl: its builds are for a --resume),
 * whose agent could otherwise fill the disk with kept copies, call after call. In a
 * private folder each copy lives only while its build runs: once built, what the GPU worker reads
 * is moved to a small folder of its own (keptModule) and the copy is removed; that folder goes
 * once the candidate is judged. So its disk use is about the builds running at once × the size of
 * the capture folder (its src/), not the number of candidates (a trial: 40 candidates of a 57 MB
 * src/ filled a 1.5 GiB TMPDIR). A confined tune's configs (`buildDir` and `confine`: kerncap mcp)
 * build in their folders under DIR/build/tune, each removed once judged, as held back as a
 * private folder's. A candidate's copy in DIR/build/eval is one eval's at a time
 * (lockWorkDir, over the candidates `building`): an eval that finds another running on the capture
 * with one of its candidates builds in a private folder too, said once; evals of other candidates
 * (other shards) build beside each other.
 */
export function candidateFolders(dir: string, building: readonly Candidate[], buildDir?: (c: Candidate) => string, confine = false): CandidateFolders {
  const theirs = building.length ? (notYours(dir) ?? unwritable(dir)) : undefined;
  // a copy is one eval's at a time (the locks, EVAL_LOCK): another eval of one of these candidates running has this one build in a private folder (nu7 #10: two evals raced in one copy)
  const locked =
    building.length && !buildDir && !theirs && !confine
      ? lockWorkDir(
          dir,
          building.map((c) => copyName(c.id)),
        )
      : undefined;
  if (building.length && confine && buildDir && !theirs) {
    // a confined tune (kerncap mcp): each config's build folder under DIR/build/tune (a confined build writes inside the
    // capture) removed once the config is judged, and no more builds ahead of the GPU than a private folder allows: an
    // agent's configs cannot fill the disk (adversary 39: 6 configs of a 128 MiB module kept 897 MiB)
    const made = new Map<string, string>();
    const drop = (id: string) => {
      const d = made.get(id);
      if (d) rmSync(d, { recursive: true, force: true });
    };
    return {
      dest: (c) => {
        const d = buildDir(c);
        made.set(c.id, d);
        return d;
      },
      private: true,
      settle: (_c, b) => b,
      judged: drop,
      dispose: () => {
        for (const id of made.keys()) drop(id);
      },
    };
  }
  if (theirs || (building.length && confine && !buildDir) || locked === null) {
    const work = privateTempFolder("kerncap-eval-");
    // a confined eval (kerncap mcp's evaluate): an agent's candidates are not kept, or every call would add its copies to the disk
    if (theirs) log.info(`the candidates are built in a private folder, not ${join(dir, EVAL_WORK_DIR)} (${theirs}); it is removed after the eval`);
    if (locked === null)
      log.info(
        `another kerncap eval of ${dir} is running on some of these candidates (its copies are in ${join(dir, EVAL_WORK_DIR)}): this eval's candidates are built in a private folder, removed after the eval (a --resume builds them again)`,
      );
    const dest = (c: Candidate) => join(work, copyName(c.id));
    const kept = (id: string) => join(work, `${copyName(id)}.module`);
    return {
      dest,
      private: true,
      settle: (c, b) => {
        const out = "built" in b ? keptModule(dest(c), b, kept(c.id)) : b;
        rmSync(dest(c), { recursive: true, force: true });
        return out;
      },
      judged: (id) => rmSync(kept(id), { recursive: true, force: true }),
      dispose: () => {
        try {
          rmSync(work, { recursive: true, force: true });
        } catch {
          // a build still writing into it (at a stop signal): removed again at the end
        }
      },
    };
  }
  const work = locked?.work ?? join(dir, EVAL_WORK_DIR);
  const release = locked ? () => unlockWorkDir(locked.lock) : () => {};
  return { dest: (c: Candidate) => buildDir?.(c) ?? join(work, copyName(c.id)), private: false, settle: (_c, b) => b, judged: () => {}, dispose: release };
}

/** Why this user may not write the capture folder or its build/ (a read-only copy, a read-only mount), or undefined: its candidates then build in a private folder. */
function unwritable(dir: string): string | undefined {
  const u = unwritableFolder(dir);
  return u && `you may not write ${u.path === dir ? "it" : "its build/"}${u.code === "EROFS" ? ": a read-only file system" : ""}`;
}

/** The lock files of DIR/build/eval: `.kerncap-eval-<pid>-<token>.lock`, one per eval (and the single `.kerncap-eval.lock` of kerncap before it). */
export const EVAL_LOCK = /^\.kerncap-eval(-\d+-[0-9a-f]+)?\.lock$/;

/**
 * DIR/build/eval made (inside the capture with no link followed: a build/ that is a link out of a
 * received capture writes nothing there; 0700, yours alone: a candidate's copy holds what its files
 * held) and locked for this eval and the copies it builds there (`names`, copyName): its lock
 * file `.kerncap-eval-<pid>-<token>.lock`, created O_EXCL, holds this pid and those names. Another eval
 * running on the capture with none of these candidates (another --shard: nu13 #1, whose builds went to
 * a private folder and were lost to --resume) builds beside it; one with a candidate of these (nu7
 * #10: two evals raced in one copy), or a lock of kerncap before it (no names), has this eval build in
 * a private folder. A lock whose process is gone (killed) is removed.
 * @returns the folder and this eval's lock file, or null when a live eval holds one of these candidates
 */
function lockWorkDir(dir: string, names: readonly string[]): { work: string; lock: string } | null {
  const work = mkdirInCapture(dir, EVAL_WORK_DIR);
  chmodSync(work, 0o700);
  const mine = join(work, `.kerncap-eval-${process.pid}-${randomBytes(6).toString("hex")}.lock`);
  const fd = openSync(mine, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    writeSync(fd, [String(process.pid), ...names].join("\n") + "\n");
  } finally {
    closeSync(fd);
  }
  const want = new Set(names);
  for (const n of readdirSync(work)) {
    if (!EVAL_LOCK.test(n) || join(work, n) === mine) continue;
    const held = lockHolder(join(work, n));
    if (held === undefined || !pidAlive(held.pid)) {
      rmSync(join(work, n), { force: true }); // its eval is gone: taken over
      continue;
    }
    if (held.names === null || held.names.some((x) => want.has(x))) {
      rmSync(mine, { force: true });
      return null; // a live eval of one of these candidates (or one that does not say which)
    }
  }
  return { work, lock: mine };
}

/**
 * What a lock file holds: its pid and the copies it builds (null: a lock of kerncap before names,
 * every copy); undefined where it is no lock an eval of this user's wrote: unreadable, a link, past
 * 64 KiB, another user's, no pid on its first line (kerncap clean asks the same: src/ops/clean.ts).
 */
export function lockHolder(lock: string): { pid: number; names: string[] | null } | undefined {
  try {
    const st = lstatSync(lock);
    const uid = process.geteuid?.();
    if (!st.isFile() || st.size > 1 << 16 || (uid !== undefined && st.uid !== uid)) return undefined;
    const [first, ...rest] = readFileSync(lock, "utf8").split("\n").filter(Boolean);
    const pid = Number.parseInt(first ?? "", 10);
    return Number.isSafeInteger(pid) && pid > 0 ? { pid, names: basename(lock) === ".kerncap-eval.lock" ? null : rest } : undefined;
  } catch {
    return undefined;
  }
}

/** Remove this eval's lock file (lockWorkDir's); another's is left. Safe to call more than once. */
function unlockWorkDir(lock: string): void {
  rmSync(lock, { force: true });
}

/**
 * What the GPU worker reads of a built candidate (src/eval/worker.ts judge: the module, and a
 * Triton module's launch metadata beside it, MODULE.json: src/frontends/triton/launch.ts), moved
 * out of its copy `copy` into the folder `keep` (made here), so that the copy can go; a module
 * outside the copy (a flags candidate's build folder) is left where it is.
 * @returns the outcome with the module's new path
 */
function keptModule(copy: string, b: Extract<BuildOutcome, { built: unknown }>, keep: string): BuildOutcome {
  const real = (p: string) => {
    try {
      return realpathSync(p);
    } catch {
      return resolve(p);
    }
  };
  const module = real(b.built.module);
  if (!module.startsWith(`${real(copy)}/`)) return b;
  rmSync(keep, { recursive: true, force: true });
  mkdirSync(keep, { mode: 0o700 });
  const to = join(keep, basename(module));
  renameSync(module, to);
  if (lstatSync(`${module}.json`, { throwIfNoEntry: false })?.isFile()) renameSync(`${module}.json`, `${to}.json`);
  return { built: { ...b.built, module: to } };
}

/** A candidate's private copy's folder name under EVAL_WORK_DIR: 16 hex digits of its identity's SHA-256 (two candidates of one content under two names get two copies). */
export function copyName(id: string): string {
  return new Bun.CryptoHasher("sha256").update(id).digest("hex").slice(0, 16);
}

/** The largest kept module `eval --resume` reads back (bytes). */
const KEPT_MODULE_MAX_BYTES = 1 << 30;

/**
 * A candidate's module that an earlier eval built and kept in the candidate's copy `dest`
 * (DIR/build/eval/<copyName>), as its record's `build` names it (module: the path inside the copy;
 * moduleSha256): reused by `eval --resume` for a candidate whose runs were not made (built where
 * there was no GPU, E_NO_GPU; a worker that died), so that building on a machine without a GPU and
 * judging on one with it builds each candidate once. Only a regular file reached through no link
 * whose SHA-256 is still the recorded one is reused.
 * @returns the built module with the recorded build figures (seconds: the earlier build's), or why
 *   it is not (gone, changed, not a plain file: the candidate is built again, said: nu13 #3)
 */
export function keptBuild(dest: string, prior: EvalRecord["build"]): { built: BuiltModule } | { why: string } {
  if (!prior.module || !prior.moduleSha256)
    return { why: "was not kept (its build ran in a private folder: a confined eval without --jsonl, another eval of it running)" };
  let bytes: Buffer | undefined;
  try {
    bytes = readInCapture(dest, prior.module, KEPT_MODULE_MAX_BYTES);
  } catch (e) {
    return { why: `cannot be read (${e instanceof Error ? e.message : String(e)})` }; // a link, a path out of the copy
  }
  if (!bytes) return { why: "is gone (the capture's build/ was not carried over?)" };
  if (new Bun.CryptoHasher("sha256").update(bytes).digest("hex") !== prior.moduleSha256)
    return { why: "is not the module that was built (its SHA-256 differs)" };
  const { seconds, registers, stackFrameBytes, spillStoreBytes = null, spillLoadBytes = null } = prior;
  return { built: { module: join(resolve(dest), prior.module), seconds, registers, stackFrameBytes, spillStoreBytes, spillLoadBytes } };
}
