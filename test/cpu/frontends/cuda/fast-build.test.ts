/**
 * The fast build's state between validates (src/frontends/cuda/fast-build.ts FastBuildState): the
 * base of the next incremental preprocessing is the whole TU's output with the sources it was
 * made from, and a build stopped while gcc -E rewrote that output (validate's race lost) leaves
 * the two agreeing: the base's own text is written back.
 */
import { describe, expect, test } from "bun:test";
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "../../fixtures.ts";
import { FastBuildState, friendIn } from "../../../../src/frontends/cuda/fast-build.ts";
import { readPlan, savePlan } from "../../../../src/frontends/cuda/fast-plan.ts";
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

test("save and load: the #pragma once answers kept beside the base; a damaged answers file: the base is not taken back (its seal no longer holds)", () => {
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
  expect(FastBuildState.load(work).base?.text).toBe('# 1 "k.cu"\nint a;\n');
  writeFileSync(join(work, "pragma-once.json"), "{not json");
  expect(FastBuildState.load(work).base).toBeUndefined();
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

describe("what the fast build keeps for the next process is taken back only as sealed by this user's kerncap for this folder (adversary 56: a plan line planted in build/pruned/plan.json of a folder handed over with tar ran)", () => {
  const KEY = "5f0e3c1a9b7d2e4f6a8c0b1d3e5f7a9c2b4d6e8f0a1c3e5b7d9f1a3c5e7b9d0f";
  const OTHER = "a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f91";
  const withKey = <T>(key: string | undefined, f: () => T): T => {
    const prev = process.env.KERNCAP_RESULTS_KEY;
    const prevState = process.env.XDG_STATE_HOME;
    if (key === undefined) {
      delete process.env.KERNCAP_RESULTS_KEY;
      // no state folder of the user's (under a file: not made, root or not): no key
      const file = join(tempDir("kerncap-no-state-"), "file");
      writeFileSync(file, "");
      process.env.XDG_STATE_HOME = join(file, "state");
    } else process.env.KERNCAP_RESULTS_KEY = key;
    try {
      return f();
    } finally {
      if (prev === undefined) delete process.env.KERNCAP_RESULTS_KEY;
      else process.env.KERNCAP_RESULTS_KEY = prev;
      if (prevState === undefined) delete process.env.XDG_STATE_HOME;
      else process.env.XDG_STATE_HOME = prevState;
    }
  };
  const plan = (work: string) => ({
    env: ["export PATH=/usr/bin"],
    preprocess: "gcc -E k.cu",
    compile: "cicc k.ii && ptxas k.ptx",
    fullTU: join(work, "full.cpp1.ii"),
    prunedTU: join(work, "pruned.ii"),
    cubin: join(work, "kernel.cubin"),
    source: "src/k.cu",
    key: "k",
  });

  test("the plan: sealed and taken back; a line changed, another user's key, no key, or a plan with no seal: not taken (the next build makes its own)", () => {
    const dir = tempDir("kerncap-plan-");
    const work = join(dir, "pruned");
    mkdirSync(work);
    withKey(KEY, () => savePlan(work, dir, plan(work)));
    expect(withKey(KEY, () => readPlan(work))?.preprocess).toBe("gcc -E k.cu");
    expect(withKey(OTHER, () => readPlan(work))).toBeUndefined();
    expect(withKey(undefined, () => readPlan(work))).toBeUndefined();
    const sealed = JSON.parse(readFileSync(join(work, "plan.json"), "utf8"));
    writeFileSync(join(work, "plan.json"), JSON.stringify({ ...sealed, preprocess: "touch PWNED; gcc -E k.cu" }));
    expect(withKey(KEY, () => readPlan(work))).toBeUndefined();
    const { auth: _, ...bare } = sealed;
    writeFileSync(join(work, "plan.json"), JSON.stringify(bare));
    expect(withKey(KEY, () => readPlan(work))).toBeUndefined();
    // with no key nothing is kept
    withKey(undefined, () => savePlan(work, dir, plan(work)));
    expect(existsSync(join(work, "plan.json"))).toBe(false);
  });

  test("the incremental base: sealed for its folder; its text changed, another user's key, no key, or the folder copied elsewhere (cp -a): not taken back", () => {
    const work = tempDir("kerncap-fast-seal-");
    const st = new FastBuildState();
    st.base = { text: '# 1 "k.cu"\nint a;\n', sources: new Map([["/x/src/k.cu", "int a;\n"]]) };
    st.baseOnDisk = false;
    withKey(KEY, () => st.save(work));
    expect(withKey(KEY, () => FastBuildState.load(work)).base?.text).toBe('# 1 "k.cu"\nint a;\n');
    expect(withKey(OTHER, () => FastBuildState.load(work)).base).toBeUndefined();
    expect(withKey(undefined, () => FastBuildState.load(work)).base).toBeUndefined();
    const copy = tempDir("kerncap-fast-copy-");
    cpSync(work, copy, { recursive: true, preserveTimestamps: true });
    expect(withKey(KEY, () => FastBuildState.load(copy)).base).toBeUndefined();
    writeFileSync(join(work, "full.cpp1.ii"), '# 1 "k.cu"\nint a; __global__ void planted() {}\n');
    expect(withKey(KEY, () => FastBuildState.load(work)).base).toBeUndefined();
    // a FIFO in its place (tar keeps one) is no base, and the load does not wait on it
    rmSync(join(work, "full.cpp1.ii"));
    expect(Bun.spawnSync(["mkfifo", join(work, "full.cpp1.ii")]).exitCode).toBe(0);
    expect(withKey(KEY, () => FastBuildState.load(work)).base).toBeUndefined();
  });
});

test("a source that declares a friend is not built from the pruned TU (its host bodies, which the pruned TU drops, can change the kernel through a friend's definition: adversary 57); other sources are", () => {
  expect(friendIn(new Map([["/c/src/k.cu", "__global__ void k(float* x) { x[0] = 1; }\n"]]))).toBeUndefined();
  const why = friendIn(
    new Map([
      ["/c/src/k.cu", '#include "flag.h"\n__global__ void k(float* x) { x[0] = scale<1>(0); }\n'],
      ["/c/src/flag.h", "template <int N> struct Setter { friend constexpr int flag(Flag<N>) { return 1; } };\n"],
    ]),
  );
  expect(why).toBe("/c/src/flag.h declares a friend (a host body the pruned TU leaves out could change the kernel)");
  expect(friendIn(new Map([["/c/src/k.cu", "int befriended = 1; // friendly\n"]]))).toBeUndefined(); // a word, not a part of one
});
