/**
 * src/eval/report.ts: the last line of an eval with candidates it could not judge (by why: no rerun
 * fixes a candidate that does not fit src/), the reasons under the table on real lines, and a row's
 * short reason that never ends inside a parenthesis; records whose numbers no run gives refused
 * by --merge and --resume.
 */
import { expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseRecords } from "../../../src/check/results.ts";
import { EVAL_RECORDS, firstClause, mergeEval, rankedTable, reasonNotes, reportOf, shortReason, unjudgedLine } from "../../../src/eval/report.ts";
import * as v from "valibot";
import { DOCUMENTS, documentId, jsonDocument, jsonSchemaOf } from "../../../src/format/documents.ts";
import type { EvalRecord } from "../../../src/format/eval-record.ts";
import { sealedText, tempDir } from "../fixtures.ts";

/** A record of `label` on input `input` (BUILD_INPUT's "(build)" for one that never reached a GPU). */
function rec(label: string, verdict: EvalRecord["verdict"], code: string | null, reason: string | null, input = "(build)"): EvalRecord {
  return {
    candidate: `${label}@000000000000`,
    input,
    verdict,
    reason,
    code,
    numerics: null,
    timing: null,
    runSeconds: 0,
    device: null,
    label,
    kind: "file",
    build: { seconds: 0, registers: null, stackFrameBytes: null },
    worker: null,
    gpu: null,
    shard: null,
    at: "2026-12-04T00:00:00.000Z",
  };
}

const report = (records: EvalRecord[]) => reportOf(records, { dir: "/cap", inputs: ["cap"], results: null, shard: null, workers: 1, wall: 0 });

test("a candidate that does not fit src/ (a patch that does not apply, a file src/ lacks): fix it, no rerun or --resume hint; the others by their kind", () => {
  const bad = report([
    rec("bad.patch", "error", "E_PATCH", "the patch bad.patch does not apply to src/: error: x.cu: No such file or directory"),
    rec("other.cu", "error", "E_CANDIDATE", "candidate /c/other.cu: src/ has no file named other.cu"),
  ]);
  expect(bad.exitCode).toBe(2); // both alike: error, exit 2
  for (const how of ["none", "jsonl", "merge"] as const) {
    const line = unjudgedLine(bad, how);
    expect(line).toBe(
      "2 of 2 candidates could not be judged (error): bad.patch, other.cu do not fit the capture's src/ (E_PATCH, E_CANDIDATE: the reason says why); fix them: running again as they are changes nothing",
    );
    expect(line).not.toContain("--resume");
  }
  // mixed: the worker that died is tried again by --resume; no GPU here says where to run it
  const mixed = report([
    rec("bad.patch", "error", "E_PATCH", "does not apply"),
    rec("die.cu", "error", "E_WORKER", "the worker died (SIGKILL)", "cap"),
    rec("nogpu.cu", "error", "E_NO_GPU", "no NVIDIA driver", "cap"),
    rec("ok.cu", "mismatch", null, "0x7f0000000000 differs", "cap"),
  ]);
  const line = unjudgedLine(mixed, "jsonl");
  expect(line).toStartWith("3 of 4 candidates could not be judged (error): bad.patch does not fit the capture's src/ (E_PATCH");
  expect(line).toContain("fix it: running again as it is changes nothing");
  expect(line).toContain("there is no GPU here for 1 candidate, which built");
  expect(line).toEndWith("; 1 more: the same command with --resume tries them again");
  // --merge shows no builds and ran nowhere here: it names the shards
  const merged = unjudgedLine(report([rec("nogpu.cu", "error", "E_NO_GPU", "no NVIDIA driver", "cap")]), "merge");
  expect(merged).not.toContain("builds are above");
  expect(merged).not.toContain("no GPU here");
  expect(merged).toContain("run its shard again with --resume on a machine with the capture's GPU");
  // a build the confinement refused: its author's to fix, never --resume's
  const refused = unjudgedLine(report([rec("leak.cu", "error", "E_CONFINED", "the build read 1 file outside the capture folder …")]), "jsonl");
  expect(refused).toBe(
    "1 of 1 candidate could not be judged (error): leak.cu was refused by the confined build (E_CONFINED: the reason says what it read or names, or the limit it kept: a source file too large to scan); running again as it is changes nothing",
  );
  expect(unjudgedLine(report([rec("one.cu", "error", "E_WORKER", "died", "cap")]), "none")).toBe(
    "1 of 1 candidate could not be judged (error): rerun with --jsonl FILE, then --resume (with that --jsonl FILE) tries them again",
  );
});

