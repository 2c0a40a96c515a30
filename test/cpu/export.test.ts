/**
 * `kerncap export` on a machine without a GPU: the exported folder is rendered from stored captures
 * (the demo capture, a synthetic Triton capture with small chunks), its C program is compiled
 * against the CUDA headers (every driver entry point it calls must be declared in cuda.h) and run
 * against a fake libcuda (test/apps/fake_libcuda.c: device memory is host memory at the captured
 * VAs; the "kernel" applies the writes a file lists), and the Triton script's reconstruction
 * (kcdata.py, standard library only) is run with python3.
 */
import { beforeAll, describe, expect, spyOn, test } from "bun:test";
import {
  chmodSync,
  closeSync,
  copyFileSync,
  cpSync,
  existsSync,
  linkSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
  writeSync,
  truncateSync,
} from "node:fs";
import { join } from "node:path";
import * as v from "valibot";
import { writeDemo } from "../../src/capture/demo.ts";
import { finalizeCapture } from "../../src/capture/finalize.ts";
import { isKerncapError } from "../../src/errors.ts";
import { exportCapture, EXPORT_FILE } from "../../src/export/export.ts";
import { buildReproducer } from "../../src/frontends/build.ts";
import { captureHeader, cString, exportPlan, storedPointer } from "../../src/export/plan.ts";
import { readManifest, sha256File, verifyFiles } from "../../src/format/capture-dir.ts";
import { runs } from "../../src/format/chunks.ts";
import { packCapture, unpackArchive } from "../../src/format/archive.ts";
import { DOCUMENTS, jsonDocument } from "../../src/format/documents.ts";
import type { Manifest } from "../../src/format/manifest.ts";
import { RECEIVED_MARK } from "../../src/format/file-names.ts";
import { kc64 } from "../../src/format/kc64.ts";
import { acceptJudging, readJudging, readJudgingFile, writeJudging } from "../../src/replay/judge-settings.ts";
import { chunkedRanges } from "../raw-fixture.ts";
import { NVCC } from "../nvcc-fixtures.ts";
import { deadPid, grepTree, PLANTED, plantPrivate, stderrOf, tempDir } from "./fixtures.ts";
import { log } from "../../src/log.ts";

const CUDA_HOME = [process.env.CUDA_HOME, "/usr/local/cuda"].find((p): p is string => !!p && existsSync(join(p, "include/cuda.h")));
const CC = Bun.which("cc") ?? Bun.which("gcc");
const PY = Bun.which("python3");
const CAN_BUILD = Boolean(CUDA_HOME && CC);
const FAKE_LIBCUDA = join(import.meta.dir, "../apps/fake_libcuda.c");

