/**
 * The plan of a CUDA fast build (./fast-build.ts): the three commands of the device-only compile
 * build.sh would run (gcc -E, cicc, ptxas), read from nvcc's --dryrun output under
 * `EXTRA_FLAGS=--dryrun build.sh` and rewritten to the work folder's files (parseDryrun); kept
 * per work folder, in memory and in its plan.json, while what build.sh's choice of command depends
 * on is unchanged (planKey), and hashed for the check of the pruned build against build.sh's
 * (planHash).
 */
import { readFileSync, realpathSync, rmSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { recordAuthProblem, sealRecord } from "../../format/record-auth.ts";
import { writeFileAtomic } from "../../util/write-file.ts";
import { BuildSuperseded, FastBuildUnavailable, runBuildCommand } from "../build.ts";
import type { ConfinedSteps } from "../frontend.ts";
import { userResultsKey } from "../../format/state-seal.ts";

/** The three commands of a device-only `nvcc -cubin` and the files they read and write. */
export interface FastPlan {
  /** Shell lines that set nvcc's environment (CICC_PATH, PATH, …), run before each step. */
  env: string[];
  /** gcc -E …, writing `fullTU`. */
  preprocess: string;
  /** cicc … reading `prunedTU`, then ptxas … writing `cubin`. */
  compile: string;
  fullTU: string;
  prunedTU: string;
  cubin: string;
  /** The source nvcc was given (build.sh's choice: the slice or the whole TU). */
  source: string;
}

/** Split one `#$ ` line of nvcc --dryrun into words (double quotes grouped, as sh would). */
function shellWords(line: string): string[] {
  const out: string[] = [];
  const re = /"((?:\\.|[^"\\])*)"|(\S+)/g;
  for (let m = re.exec(line); m; m = re.exec(line)) out.push(m[1] ?? m[2]!);
  return out;
}

/**
 * Make the plan from nvcc's --dryrun output (the `#$ ` lines of build.sh's stderr).
 * @param dryrun build.sh's stderr under EXTRA_FLAGS=--dryrun
 * @param dryCubin the output path build.sh was given (replaced by `work`/kernel.cubin)
 * @param work the folder the fast build writes in
 * @returns the plan, or why there is none (not exactly gcc -E, cicc, ptxas)
 */
export function parseDryrun(dryrun: string, dryCubin: string, work: string): FastPlan | { reason: string } {
  const lines = dryrun
    .split("\n")
    .filter((l) => l.startsWith("#$ "))
    .map((l) => l.slice(3).trim());
  const env: string[] = [];
  const cmds: string[] = [];
  for (const l of lines) {
    const a = /^([A-Za-z_][A-Za-z0-9_]*)=(.*)$/.exec(l);
    if (a) {
      // nvcc's variables; the quoted ones (INCLUDES="-I…" "…") only describe what the commands already spell out
      // nvcc's LD_LIBRARY_PATH ends in an empty entry (`<cuda>/lib:`: the working folder, the capture
      // folder here) and its PATH may: only absolute entries are kept (docs/security.md)
      const value = /^(LD_LIBRARY_PATH|PATH)$/.test(a[1]!)
        ? a[2]!
            .trim()
            .split(":")
            .filter((e) => e.startsWith("/"))
            .join(":")
        : a[2]!.trim();
      if (!value.includes('"')) env.push(`${a[1]}='${value.replace(/'/g, "'\\''")}'`);
    } else if (l) cmds.push(l);
  }
  if (!cmds.length) return { reason: "build.sh's nvcc printed no steps under --dryrun (build.sh does not pass EXTRA_FLAGS to nvcc?)" };
  if (cmds.length !== 3)
    return { reason: `nvcc runs ${cmds.length} steps, not gcc -E, cicc, ptxas (${cmds.map((c) => shellWords(c)[0]?.split("/").pop()).join(", ")})` };
  const [pp, cicc, ptxas] = cmds as [string, string, string];
  const ppw = shellWords(pp),
    cw = shellWords(cicc),
    pw = shellWords(ptxas);
  if (!ppw.includes("-E")) return { reason: "nvcc's first step is not the preprocessor (gcc -E)" };
  if (!/cicc$/.test(cw[0] ?? "")) return { reason: "nvcc's second step is not cicc" };
  if (!/ptxas$/.test(pw[0] ?? "")) return { reason: "nvcc's third step is not ptxas" };
  const ppOut = ppw[ppw.indexOf("-o") + 1];
  if (!ppOut || !cicc.includes(ppOut)) return { reason: "cicc does not read what the preprocessor writes" };
  const source = ppw[ppw.indexOf("-o") - 1] ?? "";
  const fullTU = join(work, "full.cpp1.ii");
  const prunedTU = join(work, "pruned.cpp1.ii");
  const cubin = join(work, "kernel.cubin");
  // nvcc's temporary files (…/tmpxft_<pid>_<n>-<k>_<name>) go to the work folder
  const temps = new Map<string, string>();
  // nvcc --threads sends a step's output to temporary files (`> …_stdout 2>…_stderr`): not here
  const unredirect = (s: string) => s.replace(/\s+>\s*"?\/[^\s"]*tmpxft_[^\s"]*"?\s+2>\s*"?\/[^\s"]*tmpxft_[^\s"]*"?\s*$/, "");
  const retemp = (s: string) =>
    unredirect(s).replace(/(?:\/[^\s"]*\/)?tmpxft_[0-9a-f]+_[0-9a-f]+-([^\s"]+)/g, (whole, rest: string) => {
      if (!temps.has(whole)) temps.set(whole, join(work, `nv-${rest}`));
      return temps.get(whole)!;
    });
  const quoted = (p: string) => `"${p.replace(/(["\\$`])/g, "\\$1")}"`;
  const preprocess = retemp(pp.split(`"${ppOut}"`).join(quoted(fullTU)).split(ppOut).join(quoted(fullTU)));
  const cc = retemp(cicc.split(`"${ppOut}"`).join(quoted(prunedTU)).split(ppOut).join(quoted(prunedTU)));
  const px = retemp(ptxas.split(`"${dryCubin}"`).join(quoted(cubin)).split(dryCubin).join(quoted(cubin)));
  if (!px.includes(cubin)) return { reason: "ptxas does not write build.sh's output" };
  return { env, preprocess, compile: `${cc} && ${px}`, fullTU, prunedTU, cubin, source };
}

