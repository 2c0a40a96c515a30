/**
 * The fast build's state between validates (src/frontends/cuda/fast-build.ts FastBuildState): the
 * base of the next incremental preprocessing is the whole TU's output with the sources it was
 * made from, and a build stopped while gcc -E rewrote that output (validate's race lost) leaves
 * the two agreeing: the base's own text is written back.
 */
import { expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "../../fixtures.ts";
import { FastBuildState } from "../../../../src/frontends/cuda/fast-build.ts";
import { parseBase } from "../../../../src/frontends/cuda/incremental-pp.ts";
import { pragmaOnceKnown, rememberPragmaOnce } from "../../../../src/frontends/cuda/pragma-once.ts";

test("save and load: the base's text and sources together; a stopped gcc -E's partial output is replaced by the base's text", () => {
  const work = tempDir("kerncap-fast-state-");
  const st = new FastBuildState();
  st.base = { text: '# 1 "k.cu"\nint a;\n', sources: new Map([["/x/src/k.cu", "int a;\n"]]) };
  st.baseOnDisk = false; // in memory only: save writes it
  st.save(work);
  const back = FastBuildState.load(work);
  expect(back.base?.sources.get("/x/src/k.cu")).toBe("int a;\n");
  // a build started: gcc -E rewrites full.cpp1.ii, then is stopped (the sources of this edit were never the base's)
  back.baseOnDisk = false;
  writeFileSync(join(work, "full.cpp1.ii"), '# 1 "k.cu"\nint b; // cut sh');
  back.save(work);
  expect(readFileSync(join(work, "full.cpp1.ii"), "latin1")).toBe('# 1 "k.cu"\nint a;\n');
  expect(FastBuildState.load(work).base?.text).toBe('# 1 "k.cu"\nint a;\n');
});

test("save and load: the #pragma once answers kept beside the base; a damaged answers file leaves the base loaded", () => {
  const work = tempDir("kerncap-fast-once-");
  const header = join(work, "h.cuh");
  writeFileSync(header, "#pragma once\n");
  rememberPragmaOnce([[`${header}\0${13}\0${1}`, true]]);
  const st = new FastBuildState();
  st.base = { text: '# 1 "k.cu"\nint a;\n', sources: new Map([["/x/src/k.cu", "int a;\n"]]) };
  st.baseOnDisk = false; // in memory only: save writes it
  st.save(work);
  const kept = JSON.parse(readFileSync(join(work, "pragma-once.json"), "latin1")) as [string, boolean][];
  expect(kept).toContainEqual([`${header}\0${13}\0${1}`, true]);
  expect(kept).toEqual(pragmaOnceKnown());
  writeFileSync(join(work, "pragma-once.json"), "{not json");
  expect(FastBuildState.load(work).base?.text).toBe('# 1 "k.cu"\nint a;\n');
});

test("parseAhead: a watch's state parses its new base while cicc runs (the next save starts from it); validate's state leaves it to the next process", () => {
  const text = '# 0 "<built-in>"\n#define X 1\n# 1 "k.cu"\nint a;\n';
  const watch = new FastBuildState();
  watch.base = { text, sources: new Map() };
  watch.parseAhead();
  expect(watch.base.parsed).toEqual(parseBase(text));
  const work = tempDir("kerncap-fast-ahead-");
  const validate = FastBuildState.load(work);
  validate.base = { text, sources: new Map() };
  validate.parseAhead();
  expect(validate.base.parsed).toBeUndefined();
  const bad = new FastBuildState();
  bad.base = { text: "no markers\n", sources: new Map() };
  bad.parseAhead(); // no primary file: left for the speculation to say
  expect(bad.base.parsed).toBeUndefined();
});