function sh(cmd: string[], o: { cwd?: string; env?: Record<string, string> } = {}): { code: number; out: string; err: string } {
  const p = Bun.spawnSync(cmd, { cwd: o.cwd, env: { ...process.env, ...o.env }, stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode ?? -1, out: p.stdout.toString(), err: p.stderr.toString() };
}

/** Stand-ins for PyTorch (no GPU) and Triton under DIR/fake-py, enough for repro.py to reach its kernel file under TRITON_INTERPRET=1. */
function fakeTorchTriton(dir: string): string {
  const fake = join(dir, "fake-py");
  mkdirSync(join(fake, "torch"), { recursive: true });
  mkdirSync(join(fake, "triton"), { recursive: true });
  writeFileSync(join(fake, "triton/__init__.py"), "");
  writeFileSync(join(fake, "torch/__init__.py"), "class _Cuda:\n    def is_available(self):\n        return False\ncuda = _Cuda()\n");
  return fake;
}

/** The fake driver, built once: DIR/libcuda.so (and .so.1). */
let fakeDir = "";
beforeAll(() => {
  if (!CAN_BUILD) return;
  fakeDir = tempDir("kerncap-fake-cuda-");
  const r = sh([CC!, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-I", join(CUDA_HOME!, "include"), FAKE_LIBCUDA, "-o", join(fakeDir, "libcuda.so.1")]);
  if (r.code) throw new Error(r.err);
  symlinkSync("libcuda.so.1", join(fakeDir, "libcuda.so"));
});

/** Build OUT/repro with the export's own Makefile, linked against the fake driver. */
function make(out: string): void {
  const r = sh(["make", `CUDA_HOME=${CUDA_HOME}`, `LDFLAGS=-L${fakeDir}`, "CFLAGS=-O2 -std=c11 -Wall -Wextra -Werror", "repro"], { cwd: out });
  expect(r.err).not.toContain("warning");
  expect(r.code).toBe(0);
}

/** Run OUT/repro on the fake driver; `kernel`: the fake kernel's writes (lines of fake_libcuda.c's format). */
function repro(out: string, kernel: string | null, env: Record<string, string> = {}, args: string[] = []): { code: number; out: string; err: string } {
  const k = join(out, "..", `kernel-${Math.random().toString(36).slice(2)}.txt`);
  if (kernel !== null) writeFileSync(k, kernel);
  return sh(["./repro", "-n", "5", ...args], { cwd: out, env: { LD_LIBRARY_PATH: fakeDir, ...(kernel !== null ? { KC_FAKE_KERNEL: k } : {}), ...env } });
}

/** What the app's launch wrote, read from the manifest here (src/format/chunks.ts runs), independently of repro.c: each changed run copied from after.bin. */
function appWrites(out: string, m: Manifest): string {
  const after = join(out, "data", m.memory.after);
  return m.regions
    .flatMap((r) =>
      runs(r, r.after, m.memory.chunkBytes).map((x) => `${(BigInt(r.va) + BigInt(x.vaOffset)).toString(16)} ${after} ${x.fileOffset} ${x.bytes}\n`),
    )
    .join("");
}

async function demo(): Promise<{ cap: string; out: string; m: Manifest }> {
  const root = tempDir("kerncap-export-");
  const { dir, manifest } = writeDemo(join(root, "cap"), false);
  return { cap: dir, out: join(root, "out"), m: manifest };
}

/** Run `f` with kerncap's log captured: its value and the lines written (warnings and info). */
async function logged<T>(f: () => T | Promise<T>): Promise<{ value: T; lines: string[] }> {
  const lines: string[] = [];
  const spies = [spyOn(log, "info"), spyOn(log, "warn")].map((sp) => sp.mockImplementation(((...a: unknown[]) => void lines.push(a.join(" "))) as never));
  try {
    return { value: await f(), lines };
  } finally {
    for (const sp of spies) sp.mockRestore();
  }
}

/**
 * A Triton capture with 4 KiB chunks: x (fp32, 3 chunks and 100 bytes, its middle chunk zero), y
 * (fp32, 2 chunks, the launch changed the second), kernel parameters x, y + 64, n = 1000, alpha = 2.5.
 */
/** `edit` changes the before state before its checksums are taken. */
async function tritonCapture(edit?: (before: DataView) => void): Promise<{ cap: string; m: Manifest }> {
  const root = tempDir("kerncap-export-triton-");
  const cap = join(root, "cap");
  const tmp = `${cap}.tmp-${process.pid}`;
  mkdirSync(join(tmp, "kernel"), { recursive: true });
  mkdirSync(join(tmp, "memory"), { recursive: true });
  const X = 0x7f0000000000n;
  const Y = 0x7f0000100000n;
  const params = new Uint8Array(24);
  const dv = new DataView(params.buffer);
  dv.setBigUint64(0, X, true);
  dv.setBigUint64(8, Y + 64n, true);
  dv.setInt32(16, 1000, true);
  dv.setFloat32(20, 2.5, true);
  writeFileSync(join(tmp, "kernel/params.bin"), params);
  writeFileSync(join(tmp, "kernel/module.cubin"), new Uint8Array([0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0x41]));
  const before = new Float32Array((65536 + 8192) / 4);
  const after = new Float32Array((65536 + 8192) / 4);
  for (let i = 0; i < (3 * 4096 + 100) / 4; i++) if (i < 1024 || i >= 2048) before[i] = i * 0.5;
  for (let i = 0; i < 2048; i++) before[16384 + i] = after[16384 + i] = -i;
  for (let i = 1024; i < 2048; i++) after[16384 + i] = i * 3;
  edit?.(new DataView(before.buffer));
  writeFileSync(join(tmp, "memory/before.bin"), new Uint8Array(before.buffer));
  writeFileSync(join(tmp, "memory/after.bin"), new Uint8Array(after.buffer));
  const raw = {
    raw_version: 2 as const,
    library: "test-fixture",
    frontend: "triton",
    kernel: { name: "axpy_kernel", demangled: "axpy_kernel", match_index: 0, launch_index: 3 },
    device: { vendor: "nvidia" as const, name: "NVIDIA H200", arch: "sm_90", driver_version: 13000, ordinal: 0 },
    launch: {
      api: "cuLaunchKernelEx",
      grid: [8, 1, 1] as [number, number, number],
      block: [128, 1, 1] as [number, number, number],
      shared_mem_bytes: 0,
      cluster: [1, 1, 1] as [number, number, number],
      attributes: [],
    },
    function_attributes: [{ id: 8, name: "MAX_DYNAMIC_SHARED_SIZE_BYTES", value: 0 }],
    params: {
      file: "kernel/params.bin",
      size: 24,
      layout_source: "test",
      layout: [
        { index: 0, offset: 0, size: 8 },
        { index: 1, offset: 8, size: 8 },
        { index: 2, offset: 16, size: 4 },
        { index: 3, offset: 20, size: 4 },
      ],
    },
    module: { file: "kernel/module.cubin", kind: "cubin" as const, size: 8, source: "test" },
    ...chunkedRanges(
      tmp,
      [
        { va: `0x${X.toString(16)}`, size: 3 * 4096 + 100, kind: "device", offset: 0, changed: false },
        { va: `0x${Y.toString(16)}`, size: 8192, kind: "device", offset: 65536, changed: true },
      ],
      [],
      4096,
    ),
    timing: { sync_us: 1, before_us: 2, after_us: 3, app_launch_us: 4.5, app_to_capture_s: 0.1 },
    hsa: null,
  };
  const source = {
    frontend: "triton",
    tritonVersion: "3.5.0",
    fnName: "axpy_kernel",
    signature: { x_ptr: "*fp32", y_ptr: "*fp32", n: "i32", alpha: "fp32", BLOCK: "constexpr" },
    constexprs: [{ path: [4], name: "BLOCK", expr: "128", value: 128 }],
    options: { num_warps: 4, num_stages: 2, shared: 0 },
  };
  const m = await finalizeCapture(raw, { tmpDir: tmp, finalDir: cap, force: false, command: ["python3", "app.py"], match: "axpy", source });
  mkdirSync(join(cap, "src"));
  writeFileSync(
    join(cap, "src/axpy_kernel.py"),
    "import triton\nimport triton.language as tl\n\n@triton.jit\ndef axpy_kernel(x_ptr, y_ptr, n, alpha, BLOCK: tl.constexpr):\n    pass\n",
  );
  return { cap, m };
}

describe("kerncap export: the folder", () => {
  test("the demo capture: program, data, README, document; the capture and the export's data/ stay valid captures", async () => {
    const { cap, out, m } = await demo();
    chmodSync(join(cap, "kernel/params.bin"), 0o755); // a capture's file with an x bit: data, never a program in the export (adversary 61: data/gcc ran)
    const r = exportCapture(cap, out);
    expect(v.safeParse(DOCUMENTS.export, jsonDocument("export", r)).success).toBe(true);
    for (const d of r.data) expect(lstatSync(join(out, d.path)).mode & 0o777, d.path).toBe(0o644);
    for (const f of [
      "repro.c",
      "capture.h",
      "Makefile",
      "CMakeLists.txt",
      "README.md",
      EXPORT_FILE,
      "build.sh",
      "src/saxpy.cu",
      "data/kerncap.json",
      "data/memory/before.bin",
      "data/memory/after.bin",
      "data/kernel/module.fatbin",
      "data/kernel/params.bin",
      "kernel.ptx",
    ]) {
      expect(existsSync(join(out, f))).toBe(true);
    }
    expect(existsSync(join(out, "repro.py"))).toBe(false); // a CUDA C++ kernel: no Triton script
    expect(r.editable).toBe("src/saxpy.cu");
    expect(r.commands.runSource).toBe("make run-src");
    expect(lstatSync(join(out, "build.sh")).mode & 0o111).not.toBe(0);
    // never a hard link: the capture's readers refuse a file with a second name
    for (const d of r.data) expect(lstatSync(join(out, d.path)).nlink).toBe(1);
    verifyFiles(cap, m);
    verifyFiles(join(out, "data"), readManifest(join(out, "data")));
    // data/kerncap.json as pack --redact ships it: without this machine's id (an export leaves the machine; the id sent
    // back in a forged folder made it count as made here: a trial), its host name and command line, the rest the capture's
    const kept = JSON.parse(readFileSync(join(cap, "kerncap.json"), "utf8"));
    const sent = JSON.parse(readFileSync(join(out, "data/kerncap.json"), "utf8"));
    expect(sent.host).toEqual({ name: "(redacted)", machineId: null });
    expect(sent.command).toEqual([]);
    expect({ ...sent, host: kept.host, command: kept.command }).toEqual(kept);
    // validate of the export's data/ (a capture without its project) points at the export's own project
    const nb = await buildReproducer(join(out, "data"), { quiet: true, force: false }).then(
      () => undefined,
      (e) => e,
    );
    expect(nb).toMatchObject({ code: "E_NO_REPRODUCER" });
    expect(nb.message).toContain(`is the data of an export (${join(out, EXPORT_FILE)}): the reproducer's project lies in ${out}`);
    expect(nb.hint).toContain("make run-src");
    // the export's data/ packs as a capture does
    const packed = await packCapture(join(out, "data"), join(out, "..", "data.zip"), { force: false });
    expect(packed.files).toBe(r.data.length);
    expect(r.bytes.data).toBe(r.data.reduce((a, d) => a + d.bytes, 0));
    const h = readFileSync(join(out, "capture.h"), "utf8");
    expect(h).toContain('#define KERNEL_NAME "_Z5saxpyPK5Saxpy"');
    expect(h).toContain("#define N_REGIONS 3");
    expect(h).toContain("{0x600000400000ull, ".replace("{", "")); // the changed region, by VA
    const readme = readFileSync(join(out, "README.md"), "utf8");
    expect(readme).toContain("make run-src");
    expect(readme).toContain("[first chunk, chunk count, file offset]");
    // what it takes (nu12 #3): the minimum CUDA to build and to run, the data check alone
    expect(readme).toContain(
      "Minimum CUDA: to build, the toolkit's headers (`cuda.h`) of **CUDA 12.0** or newer; to run, an\nNVIDIA GPU and a driver for **CUDA 12.0** or newer",
    );
    expect(readme).toContain("./repro --verify-only   # the data files' check alone, no GPU or driver: exit 0 intact, 3 damaged");
    expect(readme).not.toContain("## Triton");
    // the demo's is said as made without a GPU (found by a new user: "captured by kerncap on no GPU: …")
    expect(readme).toContain("One launch of this kernel, made by kerncap demo without a GPU (for sm\\_90)");
  });

  test("OUT is refused when it exists (not an export), lies inside the capture, or holds it; --force replaces a previous export only", async () => {
    const { cap, out } = await demo();
    exportCapture(cap, out);
    const code = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        if (isKerncapError(e)) return e.code;
        throw e;
      }
      return "ok";
    };
    expect(code(() => exportCapture(cap, out))).toBe("E_EXISTS");
    // a temp folder a killed export left (its pid gone) is removed by the next export of OUT
    const dead = await deadPid();
    const stale = `${out}.tmp-${dead}`;
    mkdirSync(stale);
    writeFileSync(join(stale, ".kerncap-temp"), `${dead}\n`);
    // a sibling named like one but by a number no process can have (a date) is the user's: kept (adversary 53)
    const backup = `${out}.old-20240611`;
    mkdirSync(backup);
    writeFileSync(join(backup, ".kerncap-temp"), "mine\n");
    writeFileSync(join(out, "mine.txt"), "x");
    writeFileSync(join(out, "y\n[kerncap] ✔ FORGED"), "x"); // a name with a newline: said on the warning's line (adversary 89 #02)
    // what --force loses is said, as unpack --force says it (adversary 35: an edited src/ and a notes file went without a word)
    const srcFile = readdirSync(join(out, "src")).find((n) => n.endsWith(".cu"))!;
    writeFileSync(join(out, "src", srcFile), `${readFileSync(join(out, "src", srcFile), "utf8")}// my edit\n`);
    writeFileSync(join(out, "Makefile"), `${readFileSync(join(out, "Makefile"), "utf8")}# mine\n`); // the program's own files too (adversary 36)
    const { err } = await stderrOf(() => code(() => exportCapture(cap, out, { force: true })));
    expect(err).toContain(`--force: replacing ${out} removes 2 files the new export does not hold: mine.txt, y\\n[kerncap] ✔ FORGED`);
    expect(err).not.toContain("\n[kerncap] ✔ FORGED");
    expect(err).toContain(`--force: replacing ${out} discards the edits of 2 files: Makefile, src/${srcFile}`);
    expect(existsSync(join(out, "mine.txt"))).toBe(false); // replaced whole
    expect(readFileSync(join(out, "src", srcFile), "utf8")).not.toContain("// my edit");
    expect(existsSync(stale)).toBe(false);
    expect(existsSync(backup)).toBe(true);
    const other = join(out, "..", "other");
    mkdirSync(other);
    writeFileSync(join(other, "notes.txt"), "keep");
    expect(code(() => exportCapture(cap, other, { force: true }))).toBe("E_EXISTS");
    expect(code(() => exportCapture(cap, other))).toBe("E_EXISTS");
    expect(readFileSync(join(other, "notes.txt"), "utf8")).toBe("keep");
    // a kerncap-export.json of 1.5 GB (sparse) in such a folder is not read to tell (adversary 86 #05: read whole, 1.6 GB)
    writeFileSync(join(other, "kerncap-export.json"), "");
    truncateSync(join(other, "kerncap-export.json"), 1.5 * 2 ** 30);
    const t0 = performance.now();
    expect(code(() => exportCapture(cap, other, { force: true }))).toBe("E_EXISTS");
    expect(performance.now() - t0).toBeLessThan(5000);
    // an empty folder (mkdir repro && kerncap export cap -o repro) is written into without --force
    const empty = join(out, "..", "empty");
    mkdirSync(empty);
    expect(code(() => exportCapture(cap, empty))).toBe("ok");
    expect(existsSync(join(empty, EXPORT_FILE))).toBe(true);
    expect(code(() => exportCapture(cap, join(cap, "x")))).toBe("E_USAGE");
    expect(code(() => exportCapture(cap, join(cap, "..")))).toBe("E_USAGE");
    expect(existsSync(join(cap, "x"))).toBe(false);
  });

  test("a manifest's source.cuda of the wrong types (a received capture's, the sender's to write): exported, no internal error", async () => {
    for (const bad of [-1, {}, 1e308, null]) {
      const { cap, out } = await demo();
      const m = JSON.parse(readFileSync(join(cap, "kerncap.json"), "utf8"));
      m.source = { ...(m.source ?? {}), cuda: { ...(m.source?.cuda ?? {}), definition: bad, projectRoot: bad } };
      writeFileSync(join(cap, "kerncap.json"), JSON.stringify(m));
      let err: unknown;
      try {
        exportCapture(cap, out);
      } catch (e) {
        err = e;
      }
      // either exported or refused with a kerncap error saying why, never a TypeError
      if (err !== undefined) expect(isKerncapError(err), String(err)).toBe(true);
      else expect(existsSync(join(out, EXPORT_FILE))).toBe(true);
    }
  });

  test("a damaged capture (bytes altered in memory/before.bin) is refused as pack refuses it, and nothing is written", async () => {
    const { cap, out } = await demo();
    const fd = openSync(join(cap, "memory/before.bin"), "r+");
    writeSync(fd, Buffer.from("XXXXXXXXXX"), 0, 10, 4200);
    closeSync(fd);
    const refusal = async (f: () => unknown) => {
      try {
        await f();
      } catch (e) {
        if (isKerncapError(e)) return { code: e.code, message: e.message };
        throw e;
      }
      return null;
    };
    const packed = await refusal(() => packCapture(cap, join(out, "../damaged.zip")));
    expect(packed?.code).toBe("E_CHECKSUM");
    expect(await refusal(() => exportCapture(cap, out))).toEqual(packed);
    expect(existsSync(out)).toBe(false);
  });
  test("links: a symbolic link in src/ is refused as pack and validate refuse it (E_UNSAFE_PATH, nothing written), a data file with a second name is refused", async () => {
    const { cap, out } = await demo();
    writeFileSync(join(cap, "..", "secret.txt"), "secret");
    symlinkSync(join(cap, "..", "secret.txt"), join(cap, "src/leak.cu"));
    let err: unknown;
    try {
      exportCapture(cap, out);
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: "E_UNSAFE_PATH" });
    expect((err as Error).message).toContain('"src/leak.cu" is a symbolic link');
    expect(existsSync(out)).toBe(false);
    rmSync(join(cap, "src/leak.cu"));
    linkSync(join(cap, "kernel/params.bin"), join(cap, "..", "params-link"));
    expect(() => exportCapture(cap, join(out, "..", "out2"))).toThrow(/hard link/);
    expect(existsSync(join(out, "..", "out2"))).toBe(false);
  });

  test("private facts: a capture whose manifest holds a host, user, command line, job environment and GPU identity exports none of them; the GPU model, driver and flags stay", async () => {
    const { cap, out } = await demo();
    plantPrivate(cap);
    const r = exportCapture(cap, out);
    expect(v.safeParse(DOCUMENTS.export, jsonDocument("export", r)).success).toBe(true);
    const found = grepTree(out, PLANTED);
    expect(found).toEqual([]);
    const sent = readManifest(join(out, "data")); // still a capture: its schema and checksums hold
    verifyFiles(join(out, "data"), sent);
    expect(sent.device.name).toBe("NVIDIA H200");
    expect(sent.device.driverVersion).toBe(12080);
    expect((sent.source as { cuda: { flags: string[] } }).cuda.flags).toEqual(expect.arrayContaining(["-DLAB_FLAG=1", "-I/redacted/project/include"]));
    expect(sent.process?.jobEnv).toEqual({ SLURM_PROCID: "0" }); // the rank kept, the rest gone
    const readme = readFileSync(join(out, "README.md"), "utf8");
    expect(readme).toContain("| GPU | NVIDIA H200 (sm\\_90) |");
    expect(readme).toContain("CUDA 12.8 (cuDriverGetVersion 12080)");
    expect(readme).toContain("The compile flags are included here");
    expect(readme).toContain("**The compile flags were guessed**");
    // the demo's fatbin: its sm_90 cubin's .note.nv.tkinfo names the ptxas release that assembled it
    expect(readme).toMatch(/assembled by \| ptxas Cuda compilation tools, release \d+\.\d+/);
    // the export folder given where a capture is expected: said as an export, pointing at its data/
    let err: unknown;
    try {
      readManifest(out);
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: "E_NOT_CAPTURE" });
    expect((err as Error).message).toBe(`${out} is an exported reproducer (kerncap export), not a capture; the capture's data is in ${join(out, "data")}`);
  });

  test("editor temporaries and hidden files under src/ are left out and named in one warning; an Emacs backup no longer refuses the export", async () => {
    const { cap, out } = await demo();
    writeFileSync(join(cap, "src/.saxpy.cu.swp"), "b0VIM 9.0 jdoe gpu-node-0421 /home/jdoe/proj/saxpy.cu");
    writeFileSync(join(cap, "src/saxpy.cu~"), "old text");
    writeFileSync(join(cap, "src/#saxpy.cu#"), "autosave");
    const warned = await logged(() => exportCapture(cap, out));
    const r = warned.value;
    expect(r.leftOut).toEqual(["src/#saxpy.cu#", "src/.saxpy.cu.swp", "src/saxpy.cu~"]);
    for (const f of r.leftOut) expect(existsSync(join(out, f))).toBe(false);
    expect(warned.lines.filter((l) => l.includes("left out 3 editor temporaries"))).toHaveLength(1);
    expect(r.changedSources).toEqual([]); // left-out files are no edit
  });

  test("an edited source is said: a warning naming it, a line in README.md, changedSources; absolute paths in build.sh warn as pack warns", async () => {
    const { cap, out } = await demo();
    writeFileSync(join(cap, "src/saxpy.cu"), `${readFileSync(join(cap, "src/saxpy.cu"), "utf8")}\n// an experiment\n`);
    writeFileSync(join(cap, "build.sh"), readFileSync(join(cap, "build.sh"), "utf8").replace('-I"$here/src"', '-I"$here/src" -I/home/jdoe/include'));
    const warned = await logged(() => exportCapture(cap, out));
    expect(warned.value.changedSources).toEqual([{ path: "src/saxpy.cu", change: "edited" }]);
    expect(warned.lines.some((l) => l.includes("src/ differs from the source the captured module was built from: src/saxpy.cu (edited)"))).toBe(true);
    expect(readFileSync(join(out, "README.md"), "utf8")).toContain("**Edited source**: `src/` differs from the source the captured module was built from");
    expect(warned.value.warnings.join("\n")).toContain("/home/jdoe/include");
    expect(warned.lines.some((l) => l.includes("build.sh names 1 absolute path outside the capture"))).toBe(true);
    rmSync(out, { recursive: true });
    // an unedited capture: nothing said
    const fresh = await demo();
    expect(exportCapture(fresh.cap, fresh.out).changedSources).toEqual([]);
    expect(readFileSync(join(fresh.out, "README.md"), "utf8")).not.toContain("Edited source");
  });

  test("a sparse memory image stays sparse in the export (where no reflink is made: its data extents copied, holes left)", async () => {
    const { cap } = await tritonCapture();
    // before.bin rewritten with a hole between x's data (12388 bytes at 0) and y's (at 65536), as a capture library leaves it
    const before = join(cap, "memory/before.bin");
    const bytes = readFileSync(before);
    const fd = openSync(`${before}.new`, "w");
    writeSync(fd, bytes, 0, 12388, 0);
    writeSync(fd, bytes, 65536, bytes.length - 65536, 65536);
    closeSync(fd);
    const copy = readFileSync(`${before}.new`);
    expect(copy.equals(bytes)).toBe(true);
    rmSync(before);
    renameSync(`${before}.new`, before);
    const out = join(cap, "..", "out");
    const r = exportCapture(cap, out);
    const d = r.data.find((x) => x.path === "data/memory/before.bin")!;
    expect(readFileSync(join(out, d.path)).equals(bytes)).toBe(true);
    if (d.shared === "copy") {
      // the source's holes (zeros past x's data: 4 KiB blocks of them) are holes in the copy too
      const src = lstatSync(before);
      const dst = lstatSync(join(out, d.path));
      expect(src.blocks * 512).toBeLessThan(src.size); // this file system keeps holes
      expect(dst.blocks).toBeLessThanOrEqual(src.blocks);
    }
  });

  test("names are data: a kernel name with quotes, backslashes, a newline, */ and ?? is one C string literal, exactly", async () => {
    const name = 'k"\\\n*/??=é';
    expect(cString(name)).not.toContain("\n");
    if (!CAN_BUILD) return;
    const { cap, m } = await demo();
    const plan = exportPlan({ ...m, kernel: { ...m.kernel, name, demangled: name } }, new Uint8Array(8), ["sm_90"]);
    const dir = tempDir("kerncap-cstring-");
    writeFileSync(join(dir, "capture.h"), captureHeader(plan, { module: "m", ptx: "", params: "p", before: "b", after: "a" }));
    writeFileSync(
      join(dir, "t.c"),
      '#include <stdio.h>\n#include "capture.h"\nint main(void) { fputs(KERNEL_NAME, stdout); return REGIONS[0].va == 0 && N_REGIONS > 0; }\n',
    );
    const c = sh([CC!, "-std=c11", "-Wall", "-Werror", "-Wno-unused-const-variable", "-Wno-unused-variable", "t.c", "-o", "t"], { cwd: dir });
    expect(c.err).toBe("");
    const r = sh([join(dir, "t")]);
    expect(r.out).toBe(name);
    void cap;
  });

  test("storedPointer finds a captured VA stored in a region's memory, and nothing in memory without one", () => {
    const regions = [
      { name: "device", va: 0x7f0000000000n, size: 4096, changed: false, dtype: "u8" as const, multiset: false, before: [], after: [] },
      { name: "device", va: 0x7f0000100000n, size: 4096, changed: true, dtype: "u8" as const, multiset: false, before: [], after: [] },
    ];
    const words = new Uint8Array(64);
    new DataView(words.buffer).setBigUint64(40, 0x7f0000100010n, true);
    expect(storedPointer(regions, (ri) => (ri === 1 ? [{ offset: 128, bytes: words }] : []))).toEqual({ region: 1, offset: 168, va: "0x7f0000100010" });
    new DataView(words.buffer).setBigUint64(40, 0x7f0000200000n, true); // past both regions
    expect(storedPointer(regions, () => [{ offset: 0, bytes: words }])).toBeUndefined();
  });
});

