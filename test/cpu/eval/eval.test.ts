/**
 * src/eval/eval.ts: what is refused before any build: a --jsonl file whose folder does not exist
 * (said as pack's -o says it), an input named as a failed build's records are.
 */
import { expect, test } from "bun:test";
import { cpSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runEval } from "../../../src/ops/eval.ts";
import { captureWithSource, tempDir } from "../fixtures.ts";
import { fakeBuild, fakeEvalOptions } from "../eval-child.ts";

test("--jsonl in a folder that does not exist: the folder named, Create it first; nothing built", async () => {
  const cap = await captureWithSource();
  const d = tempDir();
  writeFileSync(join(d, "kernel.cu"), "match 1");
  const built: string[] = [];
  const e = await runEval(fakeEvalOptions([cap], [join(d, "kernel.cu")], { jsonl: join(d, "nodir/e.jsonl"), buildWith: fakeBuild(0, built) })).catch((x) => x);
  expect(e).toMatchObject({ code: "E_USAGE", message: `the folder that would hold ${join(d, "nodir/e.jsonl")} does not exist` });
  expect(e.hint).toBe(`Create ${join(d, "nodir")} first, or choose another --jsonl.`);
  expect(built).toEqual([]);
});

test("an input named (build), the input of a failed build's record, is refused", async () => {
  const cap = await captureWithSource();
  const odd = join(tempDir(), "(build)");
  cpSync(cap, odd, { recursive: true });
  const d = tempDir();
  writeFileSync(join(d, "kernel.cu"), "match 1");
  expect(runEval(fakeEvalOptions([cap, odd], [join(d, "kernel.cu")]))).rejects.toThrow(/an input may not be named \(build\)/);
});

test("two capture folders of one name (run1/cap, run2/cap) are two inputs, named by the ends of their paths (nu7 #15: refused as one name given twice); one folder given twice is refused", async () => {
  const cap = await captureWithSource();
  const root = tempDir();
  cpSync(cap, join(root, "run1/cap"), { recursive: true });
  cpSync(cap, join(root, "run2/cap"), { recursive: true });
  const d = tempDir();
  writeFileSync(join(d, "kernel.cu"), "match 1");
  const r = await runEval(fakeEvalOptions([join(root, "run1/cap"), join(root, "run2/cap")], [join(d, "kernel.cu")]));
  expect(r.inputs).toEqual(["run1/cap", "run2/cap"]);
  expect(r.records.map((x) => x.input).sort()).toEqual(["run1/cap", "run2/cap"]);
  expect(runEval(fakeEvalOptions([cap, cap], [join(d, "kernel.cu")]))).rejects.toThrow(`the capture ${cap} is given twice as an input`);
});
