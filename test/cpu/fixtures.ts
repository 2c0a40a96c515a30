/**
 * A synthetic capture folder, written through the same finalizeCapture path as a real capture,
 * for tests that need no GPU (inspect, checksum and manifest errors, validate's checks).
 */
import { afterAll, beforeAll } from "bun:test";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { finalizeCapture } from "../../src/capture/finalize.ts";
import { renderedDigests } from "../../src/format/rendered.ts";
import { readWhatRuns } from "../../src/format/what-runs.ts";
import { CUDA_TEMPLATES } from "../../src/frontends/cuda/templates.ts";
import { templateEngine } from "../../src/frontends/templates.ts";
import type { Manifest } from "../../src/format/manifest.ts";
import type { Outcome } from "../../src/format/check-record.ts";
import type { CheckOptions } from "../../src/check/check.ts";
import type { ReplayResult, ReplaySession } from "../../src/replay/engine.ts";
import { chunkedRanges } from "../raw-fixture.ts";
import { writeCandidates, type McpCandidate } from "../../src/mcp/evaluate.ts";
import { authenticatorOf, resultsKey, sealRecord, type ResultsKey } from "../../src/format/record-auth.ts";
import { documentId } from "../../src/format/documents.ts";
import { isKerncapError, type KerncapError } from "../../src/errors.ts";

/** A pid that no process has: a child's, after it exited. */
export async function deadPid(): Promise<number> {
  const p = Bun.spawn(["true"]);
  await p.exited;
  return p.pid;
}

