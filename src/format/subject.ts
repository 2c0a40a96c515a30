/**
 * A results record's subject: the SHA-256 (hex) of what its verdict depends on, written into each
 * record of `kerncap check` (src/check/check.ts) and `kerncap eval` (src/eval/eval.ts) and so
 * covered by its authenticator (./record-auth.ts signs the whole record). `--resume` takes a
 * record only when its subject is the one its capture or input has now: a genuine record of
 * another capture under the same id, of this capture before its source changed, or of a run with
 * other judging options, is judged again, not taken (an adversarial trial's stale "ok" and "match").
 *
 * Parts, each length-prefixed and named: the capture's manifest bytes (kerncap.json; an archive
 * from `kerncap pack`: the whole archive's bytes), its judging settings file (kerncap-judge.json)
 * when present, for a rebuild the reproducer's build.sh (and a frontend's run files: ./run-files.ts) and every file under src/ in name order
 * (./source-digests.ts sourceDigests: path and SHA-256), and the run's options that change a
 * verdict, as canonical JSON. A file that is absent or does not read is named so (no error: the
 * check or eval itself says what is wrong with the capture).
 */
import { createHash, type Hash } from "node:crypto";
import { closeSync, openSync, readSync } from "node:fs";
import { JUDGE_FILE } from "./file-names.ts";
import { MANIFEST_FILE } from "./manifest.ts";
import { MANIFEST_MAX_BYTES, readInCapture } from "./paths.ts";
import { frontendRunFiles } from "./run-files.ts";
import { sourceDigests } from "./source-digests.ts";

/** What a subject covers: the capture (a folder, or an archive read whole), the reproducer whose src/ and build.sh are built (undefined: no rebuild), and the run's verdict-changing options. */
export interface SubjectParts {
  capture: { dir: string; kind: "folder" | "archive" };
  reproducer?: string;
  options: Record<string, unknown>;
}

/** The largest build.sh or judging settings file read into a subject (bytes); a larger one is named "too large". */
const SMALL_FILE_MAX = 16 << 20;

const part = (h: Hash, name: string, bytes: Uint8Array | string | undefined): void => {
  const b = bytes === undefined ? "(absent or unreadable)" : bytes;
  h.update(`${name}\n${typeof b === "string" ? Buffer.byteLength(b) : b.byteLength}:`).update(b);
};

/** The bytes of file `rel` of folder `dir` (read inside it, no link followed), undefined when it is absent, no regular file or does not read. */
function fileOf(dir: string, rel: string, max: number): Buffer | undefined {
  try {
    return readInCapture(dir, rel, max);
  } catch {
    return undefined;
  }
}

