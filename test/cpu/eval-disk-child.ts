/**
 * Run as a program by test/cpu/eval-disk.test.ts (`bun eval-disk-child.ts CAPTURE LIST BUILD_MS`):
 * a confined eval (kerncap mcp's evaluate: --confine, its copies in a private folder under TMPDIR)
 * of a candidate list, each candidate's copy made by the real materialise, then a build that
 * sleeps BUILD_MS before it writes a module; judged by fake worker processes. Prints "building"
 * on stderr once a copy exists, so the test can stop it mid-build.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { listedCandidates, materialise } from "../../src/eval/candidates.ts";
import { fakeEvalOptions } from "./eval-child.ts";
import { runEval } from "../../src/ops/eval.ts";

const [dir, list, ms] = process.argv.slice(2);
await runEval(
  fakeEvalOptions([dir!], [], {
    candidates: listedCandidates(list!),
    confine: true,
    jobs: 1,
    buildWith: async (d, _m, c, dest) => {
      await materialise(d, c, dest);
      process.stderr.write("building\n");
      await Bun.sleep(Number(ms));
      mkdirSync(join(dest, "build"), { recursive: true });
      writeFileSync(join(dest, "build/kernel.cubin"), "match 1.1");
      return { built: { module: join(dest, "build/kernel.cubin"), seconds: 0, registers: 32, stackFrameBytes: 0 } };
    },
  }),
);
