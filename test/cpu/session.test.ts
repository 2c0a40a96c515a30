/**
 * The capture session (src/capture/session.ts) and the `run`/`list` verbs end to end, on a machine
 * without a GPU: the real CLI (`bun src/cli/main.ts`) in a child process, with a stub libcuda whose
 * cuInit succeeds (KERNCAP_LIBCUDA), so the session gets past the GPU probe, and a fake "app" (a
 * shell script) in place of a CUDA application: it plays the capture library's part where a test
 * needs one (writes kernels.json or a raw capture into $KERNCAP_OUT). Signal handling, leftovers,
 * the working directory, ncu's spellings and the application's exit code need no capture library.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { applicationExitCode, countedLaunches, graphOnlyMisses } from "../../src/capture/session.ts";
import { compileEre } from "../../src/util/posix-regex.ts";
import { kernelPattern } from "../../src/cli/args.ts";
import { DOCUMENTS } from "../../src/format/documents.ts";
import * as v from "valibot";

/** The document matches its valibot schema (src/format/documents.ts); the issues, when not. */
function expectDocument(name: keyof typeof DOCUMENTS, doc: unknown): void {
  const r = v.safeParse(DOCUMENTS[name], doc);
  expect(r.success, JSON.stringify(r.issues?.map((i) => [v.getDotPath(i), i.message]))).toBe(true);
  expect((doc as { schema: string }).schema).toBe(`kerncap.${name}/1`);
}
import { pidAlive } from "../../src/leftovers.ts";
import { deadPid, tempDir, writeRawCapture } from "./fixtures.ts";

const MAIN = resolve(import.meta.dir, "../../src/cli/main.ts");
const HAS_GCC = !!Bun.which("gcc");
let stubCuda = "";
let cacheDir = "";

beforeAll(() => {
  if (!HAS_GCC) return;
  const d = tempDir();
  writeFileSync(join(d, "cuda.c"), "int cuInit(unsigned f) { (void)f; return 0; }\nint cuDeviceGetCount(int *n) { *n = 1; return 0; }\n");
  const cc = Bun.spawnSync(["gcc", "-shared", "-fPIC", "-o", join(d, "libcuda_stub.so"), join(d, "cuda.c")], { stderr: "pipe" });
  if (cc.exitCode !== 0) throw new Error(cc.stderr.toString());
  stubCuda = join(d, "libcuda_stub.so");
  cacheDir = tempDir();
});

/** A fake application: a bash script (mode 755). */
function app(dir: string, name: string, body: string): string {
  const p = join(dir, name);
  writeFileSync(p, `#!/usr/bin/env bash\n${body}\n`);
  chmodSync(p, 0o755);
  return p;
}

/** The environment of a kerncap child: GPU probe passes (stub libcuda), nothing real is injected. */
function kerncapEnv(extra: Record<string, string> = {}): Record<string, string | undefined> {
  return {
    ...process.env,
    KERNCAP_LIBCUDA: stubCuda,
    KERNCAP_CUPTI_PATH: stubCuda, // an ELF file (the stub): findCupti refuses anything else
    KERNCAP_CUDA_LIB: "/dev/null", // CUDA_INJECTION64_PATH of the fake app: bash never initializes CUDA
    KERNCAP_NO_PRELOAD: "1", // nor is /dev/null put on its LD_PRELOAD (the loader would complain)
    KERNCAP_TRITON: "0",
    KERNCAP_CACHE: cacheDir,
    ...extra,
  };
}

function spawnKerncap(args: string[], cwd: string, extra: Record<string, string> = {}) {
  return Bun.spawn([process.execPath, MAIN, ...args], { cwd, env: kerncapEnv(extra), stdin: "ignore", stdout: "pipe", stderr: "pipe" });
}

async function kerncap(args: string[], cwd: string, extra: Record<string, string> = {}): Promise<{ code: number; out: string; err: string }> {
  const p = spawnKerncap(args, cwd, extra);
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, out, err };
}

async function waitFor(path: string, ms = 10_000): Promise<void> {
  const t0 = performance.now();
  while (!existsSync(path)) {
    if (performance.now() - t0 > ms) throw new Error(`${path} did not appear within ${ms} ms`);
    await Bun.sleep(25);
  }
}

