/** `kerncap replay DIR`: same VAs, launch, bit-exact check, timing. Exit 0 match, 1 mismatch, 2 error. */
import { defineCommand, type ArgsDef } from "citty";
import { readManifest } from "../../format/capture-dir.ts";
import { KerncapError } from "../../errors.ts";
import { log } from "../../log.ts";
import { replayHsa } from "../../replay/hsa.ts";
import { elementType } from "../../replay/tolerance.ts";
import { withAslrRetry } from "../../replay/aslr.ts";
import { replayCuda, type ReplayResult } from "../../replay/engine.ts";
import { floatArg } from "../../replay/tolerance-plan.ts";
import { dirArg, intArg, jsonArg, printJson, verboseArg } from "../args.ts";
import { formatBytes } from "./inspect.ts";

/** Human lines for a replay result. */
export function describeReplay(r: ReplayResult): string {
  const L = [
    `${r.verdict === "match" ? "MATCH" : "MISMATCH"}  ${r.kernel}`,
    `  checked ${r.regionsChecked} regions, ${formatBytes(r.bytesChecked)}; ${r.mismatches.length} differ`,
  ];
  for (const x of r.mismatches.slice(0, 20)) {
    L.push(`  region ${x.va} (${x.kind}, ${formatBytes(x.size)}, ${x.changedInApp ? "written by the kernel in the app" : "not written in the app"}): first difference at byte ${x.firstDiffOffset}, ${x.bytesDiffering} bytes differ`);
  }
  if (r.timing.iters) {
    L.push(`  kernel time: median ${r.timing.medianUs.toFixed(2)} µs, min ${r.timing.minUs.toFixed(2)} µs over ${r.timing.iters} launches` + (r.timing.appUs !== null ? `; in the app ${r.timing.appUs.toFixed(2)} µs (one launch)` : ""));
  }
  L.push(`  restore ${formatBytes(r.restore.bytes)} in ${(r.restore.seconds * 1000).toFixed(1)} ms (${r.restore.gbPerS.toFixed(1)} GB/s${r.restore.hostRegistered ? ", host-registered mmap" : ", pageable"}); ${r.reserve.spans} VA spans reserved at the captured addresses`);
  L.push(...describeNumerics(r));
  L.push(`  device ${r.device.name} ${r.device.arch}`);
  return L.join("\n");
}

/** The tolerance report: overall verdict, then each region that is not bit-exact. */
export function describeNumerics(r: ReplayResult): string[] {
  const n = r.numerics;
  const L = [`  numerics: ${n.verdict.toUpperCase()} (atol ${n.atol}, rtol ${n.rtol})`];
  for (const x of n.regions.slice(0, 20)) {
    L.push(
      `  region ${x.va} as ${x.dtype} (${x.dtypeSource}): ${x.verdict}; ${x.overTolerance} of ${x.elements} elements over tolerance, max abs ${x.maxAbsError.toPrecision(4)}, max rel ${x.maxRelError.toPrecision(4)}` +
        (x.firstOverOffset >= 0 ? `, first at byte ${x.firstOverOffset}` : "") +
        (x.trivial === "unchanged" ? "; the replay left it unchanged where the app wrote it" : x.trivial === "all-zeros" ? "; the replay left it all zeros where the app wrote data" : ""),
    );
  }
  return L;
}

/** --atol/--rtol/--dtype, shared by replay and validate. */
export const toleranceArgs = {
  atol: { type: "string", description: "Absolute tolerance per element (|got − expected| ≤ atol + rtol·|expected|)", default: "0" },
  rtol: { type: "string", description: "Relative tolerance per element", default: "0" },
  dtype: { type: "string", description: "Element type for regions whose type the kernel signature does not give (default fp32)" },
} as const satisfies ArgsDef;

/** --atol/--rtol/--dtype, checked before any GPU work. @throws KerncapError E_USAGE */
export function toleranceOptions(args: { atol?: unknown; rtol?: unknown; dtype?: unknown }): { atol?: number; rtol?: number; dtype?: string } {
  const dtype = args.dtype ? String(args.dtype) : undefined;
  if (dtype && !elementType(dtype)) {
    throw new KerncapError("E_USAGE", `--dtype ${dtype} is not a known element type`, { hint: "Use fp32, fp16, bf16, fp64, i8/i16/i32/i64 or u8/u16/u32/u64." });
  }
  return { atol: floatArg("atol", args.atol), rtol: floatArg("rtol", args.rtol), dtype };
}

export default defineCommand({
  meta: { name: "replay", description: "Replay a capture at its captured VAs, compare bit for bit, time it" },
  args: {
    ...dirArg,
    iters: { type: "string", description: "Timed launches after the checked one (median, min)", default: "10" },
    verify: { type: "boolean", description: "Check the capture's checksums (--no-verify skips it)", negativeDescription: "Skip the checksums (faster for large captures; a damaged file goes unnoticed)", default: true },
    ...toleranceArgs,
    ...jsonArg,
    ...verboseArg,
  },
  async run({ args }) {
    const dir = String(args.dir);
    const iters = intArg("iters", args.iters, 10, 100_000);
    const tol = toleranceOptions(args);
    if (readManifest(dir).device.vendor === "amd") return replayAmd(dir, iters, Boolean(args.json));
    return withAslrRetry(async () => {
      const r = await replayCuda(dir, { iters, verify: args.verify !== false, ...tol });
      if (args.json) printJson("replay", r);
      else process.stdout.write(describeReplay(r) + "\n");
      if (r.verdict !== "match") log.error(`replay does not match the app's after state in ${r.numerics.regions.filter((x) => x.verdict === "mismatch").length} of ${r.regionsChecked} regions and module globals`);
      return r.verdict === "match" ? 0 : 1;
    });
  },
});

/** AMD captures go to the HSA backend (src/replay/hsa.ts; never run on AMD hardware so far). */
function replayAmd(dir: string, iters: number, json: boolean): number {
  const m = readManifest(dir);
  const r = replayHsa(dir, m, { iterations: Math.max(1, iters) });
  if (json) printJson("replay", r);
  else {
    const bad = r.regions.filter((x) => !x.match);
    process.stdout.write(`${r.match ? "MATCH" : "MISMATCH"}  ${m.kernel.demangled} on ${r.device.name} ${r.device.arch}\n  ${r.regions.length} regions, ${bad.length} differ; dispatch median ${r.timing.medianUs.toFixed(2)} µs (wall clock)\n`);
  }
  return r.match ? 0 : 1;
}
