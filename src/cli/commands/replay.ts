/** `kerncap replay DIR`: same VAs, launch, bit-exact check, timing. Exit 0 match, 1 mismatch, 2 error. */
import { defineCommand } from "citty";
import { log } from "../../log.ts";
import { replayCuda, type ReplayResult } from "../../replay/engine.ts";
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
  L.push(`  device ${r.device.name} ${r.device.arch}`);
  return L.join("\n");
}

export default defineCommand({
  meta: { name: "replay", description: "Replay a capture at its captured VAs, compare bit for bit, time it" },
  args: {
    ...dirArg,
    iters: { type: "string", description: "Timed launches after the checked one (median, min)", default: "10" },
    verify: { type: "boolean", description: "Check the capture's checksums (--no-verify skips it)", default: true },
    ...jsonArg,
    ...verboseArg,
  },
  async run({ args }) {
    const r = await replayCuda(String(args.dir), { iters: intArg("iters", args.iters, 10), verify: args.verify !== false });
    if (args.json) printJson(r);
    else process.stdout.write(describeReplay(r) + "\n");
    if (r.verdict !== "match") log.error(`replay does not match the app's after state in ${r.mismatches.length} regions`);
    return r.verdict === "match" ? 0 : 1;
  },
});
