/**
 * src/eval/report.ts: the last line of an eval with candidates it could not judge (by why: no rerun
 * fixes a candidate that does not fit src/), the reasons under the table on real lines, and a row's
 * short reason that never ends inside a parenthesis.
 */
import { expect, test } from "bun:test";
import { firstClause, rankedTable, reasonNotes, reportOf, shortReason, unjudgedLine } from "../../../src/eval/report.ts";
import type { EvalRecord } from "../../../src/format/eval-record.ts";

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
      "2 of 2 candidates could not be judged (error): bad.patch, other.cu do not fit the capture's src/ (E_PATCH, E_CANDIDATE: the reason says why); fix them, no rerun changes that",
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
  expect(line).toContain("fix it, no rerun changes that");
  expect(line).toContain("there is no GPU here for 1 candidate, which built");
  expect(line).toEndWith("; 1 more: the same command with --resume tries them again");
  // --merge shows no builds and ran nowhere here: it names the shards
  const merged = unjudgedLine(report([rec("nogpu.cu", "error", "E_NO_GPU", "no NVIDIA driver", "cap")]), "merge");
  expect(merged).not.toContain("builds are above");
  expect(merged).not.toContain("no GPU here");
  expect(merged).toContain("run its shard again with --resume on a machine with the capture's GPU");
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
});