export function tempDir(prefix = "kerncap-test-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/**
 * kerncap mcp's evaluate refusing one candidate (src/mcp/evaluate.ts writeCandidates): its code and
 * reason from the candidate list eval reads; throws "not refused" when it was written, and fails
 * the test when anything of it was (the folder holds the list alone).
 */
export function evaluateRefusal(cap: string, c: McpCandidate): { code: string; reason: string } {
  const { folder } = writeCandidates(cap, [c]);
  try {
    const list = JSON.parse(readFileSync(join(folder, "candidates.json"), "utf8"));
    const r = list.candidates[0].refused;
    if (!r) throw new Error("not refused");
    const written = readdirSync(folder).filter((f) => f !== "candidates.json");
    if (written.length) throw new Error(`a refused candidate was written: ${written.join(", ")}`);
    return r;
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}

/** makeCapture in a new temp folder's `cap`, with a src/kernel.cu (the source an eval candidate replaces). @returns its path */
export async function captureWithSource(): Promise<string> {
  const dir = join(tempDir(), "cap");
  await makeCapture(dir);
  mkdirSync(join(dir, "src"));
  writeFileSync(join(dir, "src/kernel.cu"), "__global__ void scale(float* x, int n) {}\n");
  return dir;
}

/** Two regions: 0x7f0000000000 (4 KiB, changed by the "kernel") and 0x7f0000010000 (8 KiB, unchanged). */
export async function makeCapture(finalDir: string, extra: { process?: Record<string, unknown> } = {}): Promise<Manifest> {
  const tmp = `${finalDir}.tmp-${process.pid}`;
  const raw = writeRawCapture(tmp, false, extra);
  return finalizeCapture(raw, { tmpDir: tmp, finalDir, force: false, command: ["./app"], match: "scale" });
}

/**
 * Record the folder's build.sh (and pinned.json, repro.py) in its manifest as the files kerncap
 * wrote at capture (manifest.rendered, as finalize records the rendered templates), for a test
 * whose hand-written build.sh stands for a rendered one; a confined build runs only those bytes.
 */
export function recordRendered(dir: string): void {
  const m = JSON.parse(readFileSync(join(dir, "kerncap.json"), "utf8"));
  m.rendered = renderedDigests(dir);
  writeFileSync(join(dir, "kerncap.json"), JSON.stringify(m, null, 2) + "\n");
}

/**
 * The digest a received capture's E_UNTRUSTED refusal shows (`--trust=DIGEST`): a build.sh that is
 * not kerncap's own (a test's hand-written one) is trusted with it, not with plain --trust.
 */
export function trustDigest(dir: string): string {
  const m = JSON.parse(readFileSync(join(dir, "kerncap.json"), "utf8"));
  return readWhatRuns(dir, m.kernel?.frontend ?? "", true)!.digest;
}

/**
 * kerncap's own CUDA build.sh (templates/cuda/build.sh.hbs) for src/kernel.cu with plain flags, as
 * a capture renders it: a received capture's build.sh that plain --trust runs (a hand-written one
 * needs --trust=DIGEST). It runs $NVCC when set.
 */
export function stockBuildSh(flags = "-O2", more: Record<string, unknown> = {}): string {
  const text = CUDA_TEMPLATES.find((t) => t.path === "build.sh.hbs")!.text;
  return templateEngine().compile(text, { strict: true, noEscape: true })({
    kernelName: "k",
    flagsFrom: "defaults",
    overlay: false,
    arch: "sm_90",
    sliced: false,
    rdc: false,
    flags,
    tuSource: "kernel.cu",
    compiledSource: "kernel.cu",
    sliceKind: "none",
    ...more,
  });
}

/**
 * What a capture library writes into KERNCAP_OUT for that capture (docs/raw-capture.md):
 * kernel/, memory/, processes/0 (the library numbers each process of the job there,
 * c/common/kc_process.c), and raw.json when `rawJson` (a library writes it last); `extra.process`:
 * the capturing process's identity (raw.json `process`, c/common/kc_process.h).
 * @returns the raw capture object.
 */
export function writeRawCapture(tmp: string, rawJson = false, extra: { process?: Record<string, unknown> } = {}) {
  mkdirSync(join(tmp, "kernel"), { recursive: true });
  mkdirSync(join(tmp, "memory"), { recursive: true });
  mkdirSync(join(tmp, "processes"), { recursive: true });
  writeFileSync(join(tmp, "processes/0"), "");
  const params = new Uint8Array(12);
  new DataView(params.buffer).setBigUint64(0, 0x7f0000000000n, true);
  new DataView(params.buffer).setInt32(8, 1024, true);
  writeFileSync(join(tmp, "kernel/params.bin"), params);
  writeFileSync(join(tmp, "kernel/module.cubin"), new Uint8Array([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0x41]));
  const before = new Uint8Array(65536 + 8192);
  for (let i = 0; i < 4096; i++) before[i] = i & 0xff;
  for (let i = 0; i < 8192; i++) before[65536 + i] = (i * 7) & 0xff;
  const after = new Uint8Array(65536 + 8192);
  for (let i = 0; i < 4096; i++) after[i] = (i * 3) & 0xff;
  writeFileSync(join(tmp, "memory/before.bin"), before);
  writeFileSync(join(tmp, "memory/after.bin"), after);
  const raw = {
    raw_version: 2 as const,
    library: "test-fixture",
    frontend: "cuda" as const,
    kernel: { name: "_Z5scalePfi", demangled: "scale(float*, int)", match_index: 1, launch_index: 5 },
    device: { vendor: "nvidia" as const, name: "NVIDIA H200", arch: "sm_90", driver_version: 13000, ordinal: 0 },
    launch: {
      api: "cuLaunchKernel",
      grid: [4, 1, 1] as [number, number, number],
      block: [256, 1, 1] as [number, number, number],
      shared_mem_bytes: 0,
      cluster: [1, 1, 1] as [number, number, number],
      attributes: [],
    },
    function_attributes: [{ id: 8, name: "MAX_DYNAMIC_SHARED_SIZE_BYTES", value: 0 }],
    params: {
      file: "kernel/params.bin",
      size: 12,
      layout_source: "test",
      layout: [
        { index: 0, offset: 0, size: 8 },
        { index: 1, offset: 8, size: 4 },
      ],
    },
    module: { file: "kernel/module.cubin", kind: "cubin" as const, size: 8, source: "test" },
    ...chunkedRanges(tmp, [
      { va: "0x7f0000000000", size: 4096, kind: "device", offset: 0, changed: true },
      { va: "0x7f0000010000", size: 8192, kind: "device", offset: 65536, changed: false },
    ]),
    timing: { sync_us: 1, before_us: 2, after_us: 3, app_launch_us: 4.5, app_to_capture_s: 0.1 },
    hsa: null,
    ...(extra.process ? { process: extra.process as never } : {}),
  };
  if (rawJson) writeFileSync(join(tmp, "raw.json"), JSON.stringify(raw));
  return raw;
}

/**
 * The ReplaySession the watch children (./watch-child.ts, ./watch-cuda-child.ts) give
 * watchReproducer: nothing restored, no GPU; `run` is the test's (its verdict from the rebuilt
 * module), `reset` says what it put back (undefined: nothing).
 */
export function noGpuSession(dir: string, manifest: Manifest, run: ReplaySession["run"], reset: ReplaySession["reset"] = () => undefined): ReplaySession {
  return {
    dir,
    manifest,
    opened: {
      restore: { bytes: 0, storedBytes: 0, seconds: 0, gbPerS: 0, hostRegistered: false },
      reserve: { spans: 0, bytes: 0, seconds: 0 },
      verifySeconds: 0,
    },
    lastReset: null,
    run,
    // the watch compares nothing: the candidate's run alone
    runCompared: async (_baseline, candidate) => ({ baseline: null, candidate: await run(candidate), compare: null }),
    runSet: async (list) => Promise.all(list.map(async (o) => ({ result: await run(o), times: [] }))),
    reset,
    isContextLost: () => false,
    close() {},
  };
}

/** A replay result of a run that needs no GPU: match, or mismatch in one 4 KiB device region. */
export function noGpuResult(kernel: string, bad: boolean): ReplayResult {
  const mm = { va: "0x7f0000000000", kind: "device", size: 4096, changedInApp: true, firstDiffOffset: 8, bytesDiffering: 4088 };
  return {
    kernel,
    verdict: bad ? "mismatch" : "match",
    mismatches: bad ? [mm] : [],
    numerics: { verdict: bad ? "mismatch" : "bit-exact" },
    determinism: { nondeterministic: false },
    timing: { medianUs: 3.5 },
  } as unknown as ReplayResult;
}

/** stderr and stdout written during fn, and fn's result or error. */
export async function output<T>(fn: () => T | Promise<T>): Promise<{ err: string; out: string; value?: T; error?: unknown }> {
  let err = "";
  let out = "";
  const [e0, o0] = [process.stderr.write.bind(process.stderr), process.stdout.write.bind(process.stdout)];
  const grab = (add: (s: string) => void) =>
    ((s: string | Uint8Array) => (add(typeof s === "string" ? s : new TextDecoder().decode(s)), true)) as typeof process.stderr.write;
  process.stderr.write = grab((s) => (err += s));
  process.stdout.write = grab((s) => (out += s));
  let value: T | undefined;
  let error: unknown;
  try {
    value = await fn();
  } catch (e) {
    error = e;
  } finally {
    process.stderr.write = e0;
    process.stdout.write = o0;
  }
  return { err, out, value, error };
}

/**
 * A check worker's outcome of a capture that matched on an H200, as the worker writes one: 20
 * samples spread ±2% around 10 µs, their median the record's medianUs (the readers check that).
 */
export function fakeOutcome(t: { id: string; path: string }, o: Partial<Outcome> = {}): Outcome {
  const H200 = { name: "NVIDIA H200", arch: "sm_90" };
  return {
    id: t.id,
    path: t.path,
    kernel: "scale(float*, int)",
    outcome: "done",
    verdict: "match",
    numerics: "bit-exact",
    reason: null,
    code: null,
    note: null,
    captured: H200,
    device: H200,
    rebuild: null,
    timing: { medianUs: 10, samplesUs: Array.from({ length: 20 }, (_, i) => 10 * (0.98 + (0.04 * i) / 19)) },
    seconds: 0.01,
    replaySeconds: 0.005,
    at: new Date().toISOString(),
    ...o,
  };
}

/** runCheck options of a test: 20 timed launches, verified, no rebuild, one GPU slot, no live lines; `open` the fake workers. */
export function checkOptions(paths: string[], results: string, open: CheckOptions["open"], o: Partial<CheckOptions> = {}): CheckOptions {
  const settings = { iters: 20, verify: true, rebuild: false, force: false, trust: false, tolerance: {} };
  return { paths, settings, results, resume: false, slowerPct: 10, gpus: [null], live: false, open, ...o };
}

/** This process's results key (src/format/record-auth.ts resultsKey: the tests' state folder's, or KERNCAP_RESULTS_KEY's). */
export function testResultsKey(): ResultsKey {
  const k = resultsKey();
  if (typeof k === "string") throw new Error(k);
  return k;
}

/** One line of a results file as kerncap writes it (src/check/results.ts RecordLog.append): `rec` with its schema and authenticator, and its newline. */
export function recordLine(name: "check-record" | "eval-record", rec: object): string {
  const schema = documentId(name);
  return `${JSON.stringify({ schema, ...sealRecord(schema, rec, testResultsKey()) })}\n`;
}

/**
 * `line` (a record's JSON text, without newline, holding what JSON.stringify cannot write, such as
 * 1e999) with the authenticator of what it parses to: a record that passes the authenticator's
 * check and meets the consistency checks behind it.
 */
export function sealedText(line: string): string {
  const raw = JSON.parse(line);
  return `${line.trimEnd().replace(/}$/, `,"auth":${JSON.stringify(authenticatorOf(raw.schema, raw, testResultsKey()))}}`)}`;
}

/** fn's result with KERNCAP_RESULTS_KEY set to `hex` (unset: undefined) in process.env, restored after. */
export async function withResultsKey<T>(hex: string | undefined, fn: () => T | Promise<T>): Promise<T> {
  const saved = process.env.KERNCAP_RESULTS_KEY;
  if (hex === undefined) delete process.env.KERNCAP_RESULTS_KEY;
  else process.env.KERNCAP_RESULTS_KEY = hex;
  try {
    return await fn();
  } finally {
    if (saved === undefined) delete process.env.KERNCAP_RESULTS_KEY;
    else process.env.KERNCAP_RESULTS_KEY = saved;
  }
}

/** The KerncapError fn throws (or rejects with); any other error is thrown on, and a return fails the test. */
export async function kerncapErrorOf(fn: () => unknown): Promise<KerncapError> {
  try {
    await fn();
  } catch (e) {
    if (isKerncapError(e)) return e;
    throw e;
  }
  throw new Error("did not throw");
}

/** The error fn throws (or rejects with), undefined when it returns. */
export async function thrownBy(fn: () => unknown): Promise<KerncapErrorLike | undefined> {
  try {
    await fn();
  } catch (e) {
    return e as KerncapErrorLike;
  }
  return undefined;
}

/** What the tests read of a thrown KerncapError. */
export interface KerncapErrorLike {
  code: string;
  message: string;
  hint?: string;
  exitCode: number;
}

/**
 * In the calling describe block, confined builds run without the sandbox (KERNCAP_SANDBOX=0, for
 * this process and the kerncap children it starts): for tests whose build.sh writes a marker
 * outside the capture (its pids, that it ran), which the sandbox forbids (src/frontends/sandbox.ts;
 * test/cpu/frontends/sandbox.test.ts tests the sandbox itself).
 */
export function sandboxOffForMarkers(): void {
  let saved: string | undefined;
  beforeAll(() => {
    saved = process.env.KERNCAP_SANDBOX;
    process.env.KERNCAP_SANDBOX = "0";
  });
  afterAll(() => {
    if (saved === undefined) delete process.env.KERNCAP_SANDBOX;
    else process.env.KERNCAP_SANDBOX = saved;
  });
}

/** Values planted in a capture's manifest that no export or redacted archive may hold. */
export const PLANTED = ["jdoe", "gpu-node-0421", "PROJX123", "CLASSIFIED_run42", "4a04f172", "0000:3b:00.0", "secretapp"];

/** Fill capture `cap`'s manifest as a lab's capture records it (process, host, job environment, absolute project paths), with PLANTED values. */
export function plantPrivate(cap: string): void {
  const p = join(cap, "kerncap.json");
  const m = JSON.parse(readFileSync(p, "utf8"));
  m.command = ["/home/jdoe/secretapp/bin/solver", "--deck", "/lustre/PROJX123/CLASSIFIED_run42.h5"];
  m.host = { name: "gpu-node-0421.hpc.example.gov", machineId: "3d1219c7c4c5404aaa1f6d2a48adfda4" };
  m.device = { ...m.device, name: "NVIDIA H200", driverVersion: 12080 };
  m.process = {
    pid: 4242,
    ppid: 4200,
    number: 0,
    hostname: "gpu-node-0421.hpc.example.gov",
    cmdline: m.command,
    jobEnv: { SLURM_JOB_USER: "jdoe", SLURM_JOB_ACCOUNT: "PROJX123", SLURM_SUBMIT_DIR: "/home/jdoe/secretapp", SLURM_PROCID: "0" },
    rank: 0,
    rankVariable: "SLURM_PROCID",
    selection: { by: "any", admitted: true },
    visibleDevices: { CUDA_VISIBLE_DEVICES: "GPU-4a04f172-a58a-0fc9-4255-5e606d46062e" },
    deviceUuid: "GPU-4a04f172-a58a-0fc9-4255-5e606d46062e",
    pciBusId: "0000:3b:00.0",
  };
  const c = m.source.cuda;
  m.source.cuda = {
    ...c,
    tu: "/home/jdoe/secretapp/saxpy.cu",
    definition: "/home/jdoe/secretapp/saxpy.cu",
    projectRoot: "/home/jdoe/secretapp",
    compileCommands: "/home/jdoe/secretapp/build/compile_commands.json",
    referencedOutsideRoot: ["/home/jdoe/otherlib/x.h"],
    flags: [...c.flags, "-I/home/jdoe/secretapp/include", "-DLAB_FLAG=1"],
  };
  writeFileSync(p, JSON.stringify(m, null, 2));
  // the capture's README quotes the project's folder and TU as the capture wrote them
  const readme = join(cap, "README.md");
  writeFileSync(readme, readFileSync(readme, "utf8").replaceAll("demo/app", "/home/jdoe/secretapp"));
}

/** The files under `dir` (relative) holding any of `needles`, with the needle found. */
export function grepTree(dir: string, needles: string[]): string[] {
  const hits: string[] = [];
  for (const e of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!e.isFile()) continue;
    const text = readFileSync(join(e.parentPath, e.name)).toString("latin1");
    for (const n of needles) if (text.includes(n)) hits.push(`${join(e.parentPath, e.name).slice(dir.length + 1)}: ${n}`);
  }
  return hits;
}

