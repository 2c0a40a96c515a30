/**
 * The CPU side of one validate's incremental rebuild, step by step, in a fresh process (what a
 * `kerncap validate` after an edit does before cicc starts): read the base (the previous whole-TU
 * gcc -E -dD output and its sources), read the sources, parse the base, plan the synthetic TU, run
 * its gcc -E, restore the pruner's analysis, assemble, prune, write the pruned TU. No GPU: the
 * plan's compile (cicc, ptxas) is replaced by a no-op after the setup's build.
 *
 *   bun scripts/bench-incremental.ts DIR setup          # the first build: the base and the pruner's state
 *   bun scripts/bench-incremental.ts DIR edit FILE [N]  # N times (default 3): append a comment line to
 *                                                       # DIR/src/FILE, then a fresh process times the steps
 *   bun scripts/bench-incremental.ts DIR watch FILE [N] # the same edits in one process, as a watch's saves
 *
 * DIR is a reproducer-shaped folder: DIR/build.sh (`build.sh OUT` compiles to OUT with nvcc -cubin,
 * passing $EXTRA_FLAGS) and its sources under DIR/src; the work folder is DIR/build/pruned as in
 * validate. Prints one JSON line per run: {step: ms}, and `toCompile`: ms from the process's start
 * until the compile started.
 */
import { appendFileSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fastBuild, FastBuildState } from "../src/frontends/cuda/fast-build.ts";

async function once(dir: string, watch?: FastBuildState, first = false): Promise<Record<string, number | string>> {
  const work = join(dir, "build", "pruned");
  const state = watch ?? FastBuildState.load(work);
  if (watch) state.trace = {};
  const t0 = performance.now();
  let toCompile = 0;
  const onCompile = () => (toCompile = performance.now() - (watch ? t0 : 0));
  await fastBuild(dir, work, { force: false, onCompile }, state).catch((e) => {
    // the first build's real compile may fail where the folder is not a capture's reproducer (no slice of the instantiation): its base and pruner state are made all the same
    if (!first || !toCompile) throw e;
    console.error(`the first build's compile: ${e instanceof Error ? e.message.slice(0, 200) : String(e)}`);
  });
  if (!watch) state.save(work);
  // cicc and ptxas are the GPU node's part of the benchmark: the plan's compile becomes a no-op (the plan is kept while build.sh is unchanged)
  const planFile = join(work, "plan.json");
  const plan = JSON.parse(readFileSync(planFile, "utf8"));
  if (plan.compile !== "true") writeFileSync(planFile, JSON.stringify({ ...plan, compile: "true" }));
  const round = (x: number) => Math.round(x * 10) / 10;
  const steps = Object.fromEntries(Object.entries(state.trace).map(([k, v]) => [k, round(v)]));
  return { ...steps, toCompile: round(toCompile), ...(state.lastMiss ? { miss: state.lastMiss } : {}) };
}

const [dir, verb, file, n] = process.argv.slice(2);
if (!dir || !["setup", "edit", "watch", "run"].includes(verb ?? "") || (verb !== "setup" && verb !== "run" && !file)) {
  console.error("usage: bun scripts/bench-incremental.ts DIR setup | DIR edit FILE [N] | DIR watch FILE [N]");
  process.exit(2);
}
/** The median of each step over the runs (a shared machine's noise: the median, not the mean). */
function medians(runs: Record<string, number | string>[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const k of Object.keys(runs[0] ?? {})) {
    const v = runs
      .map((r) => r[k])
      .filter((x): x is number => typeof x === "number")
      .sort((a, b) => a - b);
    if (v.length) out[k] = v[v.length >> 1]!;
  }
  return out;
}

if (verb === "edit") {
  const runs: Record<string, number | string>[] = [];
  for (let i = 0; i < Number(n ?? 3); i++) {
    appendFileSync(join(dir, "src", file!), `// kerncap bench edit ${Date.now()}\n`);
    // a fresh process, as validate is
    const p = Bun.spawnSync([process.execPath, import.meta.path, dir, "run"], { stdout: "pipe", stderr: "inherit" });
    process.stdout.write(p.stdout.toString());
    runs.push(JSON.parse(p.stdout.toString()));
  }
  console.log(`median ${JSON.stringify(medians(runs))}`);
} else if (verb === "watch") {
  // a watch: one process, the state in memory; the first build is whole (its time not printed)
  const state = new FastBuildState();
  await once(dir, state, true);
  const runs: Record<string, number | string>[] = [];
  for (let i = 0; i < Number(n ?? 3); i++) {
    appendFileSync(join(dir, "src", file!), `// kerncap bench edit ${Date.now()}\n`);
    runs.push(await once(dir, state));
    console.log(JSON.stringify(runs.at(-1)));
  }
  console.log(`median ${JSON.stringify(medians(runs))}`);
} else {
  const r = await once(dir, undefined, verb === "setup");
  console.log(JSON.stringify(r));
}
