/**
 * `kerncap validate --watch` without a GPU (src/rebuild/watch.ts): which file events are saves,
 * the debounce, the line and JSON Lines formatting, and the refusals before any GPU work.
 * The watch itself (resident memory, rebuild, verdict lines, Ctrl-C) is test/gpu/watch.test.ts.
 */
import { describe, expect, test } from "bun:test";
import { runCommand } from "citty";
import { existsSync, mkdirSync, readdirSync, readFileSync, watch, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as v from "valibot";
import { jsonDocument } from "../../src/format/documents.ts";
import { DOCUMENTS, jsonSchemaOf } from "../../src/format/documents.ts";
import { commands } from "../../src/cli/main.ts";
import { NVCC } from "../nvcc-fixtures.ts";
import { KerncapError } from "../../src/errors.ts";
import { makeHeavyReproducer } from "../heavy-fixture.ts";
import { DEBOUNCE_MS, isSourceSave, SaveCycles, watchLine, type SaveCycle, type Timers, type WatchEvent } from "../../src/rebuild/watch.ts";
import { compareTimings } from "../../src/replay/stats.ts";
import { writeInCapture } from "../../src/format/paths.ts";
import { makeCapture, tempDir, unlistedKeys } from "./fixtures.ts";

const HAS_GPU = existsSync("/dev/nvidiactl") || existsSync("/dev/nvidia0");

describe("which file events are saves", () => {
  test("sources are; editor temporaries, dotfiles, caches, the slice and its temporary are not", async () => {
    for (const f of ["structs.cu", "kernels/tiled.cuh", "kernel.py", "a/b/c.h", "#include.h"]) expect(isSourceSave(f), f).toBe(true);
    const temps = [
      ".structs.cu.swp", // vim swap (a dotfile)
      "structs.cu.swx",
      "4913", // vim's write probe
      "structs.cu~", // backup
      "#structs.cu#", // emacs autosave
      ".#structs.cu", // emacs lock
      "structs.cu.tmp",
      "structs.cu___jb_tmp___",
      "structs.cu___jb_old___",
      "sedAb12Cd", // sed -i
      ".goutputstream-XYZ12", // gedit
      "__pycache__/kernel.cpython-312.pyc",
      "kernel.pyc",
      ".git/index",
      "kernels/.tiled.cuh.swp",
    ];
    for (const f of temps) expect(isSourceSave(f), f).toBe(false);
    expect(isSourceSave("structs.kerncap-slice.cu", new Set(["structs.kerncap-slice.cu"]))).toBe(false);
    expect(isSourceSave("structs.cu", new Set(["structs.kerncap-slice.cu"]))).toBe(true);
    // the temporary kerncap writes the remade slice under (src/format/paths.ts writeInCapture), named as it names it
    const dir = tempDir();
    writeInCapture(dir, "src/structs.kerncap-slice.cu", "x");
    const seen: string[] = [];
    const w = watch(join(dir, "src"), (_e, f) => f && seen.push(String(f)));
    writeInCapture(dir, "src/structs.kerncap-slice.cu", "y");
    await Bun.sleep(100);
    w.close();
    expect(seen.some((f) => f.includes(".tmp-"))).toBe(true);
    for (const f of seen) expect(isSourceSave(f, new Set(["structs.kerncap-slice.cu"])), f).toBe(false);
    expect(isSourceSave("structs.cu.tmp-12-abc")).toBe(true); // another tool's name, not kerncap's pattern
    expect(isSourceSave(null)).toBe(false);
    expect(isSourceSave("")).toBe(false);
  });
});

/** A hand-driven clock: set() registers, advance() fires what is due. */
function fakeTimers(): Timers & { advance(ms: number): void; pending(): number } {
  let now = 0;
  let id = 0;
  const due = new Map<number, { at: number; fn: () => void }>();
  return {
    now: () => now,
    set: (fn, ms) => (due.set(++id, { at: now + ms, fn }), id),
    clear: (h) => void due.delete(h as number),
    advance(ms) {
      const end = now + ms;
      for (;;) {
        const next = [...due.entries()].sort((a, b) => a[1].at - b[1].at)[0];
        if (!next || next[1].at > end) break;
        now = next[1].at;
        due.delete(next[0]);
        next[1].fn();
      }
      now = end;
    },
    pending: () => due.size,
  };
}

/** SaveCycles with a hand-driven clock and cycles the test ends (end(i)); what each cycle's quiet() and signal said. */
function cyclesUnderTest(ms: number) {
  const t = fakeTimers();
  const started: SaveCycle[] = [];
  const ends: (() => void)[] = [];
  const quietAt: (number | undefined)[] = [];
  const cycles = new SaveCycles(
    ms,
    (c) => {
      const i = started.push(c) - 1;
      void c.quiet().then(() => (quietAt[i] = t.now()));
      return new Promise<void>((res) => ends.push(res));
    },
    t,
  );
  const settle = () => Bun.sleep(0);
  return { t, cycles, started, quietAt, settle, end: async (i: number) => (ends[i]!(), await settle()) };
}

describe("save cycles (SaveCycles)", () => {
  test("a cycle starts at the first event of a burst; its compiler's wait (quiet) ends once the burst has been quiet for the debounce time", async () => {
    const { t, cycles, started, quietAt, settle } = cyclesUnderTest(150);
    t.advance(10);
    cycles.poke("structs.cu");
    expect(started).toHaveLength(1); // at once: the build's own work runs while the burst settles
    expect(started[0]).toMatchObject({ files: ["structs.cu"], savedAt: 10 });
    t.advance(149);
    await settle();
    expect(quietAt[0]).toBeUndefined();
    t.advance(1);
    await settle();
    expect(quietAt[0]).toBe(160);
    expect(started[0]!.signal.aborted).toBe(false);
  });
  test("an event while the build runs stops it; one cycle follows, once it ended, with the files of both and the last event's time", async () => {
    const { t, cycles, started, quietAt, settle, end } = cyclesUnderTest(150);
    cycles.poke("structs.cu"); // t=0: the editor's temporary renamed over the file…
    t.advance(20);
    cycles.poke("structs.cu"); // …then its change event: the build of the first text stopped
    expect(started[0]!.signal.aborted).toBe(true);
    await settle();
    expect(quietAt[0]).toBe(20); // a stopped build's wait ends at once (its build ends without a compile)
    t.advance(30);
    cycles.poke("kernel.cuh"); // t=50
    expect(started).toHaveLength(1); // not beside the stopped build: after it (they share the work folder)
    await end(0);
    expect(started).toHaveLength(2);
    expect(started[1]).toMatchObject({ files: ["structs.cu", "kernel.cuh"], savedAt: 50 });
    t.advance(149);
    await settle();
    expect(quietAt[1]).toBeUndefined();
    t.advance(1);
    await settle();
    expect(quietAt[1]).toBe(200); // 150 ms after the burst's last event
    await end(1);
    expect(started).toHaveLength(2);
  });
  test("an event once the build is done (the run, its line) does not stop it: one more cycle after it, with the files saved since", async () => {
    const { t, cycles, started, end } = cyclesUnderTest(150);
    cycles.poke("a.cu");
    t.advance(500);
    started[0]!.built();
    cycles.poke("b.cu");
    t.advance(5);
    cycles.poke("b.cu");
    expect(started[0]!.signal.aborted).toBe(false);
    expect(started).toHaveLength(1);
    await end(0);
    expect(started[1]).toMatchObject({ files: ["b.cu"], savedAt: 505 });
    // a later save is a cycle of its own
    started[1]!.built();
    await end(1);
    t.advance(1000);
    cycles.poke("a.cu");
    expect(started[2]).toMatchObject({ files: ["a.cu"], savedAt: 1505 });
  });
  test("cancel stops a build still running and drops the queued cycle; no cycle starts after it", async () => {
    const { t, cycles, started, end } = cyclesUnderTest(150);
    cycles.poke("a.cu");
    cycles.poke("a.cu");
    cycles.cancel();
    expect(started[0]!.signal.aborted).toBe(true);
    cycles.poke("b.cu");
    await end(0);
    t.advance(1000);
    expect(started).toHaveLength(1);
    expect(t.pending()).toBe(0);
  });
});

const AT = "2025-01-02T12:34:56.789Z";
const verdict = (x: Partial<Extract<WatchEvent, { event: "verdict" }>> = {}): WatchEvent => ({
  event: "verdict",
  trigger: "save",
  files: ["structs.cu"],
  at: AT,
  kernel: "scale_jobs(Job const*, int)",
  verdict: "match",
  numerics: "bit-exact",
  firstMismatch: null,
  mismatches: 0,
  nondeterministic: false,
  kernelMedianUs: 12.345,
  compare: null,
  buildSeconds: 1.5,
  builder: "build.sh",
  saveToVerdictSeconds: 1.72,
  overheadSeconds: 0.22,
  reset: { chunks: 2, bytes: 131072, seconds: 0.003 },
  ...x,
});

describe("watch lines", () => {
  test("a match: verdict, kernel median, build and save-to-verdict seconds, the file saved; one line", () => {
    const l = watchLine(verdict());
    expect(l).toBe("[12:34:56] MATCH  kernel 12.35 µs  build 1.50 s  save→verdict 1.72 s  (structs.cu)");
    expect(watchLine(verdict({ numerics: "within-spread", nondeterministic: true }))).toStartWith("[12:34:56] MATCH within the run-to-run spread  kernel");
    expect(watchLine(verdict({ numerics: "within-spread", nondeterministic: true }))).toContain("(nondeterministic)");
    // the first build is no save's (nu15: "save→built 0.24 s" before anything was saved)
    expect(watchLine(verdict({ trigger: "start", files: [], kernelMedianUs: null }))).toBe(
      "[12:34:56] MATCH  kernel no timed launch  build 1.50 s  (the first build, before any save)",
    );
    expect(watchLine(verdict({ kernelMedianUs: null, files: [] }))).toBe("[12:34:56] MATCH  kernel no timed launch  build 1.50 s  save→verdict 1.72 s");
    // the rebuilt kernel timed interleaved against the captured module (src/replay/stats.ts)
    const A = [10, 10.1, 9.9, 10, 10.2, 10, 9.8, 10.1, 10, 10.3, 9.9, 10, 10, 10.1, 9.9, 10];
    const c = compareTimings(
      A,
      A.map((x, i) => x * (0.8 + 0.001 * (i % 3))),
    );
    expect(watchLine(verdict({ compare: c }))).toBe(
      `[12:34:56] MATCH  kernel 12.35 µs (${c.text} against the captured module)  build 1.50 s  save→verdict 1.72 s  (structs.cu)`,
    );
    expect(c.text).toMatch(/^1\.2\d× faster/);
  });
  test("a mismatch names the first differing region, where it differs, and how many regions differ", () => {
    const l = watchLine(
      verdict({
        verdict: "mismatch",
        numerics: "mismatch",
        mismatches: 2,
        firstMismatch: { va: "0x7f0000000000", kind: "device", size: 4096, changedInApp: true, firstDiffOffset: 64, bytesDiffering: 4032 },
      }),
    );
    expect(l).toBe(
      "[12:34:56] MISMATCH region 0x7f0000000000 (device, 4096 B) from byte 64, 4032 bytes differ; 2 regions differ  kernel 12.35 µs  build 1.50 s  save→verdict 1.72 s  (structs.cu)",
    );
    expect(l.split("\n")).toHaveLength(1);
  });
  test("a build error: its line, then the compiler's message indented; a refusal names its code", () => {
    const e: WatchEvent = {
      event: "build-error",
      trigger: "save",
      files: ["structs.cu"],
      at: AT,
      code: "E_BUILD",
      message: 'the reproducer does not build (build.sh exit 1):\nsrc/structs.cu(28): error: identifier "not_declared" is undefined',
      hint: "Fix the compile error in the edited source and run validate again.",
      buildSeconds: 0.9,
      saveToVerdictSeconds: 1.06,
    };
    const l = watchLine(e).split("\n");
    expect(l[0]).toBe("[12:34:56] BUILD ERROR  build 0.90 s  save→error 1.06 s  (structs.cu)");
    expect(l[2]).toBe('  src/structs.cu(28): error: identifier "not_declared" is undefined');
    const r = watchLine({ ...e, event: "error", code: "E_CUDA", message: "cuCtxSynchronize failed", hint: null, reopened: true, buildSeconds: null });
    expect(r.split("\n")[0]).toBe("[12:34:56] ERROR E_CUDA  save→error 1.06 s  (kernel fault: memory restored in a new context)  (structs.cu)");
  });
  test("--json: one document per line with its schema id, valid against kerncap.validate-watch/1", () => {
    for (const e of [
      verdict(),
      verdict({ kernelMedianUs: null }),
      verdict({ compare: compareTimings([1, 2, 3, 4, 5], [1, 2, 3, 4, 5]) }),
      {
        event: "build-error",
        trigger: "start",
        files: [],
        at: AT,
        code: "E_BUILD",
        message: "x\ny",
        hint: null,
        buildSeconds: null,
        saveToVerdictSeconds: 0.5,
      } as WatchEvent,
    ]) {
      const line = JSON.stringify(jsonDocument("validate-watch", e));
      expect(line).not.toContain("\n");
      const doc = JSON.parse(line);
      expect(doc.schema).toBe("kerncap.validate-watch/1");
      expect(Object.keys(doc)[0]).toBe("schema");
      const ok = v.safeParse(DOCUMENTS["validate-watch"], doc);
      expect(ok.success, JSON.stringify(ok.issues)).toBe(true);
      // every field the line carries is in the published schema (a harness may validate with additionalProperties false)
      expect(unlistedKeys(jsonSchemaOf("validate-watch"), doc)).toEqual([]);
    }
  });
});

async function failure(rawArgs: string[]): Promise<KerncapError> {
  try {
    await runCommand(await commands.validate(), { rawArgs });
  } catch (e) {
    if (e instanceof KerncapError) return e;
    throw e;
  }
  throw new Error(`validate ${rawArgs.join(" ")} did not fail`);
}

async function capture(): Promise<string> {
  const dir = join(tempDir(), "cap");
  await makeCapture(dir);
  return dir;
}

describe("validate --watch refusals, before any GPU work or build", () => {
  test("no reproducer: no build.sh, or no src/ to watch", async () => {
    const dir = await capture();
    const e = await failure([dir, "--watch"]);
    expect(e.code).toBe("E_NO_REPRODUCER");
    expect(e.message).toContain("build.sh");
    writeFileSync(join(dir, "build.sh"), "echo should-not-run >&2; exit 1\n");
    const s = await failure([dir, "--watch"]);
    expect(s.code).toBe("E_NO_REPRODUCER");
    expect(s.message).toContain("src/");
  });
  test("an AMD capture is refused, naming the vendor", async () => {
    const dir = await capture();
    writeFileSync(join(dir, "build.sh"), "exit 1\n");
    mkdirSync(join(dir, "src"));
    const p = join(dir, "kerncap.json");
    const m = JSON.parse(readFileSync(p, "utf8"));
    m.device.vendor = "amd";
    m.device.arch = "gfx942";
    writeFileSync(p, JSON.stringify(m));
    const e = await failure([dir, "--watch"]);
    expect(e.code).toBe("E_FRONTEND");
    expect(e.message).toContain("AMD capture");
  });
  test("a bad option is refused before the watch starts", async () => {
    const dir = await capture();
    expect((await failure([dir, "--watch", "--iters", "many"])).code).toBe("E_USAGE");
  });
  test.skipIf(HAS_GPU)("without a GPU: E_NO_GPU once the capture is opened; the watch's signal handlers are gone", async () => {
    const dir = await capture();
    writeFileSync(join(dir, "build.sh"), "echo build/kernel.cubin\n");
    mkdirSync(join(dir, "src"));
    const before = process.listenerCount("SIGINT");
    const e = await failure([dir, "--watch"]);
    expect(e.code).toBe("E_NO_GPU");
    // the hint fits --watch: it needs the GPU; --build-only is the watch of a machine without one
    expect(e.hint).toContain("--watch needs a GPU");
    expect(e.hint).toContain("`kerncap validate DIR --watch --build-only` rebuilds at each save without one");
    expect(e.hint).not.toContain("a build error is reported first");
    expect(process.listenerCount("SIGINT")).toBe(before);
  });
});

describe("the watch loop, with a replay session that needs no GPU (./watch-child.ts)", () => {
  test("initial verdict; a save that changes results, a build error, a fix: one line each, temp files ignored; a save during a build stops it (one line, the last text's); the run begins beside the compiler; Ctrl-C exits 130", async () => {
    const dir = await capture();
    mkdirSync(join(dir, "src"));
    writeFileSync(join(dir, "src/k.cu"), "ok\n");
    writeFileSync(
      join(dir, "build.sh"),
      'if grep -q SYNTAX src/k.cu; then echo "src/k.cu(1): error: expected a \\";\\"" >&2; exit 1; fi\nif grep -q SLOW src/k.cu; then sleep 5; fi\nif grep -q PAUSE src/k.cu; then sleep 0.8; fi\nmkdir -p build; cp src/k.cu build/k.mod; echo build/k.mod\n',
    );
    const p = Bun.spawn([process.execPath, join(import.meta.dir, "watch-child.ts"), dir], { stdout: "pipe", stderr: "pipe" });
    const lines: any[] = [];
    let err = "";
    const errReader = (async () => {
      for await (const chunk of p.stderr) err += new TextDecoder().decode(chunk);
    })();
    const reader = (async () => {
      let buf = "";
      for await (const chunk of p.stdout) {
        buf += new TextDecoder().decode(chunk);
        for (let i; (i = buf.indexOf("\n")) >= 0; buf = buf.slice(i + 1)) lines.push(JSON.parse(buf.slice(0, i)));
      }
    })();
    const next = async (n: number) => {
      for (let t = 0; lines.length < n; t++) {
        if (t > 200) throw new Error(`no line ${n} after 10 s; got ${JSON.stringify(lines)}\n${err}`);
        await Bun.sleep(50);
      }
      await Bun.sleep(300); // room for a wrong extra line to show
      expect(lines).toHaveLength(n);
      return lines[n - 1];
    };
    try {
      const first = await next(1);
      expect(first).toMatchObject({ schema: "kerncap.validate-watch/1", event: "verdict", trigger: "start", verdict: "match", kernelMedianUs: 3.5, files: [] });
      for (let t = 0; !err.includes("watching "); t++) {
        if (t > 200) throw new Error(`no watcher after 10 s\n${err}`);
        await Bun.sleep(50); // until the watcher is up (said once it is)
      }
      writeFileSync(join(dir, "src/.k.cu.swp"), "x"); // editor temporaries: no rebuild
      writeFileSync(join(dir, "src/k.cu~"), "x");
      writeFileSync(join(dir, "src/k.cu"), "WRONG\n");
      const bad = await next(2);
      expect(bad).toMatchObject({ event: "verdict", trigger: "save", verdict: "mismatch", files: ["k.cu"], mismatches: 1, reset: { chunks: 1, bytes: 4096 } });
      expect(bad.firstMismatch.va).toBe("0x7f0000000000");
      expect(bad.saveToVerdictSeconds).toBeGreaterThanOrEqual(DEBOUNCE_MS / 1000); // the debounce
      expect(bad.overheadSeconds).toBeCloseTo(bad.saveToVerdictSeconds - bad.buildSeconds, 6);
      writeFileSync(join(dir, "src/k.cu"), "SYNTAX\n");
      const ce = await next(3);
      expect(ce).toMatchObject({ event: "build-error", code: "E_BUILD" });
      expect(ce.message).toContain('src/k.cu(1): error: expected a ";"');
      // structured, as validate's E_BUILD carries them (nu12 #6)
      expect(ce.diagnostics).toContainEqual({ file: "src/k.cu", line: 1, column: null, severity: "error", text: 'expected a ";"' });
      writeFileSync(join(dir, "src/k.cu"), "ok again\n");
      expect(await next(4)).toMatchObject({ event: "verdict", verdict: "match" });
      // a save while build.sh builds the previous one (its compiler started once the burst was quiet): that build is stopped
      // and prints no line; the last text is built and its line names the files of both
      writeFileSync(join(dir, "src/k.cu"), "SLOW WRONG\n");
      await Bun.sleep(600);
      writeFileSync(join(dir, "src/k2.cu"), "ok\n");
      writeFileSync(join(dir, "src/k.cu"), "ok 3\n");
      const last = await next(5);
      expect(last).toMatchObject({ event: "verdict", verdict: "match", files: ["k.cu", "k2.cu"] });
      expect(last.saveToVerdictSeconds).toBeLessThan(4); // not after the stopped build's sleep
      expect(err).not.toContain("before its module was built");
      // the run begins once the compiler does (the captured module's part of it beside the compiler), the rebuilt module awaited inside it
      writeFileSync(join(dir, "src/k.cu"), "PAUSE ok\n");
      expect(await next(6)).toMatchObject({ event: "verdict", verdict: "match", files: ["k.cu"] });
      expect(err).toMatch(/the run began \d+ ms before its module was built/);
      p.kill("SIGINT");
      expect(await p.exited).toBe(130);
    } finally {
      p.kill("SIGKILL");
      await reader.catch(() => {});
      await errReader.catch(() => {});
    }
  }, 30_000);
});

/** The command names (comm) of the processes under `pid` (from /proc). */
function descendants(pid: number): string[] {
  const kids = new Map<number, { ppid: number; comm: string }>();
  for (const e of readdirSync("/proc")) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const st = readFileSync(`/proc/${e}/stat`, "utf8");
      const close = st.lastIndexOf(")");
      kids.set(Number(e), { comm: st.slice(st.indexOf("(") + 1, close), ppid: Number(st.slice(close + 2).split(" ")[1]) });
    } catch {
      // gone meanwhile
    }
  }
  const out: string[] = [];
  const under = new Set([pid]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const [k, v] of kids)
      if (!under.has(k) && under.has(v.ppid)) {
        under.add(k);
        out.push(v.comm);
        grew = true;
      }
  }
  return out;
}