/** The process has ended (a zombie awaiting its reaper counts as ended), within ms. */
async function gone(pid: number, ms = 3000): Promise<boolean> {
  const t0 = performance.now();
  for (;;) {
    let zombie = false;
    try {
      zombie = /^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
    } catch {
      /* no /proc entry: gone */
    }
    if (!pidAlive(pid) || zombie) return true;
    if (performance.now() - t0 > ms) return false;
    await Bun.sleep(25);
  }
}

/**
 * A fake app that writes into $KERNCAP_OUT (as a library would), starts a background child and a
 * foreground one (both in its process group), writes their pids and a "started" marker into
 * `marks`, then waits.
 */
function longApp(dir: string, marks: string): string {
  return app(
    dir,
    "long-app.sh",
    `echo partial > "$KERNCAP_OUT/memory/before.bin"
sleep 300 & echo $! > ${marks}/bg.pid
echo $$ > ${marks}/app.pid
touch ${marks}/started
sleep 300`,
  );
}

describe.skipIf(!HAS_GCC)("signals and leftovers (kerncap run/list under a fake app)", () => {
  for (const [verb, sig, code] of [
    ["run", "SIGTERM", 143],
    ["run", "SIGINT", 130],
    ["list", "SIGTERM", 143],
    // found by a trial: a hangup (terminal or ssh gone) left the app running and the temp folder behind
    ["run", "SIGHUP", 129],
    ["list", "SIGQUIT", 131],
  ] as const) {
    test(`${sig} of \`kerncap ${verb}\`: the app's process group ends, its temp folder is removed, nothing is left in the working directory`, async () => {
      const d = tempDir();
      const cwd = join(d, "cwd");
      const marks = join(d, "marks");
      const scratch = join(d, "tmp"); // list's folder goes under TMPDIR
      for (const x of [cwd, marks, scratch]) mkdirSync(x);
      const a = longApp(d, marks);
      const args = verb === "run" ? ["run", "--kernel", "scale", "--out", join(d, "cap"), "--", a] : ["list", "--", a];
      const p = spawnKerncap(args, cwd, { TMPDIR: scratch });
      await waitFor(join(marks, "started"));
      const pids = ["app.pid", "bg.pid"].map((f) => Number(readFileSync(join(marks, f), "utf8")));
      if (verb === "run") expect(readdirSync(d).some((n) => n.startsWith(`cap.tmp-${p.pid}-`))).toBe(true);
      else expect(readdirSync(scratch).some((n) => n.startsWith(`kerncap-list-${p.pid}-`))).toBe(true);
      p.kill(sig);
      const [err, exit] = await Promise.all([new Response(p.stderr).text(), p.exited]);
      expect(exit, err).toBe(code);
      expect(err).toContain("interrupted");
      expect(err).toContain("process group was ended");
      // (a non-interactive bash ignores SIGINT in its background children: SIGKILL ends those)
      for (const pid of pids) expect(await gone(pid)).toBe(true);
      expect(readdirSync(d).sort()).toEqual(["cwd", "long-app.sh", "marks", "tmp"]);
      expect(readdirSync(scratch)).toEqual([]);
      expect(readdirSync(cwd)).toEqual([]);
    }, 20_000);
  }

  test("a stale DIR.tmp-<pid> whose pid is gone is removed by the next run (said so); one whose pid lives is kept", async () => {
    const d = tempDir();
    const out = join(d, "cap");
    const dead = await deadPid();
    const live = Bun.spawn(["sleep", "30"]);
    try {
      mkdirSync(join(`${out}.tmp-${dead}`, "memory"), { recursive: true });
      writeFileSync(join(`${out}.tmp-${dead}`, "memory/before.bin"), "12 GiB, once");
      writeFileSync(join(`${out}.tmp-${dead}`, ".kerncap-temp"), `${dead}\n`); // made by kerncap (src/leftovers.ts)
      mkdirSync(`${out}.tmp-${live.pid}`);
      // a folder of the user's with a look-alike name and a dead pid: not kerncap's, never removed
      const dead2 = await deadPid();
      const mine = `${out}.tmp-${dead2}`;
      mkdirSync(mine);
      writeFileSync(join(mine, "mydata.txt"), "important");
      const a = app(d, "quick.sh", "exit 0");
      const r = await kerncap(["run", "--kernel", "scale", "--out", out, "--", a], d);
      expect(r.code).toBe(2); // the app launched no kernel: no capture
      expect(r.err).toContain(`removed ${out}.tmp-${dead}: left by kerncap process ${dead}, which is gone`);
      expect(existsSync(`${out}.tmp-${dead}`)).toBe(false);
      expect(existsSync(`${out}.tmp-${live.pid}`)).toBe(true);
      expect(readFileSync(join(mine, "mydata.txt"), "utf8")).toBe("important");
      expect(readdirSync(d).sort()).toEqual(["cap.tmp-" + live.pid, `cap.tmp-${dead2}`, "quick.sh"].sort());
    } finally {
      live.kill();
    }
  }, 20_000);

  test("a stale DIR.tmp-<pid> that an orphaned application still writes into (its KERNCAP_OUT) is kept", async () => {
    const d = tempDir();
    const out = join(d, "cap");
    const dead = await deadPid();
    const tmp = `${out}.tmp-${dead}`;
    mkdirSync(tmp);
    writeFileSync(join(tmp, ".kerncap-temp"), `${dead}\n`);
    // the application of the killed run: alive, KERNCAP_OUT naming the temp folder
    const orphan = Bun.spawn(["sleep", "30"], { env: { ...process.env, KERNCAP_OUT: tmp } });
    try {
      const { processesWritingInto } = await import("../../src/leftovers.ts");
      await Bun.sleep(50);
      expect(processesWritingInto(tmp)).toContain(orphan.pid);
      expect(processesWritingInto(`${tmp}x`)).toEqual([]);
      const r = await kerncap(["run", "--kernel", "scale", "--out", out, "--", app(d, "quick.sh", "exit 0")], d);
      expect(r.code).toBe(2);
      expect(existsSync(tmp)).toBe(true);
    } finally {
      orphan.kill();
    }
  }, 20_000);

  test("a stale list folder under TMPDIR whose kerncap is gone is removed by the next list", async () => {
    const d = tempDir();
    const scratch = join(d, "tmp");
    mkdirSync(scratch);
    const dead = await deadPid();
    mkdirSync(join(scratch, `kerncap-list-${dead}-abc123`), { mode: 0o700 });
    mkdirSync(join(scratch, `kerncap-list-${process.pid}-def456`), { mode: 0o700 }); // a live kerncap's (this test's pid)
    mkdirSync(join(scratch, `kerncap-list-${dead}-open00`), { mode: 0o755 }); // not as kerncap makes them (0700): left
    const a = app(
      d,
      "list-app.sh",
      `echo '{"launches": 3, "kernels": [{"name": "_Z5scalePfi", "demangled": "scale(float*, int)", "count": 3, "grid": [4,1,1], "block": [256,1,1], "module": "module-1"}]}' > "$KERNCAP_OUT/kernels.json"`,
    );
    const r = await kerncap(["list", "--json", "--", a], d, { TMPDIR: scratch });
    expect(r.code, r.err).toBe(0);
    expect(JSON.parse(r.out).kernels[0].demangled).toBe("scale(float*, int)");
    expectDocument("list", JSON.parse(r.out));
    expect(readdirSync(scratch).sort()).toEqual([`kerncap-list-${dead}-open00`, `kerncap-list-${process.pid}-def456`].sort());
  }, 20_000);

  test("ncu spellings (-k regex:, --launch-skip, -o, -f) and the app's exit code passed through after a complete capture", async () => {
    const d = tempDir();
    const cwd = join(d, "cwd");
    mkdirSync(cwd);
    const raw = join(d, "raw");
    writeRawCapture(raw, true); // what the library would have written for launch #0 of scale
    const a = app(d, "fails-after.sh", `cp -r ${raw}/. "$KERNCAP_OUT"/\necho 'app: giving up' >&2\nexit 3`);
    const out = join(d, "cap");
    const r = await kerncap(["run", "-k", "regex:scale", "--launch-skip", "0", "-o", out, "--json", "--", a], cwd);
    expect(r.code, r.err).toBe(3);
    expect(r.err).toContain("the application failed (exit code 3) after the capture was written; kerncap run exits with 3");
    const j = JSON.parse(r.out);
    expect(j.appExitCode).toBe(3);
    expect(j.kernel).toBe("scale(float*, int)");
    expectDocument("run", j);
    const m = JSON.parse(readFileSync(join(out, "kerncap.json"), "utf8"));
    expect(m.kernel.match).toBe("scale"); // regex: stripped: the library got the same ERE
    // -f (= --force) replaces it; --kernel-name is --kernel
    const again = await kerncap(["run", "--kernel-name", "scale", "-f", "-o", out, "--", a], cwd);
    expect(again.code, again.err).toBe(3);
    expect(readdirSync(cwd)).toEqual([]);
    expect(readdirSync(d).sort()).toEqual(["cap", "cwd", "fails-after.sh", "raw"]);
    // an app that exits 0 after the capture: kerncap exits 0, says nothing about it
    const ok = app(d, "ok.sh", `cp -r ${raw}/. "$KERNCAP_OUT"/`);
    const r0 = await kerncap(["run", "-f", "-o", out, "--", ok], cwd);
    expect(r0.code, r0.err).toBe(0);
    expect(r0.err).not.toContain("the application failed");
  }, 30_000);
});