describe.skipIf(!CAN_BUILD)("kerncap export: the C program, built against cuda.h and run on a fake driver", () => {
  test("repro.c calls no driver entry point by link: each is resolved by the name cuda.h gives it (versioned), every one declared there", async () => {
    const { cap, out } = await demo();
    exportCapture(cap, out);
    const o = join(out, "repro.o");
    const c = sh([CC!, "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", join(CUDA_HOME!, "include"), "-c", "repro.c", "-o", o], { cwd: out });
    expect(c.err).toBe("");
    const undef = sh(["nm", "-u", o])
      .out.split("\n")
      .map((l) => l.trim().split(/\s+/).pop()!);
    expect(undef.filter((s) => /^cu[A-Z]/.test(s))).toEqual([]);
    expect(undef).toContain("dlopen");
    // the names dlsym is given: string literals of repro.o (the fallback for drivers before 12.8 and the version query left aside)
    const names = sh(["strings", "-a", o])
      .out.split("\n")
      .filter((s) => /^cu[A-Z]\w*$/.test(s) && s !== "cuEventElapsedTime" && s !== "cuDriverGetVersion");
    expect(names).toContain("cuMemAddressReserve");
    expect(names).toContain("cuLaunchKernelEx");
    expect(names).toContain("cuMemAlloc_v2"); // cuda.h's #define, not the bare name (the CUDA 3.1 ABI)
    expect(names).not.toContain("cuMemAlloc");
    // cuda.h as the compiler sees it: its #defines give the versioned names (cuEventElapsedTime → _v2)
    writeFileSync(join(out, "h.c"), "#include <cuda.h>\n");
    const header = sh([CC!, "-E", "-I", join(CUDA_HOME!, "include"), "h.c"], { cwd: out }).out;
    for (const s of names) expect([s, new RegExp(`\\bCUresult\\s+${s}\\s*\\(`).test(header)]).toEqual([s, true]);
  });

  test("the demo capture: MATCH when the kernel writes the app's after state, MISMATCH when it writes nothing or one byte differs", async () => {
    const { cap, out, m } = await demo();
    exportCapture(cap, out);
    make(out);
    const ok = repro(out, appWrites(out, m));
    expect(ok.err).toBe("");
    expect(ok.out).toContain("MATCH: 3 regions");
    expect(ok.out).toMatch(/kernel time: median 12\.50 us, min 12\.50 us over 5 launches/);
    expect(ok.code).toBe(0);
    const none = repro(out, null);
    expect(none.out).toContain("MISMATCH region 0x600000400000 (16000 bytes, fp32): the app changed it, the replay left it as it was");
    expect(none.code).toBe(1);
    const flipped = repro(out, appWrites(out, m) + "600000400ff0 = 255\n");
    expect(flipped.out).toMatch(/MISMATCH region 0x600000400000 \(16000 bytes, fp32\): 1 elements differ, the first at byte 4080; 1 over tolerance/);
    expect(flipped.code).toBe(1);
    // a stray write into a region the app did not change
    const stray = repro(out, appWrites(out, m) + "600000200008 = 7\n");
    expect(stray.out).toContain("MISMATCH region 0x600000200000");
    expect(stray.code).toBe(1);
  });

  test("a data file damaged after the export (one byte flipped, or cut short) is named before the GPU is asked for anything, exit 3; --no-verify skips the check (nu9 #8)", async () => {
    const { cap, out, m } = await demo();
    exportCapture(cap, out);
    make(out);
    expect(readFileSync(join(out, "capture.h"), "utf8")).toContain("static const struct kc_digest DATA_DIGESTS[]");
    const intact = repro(out, appWrites(out, m));
    expect(intact.code).toBe(0);
    // a byte of the before state's first stored chunk (copied, never edited in place: the data may share the capture's blocks)
    const before = join(out, "data", m.memory.before);
    const bytes = readFileSync(before);
    const at = m.regions.find((r) => r.before.extents.length)!.before.extents[0]![2] + 5;
    bytes[at] = bytes[at]! ^ 0x10;
    rmSync(before);
    writeFileSync(before, bytes);
    const flipped = repro(out, appWrites(out, m), { KC_FAKE_NO_DEVICE: "1" }); // no driver: the check comes first
    expect(flipped.err).toContain(`error: data/${m.memory.before} is damaged: bytes `);
    expect(flipped.err).toContain("differ from their checksum (kc64 ");
    expect(flipped.err).not.toContain("cuInit");
    expect(flipped.out).not.toContain("MISMATCH");
    expect(flipped.code).toBe(3);
    // unchecked, the program runs on (here: into the missing driver)
    const unchecked = repro(out, appWrites(out, m), { KC_FAKE_NO_DEVICE: "1" }, ["--no-verify"]);
    expect(unchecked.err).toContain("cuInit failed");
    expect(unchecked.code).toBe(2);
    // the parameters cut short: named with their sizes
    const params = join(out, "data", m.params.file);
    const p = readFileSync(params);
    rmSync(params);
    writeFileSync(params, p.subarray(0, p.length - 1));
    writeFileSync(before, readFileSync(join(cap, m.memory.before)));
    const cut = repro(out, appWrites(out, m));
    expect(cut.err).toContain(`error: data/${m.params.file} is damaged: ${p.length - 1} bytes, the export recorded ${p.length} (truncated)`);
    expect(cut.code).toBe(3);
  });

  test("./repro names an argument it does not take before its usage (nu9 #14)", async () => {
    const { cap, out } = await demo();
    exportCapture(cap, out);
    make(out);
    const bogus = repro(out, null, {}, ["--bogus"]);
    expect(bogus.err).toMatch(/^error: --bogus: unknown option\nusage: /);
    expect(bogus.code).toBe(2);
    const novalue = sh(["./repro", "-m"], { cwd: out, env: { LD_LIBRARY_PATH: fakeDir } });
    expect(novalue.err).toMatch(/^error: -m: the option needs a value\nusage: /);
    expect(novalue.code).toBe(2);
    const help = sh(["./repro", "--help"], { cwd: out, env: { LD_LIBRARY_PATH: fakeDir } });
    expect(help.out).toContain("[--no-verify | --verify-only]");
    expect(help.err).toBe("");
    expect(help.code).toBe(0);
  });

  test("no libcuda to link, none to run (nu12 #3): make with gcc links no libcuda; --verify-only checks the data without a driver (0, 3); no driver is exit 2, said, after the data check; an older driver's missing entry point is named", async () => {
    const { cap, out, m } = await demo();
    exportCapture(cap, out);
    // no libcuda on the link line: no -L, no stub; the toolkit's headers only
    const built = sh(["make", "CC=gcc", `CUDA_HOME=${CUDA_HOME}`, "CFLAGS=-O2 -std=c11 -Wall -Wextra -Werror", "repro"], { cwd: out });
    expect(built.err).toBe("");
    expect(built.code).toBe(0);
    expect(readFileSync(join(out, "Makefile"), "utf8")).not.toContain("-lcuda");
    expect(sh(["readelf", "-d", "repro"], { cwd: out }).out).not.toMatch(/NEEDED.*libcuda/);
    const noLib = { LD_LIBRARY_PATH: "" };
    const ok = sh(["./repro", "--verify-only"], { cwd: out, env: noLib });
    expect(ok.out).toContain("data: 5 files as the export recorded them");
    expect([ok.err, ok.code]).toEqual(["", 0]);
    const systemDriver = /libcuda\.so\.1\b/.test(sh(["/sbin/ldconfig", "-p"]).out);
    if (!systemDriver) {
      const none = sh(["./repro"], { cwd: out, env: noLib });
      expect(none.err).toMatch(/^error: \.\/repro needs an NVIDIA GPU and its driver: libcuda\.so\.1 could not be loaded: [^\n]*libcuda\.so\.1[^\n]*\n$/);
      expect(none.code).toBe(2);
    }
    // older drivers, from the fake one: without cuEventElapsedTime_v2 (before 12.8: the unversioned one serves), without cuLaunchKernelEx (11.8)
    const old = (dir: string, renames: string[]): string => {
      mkdirSync(dir);
      const obj = join(dir, "fake.o");
      writeFileSync(join(dir, "version.c"), "#include <cuda.h>\nCUresult cuDriverGetVersion(int *v) { *v = 11080; return CUDA_SUCCESS; }\n");
      const steps = [
        [CC!, "-c", "-fPIC", "-O1", "-I", join(CUDA_HOME!, "include"), FAKE_LIBCUDA, "-o", obj],
        ["objcopy", ...renames.flatMap((r) => ["--redefine-sym", r]), obj],
        [CC!, "-shared", "-fPIC", "-I", join(CUDA_HOME!, "include"), obj, join(dir, "version.c"), "-o", join(dir, "libcuda.so.1")],
      ];
      for (const step of steps) expect(sh(step).err).toBe("");
      return dir;
    };
    const d128 = old(join(out, "..", "driver-12.0"), ["cuEventElapsedTime_v2=cuEventElapsedTime"]);
    writeFileSync(join(out, "..", "k.txt"), appWrites(out, m));
    const on120 = sh(["./repro", "-n", "2"], { cwd: out, env: { LD_LIBRARY_PATH: d128, KC_FAKE_KERNEL: join(out, "..", "k.txt") } });
    expect(on120.out).toContain("kernel time: median 12.50 us");
    expect(on120.out).toContain("MATCH: 3 regions");
    expect(on120.code).toBe(0);
    const d118 = old(join(out, "..", "driver-11.8"), ["cuEventElapsedTime_v2=cuEventElapsedTime", "cuLaunchKernelEx=kc_gone_cuLaunchKernelEx"]);
    const on118 = sh(["./repro"], { cwd: out, env: { LD_LIBRARY_PATH: d118 } });
    expect(on118.err).toMatch(
      /^error: the NVIDIA driver has no cuLaunchKernelEx: \.\/repro needs a driver for CUDA 12\.0 or newer \(this one is for CUDA 11\.8\)/,
    );
    expect(on118.out).toBe("");
    expect(on118.code).toBe(2);
    // a flipped byte: exit 3 with and without --verify-only, named before any driver is looked for (here: none, or one without cuLaunchKernelEx)
    const before = join(out, "data", m.memory.before);
    const bytes = readFileSync(before);
    const at = m.regions.find((r) => r.before.extents.length)!.before.extents[0]![2] + 5;
    bytes[at] = bytes[at]! ^ 0x10;
    rmSync(before);
    writeFileSync(before, bytes);
    for (const [args, env] of [
      [["--verify-only"], noLib],
      [[], noLib],
      [[], { LD_LIBRARY_PATH: d118 }],
    ] as const) {
      const r = sh(["./repro", ...args], { cwd: out, env });
      expect(r.err).toContain(`error: data/${m.memory.before} is damaged: bytes `);
      expect(r.err).not.toContain("driver");
      expect(r.code).toBe(3);
    }
  });

  test.skipIf(!Bun.which("cmake"))(
    "CMakeLists.txt builds the same program, linking no libcuda (the fake driver found at run time: this machine has no libcuda)",
    async () => {
      const { cap, out, m } = await demo();
      exportCapture(cap, out);
      expect(readFileSync(join(out, "CMakeLists.txt"), "utf8")).not.toContain("cuda_driver");
      const conf = sh(["cmake", "-B", "cmake-build", `-DCUDAToolkit_ROOT=${CUDA_HOME}`, "."], { cwd: out });
      expect(conf.code).toBe(0);
      const build = sh(["cmake", "--build", "cmake-build"], { cwd: out });
      expect(build.err).toBe("");
      expect(build.code).toBe(0);
      expect(sh(["readelf", "-d", "cmake-build/repro"], { cwd: out }).out).not.toMatch(/NEEDED.*libcuda/);
      const r = sh(["./cmake-build/repro", "-n", "0"], { cwd: out, env: { LD_LIBRARY_PATH: fakeDir } });
      expect(r.out).toContain("MISMATCH: 3 regions");
      expect(r.out).not.toContain("kernel time"); // -n 0: no timed launch (under compute-sanitizer, Nsight)
      void m;
    },
    120_000,
  );

  test("errors exit 2: a VA already taken is named by address; no driver; a missing data file", async () => {
    const { cap, out, m } = await demo();
    exportCapture(cap, out);
    make(out);
    const taken = repro(out, appWrites(out, m), { KC_FAKE_TAKEN: "0x600000200000" });
    expect(taken.err).toContain("captured VA range 0x600000000000-0x600002000000 (33554432 bytes) is not free in this process");
    expect(taken.code).toBe(2);
    const nodev = repro(out, null, { KC_FAKE_NO_DEVICE: "1" });
    expect(nodev.err).toContain("cuInit failed (100): no CUDA-capable device is detected");
    expect(nodev.code).toBe(2);
    const elsewhere = repro(out, null, {}, ["-d", join(out, "nowhere")]);
    expect(elsewhere.err).toContain("nowhere/data/memory/before.bin");
    expect(elsewhere.code).toBe(2);
  });

  test("a launch that faulted in the app: the same fault is MATCH, none is MISMATCH; a fault the app did not have is an error (exit 2)", async () => {
    const { cap, out, m } = await demo();
    writeFileSync(
      join(cap, "kerncap.json"),
      JSON.stringify({ ...m, fault: { code: 700, name: "CUDA_ERROR_ILLEGAL_ADDRESS", message: "an illegal memory access was encountered" } }, null, 2),
    );
    exportCapture(cap, out);
    make(out);
    const same = repro(out, null, { KC_FAKE_FAULT: "700" });
    expect(same.out).toContain(
      "MATCH: the launch gave 700 (an illegal memory access was encountered); in the app it faulted with 700 (CUDA_ERROR_ILLEGAL_ADDRESS)",
    );
    expect(same.code).toBe(0);
    const none = repro(out, appWrites(out, m));
    expect(none.out).toContain("MISMATCH: the launch gave 0");
    expect(none.code).toBe(1);
    const plain = join(out, "..", "plain");
    writeFileSync(join(cap, "kerncap.json"), JSON.stringify(m, null, 2));
    exportCapture(cap, plain);
    make(plain);
    const fault = repro(plain, null, { KC_FAKE_FAULT: "700" });
    expect(fault.err).toContain("error: the launch faulted (700): an illegal memory access was encountered");
    expect(fault.code).toBe(2);
  });

  test("a tolerance given at export: a float within atol is within tolerance (exit 0), bit for bit it is a mismatch", async () => {
    const { cap, out, m } = await demo();
    exportCapture(cap, out, { atol: 1e-3 });
    make(out);
    // element 10 of the changed region: its lowest mantissa byte flipped (a relative change < 1e-5)
    const near = appWrites(out, m) + `600000400028 = ${readFileSync(join(out, "data/memory/after.bin"))[20480 + 40]! ^ 1}\n`;
    const r = repro(out, near);
    expect(r.out).toContain("within tolerance region 0x600000400000 (16000 bytes, fp32): 1 elements differ");
    expect(r.out).toContain("MATCH: 3 regions, 0 module globals compared with the app's after state (within tolerance)");
    expect(r.code).toBe(0);
    const strict = join(out, "..", "strict");
    exportCapture(cap, strict);
    make(strict);
    expect(repro(strict, near).code).toBe(1);
  });

  test("the capture's judging settings (kerncap judge) are the export's: tolerance, types, multiset regions; the programs judge as replay does", async () => {
    const { cap, out, m } = await demo();
    writeJudging(cap, { rtol: 1e-2, multiset: ["2"] });
    const r = exportCapture(cap, out);
    expect(r.judging).toEqual({ settings: { rtol: 1e-2, multiset: ["2"] }, fromCapture: ["rtol", "multiset"], ignored: null, notApplied: [] });
    const header = readFileSync(join(out, "capture.h"), "utf8");
    expect(header).toContain("#define RTOL 0.01\n");
    expect(header).toContain('{"device", 0x600000400000ull, 16000ull, 1, DT_F32, "fp32", 1, 4,'); // multiset, 4-byte elements
    expect(header).toContain('{"device", 0x600000200000ull, 16000ull, 0, DT_F32, "fp32", 0, 4,');
    expect(header).toContain('#define JUDGED_AS " (within tolerance; as multisets: 0x600000400000)"');
    const doc = JSON.parse(readFileSync(join(out, EXPORT_FILE), "utf8"));
    expect(doc.regions.map((x: { multiset: boolean }) => x.multiset)).toEqual([false, false, true]);
    expect(doc.tolerance).toEqual({ atol: 0, rtol: 1e-2 });
    const readme = readFileSync(join(out, "README.md"), "utf8");
    expect(readme).toContain("## Judging");
    expect(readme).toContain(
      "`./repro` judges as `kerncap replay` judges the capture folder, with the capture's judging settings (kerncap judge): rtol 0.01, multiset 2.",
    );
    expect(readme).toContain("compares every region within atol 0, rtol 0.01");
    // data/ holds the same judging, for `kerncap replay data` once accepted (nu16 #8: data/ was judged bit-exact)
    expect(readJudging(join(out, "data"))).toEqual({ rtol: 1e-2, multiset: ["2"] });
    expect(r.data.map((d) => d.path)).toContain("data/kerncap-judge.json");
    expect(readme).toContain("`data/kerncap-judge.json` holds the judging the programs apply");
    // the export's own option wins over the setting (as replay's do): no multiset here
    const own = join(out, "..", "own");
    expect(exportCapture(cap, own, { multiset: [], dtypes: { "2": "i32" } }).judging.settings).toEqual({ rtol: 1e-2, multiset: [], dtypes: { "2": "i32" } });
    expect(readFileSync(join(own, "capture.h"), "utf8")).toContain('{"device", 0x600000400000ull, 16000ull, 1, DT_BYTES_EXACT, "i32", 0, 4,');
    if (!CAN_BUILD) return;
    make(out);
    // the app's elements 10 and 11 of the written region swapped: the same multiset
    const after = readFileSync(join(out, "data", m.memory.after));
    const e10 = after.subarray(20480 + 40, 20480 + 44);
    const e11 = after.subarray(20480 + 44, 20480 + 48);
    expect(e10.equals(e11)).toBe(false);
    const put = (at: number, bytes: Uint8Array) => [...bytes].map((b, k) => `${(0x600000400000 + at + k).toString(16)} = ${b}\n`).join("");
    const swapped = appWrites(out, m) + put(40, e11) + put(44, e10);
    const ok = repro(out, swapped);
    expect(ok.out).toContain("multiset-equal region 0x600000400000 (16000 bytes, fp32): the app's elements in another order");
    expect(ok.out).toContain("MATCH: 3 regions, 0 module globals compared with the app's after state (within tolerance; as multisets: 0x600000400000)");
    expect(ok.code).toBe(0);
    // one element of another value: two elements without a partner (the app's and the replay's)
    const other = repro(out, appWrites(out, m) + put(40, e11));
    expect(other.out).toContain("MISMATCH region 0x600000400000 (16000 bytes, fp32, as a multiset): 2 elements without a partner in the app's");
    expect(other.code).toBe(1);
    // as replay judges it without the setting: the swap is a mismatch
    const strict = join(out, "..", "strict");
    writeJudging(cap, {});
    exportCapture(cap, strict);
    make(strict);
    expect(repro(strict, swapped).code).toBe(1);
  });

  test("a received capture's judging settings are the export's only once accepted; what the programs cannot apply is said and written", async () => {
    const saved = process.env.XDG_STATE_HOME;
    process.env.XDG_STATE_HOME = tempDir("kerncap-state-");
    try {
      const { cap, out } = await demo();
      writeJudging(cap, { atol: 1e-3, nondeterministic: true });
      // the envelope of 8 checked runs: the programs run the kernel once
      const mine = exportCapture(cap, out);
      expect(mine.judging.notApplied).toHaveLength(1);
      expect(mine.judging.notApplied[0]).toContain("nondeterministic");
      expect(readFileSync(join(out, "README.md"), "utf8")).toContain(
        "**Not applied here**: the capture's judging settings expect the kernel to be nondeterministic",
      );
      // and every export's README says that the programs judge one run, without replay's envelope
      const plain = join(out, "..", "plain");
      writeJudging(cap, {});
      exportCapture(cap, plain);
      expect(readFileSync(join(plain, "README.md"), "utf8")).toContain(
        "`./repro` launches the kernel once and judges that run; `kerncap replay` also runs a kernel several\ntimes",
      );
      writeJudging(cap, { atol: 1e-3, nondeterministic: true });
      // received (unpacked): the sender's settings, unused until accepted, as replay leaves them
      writeFileSync(join(cap, RECEIVED_MARK), "{}\n");
      const theirs = exportCapture(cap, join(out, "..", "theirs"));
      expect(theirs.judging.settings).toEqual({});
      expect(theirs.judging.ignored).toContain("not used until you accept them");
      expect(readFileSync(join(out, "..", "theirs", "capture.h"), "utf8")).toContain("#define ATOL 0.0\n");
      expect(readFileSync(join(out, "..", "theirs", "README.md"), "utf8")).toContain("**Not used**: kerncap-judge.json of this received capture");
      expect(acceptJudging(cap, readJudgingFile(cap)!.file)).toBe(true);
      expect(exportCapture(cap, join(out, "..", "accepted")).judging.settings).toEqual({ atol: 1e-3, nondeterministic: true });
      expect(readFileSync(join(out, "..", "accepted", "capture.h"), "utf8")).toContain("#define ATOL 0.001\n");
      // C double literals whatever the value: 1e+21 (not 1e+21.0, which gcc refused: adversary 34), 5.0
      writeJudging(cap, { atol: 1e21, rtol: 5 });
      expect(acceptJudging(cap, readJudgingFile(cap)!.file)).toBe(true);
      exportCapture(cap, join(out, "..", "large"));
      const header = readFileSync(join(out, "..", "large", "capture.h"), "utf8");
      expect(header).toContain("#define ATOL 1e+21\n");
      expect(header).toContain("#define RTOL 5.0\n");
    } finally {
      if (saved === undefined) delete process.env.XDG_STATE_HOME;
      else process.env.XDG_STATE_HOME = saved;
    }
  });

  test("the Triton capture (4 KiB chunks, a zero chunk, a changed chunk): MATCH with the app's writes", async () => {
    const { cap, m } = await tritonCapture();
    const out = join(cap, "..", "out");
    const r = exportCapture(cap, out);
    make(out);
    expect(m.regions[0]!.before.extents).toEqual([
      [0, 1, 0],
      [2, 2, 8192],
    ]); // chunk 1 was zero
    const ok = repro(out, appWrites(out, m));
    expect(ok.out).toContain("MATCH: 2 regions");
    expect(ok.code).toBe(0);
    expect(repro(out, appWrites(out, m) + "7f0000001000 = 1\n").code).toBe(1); // the zero chunk written
    expect(r.triton).toEqual({ script: "repro.py", storedPointer: null });
  });

  test("make run: a kernel's device-side printf reaches the terminal as printable ASCII, ./repro's status kept", async () => {
    if (!CAN_BUILD) return;
    const { cap, out, m } = await demo();
    exportCapture(cap, out);
    make(out);
    const k = join(out, "..", "kernel.txt");
    writeFileSync(k, appWrites(out, m));
    const hostile = "thread 0 \x1b]52;c;ZWNobw==\x07\x1b[2Jsays \u009b2J\u202eevil\n";
    const env = { LD_LIBRARY_PATH: fakeDir, KC_FAKE_KERNEL: k, KC_FAKE_PRINTF: hostile, PATH: process.env.PATH! };
    const ok = sh(["make", `LDFLAGS=-L${fakeDir}`, `CUDA_HOME=${CUDA_HOME}`, "run"], { cwd: out, env });
    expect(ok.out).toContain("MATCH: 3 regions");
    expect(ok.out).toContain("thread 0 ?]52;c;ZWNobw==??[2Jsays ??2J???evil\n"); // U+009B is 2 bytes in UTF-8, U+202E 3
    expect(ok.out).not.toMatch(/[\x1b\x07\u009b\u202e\ufffd]/);
    expect(ok.code).toBe(0);
    const none = sh(["make", `LDFLAGS=-L${fakeDir}`, `CUDA_HOME=${CUDA_HOME}`, "run"], { cwd: out, env: { ...env, KC_FAKE_KERNEL: "/dev/null" } });
    expect(none.out).toContain("MISMATCH region 0x600000400000");
    expect(none.code).not.toBe(0); // ./repro's exit 1, not tr's 0
  });

  test("the Makefile rebuilds the kernel from src/ after an edit, and make run-src runs that module", async () => {
    if (!NVCC) return;
    const { cap, out } = await demo();
    exportCapture(cap, out);
    make(out);
    const env = { PATH: `${join(NVCC, "..")}:${process.env.PATH}`, LD_LIBRARY_PATH: fakeDir };
    const first = sh(["make", "build/kernel.cubin"], { cwd: out, env });
    expect(first.code).toBe(0);
    const a = sha256File(join(out, "build/kernel.cubin"));
    const src = join(out, "src/saxpy.cu");
    writeFileSync(src, readFileSync(src, "utf8").replace("p->a * p->x.data[i]", "(p->a + 1.0f) * p->x.data[i]"));
    expect(readFileSync(src, "utf8")).toContain("(p->a + 1.0f)");
    // file times are coarse (a few ms): an edit right after the build could carry the cubin's own time
    utimesSync(src, new Date(Date.now() + 2000), new Date(Date.now() + 2000));
    const run = sh(["make", "run-src"], { cwd: out, env: { ...env, KC_FAKE_LOG: join(out, "fake.log") } });
    expect(run.err).toContain("make: *** [Makefile");
    expect(run.out).toContain("MISMATCH region 0x600000400000"); // the fake driver runs no kernel: the changed region stays as it was
    expect(sha256File(join(out, "build/kernel.cubin"))).not.toBe(a);
    expect(readFileSync(join(cap, "src/saxpy.cu"), "utf8")).not.toContain("(p->a + 1.0f)"); // the capture's copy is its own
    // the compiler's messages quote the source: a #warning's escape sequence (OSC 52 writes the clipboard) reaches the
    // terminal without its control characters, the build's status kept (adversary 61)
    writeFileSync(src, `#warning "x\x1b]52;c;ZWNobw==\x07\x1b[2Jy\u009b2J\u202e"\n${readFileSync(src, "utf8")}`);
    utimesSync(src, new Date(Date.now() + 4000), new Date(Date.now() + 4000));
    const warned = sh(["make", "build/kernel.cubin"], { cwd: out, env });
    expect(warned.code).toBe(0);
    expect(warned.err).toContain("]52;c;ZWNobw==");
    expect(warned.err).not.toMatch(/[\x1b\x07\u009b\u202e\ufffd]/); // printable ASCII only: a C1 control or U+202E is ? too (adversary 62)
    expect(statSync(join(out, "build/build.log")).mode & 0o077).toBe(0); // the log may quote a file the source included
    writeFileSync(src, `#error "broken"\n${readFileSync(src, "utf8")}`);
    utimesSync(src, new Date(Date.now() + 6000), new Date(Date.now() + 6000));
    expect(sh(["make", "build/kernel.cubin"], { cwd: out, env }).code).not.toBe(0);
    // a build whose messages never end is stopped at 32 MiB of log, as kerncap's own builds are, and fails (adversary 65 05:
    // a received source made make run-src write 1 GiB and on)
    const script = join(out, "build.sh");
    writeFileSync(script, `#!/usr/bin/env bash\nyes "warning: again and again" >&2\necho build/kernel.cubin\n`);
    utimesSync(src, new Date(Date.now() + 8000), new Date(Date.now() + 8000));
    const flood = sh(["make", "build/kernel.cubin"], { cwd: out, env });
    expect(flood.code).not.toBe(0);
    expect(statSync(join(out, "build/build.log")).size).toBe(32 << 20);
    expect(flood.err).toContain("make: build.sh wrote more than 33554432 bytes of messages: stopped");
  }, 120_000);

  test("the demo's fatbin (sm_90 machine code, compute_80 PTX): kernel.ptx is written; on an sm_80 GPU the program JIT-compiles it and says so; a bare cubin without PTX is refused with what it holds", async () => {
    const { cap, out, m } = await demo();
    const r = exportCapture(cap, out);
    expect(r.module).toMatchObject({ kind: "fatbin", sass: ["sm_90"], ptx: "compute_80", ptxFile: "kernel.ptx" });
    expect(readFileSync(join(out, "kernel.ptx"), "utf8")).toContain(".entry _Z5saxpyPK5Saxpy");
    make(out);
    const log = join(out, "fake.log");
    const jit = repro(out, appWrites(out, m), { KC_FAKE_NO_SASS: "1", KC_FAKE_CC: "80", KC_FAKE_LOG: log });
    expect(jit.out).toContain("module: no machine code for sm_80 in the image (it has sm_90): JIT-compiling its PTX (compute_80, kernel.ptx)");
    expect(jit.out).toContain("MATCH");
    expect(readFileSync(log, "utf8")).toContain("load ptx");
    // a received capture's names with terminal controls (a trial: the title set, the screen cleared) are refused when its
    // manifest is read, before anything is exported (adversary 90 #05); the program escapes what it prints all the same
    const hostile = await demo();
    const hm = JSON.parse(readFileSync(join(hostile.cap, "kerncap.json"), "utf8"));
    hm.kernel.demangled = "saxpy\u001b]0;pwned\u0007\u202e";
    hm.device.name = "H200\u009b2J";
    writeFileSync(join(hostile.cap, "kerncap.json"), JSON.stringify(hm, null, 2));
    let refused: unknown;
    try {
      exportCapture(hostile.cap, hostile.out);
    } catch (e) {
      refused = e;
    }
    expect((refused as { code?: string }).code).toBe("E_MANIFEST");
    expect(existsSync(hostile.out)).toBe(false);
    // asked-for help: the usage on stdout, exit 0, before the driver; an unknown option: exit 2
    const help = repro(out, null, {}, ["-h"]);
    expect([help.code, help.out.startsWith("usage: ./repro [-m MODULE]")]).toEqual([0, true]);
    expect(repro(out, null, {}, ["-x"]).code).toBe(2);
    // a bad count or a folder that is no export: a usage error before the driver (found by a new user: "cuInit failed" on a machine without a GPU)
    const n = repro(out, null, {}, ["-n", "abc"]);
    expect([n.code, n.err]).toEqual([2, "error: -n abc: give a whole number from 0 to 1000000\n"]);
    const d = repro(out, null, {}, ["-d", "/nonexistent"]);
    expect(d.code).toBe(2);
    expect(d.err).toContain("error: cannot open /nonexistent/data/");
    expect(d.err).toContain("not an export folder?");
    // a driver that JIT-compiles the fatbin's PTX itself: said too
    const itself = repro(out, appWrites(out, m), { KC_FAKE_CC: "86" });
    expect(itself.out).toContain("module: no machine code for sm_86 in the image (it has sm_90): the driver JIT-compiled its PTX (compute_80)");
    expect(readFileSync(join(out, "README.md"), "utf8")).toContain("the driver JIT-compiles the PTX");
    const t = await tritonCapture(); // its module: a bare cubin, no PTX
    const tout = join(t.cap, "..", "out");
    exportCapture(t.cap, tout);
    make(tout);
    const bare = repro(tout, null, { KC_FAKE_NO_SASS: "1", KC_FAKE_CC: "80" });
    expect(bare.err).toContain("cuModuleLoadData(./data/kernel/module.cubin) failed: no kernel image is available for execution on the device");
    expect(bare.err).toContain("This GPU is sm_80; the image holds machine code for (unknown) and no PTX");
    expect(bare.code).toBe(2);
  }, 120_000);
});

