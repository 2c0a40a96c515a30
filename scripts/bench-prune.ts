/**
 * Benchmark of the device-side pruning's warm path (src/frontends/cuda/prune/cache.ts's
 * DevicePruner): a cold prune of a real preprocessed TU, then N rounds of warm prunes of the
 * same text with a one-line edit at 0.999, 0.9 and 0.5 of its length (each after a warm prune
 * of the unedited text again, as a watch's saves alternate), and a check that each warm output
 * is byte-identical to a cold prune of the same text (sha256 prefixes printed side by side).
 * Prints each edit position's times (ms) and medians; with a second run's medians given
 * (--old=a,b,c, e.g. an earlier commit's), the ratios old/new.
 *
 * Run: node_modules/.bin/bun scripts/bench-prune.ts [N=10] [TU=/var/tmp/gb/build/pruned/full.cpp1.ii] [--old=55,71,112]
 * (the default TU is ggml's mul_mat_q slice, gcc -E -dD output made by scripts/bench-incremental.ts's setup).
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { stripMacroLines } from "../src/frontends/cuda/incremental-pp.ts";
import { DevicePruner, pruneDeviceTU } from "../src/frontends/cuda/prune/cache.ts";

const args = process.argv.slice(2).filter((a) => !a.startsWith("--"));
const oldArg = process.argv.find((a) => a.startsWith("--old="));
const N = Number(args[0] ?? 10);
const path = args[1] ?? "/var/tmp/gb/build/pruned/full.cpp1.ii";
const full = stripMacroLines(readFileSync(path, "latin1"));
const fractions = [0.999, 0.9, 0.5];
const edits = fractions.map((f) => full.indexOf("\n", Math.floor(full.length * f)) + 1);
const h = (s: string) => createHash("sha256").update(s).digest("hex").slice(0, 12);
const p = new DevicePruner();
let t = performance.now();
const cold = p.prune(full);
console.log("cold", (performance.now() - t).toFixed(1), "ms", h(cold.text));
const res: number[][] = fractions.map(() => []);
const hashes: string[] = [];
let same = true;
for (let i = 0; i < N; i++) {
  for (const [j, at] of edits.entries()) {
    const txt = `${full.slice(0, at)}/* edit ${i} ${j} */ ${full.slice(at)}`;
    t = performance.now();
    const r = p.prune(txt);
    res[j]!.push(performance.now() - t);
    if (i === 0) {
      const c = pruneDeviceTU(txt).text;
      hashes.push(`${h(r.text)}/${h(c)}`);
      if (r.text !== c) same = false;
    }
    p.prune(full);
  }
}
const median = (a: number[]) => [...a].sort((x, y) => x - y)[a.length >> 1]!;
console.log("times ms:", JSON.stringify(res.map((a) => a.map((x) => Math.round(x)))));
const meds = res.map(median);
console.log(`warm medians ms (edit at ${fractions.join(", ")}):`, meds.map((m) => m.toFixed(1)).join(" "));
if (oldArg) {
  const old = oldArg.slice(6).split(",").map(Number);
  console.log("old/new:", meds.map((m, j) => (old[j]! / m).toFixed(2)).join(" "));
}
console.log("hashes warm/cold per edit:", hashes.join(" "), same ? "(identical)" : "(DIFFER)");
if (!same) process.exitCode = 1;