/**
 * The keys of `doc` (a JSON document) that its JSON Schema does not list, as paths (`buildSteps.parseBaseMs`): a
 * harness that validates with additionalProperties false would refuse them. Walks objects through `properties`
 * (and anyOf/oneOf alternatives: a key any alternative lists is listed) and arrays through `items`; a schema
 * whose additionalProperties is a schema lists every key.
 */
export function unlistedKeys(schema: any, doc: unknown, at = ""): string[] {
  if (!schema || typeof schema !== "object" || doc === null || typeof doc !== "object") return [];
  const alts: any[] = [schema, ...(schema.anyOf ?? []), ...(schema.oneOf ?? []), ...(schema.allOf ?? [])].filter((s) => s && typeof s === "object");
  if (Array.isArray(doc)) {
    const items = alts.find((s) => s.items)?.items;
    return items ? doc.flatMap((x, i) => unlistedKeys(items, x, `${at}[${i}]`)) : [];
  }
  if (alts.some((s) => s.additionalProperties && typeof s.additionalProperties === "object")) return [];
  const out: string[] = [];
  for (const [k, x] of Object.entries(doc as Record<string, unknown>)) {
    const sub = alts.map((s) => s.properties?.[k]).filter(Boolean);
    const path = at ? `${at}.${k}` : k;
    if (!sub.length) out.push(path);
    else {
      const deeper = sub.map((s) => unlistedKeys(s, x, path));
      out.push(...(deeper.find((d) => d.length === 0) ?? deeper[0]!));
    }
  }
  return out;
}

