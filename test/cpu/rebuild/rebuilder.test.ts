/**
 * validate's build strategy chosen by measured cost (src/rebuild/rebuilder.ts chooseStrategy),
 * with the toy frontend (test/frontends/toy/: build.sh copies the kernel's text, its fast build
 * copies it too) made slow on one path: a fast build that sleeps, or a build.sh that sleeps. The
 * check records both costs; on a machine of 2 CPUs the next validates run the cheaper alone (the
 * other is never started), with the cost averaged in; on 16 CPUs both race. The watch leaves a
 * fast build whose saves cost more than build.sh's.
 */
import { afterAll, beforeAll, describe, expect, spyOn, test } from "bun:test";
import { cpSync, existsSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { finalizeCapture } from "../../../src/capture/finalize.ts";
import { parseRaw } from "../../../src/capture/raw.ts";
import type { FastBuilder, Frontend } from "../../../src/frontends/frontend.ts";
import { BuildSuperseded, FastBuildUnavailable } from "../../../src/frontends/build.ts";
import { captureEnrichment, captureOptions, registerFrontend } from "../../../src/frontends/index.ts";
import { toyFrontend } from "../../frontends/toy/index.ts";
import { tempDir, writeRawCapture } from "../fixtures.ts";
import { log } from "../../../src/log.ts";
import { KerncapError } from "../../../src/errors.ts";
import { chooseStrategy, readPrunedCheck, Rebuilder, type RebuilderOptions } from "../../../src/rebuild/rebuilder.ts";

let unregister: () => void;
const cache = process.env.KERNCAP_CACHE;
beforeAll(() => {
  process.env.KERNCAP_CACHE = tempDir("kerncap-toy-cache-"); // the toy's templates are not in the checkout's templates/
  unregister = registerFrontend(toyFrontend);
});
afterAll(() => {
  unregister();
  if (cache === undefined) delete process.env.KERNCAP_CACHE;
  else process.env.KERNCAP_CACHE = cache;
});

async function toyCapture() {
  const finalDir = join(tempDir(), "cap");
  const tmp = `${finalDir}.tmp-${process.pid}`;
  const raw = parseRaw({ ...writeRawCapture(tmp), frontend: "toy" });
  const enrich = captureEnrichment({ tmpDir: tmp, raw, pattern: "scale", command: ["./app"] }, captureOptions({ "toy-level": "1" }));
  const m = await finalizeCapture(raw, { tmpDir: tmp, finalDir, force: false, command: ["./app"], match: "scale", ...enrich });
  return { dir: finalDir, m };
}

/** The toy frontend with its fast build taking `ms` longer; `calls` counts its builds. */
function slowFast(ms: number, calls: { n: number }): Frontend {
  const fast = toyFrontend.fastBuild!;
  const slow: FastBuilder = {
    ...fast,
    async build(dir, work, o, series) {
      calls.n++;
      const t0 = performance.now();
      await Bun.sleep(ms);
      const f = await fast.build(dir, work, o, series);
      return { ...f, seconds: (performance.now() - t0) / 1000 };
    },
  };
  return { ...(toyFrontend as Frontend), fastBuild: slow };
}

/** build.sh made to sleep `s` seconds before it builds (the compiler slow on that path). */
function slowBuildSh(dir: string, s: number): void {
  const f = join(dir, "build.sh");
  writeFileSync(f, readFileSync(f, "utf8").replace("set -euo pipefail\n", `set -euo pipefail\nsleep ${s}\n`));
}

/** What `fn` logs with log.info (each line joined), and its result. */
async function infoOf<T>(fn: () => Promise<T>): Promise<{ said: string[]; r: T }> {
  const said: string[] = [];
  const spy = spyOn(log, "info").mockImplementation(((...a: unknown[]) => void said.push(a.join(" "))) as never);
  try {
    return { said, r: await fn() };
  } finally {
    spy.mockRestore();
  }
}

const opts = (cpus: number): RebuilderOptions => ({ quiet: true, force: false, fullBuild: false, race: false, cpus });

describe("validate's build strategy by measured cost", () => {
  test("the choice: the race on a machine with the cores for it, else the cheaper build alone", () => {
    expect(chooseStrategy({ cpus: 16, buildSh: 1, pruned: 3 }, 16)).toBe("race");
    expect(chooseStrategy({ cpus: 2, buildSh: 1, pruned: 3 }, 2)).toBe("build.sh");
    expect(chooseStrategy({ cpus: 2, buildSh: 3, pruned: 1 }, 2)).toBe("pruned");
    expect(chooseStrategy({ cpus: 2, buildSh: 1, pruned: 1 }, 2)).toBe("build.sh");
    // a near tie (one or two builds' ~5%: noise) keeps build.sh, the reference build; a clear 20% gain takes the fast build
    expect(chooseStrategy({ cpus: 2, buildSh: 1.05, pruned: 1 }, 2)).toBe("build.sh");
    expect(chooseStrategy({ cpus: 2, buildSh: 1.2, pruned: 1 }, 2)).toBe("pruned");
  });

  test("a slow fast build: 2 CPUs rebuild by build.sh alone (the fast build is not started); 16 CPUs race", async () => {
    const { dir, m } = await toyCapture();
    const calls = { n: 0 };
    const fe = slowFast(400, calls);
    const { said, r: first } = await infoOf(() => new Rebuilder(dir, m, fe, opts(2)).rebuildOnce());
    expect(first.builder).toBe("build.sh"); // the check: both, side by side
    // it says what the next validate will decide from this record: build.sh alone, not the pruned TU
    expect(said.join("\n")).toContain("the next validates run build.sh alone: on 2 CPUs kerncap's pruned build (the kernel's part of the TU) is no faster (");
    expect(said.join("\n")).not.toContain("compile the pruned TU");
    expect(calls.n).toBe(1);
    const check = readPrunedCheck(dir)!;
    expect(check.same).toBe(true);
    expect(check.costs!.cpus).toBe(2);
    expect(check.costs!.pruned).toBeGreaterThanOrEqual(0.4);
    expect(check.costs!.buildSh).toBeLessThan(check.costs!.pruned);
    const second = await new Rebuilder(dir, m, fe, opts(2)).rebuildOnce();
    expect(second.builder).toBe("build.sh");
    expect(calls.n).toBe(1); // not started
    const after = readPrunedCheck(dir)!.costs!;
    expect(after.pruned).toBe(check.costs!.pruned);
    expect(after.buildSh).toBeCloseTo((check.costs!.buildSh + second.seconds) / 2, 6); // averaged in
    // another machine (16 CPUs): the record's costs are another machine's, and the cores are there: the race
    await new Rebuilder(dir, m, fe, opts(16)).rebuildOnce();
    expect(calls.n).toBe(2);
  }, 30_000);

  test("the check's record is taken back only as sealed by this user's kerncap for this folder: changed (a planted cost, a planted same), or copied with the capture (tar, cp -a), it is made again (adversary 57)", async () => {
    const { dir, m } = await toyCapture();
    slowBuildSh(dir, 0.3);
    const fe = slowFast(0, { n: 0 });
    await new Rebuilder(dir, m, fe, opts(2)).rebuildOnce(); // the check
    expect(readPrunedCheck(dir)!.same).toBe(true);
    const file = join(dir, "build", "pruned", "check.json");
    const sealed = JSON.parse(readFileSync(file, "utf8"));
    expect(sealed.auth).toMatch(/^hmac-sha256:[0-9a-f]{16}:[0-9a-f]{64}$/);
    writeFileSync(file, JSON.stringify({ ...sealed, costs: { ...sealed.costs, pruned: 0.001 } }));
    expect(readPrunedCheck(dir)).toBeUndefined();
    const { auth: _, ...bare } = sealed;
    writeFileSync(file, JSON.stringify(bare));
    expect(readPrunedCheck(dir)).toBeUndefined();
    writeFileSync(file, JSON.stringify(sealed));
    expect(readPrunedCheck(dir)!.same).toBe(true);
    const copy = join(tempDir(), "copy");
    cpSync(dir, copy, { recursive: true, preserveTimestamps: true });
    expect(readPrunedCheck(copy)).toBeUndefined();
    // with no check of its own, the copy's first validate checks both again
    const second = await new Rebuilder(copy, m, fe, opts(2)).rebuildOnce();
    expect(second.builder).toBe("build.sh");
    expect(readPrunedCheck(copy)!.same).toBe(true);
  }, 30_000);

  test("a slow build.sh: 2 CPUs rebuild by the fast build alone (build.sh is not started)", async () => {
    const { dir, m } = await toyCapture();
    slowBuildSh(dir, 0.5);
    const calls = { n: 0 };
    const fe = slowFast(0, calls);
    const { said, r: first } = await infoOf(() => new Rebuilder(dir, m, fe, opts(2)).rebuildOnce());
    expect(first.builder).toBe("build.sh");
    expect(said.join("\n")).toContain(
      "the next validates compile only the kernel's part of the TU (kerncap's pruned build): on 2 CPUs faster than build.sh, and the same machine code (",
    );
    expect(readPrunedCheck(dir)!.costs!.buildSh).toBeGreaterThanOrEqual(0.5);
    const ran = join(dir, "build", "build-sh-ran"); // build.sh's mark (build/kernel.bin is written by either build)
    const f = join(dir, "build.sh");
    writeFileSync(f, readFileSync(f, "utf8").replace('mkdir -p "$here/build"\n', '$&touch "$here/build/build-sh-ran"\n'));
    const t0 = performance.now();
    const second = await new Rebuilder(dir, m, fe, opts(2)).rebuildOnce();
    expect(second.builder).toBe("pruned");
    expect(performance.now() - t0).toBeLessThan(450); // build.sh's sleep was not waited for
    expect(existsSync(ran)).toBe(false); // build.sh did not run
    await new Rebuilder(dir, m, fe, { ...opts(2), fullBuild: true }).rebuildOnce();
    expect(existsSync(ran)).toBe(true); // the mark is build.sh's
    expect(calls.n).toBe(2);
  }, 30_000);

  test("build.sh's output (build/kernel.bin) holds the last rebuild's module whichever built it: a fast build's is written there too, whole and through no link", async () => {
    const { dir, m } = await toyCapture();
    const fe = slowFast(0, { n: 0 });
    const module = join(dir, "build", "kernel.bin");
    const src = join(dir, "src", "kernel.txt");
    expect((await new Rebuilder(dir, m, fe, opts(16)).rebuildOnce()).builder).toBe("build.sh"); // the check
    for (const [edit, o] of [
      ["raced", { ...opts(16), strategy: "race" as const }],
      ["alone", { ...opts(2), strategy: "pruned" as const }],
    ] as const) {
      writeFileSync(src, `${edit}\n`);
      const r = await new Rebuilder(dir, m, fe, o).rebuildOnce();
      expect(r.builder, edit).toBe("pruned");
      expect(r.module, edit).not.toBe(module);
      expect(readFileSync(module, "utf8"), edit).toBe(`${edit}\n`); // not the previous build's
    }
    // the watch's saves too
    const w = new Rebuilder(dir, m, fe, { quiet: true, force: false, fullBuild: false, watch: true });
    try {
      await w.checkBeside(await w.rebuildSave(), new AbortController().signal);
      writeFileSync(src, "saved\n");
      expect((await w.rebuildSave()).builder).toBe("pruned");
      expect(readFileSync(module, "utf8")).toBe("saved\n");
    } finally {
      w.close();
    }
    // a link at the name is refused, not written through
    const elsewhere = join(tempDir(), "elsewhere");
    writeFileSync(elsewhere, "mine\n");
    rmSync(module);
    symlinkSync(elsewhere, module);
    writeFileSync(src, "linked\n");
    const err = await new Rebuilder(dir, m, fe, { ...opts(2), strategy: "pruned" }).rebuildOnce().catch((e) => e);
    expect(err.code).toBe("E_UNSAFE_PATH");
    expect(readFileSync(elsewhere, "utf8")).toBe("mine\n");
  }, 30_000);

  test("the race: the compiler's start (onCompile: the replay's preparation) is the fast build's compile step, not build.sh's start; or the fast build's failure", async () => {
    const { dir, m } = await toyCapture();
    const fast = toyFrontend.fastBuild!;
    // a fast build that preprocesses and prunes for 300 ms on this thread, then compiles (or fails there)
    const compilingAfter = (fail: boolean): Frontend => ({
      ...(toyFrontend as Frontend),
      fastBuild: {
        ...fast,
        async build(dir, work, o, series) {
          await Bun.sleep(300);
          if (fail) throw new FastBuildUnavailable("the preprocessor failed");
          o.onCompile?.();
          return fast.build(dir, work, o, series);
        },
      },
    });
    const { said, r: checked } = await infoOf(() => new Rebuilder(dir, m, compilingAfter(false), opts(16)).rebuildOnce());
    expect(checked.builder).toBe("build.sh"); // the check
    expect(said.join("\n")).toContain(
      "the next validates run build.sh and kerncap's pruned build (the kernel's part of the TU) side by side and replay the first that builds: both give the same machine code (",
    );
    for (const fail of [false, true]) {
      const at: number[] = [];
      const t0 = performance.now();
      await new Rebuilder(dir, m, compilingAfter(fail), {
        ...opts(16),
        race: true,
        strategy: "race",
        onCompile: () => at.push(performance.now() - t0),
      }).rebuildOnce();
      expect(at.length, `fail ${fail}`).toBeGreaterThanOrEqual(1);
      expect(at[0]!, `fail ${fail}`).toBeGreaterThanOrEqual(290); // not at build.sh's start, while the fast build still works on this thread
    }
  }, 30_000);

  test("the frontend's deferred check (CUDA: the slice is kerncap's) runs once the fast build compiles, before build.sh starts; a source it changed: build.sh's build is the answer, the fast build's never; a check that fails: its error, build.sh never started", async () => {
    const { dir, m } = await toyCapture();
    const started = join(dir, "build-sh-started");
    const f = join(dir, "build.sh");
    writeFileSync(f, readFileSync(f, "utf8").replace("set -euo pipefail\n", `set -euo pipefail\ntouch ${started}\n`));
    const fast = toyFrontend.fastBuild!;
    // the fast build reads its source, then its compiler runs (onCompile), then it writes what it read
    const reading: FastBuilder = {
      ...fast,
      async build(d, work, o, series) {
        const text = readFileSync(join(d, "src", "kernel.txt"), "utf8");
        o.onCompile?.();
        const b = await fast.build(d, work, o, series);
        if (o.signal?.aborted) throw new BuildSuperseded();
        writeFileSync(b.module, text);
        return b;
      },
    };
    const events: string[] = [];
    const deferring = (changes: boolean | "throws"): Frontend => ({
      ...(toyFrontend as Frontend),
      fastBuild: reading,
      beforeBuild: (d, _m, o) => {
        if (!o?.defer) return;
        return () => {
          events.push(existsSync(started) ? "check after build.sh started" : "check");
          if (changes === "throws") throw new Error("the check failed");
          if (changes) writeFileSync(join(d, "src", "kernel.txt"), "REMADE\n");
          return changes;
        };
      },
    });
    await new Rebuilder(dir, m, deferring(false), opts(16)).rebuildOnce(); // the check of both builds
    for (const strategy of ["race", "pruned"] as const) {
      rmSync(started, { force: true });
      events.length = 0;
      const same = await new Rebuilder(dir, m, deferring(false), { ...opts(16), race: true, strategy }).rebuildOnce();
      expect(same.builder, strategy).toBe("pruned");
      expect(events, strategy).toEqual(["check"]); // once, before build.sh started
      rmSync(started, { force: true });
      events.length = 0;
      const changed = await new Rebuilder(dir, m, deferring(true), { ...opts(16), race: true, strategy }).rebuildOnce();
      expect(events, strategy).toEqual(["check"]);
      expect(changed.builder, strategy).toBe("build.sh");
      expect(readFileSync(changed.module, "utf8"), strategy).toBe("REMADE\n"); // built from the source as the check left it
      writeFileSync(join(dir, "src", "kernel.txt"), `${m.kernel.name}\n`);
      // a check that fails: its error is the rebuild's, both builds stopped, build.sh never started
      rmSync(started, { force: true });
      const failed = await new Rebuilder(dir, m, deferring("throws"), { ...opts(16), race: true, strategy }).rebuildOnce().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(String(failed), strategy).toContain("the check failed");
      expect(existsSync(started), strategy).toBe(false);
      // a stop signal during the fast build's compile, the check replacing a source: the interruption, not build.sh's build
      const stopped: Frontend = {
        ...deferring(true),
        fastBuild: {
          ...fast,
          async build(_d, _w, o) {
            o.onCompile?.();
            throw new KerncapError("E_INTERRUPTED", "interrupted during the rebuild", { exitCode: 130 });
          },
        },
      };
      const interrupted = await new Rebuilder(dir, m, stopped, { ...opts(16), race: true, strategy }).rebuildOnce().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect((interrupted as KerncapError)?.code, strategy).toBe("E_INTERRUPTED");
      writeFileSync(join(dir, "src", "kernel.txt"), `${m.kernel.name}\n`);
    }
  }, 30_000);

  test("the watch: build.sh starts once the burst is quiet; a save's rebuild a later save stops is superseded (no build.sh instead, the fast build stays on)", async () => {
    const { dir, m } = await toyCapture();
    const fast = toyFrontend.fastBuild!;
    // a fast build whose step the abort kills: it fails as a killed step's exit says
    const killable: FastBuilder = {
      ...fast,
      async build(d, work, o, series) {
        if (o.signal?.aborted) throw new FastBuildUnavailable("the preprocessor failed: killed");
        return fast.build(d, work, o, series);
      },
    };
    const r = new Rebuilder(dir, m, { ...(toyFrontend as Frontend), fastBuild: killable }, { quiet: true, force: false, fullBuild: false, watch: true });
    try {
      const order: string[] = [];
      const quiet = async () => {
        await Bun.sleep(30);
        order.push("quiet");
      };
      const first = await r.rebuildSave({ quiet, onCompile: () => order.push("build.sh") });
      expect(first.builder).toBe("build.sh");
      expect(order).toEqual(["quiet", "build.sh"]);
      await r.checkBeside(first, new AbortController().signal); // the same machine code: the saves go to the fast build
      const stop = new AbortController();
      stop.abort();
      await expect(r.rebuildSave({ signal: stop.signal, quiet })).rejects.toBeInstanceOf(BuildSuperseded);
      await expect(r.rebuildSave({ signal: stop.signal })).rejects.toBeInstanceOf(BuildSuperseded);
      expect((await r.rebuildSave()).builder).toBe("pruned"); // still on: a stopped build is no failure of the fast build
    } finally {
      r.close();
    }
  }, 30_000);

  test("the watch: a fast build whose saves cost more than build.sh's gives the saves back to build.sh", async () => {
    const { dir, m } = await toyCapture();
    const calls = { n: 0 };
    const r = new Rebuilder(dir, m, slowFast(300, calls), { quiet: true, force: false, fullBuild: false, watch: true });
    try {
      const first = await r.rebuildSave();
      expect(first.builder).toBe("build.sh");
      await r.checkBeside(first, new AbortController().signal); // the same machine code: the saves go to the fast build
      expect((await r.rebuildSave()).builder).toBe("pruned");
      expect((await r.rebuildSave()).builder).toBe("pruned"); // two saves measured, both slower than build.sh
      expect((await r.rebuildSave()).builder).toBe("build.sh");
      expect(calls.n).toBe(3);
    } finally {
      r.close();
    }
  }, 30_000);
});