/** The plans of the work folders (one per watch, one per capture for validate), with the key they were made for. */
const plans = new Map<string, FastPlan & { key: string }>();

/** The plan file of a work folder: the plan of the last build there, for the next process (validate runs one per edit). */
const PLAN_FILE = "plan.json";
/** Files of build/ kerncap remakes when lost: written through no link (src/util/write-file.ts), without an fsync. */
// root: the capture folder, when the work folder is inside it (writeFileAtomic walks from it with no link followed)
export const SCRATCH = { sync: false } as const;

/** The document id a plan's authenticator covers (src/format/record-auth.ts). */
const PLAN_SCHEMA = "kerncap.fast-plan/1";

/**
 * The plan.json of a work folder; undefined when absent, not a plan, or not sealed by a kerncap
 * holding this user's results key: its lines run through the shell as written, and a folder handed
 * over with tar or cp -a keeps build/ and the times its key is made of (adversary 56: a planted
 * `preprocess` line ran), so a plan is taken back only with a valid authenticator (src/format/state-seal.ts;
 * no key: never).
 */
export function readPlan(work: string): (FastPlan & { key: string }) | undefined {
  const user = userResultsKey();
  if (!user) return undefined;
  try {
    const p = JSON.parse(readFileSync(join(work, PLAN_FILE), "utf8"));
    const shaped = typeof p?.key === "string" && typeof p?.preprocess === "string" && typeof p?.compile === "string" && Array.isArray(p?.env);
    return shaped && recordAuthProblem(PLAN_SCHEMA, p, user) === undefined ? p : undefined;
  } catch {
    return undefined;
  }
}

/** Keep `plan` in the work folder for the next process, sealed with the user's results key (readPlan takes no other); with no key, nothing is kept. */
export function savePlan(work: string, dir: string, plan: FastPlan & { key: string }): void {
  const user = userResultsKey();
  if (user) writeFileAtomic(join(work, PLAN_FILE), JSON.stringify(sealRecord(PLAN_SCHEMA, plan, user)), { ...SCRATCH, root: dir });
  else rmSync(join(work, PLAN_FILE), { force: true });
}

