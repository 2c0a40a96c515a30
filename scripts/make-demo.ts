#!/usr/bin/env bun
/**
 * Regenerate demo/capture/, the capture that `kerncap demo` writes (src/capture/demo.ts embeds
 * it): the saxpy kernel of demo/app/saxpy.cu, compiled here with nvcc into a fatbin (sm_90 machine
 * code, compute_80 PTX: it replays on any GPU from sm_80), its
 * memory as the application leaves it at the launch (before), and the kernel's result computed on
 * the CPU by saxpyReference (after), written through the capture format's own writer
 * (finalizeCapture, of a raw_version 2 capture hashed on the CPU: test/raw-fixture.ts) with the CUDA reproducer
 * rendered from the app's source, as `kerncap run --source-root` would.
 *
 * Nothing here ran on a GPU, and the manifest says so (device.name, tool.library, module.source).
 * The inputs are chosen so that a·x + y is exact in fp32 (fused or not): a GPU replay of the demo
 * matches these bytes.
 *
 * Usage: node_modules/.bin/bun scripts/make-demo.ts   (needs nvcc and c++filt)
 */
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join, relative, resolve } from "node:path";
import { finalizeCapture } from "../src/capture/finalize.ts";
import { cubinKernels, cubinParamLayout, pickCubin } from "../src/codeobj/index.ts";
import { findNvcc } from "../src/frontends/cuda/nvcc.ts";
import { captureEnrichment } from "../src/frontends/index.ts";
import type { Manifest } from "../src/format/manifest.ts";
import { chunkedRanges } from "../test/raw-fixture.ts";

const ROOT = resolve(import.meta.dir, "..");
export const DEMO_APP = join(ROOT, "demo/app");
export const DEMO_CAPTURE = join(ROOT, "demo/capture");
/** How the committed files name the app's folder (instead of this checkout's absolute path). */
const APP_SHOWN = "demo/app";

/** Where each allocation of the app lives: VAs below the host's mmap area (libraries, Bun's heap sit near 0x7f…), 2 MiB apart. */
const VA = { params: 0x6000_0000_0000n, x: 0x6000_0020_0000n, y: 0x6000_0040_0000n } as const;
const N = 4000;
const BLOCK = 256;
/** sizeof(Saxpy) on x86-64 and sm_90: float a (+4 padding), Vec x {float*, int, +4}, Vec y. */
const PARAMS_BYTES = 40;

/** The app's inputs (saxpy.cu x_at, y_at, a): few significant bits, so fp32 a·x + y is exact. */
const xAt = (i: number) => (((i * 37) % 101) - 50) / 8;
const yAt = (i: number) => ((i * 11) % 53) / 4;
const A = 1.5;

/** One device allocation of the demo: its VA, its bytes at the launch. */
export interface DemoRegion {
  va: bigint;
  bytes: Uint8Array;
}

/** The app's device memory at the launch (saxpy.cu main, up to the kernel's launch). */
export function demoBefore(): DemoRegion[] {
  const p = new DataView(new ArrayBuffer(PARAMS_BYTES));
  p.setFloat32(0, A, true);
  p.setBigUint64(8, VA.x, true);
  p.setInt32(16, N, true);
  p.setBigUint64(24, VA.y, true);
  p.setInt32(32, N, true);
  const x = new Float32Array(N).map((_, i) => xAt(i));
  const y = new Float32Array(N).map((_, i) => yAt(i));
  return [
    { va: VA.params, bytes: new Uint8Array(p.buffer) },
    { va: VA.x, bytes: new Uint8Array(x.buffer) },
    { va: VA.y, bytes: new Uint8Array(y.buffer) },
  ];
}

/**
 * The saxpy kernel on the CPU, on a copy of `regions` (the memory it finds at the launch) for
 * `threads` threads of grid × block: it reads the Saxpy block that `paramsVa` points to and
 * follows its pointers into the regions, as the kernel does. fp32 throughout (Math.fround).
 * @returns the regions after the launch (the same VAs and sizes).
 * @throws Error when a pointer leads outside every region (the kernel would fault).
 */