test("why, in full: a compiler's message of several lines on its own lines, indented and escaped, never a literal \\n", () => {
  const r = report([
    rec(
      "syn",
      "compile-error",
      "E_BUILD",
      'the reproducer does not build (build.sh exit 1):\nsrc/saxpy.cu:22: error: identifier "oops" is undefined\n\nkerncap: \x1b[31mred\x1b[0m',
    ),
  ]);
  expect(reasonNotes(r)).toEqual([
    '  syn: the reproducer does not build (build.sh exit 1):\n      src/saxpy.cu:22: error: identifier "oops" is undefined\n      kerncap: \\x1b[31mred\\x1b[0m',
  ]);
  const table = rankedTable(r);
  expect(table).not.toContain("\\n");
  expect(table).toContain('\n      src/saxpy.cu:22: error: identifier "oops" is undefined\n');
});

test("a row's short reason keeps its parentheses whole: the first clause ends outside them", () => {
  const m =
    "build.sh wrote no dependency list (build/kerncap-deps.d; exit 1): a confined build cannot tell which files it read, so neither its module nor the compiler's messages are used";
  expect(firstClause(m)).toBe("build.sh wrote no dependency list (build/kerncap-deps.d; exit 1)");
  expect(shortReason(m, 160, "E_CONFINED")).toBe("build.sh wrote no dependency list (build/kerncap-deps.d; exit 1) (E_CONFINED)");
  expect(firstClause("no NVIDIA driver: libcuda could not be loaded")).toBe("no NVIDIA driver");
  expect(firstClause("a (b: c")).toBe("a (b: c"); // never closed: whole
  // "candidate PATH: what is wrong": the row names the candidate, so what is wrong is the short reason (a new user's finding: "candidate /…/kernel.cu (E_CANDIDATE)")
  expect(shortReason("candidate /var/tmp/newuser5/work/cands/files/kernel.cu: src/ has no file named kernel.cu", 160, "E_CANDIDATE")).toBe(
    "src/ has no file named kernel.cu (E_CANDIDATE)",
  );
});

