/** The index of a folder of several captures (src/format/capture-set.ts): schema, reader, and what readManifest says of such a folder. */
import { expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { jsonSchemaOf } from "../../src/format/documents.ts";
import { readManifest } from "../../src/format/capture-dir.ts";
import { CAPTURE_SET_FILE, CAPTURE_SET_MAX, readCaptureSet } from "../../src/format/capture-set.ts";
import type { KerncapError } from "../../src/errors.ts";
import { tempDir } from "./fixtures.ts";

function setDir(index: unknown): string {
  const d = tempDir();
  writeFileSync(join(d, CAPTURE_SET_FILE), typeof index === "string" ? index : JSON.stringify(index));
  return d;
}
const err = (f: () => unknown): KerncapError => {
  try {
    f();
  } catch (e) {
    return e as KerncapError;
  }
  throw new Error("no error");
};
const good = {
  format: "kerncap-capture-set",
  version: 1,
  command: ["./app"],
  captures: [
    { dir: "0-scale", kernel: "scale(float*, int)", launchIndex: 0 },
    { dir: "1-add one", kernel: "add_one(float*, int)", launchIndex: 2 },
  ],
};

test("a valid index: read back; readManifest of the folder names its captures (shell-quoted) and says to give one", () => {
  const d = setDir(good);
  mkdirSync(join(d, "0-scale"));
  expect(readCaptureSet(d)?.captures.map((c) => c.dir)).toEqual(["0-scale", "1-add one"]);
  const e = err(() => readManifest(d));
  expect(e.code).toBe("E_NOT_CAPTURE");
  expect(e.message).toContain("holds 2 captures of one run");
  expect(e.hint).toContain(join(d, "0-scale"));
  expect(e.hint).toContain(`'${join(d, "1-add one")}'`);
  expect(readCaptureSet(tempDir())).toBeUndefined();
});

test("a damaged index is E_MANIFEST naming the field; a dir outside the folder is refused", () => {
  expect(err(() => readManifest(setDir("garbage"))).code).toBe("E_MANIFEST");
  for (const dir of ["../cap1", "/etc", "a/b", ".."]) {
    const e = err(() => readManifest(setDir({ ...good, captures: [{ dir, kernel: "k", launchIndex: 0 }] })));
    expect(e.code, dir).toBe("E_MANIFEST");
    expect(e.message, dir).toContain("captures.0.dir");
  }
  expect(err(() => readCaptureSet(setDir({ ...good, version: 2 }))).message).toContain("version");
});

test("an index that lists one folder twice, or more captures than a run makes, is E_MANIFEST before any member is opened (a member listed 1.3 million times: adversary 64)", () => {
  const twice = err(() => readCaptureSet(setDir({ ...good, captures: [good.captures[0], good.captures[1], good.captures[0]] })));
  expect(twice.code).toBe("E_MANIFEST");
  expect(twice.message).toContain('lists "0-scale" twice');
  const many = Array.from({ length: CAPTURE_SET_MAX + 1 }, (_, i) => ({ dir: `c${i}`, kernel: "k", launchIndex: 0 }));
  const t0 = performance.now();
  const e = err(() => readManifest(setDir({ ...good, captures: many })));
  expect(e.code).toBe("E_MANIFEST");
  expect(e.message).toContain(`lists ${CAPTURE_SET_MAX + 1} captures: a run makes at most ${CAPTURE_SET_MAX}`);
  expect(performance.now() - t0).toBeLessThan(2000);
  expect(readCaptureSet(setDir({ ...good, captures: many.slice(0, CAPTURE_SET_MAX) }))?.captures).toHaveLength(CAPTURE_SET_MAX);
  // none at all: a run that completes none writes no index, and eval took the empty set's first member (adversary 78: internal error)
  const none = err(() => readCaptureSet(setDir({ ...good, captures: [] })));
  expect(none.code).toBe("E_MANIFEST");
  expect(none.message).toContain("lists no capture");
});

test("kerncap schema capture-set: the index's JSON Schema", () => {
  const js = jsonSchemaOf("capture-set")!;
  expect(js.$id).toBe("kerncap.capture-set");
  expect((js.properties as any).captures.items.required).toEqual(["dir", "kernel", "launchIndex"]);
});

test("eval's inputs: a folder given twice is refused before any capture is opened, and inputs past EVAL_INPUTS_MAX captures before any is read (adversary 65 04: one set named 20 000 times, 2.9 GB)", async () => {
  const { resolveInputs, EVAL_INPUTS_MAX } = await import("../../src/eval/inputs.ts");
  const members = Array.from({ length: 40 }, (_, i) => ({ dir: `m${i}`, kernel: "k", launchIndex: i }));
  const d = setDir({ ...good, captures: members }); // no member folder exists: nothing is opened before the refusals
  const t0 = performance.now();
  const twice = err(() => resolveInputs(Array.from({ length: 20_000 }, () => d)));
  expect(twice.code).toBe("E_USAGE");
  expect(twice.message).toContain("is given twice as an input");
  expect(performance.now() - t0).toBeLessThan(2000);
  const many = Array.from({ length: Math.ceil(EVAL_INPUTS_MAX / members.length) + 1 }, () => setDir({ ...good, captures: members }));
  const past = err(() => resolveInputs(many));
  expect(past.code).toBe("E_USAGE");
  expect(past.message).toContain(`more than ${EVAL_INPUTS_MAX} captures`);
});

test("a folder of captures (a corpus, no index): readManifest names those it holds, two levels down, and says check and clean take it whole (nu16 #11)", () => {
  const d = tempDir();
  for (const c of ["modelA/s1", "modelA/s2", "b"]) {
    mkdirSync(join(d, c), { recursive: true });
    writeFileSync(join(d, c, "kerncap.json"), "{}");
  }
  mkdirSync(join(d, "empty"));
  const e = err(() => readManifest(d));
  expect(e.code).toBe("E_NOT_CAPTURE");
  expect(e.message).toContain("not a complete capture; it holds captures: b, modelA/s1, modelA/s2");
  expect(e.hint).toContain(`Give one of them (e.g. ${join(d, "b")}); kerncap check and kerncap clean take the whole folder.`);
  expect(err(() => readManifest(join(d, "empty"))).hint).toBe("Give the folder that `kerncap run --out DIR` wrote.");
});