export function saxpyReference(regions: DemoRegion[], paramsVa: bigint, threads: number): DemoRegion[] {
  const out = regions.map((r) => ({ va: r.va, bytes: new Uint8Array(r.bytes) }));
  const at = (va: bigint, size: number): DataView => {
    const r = out.find((x) => va >= x.va && va + BigInt(size) <= x.va + BigInt(x.bytes.length));
    if (!r) throw new Error(`saxpy reads 0x${va.toString(16)} (${size} bytes), outside every region: the kernel would fault`);
    return new DataView(r.bytes.buffer, Number(va - r.va), size);
  };
  const p = at(paramsVa, PARAMS_BYTES);
  const a = p.getFloat32(0, true);
  const xData = p.getBigUint64(8, true);
  const yData = p.getBigUint64(24, true);
  const yN = p.getInt32(32, true);
  for (let i = 0; i < threads; i++) {
    if (i >= yN) continue;
    const x = at(xData + BigInt(i * 4), 4);
    const y = at(yData + BigInt(i * 4), 4);
    y.setFloat32(0, Math.fround(Math.fround(a * x.getFloat32(0, true)) + y.getFloat32(0, true)), true);
  }
  return out;
}

function demangle(name: string): string {
  const p = Bun.spawnSync(["c++filt", name]);
  if (p.exitCode !== 0) throw new Error(`c++filt ${name} failed: ${p.stderr.toString()}`);
  return p.stdout.toString().trim();
}

/** Every text file under dir, with `from` replaced by `to` (the checkout's path by APP_SHOWN). */
function replaceInTextFiles(dir: string, from: string, to: string): void {
  for (const e of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!e.isFile()) continue;
    const p = join(e.parentPath, e.name);
    const b = readFileSync(p);
    if (b.includes(0)) continue;
    const t = b.toString("utf8");
    if (t.includes(from)) writeFileSync(p, t.split(from).join(to), { mode: statSync(p).mode });
  }
}