test("a record whose numbers no run gives (speedup 1e999, low above high, negative, outside its interval, far from the medians' ratio) is refused by --merge and --resume, naming the file and line (trial 18 F6: the Infinity one was ranked first)", () => {
  const d = tempDir();
  const timing = {
    baselineMedianUs: 10,
    candidateMedianUs: 5,
    speedup: 2,
    low: 1.9,
    high: 2.1,
    verdict: "faster",
    decided: true,
    text: "2.00× faster (1.90–2.10)",
  };
  const raw = (label: string, t: Record<string, unknown> = {}, o: Record<string, unknown> = {}) =>
    JSON.stringify({
      schema: documentId("eval-record"),
      ...rec(label, "match", null, null, "cap"),
      numerics: "bit-exact",
      device: { name: "NVIDIA H200", arch: "sm_90" },
      worker: 0,
      gpu: "0",
      timing: { ...timing, ...t },
      ...o,
    });
  // with its authenticator: only the numbers are wrong
  const line = (label: string, t: Record<string, unknown> = {}, o: Record<string, unknown> = {}) => sealedText(raw(label, t, o));
  const file = (name: string, ...lines: string[]) => {
    const f = join(d, name);
    writeFileSync(f, lines.map((l) => `${l}\n`).join(""));
    return f;
  };
  // what a run writes is ranked
  const good = file("good.jsonl", line("fast.cu"), line("same.cu", { candidateMedianUs: 10, speedup: 1.01, low: 0.99, high: 1.02, verdict: "same" }));
  expect(mergeEval([good]).candidates.map((c) => [c.label, c.rank])).toEqual([
    ["fast.cu", 1],
    ["same.cu", 2],
  ]);
  // a last line a kill cut short: left out, and said as check --merge says it (adversary 35: silent)
  const whole = line("fast.cu");
  const cut = join(d, "cut.jsonl");
  writeFileSync(cut, `${whole}\n${line("same.cu").slice(0, 80)}`);
  const said: string[] = [];
  const write = process.stderr.write.bind(process.stderr);
  (process.stderr as any).write = (c: string) => (said.push(String(c)), true);
  let cutMerged: ReturnType<typeof mergeEval>;
  try {
    cutMerged = mergeEval([cut]);
  } finally {
    (process.stderr as any).write = write;
  }
  expect(cutMerged.candidates.map((c) => c.label)).toEqual(["fast.cu"]);
  expect(said.join("")).toContain(`${cut}: its last line is not a whole record (a shard stopped while writing it): left out`);
  const cases: [string, string, RegExp][] = [
    // JSON has no Infinity: 1e999 reads as one
    [
      "infinite",
      sealedText(raw("inf.cu", { candidateMedianUs: 10, speedup: "INF", low: "INF", high: "INF" }).replaceAll('"INF"', "1e999")),
      /timing\.speedup is Infinity/,
    ],
    ["minus-infinite", sealedText(raw("m.cu", { low: "INF" }).replace('"INF"', "-1e999")), /timing\.low is -Infinity/],
    ["low-above-high", line("lh.cu", { low: 2.1, high: 1.9 }), /timing\.speedup 2 lies outside its interval \[2\.1, 1\.9\]/],
    ["negative", line("neg.cu", { speedup: -2, low: -2.1, high: -1.9, verdict: "same" }), /timing\.speedup is -2: a time and a ratio of times are positive/],
    ["outside", line("out.cu", { speedup: 2.5 }), /timing\.speedup 2\.5 lies outside its interval \[1\.9, 2\.1\]/],
    // a factor of 3 from the medians' ratio (the speedup is a Hodges–Lehmann estimate, not that ratio: src/format/check-record.ts RATIO_FACTOR)
    [
      "far-from-medians",
      line("far.cu", { candidateMedianUs: 10, speedup: 5, low: 4.9, high: 5.1 }),
      /timing\.speedup 5 is not near baselineMedianUs \/ candidateMedianUs \(10 \/ 10 = 1\)/,
    ],
    [
      "faster-below-1",
      line("f.cu", { baselineMedianUs: 10, candidateMedianUs: 10, speedup: 1, low: 0.9, high: 1.1 }),
      /"faster" but its interval \[0\.9, 1\.1\] does not lie above 1/,
    ],
    ["negative-build", line("b.cu", {}, { build: { seconds: -1, registers: 32, stackFrameBytes: 0 } }), /build\.seconds is -1: never negative/],
    // the comparison's own counts (adversary 75: a sealed waitSeconds -1e300 was merged as it was)
    ["negative-wait", line("w.cu", { waitSeconds: -1e300 }), /timing\.waitSeconds is -1e\+300: never negative/],
    ["negative-pairs", line("p.cu", { pairs: -3 }), /timing\.pairs is -3: never negative/],
    ["fraction-pairs", line("p2.cu", { pairs: 2.5 }), /timing\.pairs is 2\.5: a count of launch pairs/],
    ["negative-detectable", line("dt.cu", { detectable: -2 }), /timing\.detectable is -2: never negative/],
    ["wait-past-run", line("wr.cu", { waitSeconds: 1e300 }), /timing\.waitSeconds 1e\+300 is more than runSeconds/],
    ["seconds-past-run", line("sr.cu", { seconds: 1e6 }), /timing\.seconds 1000000 is more than runSeconds/],
  ];
  for (const [name, bad, why] of cases) {
    const f = file(`${name}.jsonl`, line("fast.cu"), bad, line("same.cu", { candidateMedianUs: 10, speedup: 1, low: 0.99, high: 1.02, verdict: "same" }));
    let e: unknown;
    try {
      mergeEval([good, f]);
    } catch (x) {
      e = x;
    }
    expect((e as { code?: string })?.code, name).toBe("E_RESULTS");
    expect((e as Error).message, name).toStartWith(`${f}, line 2: `);
    expect((e as Error).message, name).toMatch(why);
    // --resume reads its results file through the same check (src/check/results.ts RecordLog.openKind)
    expect(() => parseRecords(f, `${line("fast.cu")}\n${bad}\n${line("fast.cu")}\n`, EVAL_RECORDS, EVAL_RECORDS.resumeAuthHint), name).toThrow(why);
  }
  // a results file named with a newline stays one line in the message (adversary 47: a forged line after it)
  expect(() => parseRecords("s2\nFAKE.jsonl", `${line("fast.cu")}\n${cases[0]![1]}\n${line("fast.cu")}\n`, EVAL_RECORDS, EVAL_RECORDS.resumeAuthHint)).toThrow(
    /^s2\\nFAKE\.jsonl, line 2: /,
  );
});