/**
 * sha256 (hex) of a plan's commands (environment lines, gcc -E, cicc + ptxas), with the capture
 * folder `dir`'s path (as given and resolved) written as `$DIR`: a check of the pruned build against
 * build.sh's holds for exactly these commands, in the capture or in a copy of it (kerncap eval's
 * candidates are built in copies: src/eval/pruned.ts).
 */
export function planHash(p: FastPlan, dir: string): string {
  const norm = (t: string) => folderSpellings(dir).reduce((acc, r) => acc.split(r).join("$DIR"), t);
  return new Bun.CryptoHasher("sha256").update(JSON.stringify([p.env.map(norm), norm(p.preprocess), norm(p.compile)])).digest("hex");
}

/** The folder `dir`'s path as given (absolute) and resolved (links followed), longest first: how a command or a preprocessed TU may spell it. */
export function folderSpellings(dir: string): string[] {
  let real = resolve(dir);
  try {
    real = realpathSync(dir);
  } catch {
    // gone: as given
  }
  return [...new Set([resolve(dir), real])].sort((a, b) => b.length - a.length);
}

/**
 * What build.sh's choice of command depends on: build.sh itself, the files its `tu=`/`slice=`
 * lines name (a TU edited so that no slice is made turns the slice into a "not made" one: the
 * plan must change to the whole TU's) (the slice is compiled only while it matches the TU copy's hash), its
 * slice-failed record, NVCC and EXTRA_FLAGS. Sizes and mtimes (ns), so a save changes the key of
 * the TU copy it touches; a header's save does not change it (the plan stays).
 */
function planKey(dir: string, env: Record<string, string | undefined>): string {
  const script = join(dir, "build.sh");
  const text = readFileSync(script, "utf8");
  const files = [script, join(dir, "build", "slice-failed.sha256")];
  // `tu="src/"saxpy.cu` (the name as shq writes it: bare, or in single quotes), or an older build.sh's
  // `tu="$here/src/"saxpy.cu` or `tu="$here/src/saxpy.cu"`
  for (const m of text.matchAll(/^(?:tu|slice)="(?:\$here\/)?(src\/[^"\n]*)"(\S*)$/gm)) files.push(join(dir, m[1]! + m[2]!.replace(/^'(.*)'$/, "$1")));
  const st = (f: string) => {
    try {
      const s = statSync(f, { bigint: true });
      return `${s.size}:${s.mtimeNs}`;
    } catch {
      return "-";
    }
  };
  // the folder's paths too: the plan's commands name the capture's and the work folder's files, so a copy (cp -a keeps the times) makes its own
  return [...folderSpellings(dir), ...files.map(st), env.NVCC ?? "", env.EXTRA_FLAGS ?? ""].join("|");
}

/**
 * The plan of the work folder's fast build: the last one (this process's, else plan.json) while
 * its key holds, else made again from build.sh under --dryrun and saved.
 * @throws FastBuildUnavailable when build.sh --dryrun fails, links -rdc code, or its steps have no plan
 */
export async function planFor(
  dir: string,
  work: string,
  env: Record<string, string | undefined>,
  signal?: AbortSignal,
  confined?: ConfinedSteps,
): Promise<FastPlan & { key: string }> {
  const key = planKey(dir, env);
  let plan = plans.get(work) ?? readPlan(work);
  if (!plan || plan.key !== key) {
    const dryCubin = join(work, "dryrun.cubin");
    const dryEnv = { ...env, EXTRA_FLAGS: `${env.EXTRA_FLAGS ?? ""} --dryrun`.trim() };
    const argv = ["bash", join(dir, "build.sh"), dryCubin];
    // a confined fast build's: build.sh (kerncap's own, src/format/rendered.ts) under the confined build's sandbox and limits too
    const { err: dryErr, code: dryCode } = confined ? await confined.run(argv, dir, dryEnv, signal) : await runBuildCommand(argv, dir, dryEnv, signal);
    if (signal?.aborted) throw new BuildSuperseded();
    if (dryCode !== 0) throw new FastBuildUnavailable(`build.sh --dryrun exited ${dryCode}`);
    if (/-dlink|\.rdc\./.test(dryErr)) throw new FastBuildUnavailable("relocatable device code (-rdc) is linked by build.sh");
    const p = parseDryrun(dryErr, dryCubin, work);
    if ("reason" in p) throw new FastBuildUnavailable(p.reason);
    plan = { ...p, key };
    savePlan(work, dir, plan);
  }
  plans.set(work, plan);
  return plan;
}