test("graphOnlyMisses: a matching kernel too rare eagerly for --dispatch but not counting its graph executions is named; captured, eager-enough and collective ones are not", () => {
  const k = (name: string, count: number, graph: number) => ({
    name,
    demangled: name,
    count,
    graph,
    grid: [1, 1, 1] as [number, number, number],
    block: [1, 1, 1] as [number, number, number],
    module: "",
  });
  const kernels = [k("layer_norm", 4, 4), k("gemm", 6, 2), k("softmax", 3, 3), k("ncclDevKernel_AllReduce", 9, 9), k("other", 5, 5)];
  // --capture-all --kernel 'layer_norm|gemm|softmax|nccl' --dispatch 1: gemm had 4 eager launches (captured), softmax is captured too
  const missed = graphOnlyMisses(kernels, ["layer_norm|gemm|softmax|nccl"], 1, new Set(["gemm", "softmax"]));
  expect(missed.map((x) => x.name)).toEqual(["layer_norm"]);
  // without a pattern every kernel matches; --dispatch 5: gemm ran 6 times, only 4 of them eagerly
  expect(graphOnlyMisses(kernels, [""], 5, new Set()).map((x) => x.name)).toEqual(["gemm"]);
  expect(graphOnlyMisses(kernels, [""], 3, new Set()).map((x) => x.name)).toEqual(["layer_norm", "other"]);
});