/** The SHA-256 (hex) of a whole file, read in 1 MiB pieces; undefined when it does not read. */
function wholeFileDigest(path: string): string | undefined {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch {
    return undefined;
  }
  try {
    const h = createHash("sha256");
    const buf = Buffer.alloc(1 << 20);
    for (let n; (n = readSync(fd, buf, 0, buf.length, null)) > 0; ) h.update(buf.subarray(0, n));
    return h.digest("hex");
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

/** Canonical JSON (object keys sorted at every depth, undefined members left out). */
function canonical(x: unknown): string {
  if (Array.isArray(x)) return `[${x.map(canonical).join(",")}]`;
  if (x && typeof x === "object")
    return `{${Object.keys(x)
      .sort()
      .filter((k) => (x as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonical((x as Record<string, unknown>)[k])}`)
      .join(",")}}`;
  return JSON.stringify(x ?? null);
}

/** The subject digest (SHA-256, hex) of `p` (see the module's comment for what it covers). Never throws. */
export function subjectDigest(p: SubjectParts): string {
  const h = createHash("sha256").update("kerncap.subject/1\n");
  const { dir, kind } = p.capture;
  if (kind === "archive") part(h, "archive", wholeFileDigest(dir));
  else {
    part(h, MANIFEST_FILE, fileOf(dir, MANIFEST_FILE, MANIFEST_MAX_BYTES));
    part(h, JUDGE_FILE, fileOf(dir, JUDGE_FILE, SMALL_FILE_MAX));
  }
  if (p.reproducer !== undefined) {
    for (const f of ["build.sh", ...frontendRunFiles()]) part(h, f, fileOf(p.reproducer, f, SMALL_FILE_MAX));
    let src: string;
    try {
      src = sourceDigests(p.reproducer)
        .map((f) => `${f.path}\0${f.sha256}\n`)
        .join("");
    } catch {
      src = "(unreadable)";
    }
    part(h, "src/", src);
  }
  part(h, "options", canonical(p.options));
  return h.digest("hex");
}

/** The settings of a check or eval run that change a verdict (src/check/runner.ts CheckSettings, src/eval/worker.ts EvalSettings): the rest (iters, workers) only time or place it. */
export interface VerdictSettings {
  runs?: number;
  verify: boolean;
  flushL2?: boolean;
  tolerance: Record<string, unknown>;
}

const verdictOptions = (s: VerdictSettings) => ({ runs: s.runs, verify: s.verify, flushL2: s.flushL2 === true, tolerance: s.tolerance });

/**
 * A `kerncap check` capture's subject: the capture as found (src/check/discover.ts CaptureRef), its
 * reproducer with --rebuild, and the run's options that change its verdict (--rebuild, --force,
 * --build-only too: a build is no replay's verdict). Not --trust: it decides only whether a received
 * capture's build runs at all, and its build.sh and src/ are in the subject; a capture refused
 * without it has an error record, which --resume checks again anyway (so `--trust --resume` checks
 * that capture again, and only it: a new user's finding, every capture was checked again).
 */
export function checkSubject(
  c: { path: string; kind: "folder" | "archive" },
  s: VerdictSettings & { rebuild: boolean; trust: boolean; force: boolean; buildOnly?: boolean },
): string {
  return subjectDigest({
    capture: { dir: c.path, kind: c.kind },
    reproducer: s.rebuild && c.kind === "folder" ? c.path : undefined,
    options: { ...verdictOptions(s), rebuild: s.rebuild, force: s.force, ...(s.buildOnly ? { buildOnly: true } : {}) },
  });
}

/**
 * A `kerncap eval` input's subject: the input capture's manifest and judging settings file, the
 * reproducer its candidates are built from (`home`: the first input's folder; a patch or overlay
 * means what it does on that src/) and the run's options that change a verdict.
 */
export function evalSubject(input: string, home: string, s: VerdictSettings): string {
  return subjectDigest({ capture: { dir: input, kind: "folder" }, reproducer: home, options: verdictOptions(s) });
}

/**
 * Each eval input's subject by its id (evalSubject; the first input's folder is the reproducer
 * built), and `buildInput`'s ("(build)": a candidate's build record) the first input's without the
 * judging options: a build (a compile-error, a `--build-only` module) is the same whatever
 * --runs, --flush-l2, --no-verify or the tolerances (a new user's finding: `--resume --flush-l2`
 * after `--build-only` built every candidate again, saying nothing).
 */
export function evalSubjects(inputs: readonly { id: string; dir: string }[], buildInput: string, s: VerdictSettings): Map<string, string> {
  const out = new Map(inputs.map((i) => [i.id, evalSubject(i.dir, inputs[0]!.dir, s)]));
  out.set(buildInput, evalSubject(inputs[0]!.dir, inputs[0]!.dir, { verify: true, tolerance: {} }));
  return out;
}

/**
 * The subject of one whole `kerncap check` run: the SHA-256 (hex) of its corpus's captures (every
 * capture found, before --shard), each by its id and subject (checkSubject: its manifest, judging
 * settings file, with --rebuild its sources, and the run's verdict-changing options), the same in
 * every shard of one run of one corpus. `check --merge` takes the shards of one only (adversary 50: a shard of an earlier
 * run with --atol 1e30 merged with a strict run's other shard).
 */
export function checkRunSubject(
  corpus: readonly { id: string; path: string; kind: "folder" | "archive" }[],
  s: VerdictSettings & { rebuild: boolean; trust: boolean; force: boolean; buildOnly?: boolean },
): string {
  const h = createHash("sha256").update("kerncap.check-run/2\n");
  for (const c of [...corpus].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))) h.update(`${c.id.length}:${c.id}=${checkSubject(c, s)}\n`);
  return h.digest("hex");
}

/**
 * The subject of one whole eval: the SHA-256 (hex) of its inputs' ids and subjects (evalSubjects,
 * the "(build)" input's too), the same in every shard of one eval (each shard opens the same inputs
 * with the same options) and in no shard of an eval of another capture, input set, text of the
 * sources or judging options. `eval --merge` takes the records of one only (adversary 48: a shard
 * of capture B's eval, every record genuine, merged as capture A's).
 */
export function evalRunSubject(subjects: ReadonlyMap<string, string>): string {
  const h = createHash("sha256").update("kerncap.eval-run/1\n");
  for (const [id, subject] of [...subjects].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) h.update(`${id.length}:${id}=${subject}\n`);
  return h.digest("hex");
}

/** Why --resume does not take a record whose subject (`subject`, absent in older records) is not its capture's or input's now; `changed`: what may have changed, in the verb's words. */
export const staleWhy = (subject: string | undefined, changed: string): string =>
  subject ? `its record is of another subject (${changed} changed since)` : "its record names no subject (written before records did)";