describe("kerncap export: what the Triton script imports and evaluates", () => {
  test("comes from pinned.json (what trust shows and hashes), not the manifest; a received capture without one gets neither (adversary 53)", async () => {
    const { cap } = await tritonCapture(); // its manifest: fnName axpy_kernel, BLOCK's expression "128"
    const pinned = {
      fnName: "axpy_kernel",
      python: "python3",
      kernelFile: "axpy_kernel.py",
      signature: {},
      constexprs: [{ name: "BLOCK", expr: "64" }],
      options: {},
    };
    writeFileSync(join(cap, "pinned.json"), JSON.stringify(pinned));
    const doc = (out: string) => JSON.parse(readFileSync(join(out, EXPORT_FILE), "utf8")).triton;
    const own = join(cap, "..", "own");
    exportCapture(cap, own);
    expect(doc(own)).toMatchObject({ kernelFile: "src/axpy_kernel.py", constexprs: [{ name: "BLOCK", expr: "64", value: 128 }] });
    // a received capture with no pinned.json: the manifest's expression and file name are the sender's, never run
    rmSync(join(cap, "pinned.json"));
    const p = await packCapture(cap, join(cap, "..", "t.zip"));
    const got = (await unpackArchive(p.archive, join(cap, "..", "got"))).dir;
    const theirs = join(cap, "..", "theirs");
    exportCapture(got, theirs);
    expect(doc(theirs)).toMatchObject({ fnName: null, kernelFile: null, constexprs: [{ name: "BLOCK", expr: null, value: 128 }] });
    // a received pinned.json naming no kernelFile (adversary 79 #21): no file named after its fnName either, which no prompt showed or
    // hashed; the script refuses, exit 2, naming what is missing
    const { kernelFile: _, ...noKernelFile } = pinned;
    writeFileSync(join(cap, "pinned.json"), JSON.stringify(noKernelFile));
    const p2 = await packCapture(cap, join(cap, "..", "t2.zip"));
    const got2 = (await unpackArchive(p2.archive, join(cap, "..", "got2"))).dir;
    const theirs2 = join(cap, "..", "theirs2");
    exportCapture(got2, theirs2);
    expect(doc(theirs2)).toMatchObject({ fnName: "axpy_kernel", kernelFile: null });
    if (PY) {
      const ran = sh([PY, join(theirs2, "repro.py"), "--no-verify"], { env: { PYTHONPATH: fakeTorchTriton(join(cap, "..")), TRITON_INTERPRET: "1" } });
      expect(ran.err).toContain("names no kernel file");
      expect(ran.code).toBe(2);
    }
  });
});