/** A census file as c/cuda/kerncap_cuda.c writes it (kernels.<pid>.json), for a fake app to echo. */
function census(pid: number, number: number, rank: number | null, count: number, admitted = true, selection: "any" | "rank" | "process" = "any"): string {
  return JSON.stringify({
    final: true,
    counting: true,
    process: { pid, number, rank, rank_variable: rank === null ? null : "RANK", cmdline: ["worker", String(number)], selection: { by: selection, admitted } },
    launches: count,
    kernels: [{ name: "_Z5scalePfi", demangled: "scale(float*, int)", count, grid: [4, 1, 1], block: [256, 1, 1], module: "module-1" }],
  });
}

describe.skipIf(!HAS_GCC)("processes, selection, injection and progress (kerncap run/list under a fake app)", () => {
  test("list of a two-process job: merged counts, a pid:count column, the process table, processes in --json", async () => {
    const d = tempDir();
    const a = app(
      d,
      "job.sh",
      `echo '${census(101, 0, 0, 3)}' > "$KERNCAP_OUT/kernels.101.json"\necho '${census(102, 1, 1, 4)}' > "$KERNCAP_OUT/kernels.102.json"`,
    );
    const r = await kerncap(["list", "--", a], d);
    expect(r.code, r.err).toBe(0);
    expect(r.out).toContain("pid:count");
    expect(r.out).toMatch(/7\s+101:3 102:4\s+4x1x1/);
    expect(r.out).toMatch(/process\s+pid\s+rank\s+launches\s+kernels\s+command/);
    expect(r.out).toMatch(/1\s+102\s+1\s+4\s+1\s+worker 1/);
    expect(r.err).toContain("1 kernels, 7 launches in 2 processes");
    const j = JSON.parse((await kerncap(["list", "--json", "--", a], d)).out);
    expect(j.launches).toBe(7);
    expect(j.processes.map((p: { pid: number; rank: number; launches: number }) => [p.pid, p.rank, p.launches])).toEqual([
      [101, 0, 3],
      [102, 1, 4],
    ]);
    expectDocument("list", j);
  }, 20_000);

  test("run: too few launches in any one process is said per process; --rank that no process has names the ranks seen", async () => {
    const d = tempDir();
    const a = app(
      d,
      "job.sh",
      `echo '${census(101, 0, 0, 2)}' > "$KERNCAP_OUT/kernels.101.json"\necho '${census(102, 1, 1, 2)}' > "$KERNCAP_OUT/kernels.102.json"`,
    );
    const r = await kerncap(["run", "--kernel", "scale", "--dispatch", "3", "--out", join(d, "cap"), "--", a], d);
    expect(r.code).toBe(2);
    expect(r.err).toContain(`only 2 launches matched "scale" in any one of the 2 processes (each counts its own launches for --dispatch)`);
    expect(r.err).toContain("--dispatch 3 needs 4");
    const b = app(
      d,
      "ranks.sh",
      `echo '${census(101, 0, 0, 2, false, "rank")}' > "$KERNCAP_OUT/kernels.101.json"\necho '${census(102, 1, 1, 2, false, "rank")}' > "$KERNCAP_OUT/kernels.102.json"`,
    );
    const r2 = await kerncap(["run", "--rank", "5", "--out", join(d, "cap"), "--", b], d);
    expect(r2.code).toBe(2);
    expect(r2.err).toContain("no process of the application has rank 5 (processes that ran CUDA: pid 101 (rank 0) = process 0, pid 102 (rank 1) = process 1)");
    const both = await kerncap(["run", "--rank", "1", "--process", "0", "--out", join(d, "cap"), "--", b], d);
    expect(both.code).toBe(2);
    expect(both.err).toContain("--rank and --process both given");
    expect(readdirSync(d).sort()).toEqual(["job.sh", "ranks.sh"]);
  }, 20_000);

  test("run of a script that starts compute-sanitizer: no capture, E_TOOL naming the application's process whose CUPTI was held", async () => {
    // what the H200 showed (compute-sanitizer 2025, CUDA 13.0): the application's census and the
    // error line its capture library wrote; the sanitizer's own process left no census
    const c = JSON.parse(census(200, 0, null, 0));
    c.process.cmdline = ["/tmp/w/verdicts", "hist"];
    c.kernels = [];
    const err = `CUPTI is already held by "<not provided>": kerncap cannot see launches under another CUPTI tool; run kerncap without the other CUDA tool (nsys, ncu, compute-sanitizer, cuda-gdb, or a profiler inside the application); point that tool at \`kerncap replay DIR\` instead (c/cuda/kerncap_cuda.c:1372)`;
    const d = tempDir();
    writeFileSync(join(d, "error.txt"), err + "\n");
    const a = app(d, "run.sh", `echo '${JSON.stringify(c)}' > "$KERNCAP_OUT/kernels.200.json"\ncp ${join(d, "error.txt")} "$KERNCAP_OUT/error.200.txt"`);
    const r = await kerncap(["run", "--kernel", "histogram", "--out", join(d, "cap"), "--", "bash", a], d);
    expect(r.code, r.err).toBe(2);
    expect(r.err).toContain("no capture: another CUDA tool held CUPTI in the application's pid 200 (/tmp/w/verdicts hist)");
    expect(r.err).toContain("compute-sanitizer --tool memcheck kerncap replay DIR");
    const j = JSON.parse((await kerncap(["run", "--json", "--kernel", "histogram", "--out", join(d, "cap"), "--", "bash", a], d)).out);
    expect(j.error.code).toBe("E_TOOL");
    // another capture failure is still E_CAPTURE_FAILED
    writeFileSync(join(d, "error.txt"), "cannot create /x/memory/before.bin: No space left on device (c/cuda/kerncap_cuda.c:330)\n");
    const j2 = JSON.parse((await kerncap(["run", "--json", "--kernel", "histogram", "--out", join(d, "cap"), "--", "bash", a], d)).out);
    expect(j2.error.code).toBe("E_CAPTURE_FAILED");
    expect(readdirSync(d).sort()).toEqual(["error.txt", "run.sh"]);
  }, 20_000);

  test("run tells the app KERNCAP_RANK/KERNCAP_PROCESS and injects the library through CUDA_INJECTION64_PATH and LD_PRELOAD", async () => {
    const d = tempDir();
    const envOut = join(d, "env.txt");
    const a = app(d, "env.sh", `env | grep -E '^(KERNCAP_RANK|KERNCAP_PROCESS|CUDA_INJECTION64_PATH|LD_PRELOAD)=.' | sort > ${envOut}`);
    // the stub libcuda stands in for the capture library: preloading it into bash is harmless
    const extra = { KERNCAP_CUDA_LIB: stubCuda, KERNCAP_NO_PRELOAD: "", LD_PRELOAD: "" };
    await kerncap(["run", "--rank", "1", "--out", join(d, "cap"), "--", a], d, extra);
    expect(readFileSync(envOut, "utf8").trim().split("\n")).toEqual([`CUDA_INJECTION64_PATH=${stubCuda}`, "KERNCAP_RANK=1", `LD_PRELOAD=${stubCuda}`]);
    await kerncap(["run", "--process", "0", "--out", join(d, "cap"), "--", a], d, { ...extra, KERNCAP_NO_PRELOAD: "1" });
    expect(readFileSync(envOut, "utf8").trim().split("\n")).toEqual([`CUDA_INJECTION64_PATH=${stubCuda}`, "KERNCAP_PROCESS=0"]);
  }, 20_000);

  test("the caller's stale capture settings (KERNCAP_RANK, KERNCAP_CAPTURE_ALL, …) never reach the application: kerncap sets or removes each", async () => {
    // found by a trial: KERNCAP_RANK=3 KERNCAP_CAPTURE_ALL=1 in the shell reached the library of a plain `run`
    const d = tempDir();
    const envOut = join(d, "env.txt");
    const a = app(
      d,
      "env.sh",
      `env | grep -E '^KERNCAP_(RANK|PROCESS|CAPTURE_ALL|MAX_CAPTURES|EXIT_AFTER_CAPTURE|COUNT_BENCHMARKS|LOG|DISPATCH)=' | sort > ${envOut}`,
    );
    const stale = {
      KERNCAP_RANK: "3",
      KERNCAP_PROCESS: "2",
      KERNCAP_CAPTURE_ALL: "1",
      KERNCAP_MAX_CAPTURES: "9",
      KERNCAP_EXIT_AFTER_CAPTURE: "1",
      KERNCAP_COUNT_BENCHMARKS: "1",
      KERNCAP_LOG: "1",
    };
    await kerncap(["run", "--out", join(d, "cap"), "--", a], d, stale);
    expect(readFileSync(envOut, "utf8").trim().split("\n")).toEqual(["KERNCAP_DISPATCH=0"]);
    await kerncap(["list", "--", a], d, stale);
    expect(readFileSync(envOut, "utf8").trim()).toBe("");
  }, 20_000);

  test("an app the kernel cannot start (no #! line, a missing #! interpreter) is E_APP_NOT_EXECUTABLE, not a kerncap bug; --json=true gives the error document", async () => {
    // found by a trial: both were "internal error … This is a kerncap bug"
    const d = tempDir();
    const no = join(d, "noshebang.sh");
    writeFileSync(no, "echo hi\n");
    chmodSync(no, 0o755);
    const bad = join(d, "badinterp.sh");
    writeFileSync(bad, "#!/nonexistent/interp\necho hi\n");
    chmodSync(bad, 0o755);
    const r1 = await kerncap(["run", "--json=true", "--out", join(d, "cap"), "--", no], d);
    expect(r1.code).toBe(2);
    expect(JSON.parse(r1.out).error).toMatchObject({ code: "E_APP_NOT_EXECUTABLE", message: expect.stringContaining("no #! line") });
    const r2 = await kerncap(["run", "--json", "--out", join(d, "cap"), "--", bad], d);
    expect(JSON.parse(r2.out).error).toMatchObject({
      code: "E_APP_NOT_EXECUTABLE",
      message: expect.stringContaining("its interpreter (#!/nonexistent/interp) does not exist"),
    });
    expect(readdirSync(d).sort()).toEqual(["badinterp.sh", "noshebang.sh"]);
  }, 20_000);

  test("an app found on PATH sees argv[0] as typed, as under a shell (not the resolved path)", async () => {
    // found by a trial: `kerncap run -- ctool` gave the program /abs/path/ctool as argv[0]
    const d = tempDir();
    const bin = join(d, "bin");
    mkdirSync(bin);
    const out = join(d, "argv0.txt");
    writeFileSync(join(d, "real.c"), `#include <stdio.h>\nint main(int c, char** v) { FILE* f = fopen("${out}", "w"); fprintf(f, "%s", v[0]); return 0; }\n`);
    expect(Bun.spawnSync(["gcc", "-o", join(bin, "ctool"), join(d, "real.c")]).exitCode).toBe(0);
    await kerncap(["run", "--out", join(d, "cap"), "--", "ctool"], d, { PATH: `${bin}:${process.env.PATH}` });
    expect(readFileSync(out, "utf8")).toBe("ctool");
  }, 20_000);

  test("an app that dies of a signal before any kernel: the signal is named (not only its exit code)", async () => {
    const d = tempDir();
    const a = app(d, "segv.sh", "kill -SEGV $$");
    const r = await kerncap(["list", "--json", "--", a], d);
    expect(JSON.parse(r.out).error).toMatchObject({
      code: "E_NO_KERNELS",
      message: "the application launched no CUDA kernel (it was ended by SIGSEGV (exit 139))",
      hint: expect.stringContaining("died of SIGSEGV"),
    });
    const r2 = await kerncap(["run", "--json", "--kernel", "foo", "--kernel-name", "bar", "--out", join(d, "cap"), "--", a, "", "my arg"], d);
    expect(JSON.parse(r2.out).error.message).toContain("ran before the app ended (it was ended by SIGSEGV (exit 139);");
    // the running line quotes the arguments (an empty one, one with a space) and names every pattern
    expect(r2.err).toContain(`running ${a} '' 'my arg' (capture "foo", "bar" #0)`);
  }, 20_000);

  test("a newline in one --kernel is refused (the library would read two patterns); a live run writing the same --out is named", async () => {
    const d = tempDir();
    const a = app(d, "quick.sh", "exit 0");
    const nl = await kerncap(["run", "--json", "--kernel", "a\nb", "--out", join(d, "cap"), "--", a], d);
    expect(JSON.parse(nl.out).error).toMatchObject({ code: "E_USAGE", message: '--kernel "a\\nb" holds a newline' });
    // another kerncap's temp folder (its marker) whose pid lives: refused at the start, before the app runs
    const other = Bun.spawn(["sleep", "30"]);
    try {
      const tmp = join(d, `cap.tmp-${other.pid}`);
      mkdirSync(tmp);
      writeFileSync(join(tmp, ".kerncap-temp"), `${other.pid}\n`);
      const r = await kerncap(["run", "--json", "--out", join(d, "cap"), "--", a], d);
      expect(JSON.parse(r.out).error).toMatchObject({
        code: "E_EXISTS",
        message: `another kerncap run (pid ${other.pid}) is writing ${join(d, "cap")} (${tmp})`,
      });
    } finally {
      other.kill();
    }
  }, 20_000);

  test("-c/--launch-count N (ncu's): the library is told KERNCAP_LAUNCH_COUNT; each of its captures becomes a folder of the set; fewer than N is said", async () => {
    const d = tempDir();
    const raw = join(d, "raw");
    // what the library writes for launches 2, 3, 4 of scale: captures/<n>/, each a raw capture
    for (const n of [0, 1, 2]) {
      const c = join(raw, "captures", String(n));
      const r = writeRawCapture(c, true);
      writeFileSync(join(c, "raw.json"), JSON.stringify({ ...r, kernel: { ...r.kernel, match_index: 2 + n, launch_index: 10 + n } }));
    }
    const envOut = join(d, "env.txt");
    const a = app(d, "three.sh", `env | grep -E '^KERNCAP_(LAUNCH_COUNT|DISPATCH)=' | sort > ${envOut}\ncp -r ${raw}/. "$KERNCAP_OUT"/`);
    const out = join(d, "caps");
    const r = await kerncap(["run", "-k", "scale", "-s", "2", "-c", "3", "-o", out, "--json", "--", a], d);
    expect(r.code, r.err).toBe(0);
    expect(readFileSync(envOut, "utf8").trim().split("\n")).toEqual(["KERNCAP_DISPATCH=2", "KERNCAP_LAUNCH_COUNT=3"]);
    const j = JSON.parse(r.out);
    expectDocument("run", j);
    expect(j.captures.map((c: { dir: string; launchIndex: number }) => [c.dir, c.launchIndex])).toEqual([
      [join(out, "0-scale"), 10],
      [join(out, "1-scale"), 11],
      [join(out, "2-scale"), 12],
    ]);
    const set = JSON.parse(readFileSync(join(out, "kerncap-captures.json"), "utf8"));
    expect(set.captures.map((c: { dir: string }) => c.dir)).toEqual(["0-scale", "1-scale", "2-scale"]);
    expect(JSON.parse(readFileSync(join(out, "1-scale/kerncap.json"), "utf8")).kernel.matchIndex).toBe(3);
    // the app made fewer matching launches than asked: what was captured is kept, and the shortfall said
    const four = await kerncap(["run", "-k", "scale", "-s", "2", "-c", "4", "-f", "-o", out, "--", a], d);
    expect(four.code, four.err).toBe(0);
    expect(four.err).toContain("--launch-count 4: 3 of the 4 launches from #2 captured");
    // one capture per launch of one kernel: not with several kernels or --capture-all; at least 1
    for (const args of [
      ["-k", "a", "-k", "b", "-c", "2"],
      ["--capture-all", "-c", "2"],
      ["-c", "0"],
    ]) {
      const x = await kerncap(["run", ...args, "-o", join(d, "x"), "--json", "--", a], d);
      expect(x.code, args.join(" ")).toBe(2);
      expect(JSON.parse(x.out).error.message).toContain("--launch-count");
    }
  }, 30_000);

  test("run shows the library's progress file on stderr, one line per phase when stderr is not a terminal", async () => {
    const d = tempDir();
    const raw = join(d, "raw");
    writeRawCapture(raw, true);
    const a = app(
      d,
      "slow.sh",
      `printf 'before 0 4194304\n' > "$KERNCAP_OUT/progress"; sleep 1.4
printf 'before 2097152 4194304\n' > "$KERNCAP_OUT/progress"; sleep 1.4
printf 'after 0 2048\n' > "$KERNCAP_OUT/progress"; sleep 1.4
cp -r ${raw}/. "$KERNCAP_OUT"/`,
    );
    const r = await kerncap(["run", "--out", join(d, "cap"), "--", a], d);
    expect(r.code, r.err).toBe(0);
    expect(r.err).toContain("writing the before state (4.0 MiB)");
    expect(r.err).toContain("writing the after state (2.0 KiB)");
    expect(r.err.match(/writing the before state/g)?.length).toBe(1); // a phase is said once
    expect(r.err).not.toContain("\r");
  }, 30_000);
});