/** ./watch-cuda-child.ts on DIR: its JSON lines as they come, its stderr so far, and a poll until a condition (60 s). */
function cudaWatch(dir: string, kernel: string, env: Record<string, string | undefined>) {
  const p = Bun.spawn([process.execPath, join(import.meta.dir, "watch-cuda-child.ts"), dir, kernel, join(dir, "first.cubin")], {
    stdout: "pipe",
    stderr: "pipe",
    env,
  });
  const lines: any[] = [];
  let err = "";
  void (async () => {
    let buf = "";
    for await (const chunk of p.stdout) {
      buf += new TextDecoder().decode(chunk);
      for (let i; (i = buf.indexOf("\n")) >= 0; buf = buf.slice(i + 1)) lines.push(JSON.parse(buf.slice(0, i)));
    }
  })();
  void (async () => {
    for await (const chunk of p.stderr) err += new TextDecoder().decode(chunk);
  })();
  const until = async (what: string, ok: () => boolean) => {
    for (let t = 0; !ok(); t++) {
      if (t > 1200) throw new Error(`no ${what} after 60 s; lines ${JSON.stringify(lines)}\n${err}`);
      await Bun.sleep(50);
    }
  };
  return { p, lines, until, err: () => err };
}

/** A capture with the heavy CUDA reproducer (test/heavy-fixture.ts) and its first build by build.sh as DIR/first.cubin (what the watch child compares with). */
async function heavyCapture() {
  const dir = await capture();
  const { kernel, header } = await makeHeavyReproducer(tempDir(), dir);
  const env = { ...process.env, NVCC: NVCC! };
  const b = Bun.spawnSync(["bash", join(dir, "build.sh"), join(dir, "first.cubin")], { cwd: dir, stdout: "pipe", stderr: "pipe", env });
  expect(b.exitCode, b.stderr.toString()).toBe(0);
  return { dir, kernel, header, env };
}