test("each ranked candidate carries the code of the record its reason is of (nu7 #20: agent-skill.md said candidates[] give code; only records[] did), null for a match", () => {
  const r = report([
    rec("bad.patch", "error", "E_PATCH", "the patch bad.patch does not apply to src/"),
    rec("syntax", "compile-error", "E_BUILD", "the reproducer does not build"),
    rec("ok", "error", "E_NO_GPU", "no NVIDIA driver", "cap"),
  ]);
  expect(Object.fromEntries(r.candidates.map((c) => [c.label, c.code]))).toEqual({ "bad.patch": "E_PATCH", syntax: "E_BUILD", ok: "E_NO_GPU" });
  // the document's schema (kerncap schema eval) names it
  const items = (jsonSchemaOf("eval") as { properties: { candidates: { items: { properties: Record<string, unknown>; required?: string[] } } } }).properties
    .candidates.items;
  expect(Object.keys(items.properties)).toContain("code");
});

test("the document says by code and by kind why candidates were not judged (nu10 #1: only the stderr line said it): summary.byCode and summary.unjudged; --merge's dir is null", () => {
  const r = report([
    ...["a.cu", "b.cu", "c.cu", "d.cu"].map((l) => ({ ...rec(l, "error", "E_NO_GPU", "no NVIDIA driver", "cap"), copy: `/cap/build/eval/${l}` })),
    rec("bad.patch", "error", "E_PATCH", "does not apply"),
    rec("inc.cu", "error", "E_CONFINED", "build.sh wrote no dependency list"),
    rec("die.cu", "error", "E_WORKER", "the worker died", "cap"),
    rec("syntax.cu", "compile-error", "E_BUILD", "expected a ;"),
  ]);
  expect(r.summary.byCode).toEqual({ E_NO_GPU: 4, E_PATCH: 1, E_CONFINED: 1, E_WORKER: 1, E_BUILD: 1 });
  expect(r.summary.unjudged).toEqual({ noGpu: 4, candidate: 2, other: 1 });
  expect(r.summary.error).toBe(7);
  // the schema (kerncap schema eval, MCP's outputSchema) holds them
  expect(v.safeParse(DOCUMENTS.eval, jsonDocument("eval", r)).success).toBe(true);
  const summary = (jsonSchemaOf("eval") as { properties: { summary: { properties: Record<string, unknown>; required: string[] } } }).properties.summary;
  expect(summary.required).toEqual(expect.arrayContaining(["byCode", "unjudged"]));
  // the stderr line counts alike
  expect(unjudgedLine(r, "jsonl")).toContain(
    "there is no GPU here for 4 candidates, which built (the same command with --resume on a machine with the capture's GPU judges their kept builds)",
  );
  // none kept (built in a private folder): not promised (nu13 #15)
  const none = report(r.records.map((x) => ({ ...x, copy: null })));
  expect(unjudgedLine(none, "jsonl")).toContain("the capture's GPU builds and judges them: none was kept here)");
  // --merge: no capture folder was built, dir null (nu10 #18c: it was "")
  const d = tempDir();
  const f = join(d, "r.jsonl");
  writeFileSync(f, `${sealedText(JSON.stringify({ schema: documentId("eval-record"), ...rec("x.cu", "error", "E_NO_GPU", "no NVIDIA driver", "cap") }))}\n`);
  const merged = mergeEval([f]);
  expect(merged.dir).toBeNull();
  expect(merged.summary.unjudged.noGpu).toBe(1);
  expect(v.safeParse(DOCUMENTS.eval, jsonDocument("eval", merged)).success).toBe(true);
});

