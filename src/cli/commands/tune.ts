/**
 * `kerncap tune DIR`: sweep a kernel's configs on the captured memory (the workflow: src/ops/tune.ts): a
 * Triton kernel's constexprs and compile options (compiled by repro.py), a CUDA kernel's macros,
 * -maxrregcount and nvcc flags (built by build.sh); each judged against the app's after state and
 * timed interleaved with the app's own build; a table, and the winner as a line to paste
 * (@triton.autotune's triton.Config, or nvcc flags). Exit 0 when some config matched, 1 when none
 * did, 2 on error; --build-only: every config built and none judged (no GPU), exit 0 when some built.
 */
import { log } from "../../log.ts";
import { KerncapError } from "../../errors.ts";
import { defineCommand } from "citty";
import { tuneNotes, tuneTable, type TuneResult } from "../../frontends/tune.ts";
import { tuneVerb } from "../../ops/tune.ts";
import { MIN_PAIRS } from "../../replay/stats.ts";
import {
  allowVersionMismatchArg,
  dataStdio,
  dirArg,
  flushL2Arg,
  intArg,
  jsonArg,
  keepStdoutForData,
  printJson,
  repeatedOption,
  toleranceArgs,
  toleranceOptions,
  trustArg,
  verboseArg,
  printText,
} from "../args.ts";
import type { TuneOptions } from "../../ops/tune.ts";
import { resolve } from "node:path";
import { tuneCsv, tuneHtml } from "../../tune/html.ts";
import { checkOutputFile, writeFileAtomic } from "../../util/write-file.ts";
import { stderrProgress, type ProgressLine } from "../../util/progress.ts";

