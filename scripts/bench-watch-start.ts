/**
 * The CPU side of a `validate --watch` save, without a GPU: from the save (an editor's: the new
 * text written to a temporary, renamed over the file) to the compiler's start and to the line, on
 * a real CUDA reproducer (test/heavy-fixture.ts, the local nvcc) in the watch loop of
 * test/cpu/watch-cuda-child.ts (a replay session that needs no GPU). Each save appends a comment
 * line to the kernel's header, so that every save is built from the pruned TU, incrementally.
 *
 *   bun scripts/bench-watch-start.ts [N=7] [--child=PATH]   # PATH: another checkout's test/cpu/watch-cuda-child.ts (a before/after)
 *
 * Prints one JSON line per save: `wallMs` (the rename → the line, as the benchmark's
 * bench-lib.sh times it), `toCompileMs` (the rename → the compiler's start, with the few ms after
 * the compile (the module written and checked): wallMs − the run − cicc + ptxas), the line's phases
 * and buildSteps; then the medians. Needs nvcc (NVCC or on PATH).
 */
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { makeHeavyReproducer } from "../test/heavy-fixture.ts";
import { makeCapture, tempDir } from "../test/cpu/fixtures.ts";
import { NVCC } from "../test/nvcc-fixtures.ts";

const args = process.argv.slice(2).filter((a) => !a.startsWith("--"));
const childArg = process.argv.find((a) => a.startsWith("--child="))?.slice(8);
const N = Number(args[0] ?? 7);
if (!NVCC) {
  console.error("no nvcc");
  process.exit(2);
}
const dir = join(tempDir("kerncap-bench-watch-"), "cap");
await makeCapture(dir);
const { kernel, header } = await makeHeavyReproducer(tempDir("kerncap-bench-heavy-"), dir);
const env = { ...process.env, NVCC: NVCC! };
const b = Bun.spawnSync(["bash", join(dir, "build.sh"), join(dir, "first.cubin")], { cwd: dir, stdout: "pipe", stderr: "pipe", env });
if (b.exitCode !== 0) throw new Error(b.stderr.toString());
const child = childArg ?? join(import.meta.dir, "..", "test", "cpu", "watch-cuda-child.ts");
const p = Bun.spawn([process.execPath, child, dir, kernel, join(dir, "first.cubin")], { stdout: "pipe", stderr: "pipe", env });
const lines: { doc: any; at: number }[] = [];
let err = "";
void (async () => {
  let buf = "";
  for await (const chunk of p.stdout) {
    const at = performance.now();
    buf += new TextDecoder().decode(chunk);
    for (let i; (i = buf.indexOf("\n")) >= 0; buf = buf.slice(i + 1)) lines.push({ doc: JSON.parse(buf.slice(0, i)), at });
  }
})();
void (async () => {
  for await (const chunk of p.stderr) err += new TextDecoder().decode(chunk);
})();
const until = async (what: string, ok: () => boolean) => {
  for (let t = 0; !ok(); t++) {
    if (t > 12000) throw new Error(`no ${what} after 60 s\n${err}`);
    await Bun.sleep(5);
  }
};
const rows: Record<string, number>[] = [];
/** The steps printed under their own names above; BENCH_STEPS=1 adds the others (the incremental preprocessing's trace: readSourcesMs, awaitGccEMs …). */
const STEP_KEYS = { preprocessMs: 1, pruneMs: 1, quietWaitMs: 1, compileMs: 1, incremental: 1 };
try {
  await until("first line", () => lines.length >= 1);
  await until("the pruned build's check", () => err.includes("saves are rebuilt"));
  if (!err.includes("saves are rebuilt from the pruned TU")) throw new Error(`the pruned build is not used: ${err}`);
  const tmp = `${header}.tmp`; // an editor's temporary (isSourceSave: not a save), renamed over the file
  for (let k = 0; k < N; k++) {
    await Bun.sleep(300);
    writeFileSync(tmp, `${readFileSync(header, "utf8")}// kerncap bench watch edit ${k}\n`);
    const t0 = performance.now();
    renameSync(tmp, header);
    await until(`line ${k + 2}`, () => lines.length >= k + 2);
    const { doc, at } = lines[k + 1]!;
    const s = doc.buildSteps ?? {};
    const ph = doc.phases ?? {};
    const wallMs = at - t0;
    const row = {
      wallMs,
      toCompileMs: wallMs - ph.runSeconds * 1000 - s.compileMs,
      waitMs: ph.waitSeconds * 1000,
      preprocessMs: s.preprocessMs,
      pruneMs: s.pruneMs,
      quietWaitMs: s.quietWaitMs ?? 0,
      compileMs: s.compileMs,
      incremental: s.incremental ? 1 : 0,
      ...(process.env.BENCH_STEPS ? Object.fromEntries(Object.entries(s).filter(([key, v]) => typeof v === "number" && !(key in STEP_KEYS))) : {}),
    } as Record<string, number>;
    if (doc.builder !== "pruned") throw new Error(`save ${k}: built by ${doc.builder}`);
    rows.push(row);
    console.log(JSON.stringify(Object.fromEntries(Object.entries(row).map(([key, v]) => [key, Math.round(v * 10) / 10]))));
  }
} finally {
  p.kill("SIGINT");
  await p.exited;
}
const median = (k: string) => {
  const v = rows.map((r) => r[k]!).sort((a, c) => a - c);
  return Math.round(v[v.length >> 1]! * 10) / 10;
};
console.log(`median ${JSON.stringify(Object.fromEntries(Object.keys(rows[0]!).map((k) => [k, median(k)])))}`);