test("a results line without a schema field is said so, not as `schema undefined` (nu10 #18f)", () => {
  const d = tempDir();
  const f = join(d, "r.jsonl");
  writeFileSync(f, `${JSON.stringify({ candidate: "x" })}\n${JSON.stringify({ candidate: "y" })}\n`);
  expect(() => mergeEval([f])).toThrow(`${f}, line 1: no "schema" field (a kerncap.eval-record/1 record has one)`);
  writeFileSync(f, "[1]\n[2]\n");
  expect(() => mergeEval([f])).toThrow("line 1: not a JSON object (a kerncap.eval-record/1 record is one)");
  writeFileSync(f, `${JSON.stringify({ schema: "kerncap.check-record/1" })}\n{}\n`);
  expect(() => mergeEval([f])).toThrow('line 1: schema "kerncap.check-record/1" is not kerncap.eval-record/1');
});

test("a compile error's row shows its first error diagnostic, not build.sh's first line (nu12 #2)", () => {
  const reason = `the reproducer does not build (build.sh exit 1):\nkerncap: the slice src/saxpy.kerncap-slice.cu does not build (its messages are not shown to a confined build: the whole TU's build, next, says any error to fix)\nsrc/saxpy.cu(21): error: identifier "blockIdxx" is undefined`;
  const broken = {
    ...rec("fix.patch", "compile-error", "E_BUILD", reason),
    diagnostics: [
      { file: "src/saxpy.cu", line: 19, column: null, severity: "warning" as const, text: "variable y is unused" },
      { file: "src/saxpy.cu", line: 21, column: null, severity: "error" as const, text: 'identifier "blockIdxx" is undefined' },
    ],
  };
  const row = rankedTable(report([broken]))
    .split("\n")
    .find((l) => l.includes("fix.patch"))!;
  expect(row).toContain('src/saxpy.cu:21: error: identifier "blockIdxx" is undefined');
  expect(row).not.toContain("kerncap: the slice");
});

test("the table: a label two candidates share is shown with its identity (nu13 #11); a built row's inputs column is a dash, an error under a build-only eval 'could not be built' (nu13 #15)", () => {
  const built = (label: string, id: string) => ({
    ...rec(label, "built", null, null),
    candidate: `${label}@${id}`,
    build: { seconds: 0, registers: 14, stackFrameBytes: 0, moduleSha256: "a".repeat(64) },
  });
  const r = report([
    built("src", "6aff7feb361c"),
    built("src", "58677d84c138"),
    built("one.cu", "111111111111"),
    rec("bad.patch", "error", "E_PATCH", "does not apply"),
  ]);
  const t = rankedTable(r);
  expect(t).toContain("src@6aff7feb361c");
  expect(t).toContain("src@58677d84c138");
  expect(t).toMatch(/ one\.cu( |$)/m);
  expect(t).not.toContain("one.cu@");
  expect(t.split("\n").find((l) => l.includes("one.cu"))).toMatch(/built\s+14\s+0\s+—\s+one\.cu/);
  expect(unjudgedLine(r, "jsonl", true)).toStartWith("1 of 4 candidates could not be built (error)");
  // no input judged: a build's failure is a dash too, as its merge (which knows no inputs) shows it (0/1 in the run, 0/0 merged: a new user's finding)
  expect(t.split("\n").find((l) => l.includes("bad.patch"))).toMatch(/error\s+—\s+bad\.patch/);
});

test("candidates of one verdict are ranked by label in numeric order: cand-2 before cand-10 (nu14 #10)", () => {
  const r = report(
    ["cand-10", "cand-2", "cand-1", "cand-11"].map((l) => ({ ...rec(l, "compile-error", "E_BUILD", "x"), candidate: `${l}@${l.padEnd(12, "0").slice(-12)}` })),
  );
  expect(r.candidates.map((c) => c.label)).toEqual(["cand-1", "cand-2", "cand-10", "cand-11"]);
});
