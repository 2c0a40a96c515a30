/**
 * A GPU worker of `kerncap eval` for the CPU tests of the GPUs' timing windows
 * (src/util/timing-window.ts): the real protocol and the real judge (src/eval/worker.ts EvalJudge,
 * its window and its `waiting`/`started` lines, as `kerncap eval --worker` writes them), with a
 * session that needs no GPU: its "restore" ($EVAL_WINDOW_CHECK_MS ms) and each comparison hold the
 * candidate's timing window; each comparison holds it shared for its
 * "checked runs" ($EVAL_WINDOW_CHECK_MS ms), then alone for its "timed rounds" ($EVAL_WINDOW_MS ms),
 * and appends "<pid> shared|alone <from ms> <to ms>" (ms since the epoch) for each to $EVAL_WINDOW_LOG.
 */
import { appendFileSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { lines, serveProtocol } from "../../src/check/worker.ts";
import { EVAL_PROTOCOL, EvalJudge } from "../../src/eval/worker.ts";
import type { TimingComparison } from "../../src/replay/stats.ts";
import { noGpuResult, noGpuSession } from "./fixtures.ts";

const write = (x: object) => process.stdout.write(JSON.stringify(x) + "\n");
const holdMs = Number(process.env.EVAL_WINDOW_MS ?? 200);
const checkMs = Number(process.env.EVAL_WINDOW_CHECK_MS ?? 100);

const judge = new EvalJudge(
  () => write({ started: true }),
  async (dir) => {
    // the input's restore, in the shared window (EvalJudge.sessionFor)
    const o0 = Date.now();
    await Bun.sleep(checkMs);
    appendFileSync(process.env.EVAL_WINDOW_LOG!, `${process.pid} shared ${o0} ${Date.now()}\n`);
    const m = JSON.parse(readFileSync(join(dir, "kerncap.json"), "utf8"));
    const session = noGpuSession(dir, m, async () => noGpuResult(m.kernel.name, false));
    return {
      ...session,
      runCompared: async (_baseline, candidate) => {
        const w = candidate.timingWindow ?? { share: async () => 0, enter: async () => 0, leave() {} };
        // the checked runs, in the shared window; then the timed rounds, alone in it
        let waited = await w.share();
        const s0 = Date.now();
        const result = await session.run(candidate);
        await Bun.sleep(checkMs);
        const s1 = Date.now();
        waited += await w.enter();
        const t0 = Date.now();
        await Bun.sleep(holdMs);
        const t1 = Date.now();
        w.leave();
        appendFileSync(process.env.EVAL_WINDOW_LOG!, `${process.pid} shared ${s0} ${s1}\n${process.pid} alone ${t0} ${t1}\n`);
        const compare = {
          baselineMedianUs: 10,
          candidateMedianUs: 10,
          speedup: 1,
          low: 0.99,
          high: 1.01,
          verdict: "same",
          decided: true,
          margin: 0.01,
          aa: null,
          bb: null,
          detectable: 0.02,
          pairs: 20,
          seconds: holdMs / 1000,
          ...(candidate.timingWindow ? { waitSeconds: waited } : {}),
          text: "same within 1% (0.99–1.01)",
          method: "fake",
        } as unknown as TimingComparison;
        return { baseline: result, candidate: result, compare };
      },
    };
  },
  () => write({ waiting: true }),
);
await serveProtocol(
  lines(Bun.stdin.stream()),
  EVAL_PROTOCOL,
  (t, s) => judge.judge(t, s),
  (o, retire) => write({ outcome: o, ...(retire ? { retire } : {}) }),
  () => judge.lost(),
);
