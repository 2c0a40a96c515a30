/**
 * A GPU worker of `kerncap eval` for the CPU tests: the real protocol (src/check/worker.ts
 * serveProtocol with src/eval/worker.ts EVAL_PROTOCOL), a fake judge. The candidate's "module"
 * (what the test's build wrote) says what its kernel does, one word and an optional speedup
 * (`match 1.25`, `mismatch`, `hang`, `die`, `fault`; `hang-first`, `slow-first MS`, `hang-late`: the
 * first launch's lines, then a hang there, MS ms there, or a hang after it), with `INPUT=WORD` lines overriding it for one
 * input. Each task appends "<pid> <candidate> <input> <ms since the epoch>" to $EVAL_FAKE_LOG once
 * started; the settings' warm input, made "resident" at the worker's start, appends
 * "<pid> <dir> <ms since the epoch>" to $EVAL_FAKE_WARM_LOG.
 */
import { appendFileSync, readFileSync } from "node:fs";
import { lines, serveProtocol } from "../../src/check/worker.ts";
import { EVAL_PROTOCOL } from "../../src/eval/worker.ts";
import type { EvalOutcome } from "../../src/format/eval-record.ts";

const write = (x: object) => process.stdout.write(JSON.stringify(x) + "\n");
let lost = false;

function behaviour(text: string, input: string): string[] {
  const rows = text
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean);
  const own = rows.find((r) => r.startsWith(`${input}=`));
  return (own ? own.slice(input.length + 1) : rows[0]!).split(/\s+/);
}

await serveProtocol(
  lines(Bun.stdin.stream()),
  EVAL_PROTOCOL,
  async (t) => {
    const [what, sp] = behaviour(readFileSync(t.module, "utf8"), t.input);
    write({ started: true });
    if (process.env.EVAL_FAKE_LOG) appendFileSync(process.env.EVAL_FAKE_LOG, `${process.pid} ${t.candidate} ${t.input} ${Date.now()}\n`);
    const base = {
      candidate: t.candidate,
      input: t.input,
      reason: null,
      code: null,
      numerics: null,
      timing: null,
      runSeconds: 0.01,
      device: { name: "fake GPU", arch: "sm_90" },
    };
    if (what === "hang") await Bun.sleep(3_600_000);
    // the first launch's lines, as src/eval/worker.ts writes them: a kernel that hangs at its first launch, or one that
    // takes `sp` ms there, or one whose first launch ends and which hangs later
    if (what === "hang-first" || what === "slow-first" || what === "hang-late") write({ launch: "begin" });
    if (what === "hang-first") await Bun.sleep(3_600_000);
    if (what === "slow-first") await Bun.sleep(Number(sp));
    if (what === "slow-first" || what === "hang-late") write({ launch: "end" });
    if (what === "hang-late") await Bun.sleep(3_600_000);
    if (what === "die") process.kill(process.pid, "SIGKILL");
    if (what === "fault") {
      lost = true;
      return { ...base, verdict: "fault", code: "E_LAUNCH", reason: "CUDA_ERROR_ILLEGAL_ADDRESS" } satisfies EvalOutcome;
    }
    if (what === "mismatch")
      return {
        ...base,
        verdict: "mismatch",
        numerics: "mismatch",
        baseline: "match",
        reason: "1 of 2 regions differ from the app's after state: 0x7f0000000000 (device), 12 bytes from byte 0",
      } satisfies EvalOutcome;
    const s = what === "slow-first" ? 1 : Number(sp ?? 1);
    return {
      ...base,
      verdict: "match",
      numerics: "bit-exact",
      baseline: "match",
      timing: {
        baselineMedianUs: 10,
        candidateMedianUs: 10 / s,
        speedup: s,
        low: s * 0.98,
        high: s * 1.02,
        verdict: s > 1.03 ? "faster" : s < 0.97 ? "slower" : "same",
        text: `${s}×`,
      },
    } satisfies EvalOutcome;
  },
  (o, retire) => write({ outcome: o, ...(retire ? { retire } : {}) }),
  () => lost,
  async (s) => {
    if (s.warm !== undefined && process.env.EVAL_FAKE_WARM_LOG) appendFileSync(process.env.EVAL_FAKE_WARM_LOG, `${process.pid} ${s.warm} ${Date.now()}\n`);
  },
);
