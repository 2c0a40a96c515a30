/**
 * `kerncap profile DIR`: Nsight Compute (or, with nsys, Nsight Systems) on the replay of a
 * capture, without the application. The report goes to DIR/profile/NAME.ncu-rep (.nsys-rep), or
 * to the path of `-o/--export` (ncu's option: the extension added when missing, an existing file
 * replaced only with `-f/--force`), written under a temp name beside it and renamed once complete; the key figures come
 * from the details page ncu prints as it profiles (`--csv --page details --print-units base`), or
 * with `ncu --import … --csv --page details` where it printed none (src/profile/ncu.ts).
 *
 * The replay under ncu runs `kerncap replay DIR --runs 1 --iters 0`: one launch of the captured
 * kernel, from the restored before state, no warm-up or timing loop (ncu locks the clocks and
 * flushes the caches itself before the launch, by default; its own options after `--` change that).
 */
import { existsSync, lstatSync, readFileSync, renameSync, rmSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { selfCommand, selfEnv } from "../util/self-exec.ts";
import { KerncapError } from "../errors.ts";
import { probeGpu } from "../native/libcuda.ts";
import { privateTempFolder } from "../cache.ts";
import { capturePath, mkdirInCapture } from "../format/paths.ts";
import { tempFor } from "../leftovers.ts";
import { refuseLink, writeFileAtomic } from "../util/write-file.ts";
import type { Manifest } from "../format/manifest.ts";
import { frontendOf } from "../frontends/index.ts";
import { log } from "../log.ts";
import { runBuildCommand } from "../frontends/build.ts";
import type { BuildGate } from "../rebuild/gate.ts";
import { Rebuilder } from "../rebuild/rebuilder.ts";
import {
  findNsightTool,
  ncuCommand,
  ncuImportCommand,
  ncuUserOptions,
  nsysCommand,
  parseNcuDetails,
  replayArgv,
  type NcuFigures,
  type NsightTool,
} from "./ncu.ts";

export interface ProfileOptions {
  /** Report name under DIR/profile/ (default "replay", "build" with `build`). */
  name?: string;
  /** -o/--export: the report's path instead (the tool's extension added when it lacks it; a relative path from the current folder). */
  export?: string;
  /** -f/--force: replace an existing file at `export` (a report under DIR/profile/ is always replaced). */
  overwrite?: boolean;
  /** Profile the reproducer's rebuilt module (validate's build) instead of the captured one. */
  build?: boolean;
  /** Nsight Systems timeline of the replay instead of an ncu report. */
  nsys?: boolean;
  /** Timed launches of the replay under nsys (ncu: always 0). */
  iters?: number;
  /** Options for the tool, given after `--`. */
  toolOptions: string[];
  /** Build even when the toolchain differs from the capture's (Triton version). */
  force?: boolean;
  /** --trust: with `build`, run a received capture's build.sh (src/format/trust.ts). */
  trust?: boolean | string;
  /** --confine (kerncap mcp): with `build`, the rebuild is validate --confine's (build.sh alone, reading nothing outside the capture, its source root and the toolchain); a Triton capture's only with `trust`. */
  confine?: boolean;
  quiet?: boolean;
}

export interface ProfileResult {
  dir: string;
  kernel: string;
  /** The kernel's symbol (its mangled name, the manifest's kernel.name): the same in every document. */
  symbol: string;
  tool: NsightTool;
  /** The report (absolute path). */
  report: string;
  /** The module profiled: the captured one, or the rebuilt one (`--build`). */
  module: string;
  /** The profiler's command line as run (the report's temp name in it). */
  command: string[];
  /** The replay's verdict as it printed it under the profiler (null when it printed none). */
  verdict: "match" | "mismatch" | null;
  /** Wall time (s): the build (0 without --build), the profiled replay, the import of the figures (about 0 when ncu printed them while profiling). */
  seconds: { build: number; profile: number; import: number };
  /** ncu's figures of the profiled launch (null for nsys). */
  figures: NcuFigures | null;
}

/** A report name: a file name of letters, digits, '.', '_', '-' (it lands in DIR/profile/). @throws KerncapError E_USAGE */
export function reportName(name: string): string {
  if (!/^[A-Za-z0-9_][A-Za-z0-9._-]{0,99}$/.test(name)) {
    throw new KerncapError("E_USAGE", `--name ${JSON.stringify(name)} is not a report name`, {
      hint: "Use letters, digits, '.', '_' and '-' (up to 100; not starting with '.' or '-'), e.g. --name blocks128.",
    });
  }
  return name;
}

/**
 * The report path of `-o/--export FILE`, as ncu takes it: FILE, with the tool's extension added
 * when it lacks it, from the current folder; its folder must exist.
 * @throws KerncapError E_USAGE (empty), E_EXISTS (a file there without `overwrite`, or anything
 *   that is not a regular file), E_USAGE (no such folder)
 */
export function exportPath(file: string, ext: string, overwrite: boolean): string {
  if (!file) throw new KerncapError("E_USAGE", "--export needs a file name", { hint: `For example -o report${ext}.` });
  const path = resolve(file.endsWith(ext) ? file : file + ext);
  if (!existsSync(dirname(path)))
    throw new KerncapError("E_USAGE", `${dirname(path)} does not exist (the folder of --export ${file})`, {
      hint: "Create the folder first, or give a path in an existing one.",
    });
  let st;
  try {
    st = lstatSync(path);
  } catch {
    return path;
  }
  if (!st.isFile()) throw new KerncapError("E_EXISTS", `${path} exists and is not a regular file`, { hint: "Choose another -o." });
  if (!overwrite) throw new KerncapError("E_EXISTS", `${path} already exists`, { hint: "Pass -f (--force) to replace it, as ncu does, or choose another -o." });
  return path;
}

/** The profiler's output, the lines worth showing when it fails (==ERROR==, ==WARNING==, the replay's own errors), else its last lines. */
function toolTail(out: string, err: string): string {
  const lines = `${out}\n${err}`.split("\n").filter((l) => l.trim());
  const marked = lines.filter((l) => /==(ERROR|WARNING)==|\[kerncap\]|ERROR|error:/.test(l));
  return (marked.length ? marked : lines).slice(-15).join("\n");
}

/**
 * Why ncu wrote no report, as a KerncapError naming what to do: no access to the GPU's
 * performance counters (ERR_NVGPUCTRPERM), no launch matched, or the replay failed.
 */
export function ncuFailure(code: number, out: string, err: string, kernel: string): KerncapError {
  const all = `${out}\n${err}`;
  if (/ERR_NVGPUCTRPERM|permission to access NVIDIA GPU Performance Counters/i.test(all)) {
    return new KerncapError("E_NCU", "ncu may not read this GPU's performance counters (ERR_NVGPUCTRPERM)", {
      hint: "Run as root, or have an administrator allow profiling for all users (the NVreg_RestrictProfilingToAdminUsers=0 option of the nvidia kernel module): https://developer.nvidia.com/ERR_NVGPUCTRPERM",
    });
  }
  if (/No kernels were profiled/i.test(all)) {
    return new KerncapError("E_NCU", `ncu profiled no kernel: no launch of ${kernel} ran under it\n${toolTail(out, err)}`, {
      hint: "The replay failed before its launch (its error is above), or the module names the kernel otherwise; run `kerncap replay DIR` alone first.",
    });
  }
  return new KerncapError("E_NCU", `ncu wrote no report (exit ${code}):\n${toolTail(out, err)}`, {
    hint: "Run with --verbose for ncu's whole output; run `kerncap replay DIR` alone to see that the replay works.",
  });
}

/**
 * Why `tool` wrote no report: no usable GPU here (probeGpu's E_NO_GPU or the driver's error, said
 * as every GPU verb says it: ncu may print nothing then), else the tool's failure (ncuFailure; E_NSYS).
 */
function noReport(tool: "ncu" | "nsys", r: { code: number; out: string; err: string }, kernel: string): KerncapError {
  try {
    probeGpu();
  } catch (e) {
    if (e instanceof KerncapError) return new KerncapError(e.code, `${tool} wrote no report (exit ${r.code}): ${e.message}`, { hint: e.hint ?? "", cause: e });
  }
  if (tool === "ncu") return ncuFailure(r.code, r.out, r.err, kernel);
  return new KerncapError("E_NSYS", `nsys wrote no report (exit ${r.code}):\n${toolTail(r.out, r.err)}`, {
    hint: "Run with --verbose for nsys's whole output; run `kerncap replay DIR` alone to see that the replay works.",
  });
}

/**
 * The capture is one the Nsight tools can profile: an NVIDIA one.
 * @throws KerncapError E_FRONTEND (an AMD capture)
 */
export function assertProfilable(dir: string, m: Manifest): void {
  if (m.device.vendor !== "nvidia") {
    throw new KerncapError("E_FRONTEND", `${dir} is an ${m.device.vendor.toUpperCase()} capture; kerncap profile runs NVIDIA's Nsight tools`, {
      hint: "Profile an AMD replay with rocprof: rocprofv3 --kernel-trace -- kerncap replay DIR",
    });
  }
}

/**
 * Profile a capture's replay (see the file's comment): the workflow of src/ops/profile.ts, which
 * applies the gates (`gate`, called before a --build's rebuild runs).
 * @returns the report's path and, for ncu, its key figures
 * @throws KerncapError E_NO_NCU / E_NO_NSYS, E_USAGE (an ncu option kerncap sets), the build's
 *   errors (--build: E_BUILD…, E_CONFINED), the gate's (E_UNTRUSTED), E_NCU / E_NSYS (no report:
 *   why), E_NCU_REPORT (a report without the figures' columns)
 */
export async function profileReplay(dir: string, m: Manifest, o: ProfileOptions & { gate: BuildGate }): Promise<ProfileResult> {
  const tool: NsightTool = o.nsys ? "nsys" : "ncu";
  // usage errors first, then the tool
  const userOptions = tool === "ncu" ? ncuUserOptions(o.toolOptions) : o.toolOptions;
  if (o.name !== undefined && o.export !== undefined)
    throw new KerncapError("E_USAGE", "--name and --export both name the report", { hint: "Give one: --name NAME (DIR/profile/NAME) or -o PATH." });
  const name = reportName(o.name ?? (o.build ? "build" : "replay"));
  const ext = tool === "ncu" ? ".ncu-rep" : ".nsys-rep";
  const exported = o.export === undefined ? undefined : exportPath(o.export, ext, Boolean(o.overwrite));
  const exe = findNsightTool(tool);

  let module = capturePath(dir, m.module.file);
  let buildSeconds = 0;
  if (o.build) {
    const fe = frontendOf(m);
    if (!fe.validates)
      throw new KerncapError("E_FRONTEND", `${dir}: --build rebuilds CUDA and Triton reproducers only`, {
        hint: "Profile the captured module (without --build).",
      });
    o.gate(); // a confined build of a capture that runs its source, a received capture's build.sh: src/ops/profile.ts
    const b = await new Rebuilder(dir, m, fe, {
      quiet: o.quiet ?? true,
      force: Boolean(o.force),
      fullBuild: false,
      ...(o.confine ? { confine: m, confinedBy: "profile --build --confine" } : {}),
    }).rebuildOnce();
    module = b.module;
    buildSeconds = b.seconds;
  }

  // made with mkdir, never through a link (a profile/ that is a link to another folder is refused: E_UNSAFE_PATH);
  // -o/--export: the user's folder, the temp beside the report so that the rename stays on one file system
  const pdir = exported ? dirname(exported) : mkdirInCapture(dir, "profile");
  const report = exported ?? join(pdir, name + ext);
  refuseLink(report, "the report");
  // the profiler writes by name: into a private folder (0700, the user's), never into profile/, which another
  // user may swap for a link while it runs; the report is then copied in through the one writer (no link followed)
  const scratch = exported ? undefined : privateTempFolder("kerncap-profile-");
  const base = tempFor(join(scratch ?? pdir, `.${basename(report, ext)}`)); // an unguessable name for the tool's report until it is renamed
  const replay = replayArgv(selfCommand(), dir, { iters: tool === "ncu" ? 0 : (o.iters ?? 10), ...(o.build ? { module } : {}) });
  const command =
    tool === "ncu"
      ? ncuCommand({ ncu: exe, kernel: m.kernel.name, reportBase: base, userOptions, replay })
      : nsysCommand({ nsys: exe, reportBase: base, userOptions, replay });
  const env = selfEnv();
  log.debug(`$ ${command.join(" ")}`);
  const t0 = performance.now();
  try {
    const r = await runBuildCommand(command, process.cwd(), env, undefined, { sharedTmp: true });
    const profileSeconds = (performance.now() - t0) / 1000;
    if (!o.quiet) log.debug(`${tool} output:\n${r.out}\n${r.err}`);
    if (!existsSync(base + ext)) throw noReport(tool, r, m.kernel.name);
    const v = /^(MATCH|MISMATCH)\b/m.exec(r.out)?.[1];
    const verdict = v === "MATCH" ? "match" : v === "MISMATCH" ? "mismatch" : null;
    let figures: NcuFigures | null = null;
    const t1 = performance.now();
    if (tool === "ncu") {
      // the details page ncu printed while profiling (NCU_PRINT); an ncu that printed none, or a page without the duration, is asked again (--import)
      figures = printedFigures(r.out);
      if (!figures || figures.durationUs === null) {
        if (figures) log.debug("ncu's printed page has no duration: importing the report");
        const imp = Bun.spawnSync(ncuImportCommand(exe, base + ext), { stdout: "pipe", stderr: "pipe", env, timeout: 120_000 });
        if (imp.exitCode !== 0)
          throw new KerncapError(
            "E_NCU_REPORT",
            `ncu --import of the report failed (exit ${imp.exitCode}): ${toolTail(imp.stdout.toString(), imp.stderr.toString())}`,
            { hint: `The report is kept at ${base + ext}; open it in the Nsight Compute UI.` },
          );
        figures = parseNcuDetails(imp.stdout.toString())[0] ?? null;
      }
      if (!figures)
        throw new KerncapError("E_NCU_REPORT", "the report holds no profiled launch", {
          hint: `Open ${base + ext} in the Nsight Compute UI, or run with --verbose for ncu's output.`,
        });
    }
    if (scratch) writeFileAtomic(report, readFileSync(base + ext), { root: dir, what: "the report" });
    else renameSync(base + ext, report);
    return {
      dir,
      kernel: m.kernel.name,
      symbol: m.kernel.name,
      tool,
      report,
      module,
      command,
      verdict,
      seconds: { build: buildSeconds, profile: profileSeconds, import: (performance.now() - t1) / 1000 },
      figures,
    };
  } finally {
    if (existsSync(base + ext)) rmSync(base + ext, { force: true });
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  }
}

/** The figures of the first launch in ncu's printed details page, or null when its output holds none (an older ncu, or the page went elsewhere). */
export function printedFigures(out: string): NcuFigures | null {
  try {
    return parseNcuDetails(out)[0] ?? null;
  } catch {
    return null;
  }
}

/** Human lines for a profile result. */
export function describeProfile(r: ProfileResult): string {
  const f = r.figures;
  const L = [
    `${r.tool === "ncu" ? "Nsight Compute" : "Nsight Systems"} report: ${r.report} (${r.seconds.profile.toFixed(1)} s${r.seconds.build ? `, after a ${r.seconds.build.toFixed(1)} s build` : ""})`,
  ];
  if (r.verdict === "mismatch") L.push("  the replayed kernel does NOT match the app's after state (the profile is of a kernel that computes something else)");
  if (f) {
    const pct = (x: number | null) => (x === null ? "?" : `${x.toFixed(1)}%`);
    const mb = f.dramBytes === null ? "?" : f.dramBytes >= 1e9 ? `${(f.dramBytes / 1e9).toFixed(2)} GB` : `${(f.dramBytes / 1e6).toFixed(2)} MB`;
    L.push(`  ${f.kernel} grid ${f.grid || "?"} block ${f.block || "?"} on ${f.device || "?"}`);
    L.push(
      `  duration ${f.durationUs === null ? "?" : `${f.durationUs.toFixed(2)} µs`}; compute (SM) ${pct(f.smThroughputPct)} and memory ${pct(f.memoryThroughputPct)} of peak; achieved occupancy ${pct(f.achievedOccupancyPct)}; ${f.registersPerThread ?? "?"} registers/thread; DRAM ${mb}`,
    );
    if (f.limiter)
      L.push(
        `  limiter: ${f.limiter.bound}-bound${f.limiter.sections.length ? `; read ${f.limiter.sections.join(", ")}` : ""} (${f.limiter.source === "ncu rule" ? "ncu's rule" : "from the throughputs"})`,
      );
  }
  L.push(`  open it: ${r.tool === "ncu" ? "ncu-ui" : "nsys-ui"} ${r.report}`);
  return L.join("\n");
}