describe("session helpers", () => {
  test("the exit code run passes on: the app's, 128+N for a signal", () => {
    expect(applicationExitCode({ exitCode: 0, signal: null })).toBe(0);
    expect(applicationExitCode({ exitCode: 3, signal: null })).toBe(3);
    expect(applicationExitCode({ exitCode: null, signal: "SIGKILL" })).toBe(137);
    expect(applicationExitCode({ exitCode: null, signal: "SIGSEGV" })).toBe(139);
  });
  test("launches counted toward --dispatch: matching names, benchmark launches only when asked", () => {
    const k = (name: string, demangled: string, count: number, benchmark?: number) => ({
      name,
      demangled,
      count,
      benchmark,
      grid: [1, 1, 1] as [number, number, number],
      block: [1, 1, 1] as [number, number, number],
      module: "m",
    });
    const ks = [k("_Z3addv", "add()", 5), k("triton_mm", "triton_mm", 10, 8)];
    expect(countedLaunches(ks, undefined, false)).toBe(7);
    expect(countedLaunches(ks, compileEre("^triton"), false)).toBe(2);
    expect(countedLaunches(ks, compileEre("^triton"), true)).toBe(10);
  });
  test("--kernel regex:RE is RE (ncu's spelling); anything else is taken as given", () => {
    expect(kernelPattern("regex:soft.*max")).toBe("soft.*max");
    expect(kernelPattern("softmax")).toBe("softmax");
    expect(kernelPattern(undefined)).toBe("");
    expect(kernelPattern("regex:")).toBe("");
  });
});