describe.skipIf(!PY)("kerncap export: the Triton script runs the kernel file alone", () => {
  test("a module beside it in the export (src/helper.py, ./helper.py) is not importable by the kernel file: only what trust showed runs (adversary 79 #23)", async () => {
    const { cap } = await tritonCapture();
    const root = join(cap, "..");
    const ran = join(root, "helper-ran");
    writeFileSync(join(cap, "src/helper.py"), `open(${JSON.stringify(ran)}, "w").close()\n`);
    const kernel = join(cap, "src/axpy_kernel.py");
    const reached = join(root, "kernel-ran");
    writeFileSync(
      kernel,
      `open(${JSON.stringify(reached)}, "w").close()\ntry:\n    from src import helper\nexcept ImportError:\n    pass\ntry:\n    import helper\nexcept ImportError:\n    pass\n${readFileSync(kernel, "utf8")}`,
    );
    const out = join(root, "out");
    exportCapture(cap, out);
    expect(existsSync(join(out, "src/helper.py"))).toBe(true); // the project is copied whole; it is not on the import path
    copyFileSync(join(out, "src/helper.py"), join(out, "helper.py"));
    for (const cwd of [out, root]) {
      const r = sh([PY!, join(out, "repro.py"), "--no-verify"], { cwd, env: { PYTHONPATH: fakeTorchTriton(root), TRITON_INTERPRET: "1" } });
      expect(r.err).not.toContain("No module named 'kcdata'"); // kcdata is loaded by its path
      expect(existsSync(reached)).toBe(true); // the kernel file ran (and tried both imports)
      expect(existsSync(ran)).toBe(false);
      rmSync(reached);
    }
    // and through `python3 -c` from the export's folder ('' on the path): not imported either
    const c = sh([PY!, "-c", `import runpy, sys; sys.argv = ["repro.py", "--no-verify"]; runpy.run_path("repro.py", run_name="__main__")`], {
      cwd: out,
      env: { PYTHONPATH: fakeTorchTriton(root), TRITON_INTERPRET: "1" },
    });
    expect(c.err).not.toContain("No module named 'kcdata'");
    expect(existsSync(reached)).toBe(true);
    expect(existsSync(ran)).toBe(false);
  });
});