describe.skipIf(!NVCC)("the watch loop on a real CUDA reproducer (nvcc; ./watch-cuda-child.ts, no GPU)", () => {
  test("the first build by build.sh; then saves rebuilt from the pruned TU: an edit MISMATCH, a compile error reported, the revert MATCH; a save during a pruned build stops it", async () => {
    const { dir, kernel, header, env } = await heavyCapture();
    const w = cudaWatch(dir, kernel, { ...env, KERNCAP_VERBOSE: "1" });
    const { p, lines, until } = w;
    const original = readFileSync(header, "utf8");
    try {
      await until("first line", () => lines.length >= 1);
      expect(lines[0]).toMatchObject({ event: "verdict", trigger: "start", verdict: "match", builder: "build.sh" });
      await until("the pruned build's check", () => w.err().includes("saves are rebuilt"));
      expect(w.err()).toContain("saves are rebuilt from the pruned TU");
      writeFileSync(header, original.replace("* a * traits<T>::vec", "* a * a * traits<T>::vec"));
      await until("line 2", () => lines.length >= 2);
      expect(lines[1]).toMatchObject({ event: "verdict", trigger: "save", verdict: "mismatch", builder: "pruned" });
      expect(lines[1].buildSteps.compileMs).toBeGreaterThan(0);
      writeFileSync(header, original.replace("int i =", "int i = undeclared_name +"));
      await until("line 3", () => lines.length >= 3);
      expect(lines[2]).toMatchObject({ event: "build-error", code: "E_BUILD" });
      expect(lines[2].message).toContain("undeclared_name"); // build.sh's own message, after the pruned build failed
      writeFileSync(header, original);
      await until("line 4", () => lines.length >= 4);
      expect(lines[3]).toMatchObject({ event: "verdict", verdict: "match", builder: "pruned" }); // still pruned: build.sh failed too
      // a save while the pruned build of the previous one runs (its whole TU's gcc -E, which the build awaits, or its cicc):
      // that build is stopped and prints no line, the pruned build stays on, and the last text is built, still from the
      // incremental preprocessing
      writeFileSync(header, original.replace("* a * traits<T>::vec", "* a * a * traits<T>::vec"));
      for (let t = performance.now(); !descendants(p.pid).some((c) => ["cc1plus", "cicc", "ptxas"].includes(c)); await Bun.sleep(1))
        if (performance.now() - t > 60_000) throw new Error(`no compiler under the watch after 60 s; lines ${JSON.stringify(lines)}`);
      writeFileSync(header, `${original}// a comment\n`);
      await until("line 5", () => lines.length >= 5);
      await Bun.sleep(500); // room for a wrong extra line
      expect(lines).toHaveLength(5);
      expect(lines[4]).toMatchObject({ event: "verdict", verdict: "match", builder: "pruned" });
      expect(lines[4].buildSteps.incremental).toBe(true);
      // the real lines, the incremental preprocessing's steps among them, carry only fields the published schema lists
      const schema = jsonSchemaOf("validate-watch");
      expect(lines.flatMap((l) => unlistedKeys(schema, { schema: "kerncap.validate-watch/1", ...l }))).toEqual([]);
      expect(w.err()).toContain("a save came while lib/ops.cuh was rebuilt: that build stopped");
      p.kill("SIGINT");
      expect(await p.exited).toBe(130);
    } finally {
      p.kill("SIGKILL");
    }
  }, 180_000);
  test("a save while the pruned build is being checked does not wait for it: build.sh builds it at once, the check is made again on that build", async () => {
    const { dir, kernel, header, env } = await heavyCapture();
    const w = cudaWatch(dir, kernel, env);
    const { p, lines, until } = w;
    const original = readFileSync(header, "utf8");
    try {
      await until("first line", () => lines.length >= 1);
      // the file watcher is up (said once it is), and the check (a compile: about a second here) was started in the same turn, right after it
      await until("the watcher", () => w.err().includes("watching "));
      expect(w.err()).not.toContain("saves are rebuilt");
      writeFileSync(header, original.replace("* a * traits<T>::vec", "* a * a * traits<T>::vec"));
      await until("line 2", () => lines.length >= 2);
      expect(lines[1]).toMatchObject({ event: "verdict", verdict: "mismatch", builder: "build.sh" });
      // built by build.sh: the check was stopped (else the save would wait for it and be built from the pruned TU);
      // the wait is the debounce and at most the check's synchronous pruning (the event loop's), not its compile
      expect(lines[1].phases.waitSeconds).toBeLessThan(1);
      await until("the pruned build's check", () => w.err().includes("saves are rebuilt"));
      expect(w.err()).toContain("saves are rebuilt from the pruned TU");
      writeFileSync(header, original);
      await until("line 3", () => lines.length >= 3);
      expect(lines[2]).toMatchObject({ event: "verdict", verdict: "match", builder: "pruned" });
      p.kill("SIGINT");
      expect(await p.exited).toBe(130);
    } finally {
      p.kill("SIGKILL");
    }
  }, 180_000);
  test("a watch that starts on a source that does not build: the pruned build is checked after the first save that builds", async () => {
    const { dir, kernel, header, env } = await heavyCapture();
    const original = readFileSync(header, "utf8");
    writeFileSync(header, original.replace("int i =", "int i = undeclared_name +"));
    const w = cudaWatch(dir, kernel, env);
    const { p, lines, until } = w;
    try {
      await until("first line", () => lines.length >= 1);
      expect(lines[0]).toMatchObject({ event: "build-error", trigger: "start" });
      await until("the watcher", () => w.err().includes("watching ")); // the file watcher is up
      expect(w.err()).not.toContain("saves are rebuilt");
      writeFileSync(header, original);
      await until("line 2", () => lines.length >= 2);
      expect(lines[1]).toMatchObject({ event: "verdict", verdict: "match", builder: "build.sh" });
      await until("the pruned build's check", () => w.err().includes("saves are rebuilt"));
      expect(w.err()).toContain("saves are rebuilt from the pruned TU");
      writeFileSync(header, original.replace("* a * traits<T>::vec", "* a * a * traits<T>::vec"));
      await until("line 3", () => lines.length >= 3);
      expect(lines[2]).toMatchObject({ event: "verdict", verdict: "mismatch", builder: "pruned" });
      p.kill("SIGTERM");
      expect(await p.exited).toBe(143);
    } finally {
      p.kill("SIGKILL");
    }
  }, 180_000);
});