/** The text of a tune: the table, its errors and notes, the winner and the line to paste. */
export function describeTune(r: TuneResult<unknown>): string {
  const w = r.winner;
  const label = (x: NonNullable<typeof w>) => x.label ?? "";
  const lines = [tuneTable(r.rows), ...tuneNotes(r.rows), ""];
  if (r.buildOnly) {
    const configs = r.rows.filter((x) => !x.captured); // CUDA's build.sh row too: the plain config
    const built = configs.filter((x) => x.verdict === "built").length;
    lines.push(
      `${built} of ${configs.length} config${configs.length === 1 ? "" : "s"} built; none judged or timed (--build-only): tune again without it on a machine with the capture's GPU`,
    );
    lines.push(`  built in ${r.seconds.compile.toFixed(1)} s`);
    return lines.join("\n");
  }
  if (!w) lines.push("no config matched the app's after state");
  else {
    const beaten = r.rows.some((x) => x.vsApp) && w.captured ? " (the app's own: no config is faster beyond the noise)" : w.captured ? " (the app's own)" : "";
    lines.push(`winner: ${label(w)}${beaten}${!w.captured && w.speedup ? `, ${w.speedup.toFixed(2)}× the app's${w.vsApp ? ` (${w.vsApp.text})` : ""}` : ""}`);
    if (r.paste !== null) lines.push(`  ${r.paste || "(no flags to add: the reproducer's build as it is)"}`);
  }
  lines.push(`  ${r.rows.length} rows: built in ${r.seconds.compile.toFixed(1)} s, checked and timed in ${r.seconds.replay.toFixed(1)} s`);
  return lines.join("\n");
}

/** Tune's builds as a progress line (configs built of all, the time left), erased once all are built. */
function buildProgress(json: boolean): (done: number, total: number) => void {
  let line: ProgressLine | undefined;
  return (done, total) => {
    line ??= stderrProgress("building configs", total, { noun: "built" }, json);
    line.update(done);
    if (done >= total) line.end();
  };
}

/**
 * The options of `kerncap tune` as its workflow takes them (src/ops/tune.ts TuneOptions): the
 * space, the timing (--iters, --flush-l2), the judging (--atol, --rtol, --dtype, --multiset),
 * --allow-version-mismatch, the builds (--jobs), --trust and --confine.
 * @throws KerncapError E_USAGE (a bad --iters, --jobs, tolerance, --dtype or --multiset)
 */
export function tuneOptions(
  args: Parameters<typeof toleranceOptions>[0] & {
    iters?: unknown;
    jobs?: unknown;
    maxrregcount?: unknown;
    grid?: unknown;
    "flush-l2"?: unknown;
    "build-only"?: unknown;
    "allow-version-mismatch"?: unknown;
    trust?: unknown;
    confine?: unknown;
  },
  rawArgs: string[],
): TuneOptions {
  const { atol, rtol, ...judging } = toleranceOptions(args, rawArgs);
  return {
    configs: repeatedOption(rawArgs, ["config"]),
    defines: repeatedOption(rawArgs, ["define"]),
    maxrregcount: args.maxrregcount === undefined ? undefined : String(args.maxrregcount),
    nvccFlags: repeatedOption(rawArgs, ["nvcc-flag"]),
    grid: args.grid === undefined ? undefined : String(args.grid),
    iters: intArg("iters", args.iters, 20, 10_000, MIN_PAIRS),
    jobs: args.jobs === undefined ? undefined : intArg("jobs", args.jobs, 1, 1024, 1),
    flushL2: Boolean(args["flush-l2"]),
    atol,
    rtol,
    ...Object.fromEntries(Object.entries(judging).filter(([, v]) => v !== undefined)),
    force: Boolean(args["allow-version-mismatch"]),
    ...(args["build-only"] ? { buildOnly: true } : {}),
    trust: trustArg(args.trust, rawArgs),
    confine: Boolean(args.confine),
  };
}

export default defineCommand({
  meta: {
    name: "tune",
    description:
      "Sweep a kernel's configs on the captured memory (Triton: constexprs, num_warps…; CUDA: macros, -maxrregcount, nvcc flags): build, check, time interleaved; print the winner to paste",
  },
  args: {
    ...dirArg,
    config: {
      type: "string",
      description:
        "Config space: NAME=V1,V2 … expanded as a product; repeat for a union. Triton: constexprs, num_warps, num_stages, maxnreg (default: the autotuner's configs recorded at capture); CUDA: maxrregcount, any other NAME a macro (-DNAME=V)",
      valueHint: "SPACE",
    },
    define: {
      type: "string",
      description: "CUDA: a macro's values, NAME=V1,V2 (-DNAME=V each; repeat for more macros: their product)",
      valueHint: "NAME=V1,V2",
    },
    maxrregcount: { type: "string", description: "CUDA: nvcc -maxrregcount values, N,M", valueHint: "N,M" },
    "nvcc-flag": {
      type: "string",
      description: "CUDA: one alternative of extra nvcc flags per use, e.g. --nvcc-flag=-Xptxas=-O1 --nvcc-flag= (none); device code generation flags only",
      valueHint: "FLAGS",
    },
    grid: {
      type: "string",
      description:
        "Triton: launch grid of a config, e.g. 'cdiv(M,BLOCK_M)*cdiv(N,BLOCK_N),1,1' (the kernel's integer arguments and the config's values; default: the captured grid)",
      valueHint: "EXPR",
    },
    iters: { type: "string", description: "Timed rounds, one launch of every config each", default: "20" },
    jobs: { type: "string", description: "Parallel compiles (default: the CPU count)" },
    "build-only": {
      type: "boolean",
      description:
        "Build every config and judge none (no GPU needed): each row built (CUDA: with its registers/thread) or compile-error; exit 0 when some config built. Tune again without it on the GPU to judge and time them",
      default: false,
    },
    ...flushL2Arg,
    trust: {
      type: "boolean",
      description:
        "Tune a received capture (unpacked, made on another machine, copied, or not yours alone: docs/security.md): its build (build.sh, the kernel's Python) runs, as validate --trust runs it; --trust=DIGEST: only if the files are the ones the refusal showed (docs/security.md)",
      default: false,
    },
    confine: {
      type: "boolean",
      description:
        "What kerncap mcp's tune uses: CUDA builds read nothing outside the capture, its source root and the toolchain (as validate --confine); a Triton capture only with --trust",
      default: false,
    },
    report: {
      type: "string",
      description:
        "Write an HTML report to FILE: the configs as a table and a bar chart of their times, a heatmap when two parameters vary (one self-contained file)",
      valueHint: "FILE",
    },
    csv: { type: "string", description: "Write the configs to FILE as CSV (one row each: parameters, verdict, median µs, speedup)", valueHint: "FILE" },
    ...toleranceArgs,
    ...allowVersionMismatchArg(),
    ...jsonArg,
    ...verboseArg,
  },
  async run({ args, rawArgs }) {
    if (args.json) keepStdoutForData(); // device printf goes to stderr (escaped), the document to stdout; a replay sets it aside in text mode too (src/replay/backends/factory.ts)
    const o = { ...tuneOptions(args, rawArgs), onBuilt: buildProgress(Boolean(args.json)) };
    if (o.buildOnly && args.report !== undefined)
      throw new KerncapError("E_USAGE", "--report draws the configs' times, and --build-only times none: they do not go together", {
        hint: "Give --csv FILE (or --json) for the rows of a --build-only tune; --report with a tune that judges and times them on the GPU.",
      });
    for (const k of ["report", "csv"] as const) if (args[k] !== undefined) checkOutputFile(k, String(args[k])); // before any build
    const files = (["report", "csv"] as const).filter((k) => args[k] !== undefined).map((k) => `--${k} ${String(args[k])}`);
    // an error ends the tune before any config is timed: the files asked for are not written, and that is said
    const unwritten = (e: unknown) => {
      if (files.length) log.info(`${files.join(" and ")}: not written (no config was timed)`);
      throw e;
    };
    return tuneVerb(
      String(args.dir),
      o,
      (r) => {
        if (args.report !== undefined) writeFileAtomic(resolve(String(args.report)), tuneHtml(r));
        if (args.csv !== undefined) writeFileAtomic(resolve(String(args.csv)), tuneCsv(r));
        if (args.json) printJson("tune", r);
        else printText(describeTune(r as TuneResult<unknown>) + "\n");
        // --build-only: no config built is E_BUILD (exit 2) before this; some built is the answer asked for
        return r.winner || r.buildOnly ? 0 : 1;
      },
      dataStdio(),
    ).catch(unwritten);
  },
});