describe.skipIf(!PY)("kerncap export: the Triton script's reconstruction (kcdata.py, python3, no Triton or PyTorch)", () => {
  test("each argument's region, offset, element count and type; region bytes before and after; judge", async () => {
    const { cap } = await tritonCapture();
    const out = join(cap, "..", "out");
    const r = exportCapture(cap, out);
    expect(r.commands.triton).toBe("python3 repro.py");
    expect(existsSync(join(out, "src/axpy_kernel.py"))).toBe(true);
    const doc = JSON.parse(readFileSync(join(out, EXPORT_FILE), "utf8"));
    expect(doc.triton.args).toEqual([
      { name: "x_ptr", kind: "tensor", dtype: "fp32", region: 0, offset: 0, numel: 3097 },
      { name: "y_ptr", kind: "tensor", dtype: "fp32", region: 1, offset: 64, numel: 2032 },
      { name: "n", kind: "scalar", type: "i32", value: 1000 },
      { name: "alpha", kind: "scalar", type: "fp32", value: 2.5 },
    ]);
    expect(doc.triton.constexprs).toEqual([{ name: "BLOCK", expr: "128", value: 128 }]);
    expect(doc.triton.options).toEqual({ num_warps: 4, num_stages: 2 });
    const script = `
import struct, sys
sys.path.insert(0, ${JSON.stringify(out)})
import kcdata
ex = kcdata.Export(${JSON.stringify(out)})
x = ex.region_bytes(0, "before")
xs = struct.unpack("<%df" % (len(x) // 4), x[: len(x) // 4 * 4])
assert xs[5] == 2.5 and xs[1500] == 0.0 and xs[3000] == 1500.0, (xs[5], xs[1500], xs[3000])
y0, y1 = ex.region_bytes(1, "before"), ex.region_bytes(1, "after")
f = lambda b, i: struct.unpack_from("<f", b, 4 * i)[0]
assert f(y0, 1500) == -1500.0 and f(y1, 1500) == 4500.0 and f(y1, 10) == -10.0
arg, ri, off, numel, dt = ex.tensor_args()[1]
assert (ri, off, numel, dt) == (1, 64, 2032, "fp32")
assert kcdata.judge(y1, y1, y0, True, "fp32") == ("bit-exact", "")
assert kcdata.judge(y0, y1, y0, True, "fp32")[0] == "mismatch"
near = bytearray(y1); near[4 * 1500] ^= 1
assert kcdata.judge(near, y1, y0, True, "fp32", 1e-3, 0)[0] == "within-tolerance"
assert kcdata.judge(near, y1, y0, True, "fp32")[0] == "mismatch"
assert kcdata.judge(near, y1, y0, True, "i32")[0] == "mismatch"
# as a multiset (kerncap judge --multiset): the app's elements in another order match, another element does not
sw = bytearray(y1); sw[0:4], sw[4 * 1500:4 * 1501] = y1[4 * 1500:4 * 1501], y1[0:4]
assert kcdata.judge(sw, y1, y0, True, "fp32")[0] == "mismatch"
assert kcdata.judge(sw, y1, y0, True, "fp32", multiset=True) == ("multiset-equal", "the app's elements in another order")
assert kcdata.judge(near, y1, y0, True, "fp32", multiset=True)[0] == "mismatch", kcdata.judge(near, y1, y0, True, "fp32", multiset=True)
assert kcdata.multiset_difference(bytes(near), bytes(y1), 4) == 2
assert kcdata.judge(y1, y1, y0, True, "fp32", multiset=True) == ("bit-exact", "")
# text from the capture is shown escaped: an escape sequence, a C1 control, a bidi override never reach the terminal
assert kcdata.shown("k\x1b]0;t\x07\x9b2J\u202e") == "k\\\\x1b]0;t\\\\x07\\\\x9b2J\\\\u202e", kcdata.shown("k\x1b]0;t\x07\x9b2J\u202e")
print("ok")
`;
    const p = sh([PY!, "-c", script]);
    expect(p.err).toBe("");
    expect(p.out.trim()).toBe("ok");
    const syntax = sh([PY!, "-m", "py_compile", join(out, "repro.py")]);
    expect(syntax.code).toBe(0);
    // without PyTorch (this machine) the script says what it needs
    const run = sh([PY!, join(out, "repro.py")]);
    if (sh([PY!, "-c", "import torch"]).code !== 0) {
      expect(run.err).toContain("repro.py needs PyTorch and Triton");
      expect(run.code).toBe(2); // an error, as its docstring and the README say (1 is a MISMATCH)
    }
    // an error's text and a traceback (which quotes the kernel file's lines) reach the terminal escaped: a stand-in torch
    // whose import fails, then one whose cuda.is_available raises
    const fake = join(out, "..", "fake-py");
    mkdirSync(join(fake, "torch"), { recursive: true });
    mkdirSync(join(fake, "triton"), { recursive: true });
    writeFileSync(join(fake, "triton/__init__.py"), "");
    const hostile = "x\\x1b]52;c;ZWNobw==\\x07\\x1b[2Jy\\u202e";
    writeFileSync(join(fake, "torch/__init__.py"), `raise RuntimeError("${hostile}")\n`);
    const failed = sh([PY!, join(out, "repro.py"), "--no-verify"], { env: { PYTHONPATH: fake } });
    expect(failed.err).toContain("RuntimeError: x\\x1b]52;c;ZWNobw==\\x07\\x1b[2Jy\\u202e");
    expect(failed.err).not.toMatch(/[\x1b\x07\u202e]/);
    expect(failed.code).toBe(2);
    writeFileSync(
      join(fake, "torch/__init__.py"),
      `class _Cuda:\n    def is_available(self):\n        raise ValueError("${hostile}")  # ${hostile}\ncuda = _Cuda()\n`,
    );
    const traced = sh([PY!, join(out, "repro.py"), "--no-verify"], { env: { PYTHONPATH: fake } });
    expect(traced.err).toContain("Traceback (most recent call last):");
    expect(traced.err).toContain("ValueError: x\\x1b]52;c;ZWNobw==\\x07\\x1b[2Jy\\u202e");
    expect(traced.err).not.toMatch(/[\x1b\x07\u202e]/);
    expect(traced.code).toBe(2);
    // a warning compile() gives quotes the kernel file's line (Python prints it raw): shown escaped too
    writeFileSync(join(fake, "torch/__init__.py"), "class _Cuda:\n    def is_available(self):\n        return False\ncuda = _Cuda()\n");
    const kernelFile = join(out, JSON.parse(readFileSync(join(out, EXPORT_FILE), "utf8")).triton.kernelFile);
    writeFileSync(kernelFile, `${readFileSync(kernelFile, "utf8")}\n_kc = 0 is 1  # \x1b]0;PWNED\x07\x1b[2J \u202etxt.exe\n`);
    const warned = sh([PY!, join(out, "repro.py"), "--no-verify"], { env: { PYTHONPATH: fake, TRITON_INTERPRET: "1" } });
    expect(warned.err).toContain("SyntaxWarning");
    expect(warned.err).toContain("_kc = 0 is 1  # \\x1b]0;PWNED\\x07\\x1b[2J \\u202etxt.exe");
    expect(warned.err).not.toMatch(/[\x1b\x07\u202e]/);
    const readme = readFileSync(join(out, "README.md"), "utf8");
    expect(readme).toContain("TRITON_INTERPRET=1 python3 repro.py");
  });

  test("repro.py checks every data file against the export's sizes and kc64 checksums before anything else: a flipped byte, a truncated file is exit 3 naming it; --no-verify skips it", async () => {
    const { cap } = await tritonCapture();
    const out = join(cap, "..", "out");
    exportCapture(cap, out);
    const doc = JSON.parse(readFileSync(join(out, EXPORT_FILE), "utf8"));
    // the same tables as capture.h's, for the C program: every memory file, the parameters, the module
    const header = readFileSync(join(out, "capture.h"), "utf8");
    expect(doc.dataFiles.map((f: { path: string }) => f.path)).toEqual(expect.arrayContaining(["data/memory/before.bin", "data/memory/after.bin"]));
    for (const [, , , hex] of doc.dataDigests) expect(header).toContain(`0x${hex}ull`);
    // kcdata's kc64 (numpy, and plain Python) is kerncap's on odd lengths and unaligned tails
    const lengths = [0, 1, 3, 4, 5, 4095, 4096, 4099];
    const sample = new Uint8Array(4099).map((_, i) => (i * 131 + 7) & 255);
    const want = lengths.map((n) => kc64(sample.subarray(0, n)).hex);
    const check = `
import sys, builtins
sys.path.insert(0, ${JSON.stringify(out)})
import kcdata
b = bytes((i * 131 + 7) & 255 for i in range(4099))
got = ["%016x" % kcdata.kc64(b[:n]) for n in ${JSON.stringify(lengths)}]
real = builtins.__import__
builtins.__import__ = lambda name, *a, **k: (_ for _ in ()).throw(ImportError(name)) if name == "numpy" else real(name, *a, **k)
plain = ["%016x" % kcdata.kc64(b[:n]) for n in ${JSON.stringify(lengths)}]
print(" ".join(got)); print(" ".join(plain))
`;
    const k = sh([PY!, "-c", check]);
    expect(k.err).toBe("");
    expect(k.out.trim().split("\n")).toEqual([want.join(" "), want.join(" ")]);
    // intact: past the check (here it stops at PyTorch, exit 2, or runs where PyTorch is)
    expect(sh([PY!, join(out, "repro.py")]).code).not.toBe(3);
    const after = join(out, "data/memory/after.bin");
    const bytes = readFileSync(after);
    const flipped = Buffer.from(bytes);
    flipped[flipped.length - 5]! ^= 0x10;
    writeFileSync(after, flipped);
    const bad = sh([PY!, join(out, "repro.py")]);
    expect(bad.code).toBe(3);
    expect(bad.err).toContain("data/memory/after.bin: bytes ");
    expect(bad.err).toContain("differ from their checksum");
    expect(sh([PY!, join(out, "repro.py"), "--no-verify"]).code).not.toBe(3);
    writeFileSync(after, bytes.subarray(0, bytes.length - 1));
    const short = sh([PY!, join(out, "repro.py")]);
    expect(short.code).toBe(3);
    expect(short.err).toContain(`data/memory/after.bin: ${bytes.length - 1} bytes, the export recorded ${bytes.length} (truncated)`);
    writeFileSync(after, bytes);
    // a crafted kerncap-export.json (adversary 29: a negative offset or a non-hex digest ended in a traceback, exit 1,
    // MISMATCH's status; a data file named ../../etc/hostname was opened): each refused as damaged, exit 3, nothing outside read
    const docFile = join(out, EXPORT_FILE);
    const original = readFileSync(docFile, "utf8");
    const crafted = (edit: (d: any) => void) => {
      const d = JSON.parse(original);
      edit(d);
      writeFileSync(docFile, JSON.stringify(d));
      const r = sh([PY!, join(out, "repro.py")]);
      writeFileSync(docFile, original);
      return r;
    };
    for (const [edit, said] of [
      [(d: any) => (d.dataFiles[0].path = "../../../../etc/hostname"), "which is no file inside the export"],
      [(d: any) => (d.dataFiles[0].path = "/etc/hostname"), "which is no file inside the export"],
      [(d: any) => (d.dataDigests[0][1] = -4), "not [file, offset, length, 16 hex digits]"],
      [(d: any) => (d.dataDigests[0][3] = "zz"), "not [file, offset, length, 16 hex digits]"],
      [(d: any) => (d.dataDigests[0][2] = 1e12), "past the end of its file"],
      [(d: any) => (d.dataFiles[0].bytes = "many"), "dataFiles is not a list"],
      [(d: any) => (d.files.before = "../../../../etc/passwd"), "which is no file inside the export"],
    ] as const) {
      const r = crafted(edit);
      expect(r.code, r.err).toBe(3);
      expect(r.err).toContain(said);
      expect(r.err).not.toContain("Traceback");
    }
    // an error it did not foresee is exit 2 (an error), never 1 (MISMATCH)
    writeFileSync(docFile, "{ not json");
    const broken = sh([PY!, join(out, "repro.py")]);
    writeFileSync(docFile, original);
    expect(broken.code).toBe(2);
  }, 60_000); // about 20 runs of python3 (4.7 s on 2 cores, idle)

  test("a captured VA in the before state is reported, by the export and by the script", async () => {
    // region 0's first word holds the VA of region 1: the kernel may follow it
    const { cap, m } = await tritonCapture((before) => before.setBigUint64(0, 0x7f0000100040n, true));
    const out = join(cap, "..", "out");
    const r = exportCapture(cap, out);
    expect(r.triton!.storedPointer).toEqual({ region: "0x7f0000000000", offset: 0, va: "0x7f0000100040" });
    const run = sh([PY!, join(out, "repro.py")]);
    expect(run.err).toContain("region 0x7f0000000000 holds the VA 0x7f0000100040");
    expect(run.err).toContain("make run");
    expect(readFileSync(join(out, "README.md"), "utf8")).toContain("**Pointers in memory**");
    void m;
  });
});
