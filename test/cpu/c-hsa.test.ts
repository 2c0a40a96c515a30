/**
 * The HSA capture library (c/hsa/kerncap_hsa.c), without an AMD GPU:
 * 1. scripts/build-hsa.sh compiles it against /usr/include/hsa; `nm -D` shows OnLoad and OnUnload
 *    as its only exports.
 * 2. fake_hsa_runtime.c hands it a stub HSA API table (host memory as "device" memory, a queue
 *    that runs a C function per dispatch) and plays an application; the raw capture it writes is
 *    checked against docs/raw-capture.md. This exercises the table patching, queue interception,
 *    name resolution, matching and before/after rules, NOT the real ROCr runtime or a GPU.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { finalizeCapture } from "../../src/capture/finalize.ts";
import { parseRaw } from "../../src/capture/raw.ts";
import { kc64 } from "../../src/format/kc64.ts";
import { buildFakeHsaApp } from "../hip-fixture.ts";

const ROOT = resolve(import.meta.dir, "../..");
const LIB = join(ROOT, "c/build/libkerncap_hsa.so");
const INC = process.env.HSA_INCLUDE ?? "/usr/include"; // as scripts/build-hsa.sh reads it
const haveHeaders = existsSync(`${INC}/hsa/hsa.h`) && existsSync(`${INC}/hsa/hsa_ext_amd.h`);
const haveGcc = !!Bun.which("gcc") && !!Bun.which("nm");
const SKIP = !haveHeaders || !haveGcc;
const REASON = !haveHeaders ? "(skipped: /usr/include/hsa missing; run scripts/install-rocm.sh)" : !haveGcc ? "(skipped: gcc/nm missing)" : "";

let tmp = "";
beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), "kerncap-hsa-lib-"));
});
afterAll(() => tmp && rmSync(tmp, { recursive: true, force: true }));

describe.skipIf(SKIP)(`libkerncap_hsa.so ${REASON}`, () => {
  test("builds with scripts/build-hsa.sh; exports only OnLoad and OnUnload", () => {
    const b = Bun.spawnSync(["bash", join(ROOT, "scripts/build-hsa.sh")]);
    expect(b.stderr.toString()).toBe("");
    expect(b.exitCode).toBe(0);
    expect(existsSync(LIB)).toBe(true);
    const nm = Bun.spawnSync(["nm", "-D", "--defined-only", LIB]).stdout.toString();
    const exported = nm
      .split("\n")
      .map((l) => l.trim().split(/\s+/))
      .filter((f) => f.length === 3 && /[TDBR]/.test(f[1]!))
      .map((f) => f[2]);
    expect(exported.sort()).toEqual(["OnLoad", "OnUnload"]);
    // No ROCm library is linked: the runtime's entries come from the table OnLoad receives.
    expect(Bun.spawnSync(["nm", "-D", "--undefined-only", LIB]).stdout.toString()).not.toContain("hsa_");
  }, 60_000); // gcc -O2 -g over the library and c/common on a loaded machine

  test("against a stub HSA runtime: writes the raw capture of the 2nd matching dispatch", async () => {
    if (!existsSync(LIB)) Bun.spawnSync(["bash", join(ROOT, "scripts/build-hsa.sh")]);
    const exe = join(tmp, "fake_hsa_runtime");
    expect(buildFakeHsaApp(exe, INC)).toBe("");
    const co = join(tmp, "module.co");
    Bun.write(co, new Uint8Array([0x7f, 0x45, 0x4c, 0x46, ...new TextEncoder().encode("_Z5scalePffi other")]));
    const out = join(tmp, "cap");
    mkdirSync(out);
    const r = Bun.spawnSync([exe, co], {
      env: { ...process.env, HSA_TOOLS_LIB: LIB, KERNCAP_OUT: out, KERNCAP_MODE: "capture", KERNCAP_KERNEL: "^scale\\(", KERNCAP_DISPATCH: "1" },
      timeout: 30_000,
    });
    expect(r.exitCode).toBe(0);
    expect(r.stdout.toString()).toContain("data[3]=24"); // each dispatch ran exactly once
    expect(existsSync(join(out, `error.${r.pid}.txt`))).toBe(false);

    const raw = JSON.parse(readFileSync(join(out, "raw.json"), "utf8"));
    expect(raw.frontend).toBe("hip");
    expect(raw.kernel).toEqual({ name: "_Z5scalePffi", demangled: "scale(float*, float, int)", match_index: 1, launch_index: 3 });
    expect(raw.device).toMatchObject({ vendor: "amd", arch: "gfx90a", name: "Fake MI210" });
    expect(raw.launch).toMatchObject({ grid: [3072, 1, 1], block: [256, 1, 1], shared_mem_bytes: 512 });
    expect(raw.hsa).toMatchObject({ kernel_object: "0x1001", group_segment_size: 512 });
    expect(raw.process).toMatchObject({ pid: r.pid, number: 0, selection: { by: "any", admitted: true } }); // c/common/kc_process.h
    expect(JSON.parse(readFileSync(join(out, "claim"), "utf8")).pid).toBe(r.pid);
    expect(raw.params.size).toBe(16);
    expect(statSync(join(out, raw.params.file)).size).toBe(16);
    expect(raw.module).toMatchObject({ file: "kernel/module.hsaco", kind: "hsaco" });
    // raw_version 2, as the CUDA library writes it (c/common/kc_raw.c): 1 MiB chunks, non-zero chunks
    // stored before, changed chunks after, each range's extents at 64 KiB-aligned offsets
    expect(raw.raw_version).toBe(2);
    expect(raw.memory).toMatchObject({
      chunk_bytes: 1 << 20,
      hash: "kc64/1",
      align: 65536,
      live_bytes: 24016,
      stored_before_bytes: 12016,
      stored_after_bytes: 12000,
      hashed_on_gpu: false,
    });
    expect(raw.memory.gpu_scan_unavailable).toContain("CPU");
    type Range = { changed: boolean; size: number; hashed_on: string; before: { extents: number[][]; hashes: string }; after: { extents: number[][] } };
    expect(raw.regions.map((g: Range) => [g.changed, g.size, g.hashed_on, g.before.extents, g.after.extents])).toEqual([
      [true, 12000, "cpu", [[0, 1, 0]], [[0, 1, 0]]],
      [false, 12000, "cpu", [], []], // all zero: nothing stored
      [false, 16, "cpu", [[0, 1, 65536]], []],
    ]);
    // the kc64 the library computed is the one kerncap computes over the stored bytes (src/format/kc64.ts)
    const beforeBin = readFileSync(join(out, "memory/before.bin"));
    expect(raw.regions[0].before.hashes).toBe(kc64(beforeBin.subarray(0, 12000)).hex);
    // before = state after the first scale dispatch (k*2); after = k*4, only for the changed region.
    const before = new Float32Array(readFileSync(join(out, "memory/before.bin")).buffer.slice(0, 16));
    const after = new Float32Array(readFileSync(join(out, "memory/after.bin")).buffer.slice(0, 16));
    expect([...before]).toEqual([0, 2, 4, 6]);
    expect([...after]).toEqual([0, 4, 8, 12]);
    expect(statSync(join(out, "memory/after.bin")).size).toBe(65536); // one 12000-byte chunk, the file ends aligned

    const kernels = JSON.parse(readFileSync(join(out, `kernels.${r.pid}.json`), "utf8")).kernels;
    expect(kernels.map((k: { name: string; count: number }) => [k.name, k.count])).toEqual([
      ["other", 3],
      ["_Z5scalePffi", 3],
    ]);

    // the library's real output fits the raw schema (src/capture/raw.ts) and finalizes into a manifest
    expect(parseRaw(raw).raw_version).toBe(2);
    expect(raw.timing.app_launch_us).toBeGreaterThanOrEqual(0);
    const m = await finalizeCapture(raw, { tmpDir: out, finalDir: join(tmp, "cap-final"), force: false, command: ["fake"], match: "scale" });
    expect(m.regions.map((g) => [g.changed, g.size, g.hashedOn, g.before.extents.length])).toEqual([
      [true, 12000, "cpu", 1],
      [false, 12000, "cpu", 0],
      [false, 16, "cpu", 1],
    ]);
    expect(m.memory.hash).toBe("kc64/1");
  });

  test("list mode counts dispatches and writes no capture", () => {
    const exe = join(tmp, "fake_hsa_runtime");
    const out = join(tmp, "list");
    mkdirSync(out);
    const r = Bun.spawnSync([exe, join(tmp, "module.co")], { env: { ...process.env, HSA_TOOLS_LIB: LIB, KERNCAP_OUT: out, KERNCAP_MODE: "list" } });
    expect(r.exitCode).toBe(0);
    expect(existsSync(join(out, "raw.json"))).toBe(false);
    expect(JSON.parse(readFileSync(join(out, `kernels.${r.pid}.json`), "utf8")).kernels).toHaveLength(2);
    expect(existsSync(join(out, "claim"))).toBe(false);
  });
});

test("build-hsa.sh exits 0 with a message and builds nothing when the headers are missing", () => {
  const r = Bun.spawnSync(["bash", join(ROOT, "scripts/build-hsa.sh")], { env: { ...process.env, HSA_INCLUDE: "/nonexistent" } });
  expect(r.exitCode).toBe(0);
  expect(r.stdout.toString()).toContain("skipping");
});
