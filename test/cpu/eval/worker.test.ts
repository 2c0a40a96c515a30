/**
 * src/eval/worker.ts verdictOf: a candidate's compared runs as its record's verdict; a mismatch
 * (and a match that is not bit-exact) carries validate's `mismatches` and `numerics` (nu10 #3: a
 * record said only the numerics' word, and a harness had to validate each candidate again to
 * learn how wrong it was).
 */
import { expect, test } from "bun:test";
import * as v from "valibot";
import { verdictOf } from "../../../src/eval/worker.ts";
import { DOCUMENTS, documentId } from "../../../src/format/documents.ts";
import { EvalOutcome } from "../../../src/format/eval-record.ts";
import type { ComparedRuns, ReplayResult } from "../../../src/replay/result.ts";

const region = {
  va: "0x7f0000001000",
  kind: "device",
  size: 4096,
  changedInApp: true,
  dtype: "fp32",
  dtypeSource: "signature",
  verdict: "mismatch",
  elements: 1024,
  bytesDiffering: 4096,
  overTolerance: 1024,
  maxAbsError: 2.5,
  maxRelError: Number.POSITIVE_INFINITY, // against an expected 0: JSON writes null
  firstOverOffset: 0,
  firstDiffOffset: 0,
};

/** A candidate's result as the engine gives it (the fields verdictOf and validate's document read). */
function result(verdict: "match" | "mismatch", numerics: string, regions: object[], mismatches: object[]): ReplayResult {
  return {
    verdict,
    regionsChecked: 2,
    mismatches,
    determinism: { runs: 3, runsDiffering: 0, nondeterministic: false },
    check: { verifySeconds: 0, compareSeconds: 0, bytesCopiedBack: 0 },
    numerics: { verdict: numerics, atol: 0, rtol: 1e-5, regions, settings: { file: "kerncap-judge.json", used: ["rtol"] } },
    device: { name: "fake GPU", arch: "sm_90" },
  } as unknown as ReplayResult;
}

test("a mismatch's record carries validate's mismatches[] and numerics (regions with maxAbsError, the tolerances, the judging settings used)", () => {
  const mm = { va: region.va, kind: "device", size: 4096, changedInApp: true, firstDiffOffset: 0, bytesDiffering: 4096 };
  const c = result("mismatch", "mismatch", [region], [mm]);
  const baseline = result("match", "bit-exact", [], []);
  const out = verdictOf({ candidate: c, baseline, compare: null } as ComparedRuns);
  expect(out.verdict).toBe("mismatch");
  expect(out.reason).toContain("1 of 2 regions differ");
  expect(out.judgement?.mismatches).toEqual([mm]);
  expect(out.judgement?.numerics).toMatchObject({ verdict: "mismatch", atol: 0, rtol: 1e-5, settings: { file: "kerncap-judge.json", used: ["rtol"] } });
  expect(out.judgement?.numerics.regions[0]).toMatchObject({ va: region.va, maxAbsError: 2.5, maxRelError: null, overTolerance: 1024, firstDiffOffset: 0 });
  // the record's schema (kerncap schema eval-record) holds it, and keeps it (valibot's object drops a field it does not name)
  const outcome = { candidate: "c@0", input: "cap", code: null, runSeconds: 1, device: c.device, ...out };
  const parsed = v.safeParse(EvalOutcome, outcome);
  expect(parsed.success).toBe(true);
  expect((parsed.output as EvalOutcome).judgement?.numerics.regions.length).toBe(1);
  const rec = {
    schema: documentId("eval-record"),
    ...outcome,
    label: "c",
    kind: "file",
    build: { seconds: 0, registers: null, stackFrameBytes: null },
    worker: 0,
    gpu: null,
    shard: null,
    at: "2026-12-05T00:00:00.000Z",
  };
  expect(v.safeParse(DOCUMENTS["eval-record"], rec).success).toBe(true);
  // the same shapes as validate's document
  expect(v.safeParse(DOCUMENTS.validate.entries.mismatches, out.judgement!.mismatches).success).toBe(true);
  expect(v.safeParse(DOCUMENTS.validate.entries.numerics, out.judgement!.numerics).success).toBe(true);
});

test("a bit-exact match carries no judgement; a match within tolerance carries its regions", () => {
  const exact = verdictOf({ candidate: result("match", "bit-exact", [], []), baseline: null, compare: null } as ComparedRuns);
  expect(exact.verdict).toBe("match");
  expect(exact.judgement).toBeUndefined();
  const near = verdictOf({
    candidate: result("match", "within-tolerance", [{ ...region, verdict: "within-tolerance", overTolerance: 0, maxRelError: 1e-6 }], []),
    baseline: null,
    compare: null,
  } as ComparedRuns);
  expect(near.judgement?.numerics.regions[0]).toMatchObject({ verdict: "within-tolerance", maxRelError: 1e-6 });
});