/** Write demo/capture/ anew. @returns the manifest written. */
export async function makeDemo(out = DEMO_CAPTURE): Promise<Manifest> {
  const tmp = `${out}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(join(tmp, "kernel"), { recursive: true });
  mkdirSync(join(tmp, "memory"), { recursive: true });
  const nvcc = findNvcc();
  const arch = "sm_90";
  // a fatbin as nvcc embeds one in an application: sm_90 machine code and compute_80 PTX, which
  // the driver JIT-compiles on any GPU from sm_80 (kerncap replay and an export's ./repro say so)
  const gencode = [`arch=compute_90,code=${arch}`, "arch=compute_80,code=compute_80"];
  const build = Bun.spawnSync(
    [nvcc, "-fatbin", ...gencode.flatMap((g) => ["-gencode", g]), "-o", join(tmp, "kernel/module.fatbin"), join(DEMO_APP, "saxpy.cu")],
    { stderr: "pipe" },
  );
  if (build.exitCode !== 0) throw new Error(`nvcc failed: ${build.stderr.toString()}`);
  const fatbin = new Uint8Array(readFileSync(join(tmp, "kernel/module.fatbin")));
  const cubin = pickCubin(fatbin, arch).cubin;
  const name = cubinKernels(cubin).find((k) => k.startsWith("_Z5saxpy"));
  if (!name) throw new Error(`the cubin defines no saxpy kernel: ${cubinKernels(cubin).join(", ")}`);
  const layout = cubinParamLayout(cubin, name);

  const grid = Math.ceil(N / BLOCK);
  const before = demoBefore();
  const after = saxpyReference(before, VA.params, grid * BLOCK);
  // each region whole at a page-aligned offset in both images (the manifest's least alignment: the files stay small)
  let off = 0;
  const placed = before.map((r, i) => {
    const o = off;
    off += Math.ceil(r.bytes.length / 4096) * 4096;
    const changed = !Buffer.from(r.bytes).equals(Buffer.from(after[i]!.bytes));
    return { r, o, changed, afterBytes: after[i]!.bytes };
  });
  const bImg = new Uint8Array(off);
  const aImg = new Uint8Array(off);
  for (const p of placed) {
    bImg.set(p.r.bytes, p.o);
    if (p.changed) aImg.set(p.afterBytes, p.o);
  }
  writeFileSync(join(tmp, "memory/before.bin"), bImg);
  writeFileSync(join(tmp, "memory/after.bin"), aImg);
  const params = new DataView(new ArrayBuffer(8));
  params.setBigUint64(0, VA.params, true);
  writeFileSync(join(tmp, "kernel/params.bin"), new Uint8Array(params.buffer));

  const generated = "generated on the CPU by scripts/make-demo.ts, not captured on a GPU";
  const ranges = chunkedRanges(
    tmp,
    placed.map((p) => ({ va: `0x${p.r.va.toString(16)}`, size: p.r.bytes.length, kind: "device" as const, offset: p.o, changed: p.changed })),
  );
  const raw = {
    raw_version: 2 as const,
    library: `none: ${generated}; the after state is a CPU reference of the kernel`,
    frontend: "cuda" as const,
    kernel: { name, demangled: demangle(name), match_index: 0, launch_index: 0 },
    device: { vendor: "nvidia" as const, name: `no GPU: the demo, ${generated}`, arch, driver_version: 0, ordinal: 0 },
    launch: {
      api: "cuLaunchKernel",
      grid: [grid, 1, 1] as [number, number, number],
      block: [BLOCK, 1, 1] as [number, number, number],
      shared_mem_bytes: 0,
      cluster: [1, 1, 1] as [number, number, number],
      attributes: [],
    },
    function_attributes: [],
    params: { file: "kernel/params.bin", size: 8, layout_source: "cubin .nv.info (EIATTR_KPARAM_INFO)", layout },
    module: {
      file: "kernel/module.fatbin",
      kind: "fatbin" as const,
      size: fatbin.length,
      source: `nvcc -fatbin ${gencode.map((g) => `-gencode ${g}`).join(" ")} ${APP_SHOWN}/saxpy.cu (scripts/make-demo.ts)`,
    },
    ...ranges,
    memory: { ...ranges.memory, align: 4096, gpu_scan_unavailable: generated },
    timing: {},
    hsa: null,
  };
  const command = ["./saxpy"];
  const enrich = captureEnrichment({ tmpDir: tmp, raw, pattern: "saxpy", command }, { cuda: { sourceRoot: DEMO_APP, slice: true, overlay: false } });
  return finalizeCapture(raw, {
    tmpDir: tmp,
    finalDir: out,
    force: true,
    command,
    match: "saxpy",
    beforeRename: async (d, m, final) => {
      await enrich.beforeRename(d, m, final);
      if ((m.source?.cuda as { error?: string } | undefined)?.error) throw new Error(`no reproducer: ${(m.source!.cuda as { error: string }).error}`);
      // the committed capture names the app's folder relative to the repository, not this checkout
      m.source = JSON.parse(JSON.stringify(m.source).split(DEMO_APP).join(APP_SHOWN));
      replaceInTextFiles(d, DEMO_APP, APP_SHOWN);
    },
  });
}

if (import.meta.main) {
  const m = await makeDemo();
  // the demo names no host here: `kerncap demo` writes the host of the machine it runs on (src/capture/demo.ts)
  const mf = join(DEMO_CAPTURE, "kerncap.json");
  const { host: _, ...rest } = JSON.parse(readFileSync(mf, "utf8"));
  writeFileSync(mf, JSON.stringify(rest, null, 2) + "\n");
  console.log(
    `make-demo: ${relative(process.cwd(), DEMO_CAPTURE)}: ${m.kernel.demangled}, ${m.regions.length} regions, ${m.memory.beforeBytes} bytes live, ${m.memory.afterBytes} changed`,
  );
}