/** stderr (and the log lines) written during `fn`, and `fn`'s result: what a verb said beside what it returned. */
export async function stderrOf<T>(fn: () => Promise<T> | T): Promise<{ err: string; value: T }> {
  let err = "";
  const orig = process.stderr.write.bind(process.stderr);
  process.stderr.write = ((s: string | Uint8Array) => ((err += typeof s === "string" ? s : new TextDecoder().decode(s)), true)) as typeof process.stderr.write;
  try {
    const value = await fn();
    return { err, value };
  } finally {
    process.stderr.write = orig;
  }
}

/** A Triton stand-in on a PYTHONPATH of its own (version 3.0.0): repro.py imports these before it imports the kernel file. @returns the site folder */
export function fakeTritonSite(): string {
  const site = tempDir("kerncap-fake-triton-");
  const pkg = join(site, "triton");
  for (const d of ["", "backends", "compiler"]) mkdirSync(join(pkg, d), { recursive: true });
  writeFileSync(join(pkg, "__init__.py"), "__version__ = '3.0.0'\nfrom . import language, backends, compiler\n");
  writeFileSync(join(pkg, "language.py"), "");
  writeFileSync(join(pkg, "backends/__init__.py"), "from . import compiler\n");
  writeFileSync(join(pkg, "backends/compiler.py"), "class GPUTarget:\n    pass\n");
  writeFileSync(join(pkg, "compiler/__init__.py"), "class ASTSource:\n    pass\nfrom . import compiler\n");
  writeFileSync(join(pkg, "compiler/compiler.py"), "def make_backend(t):\n    pass\n");
  return site;
}
