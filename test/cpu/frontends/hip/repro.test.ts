/**
 * Renders a HIP reproducer from test/apps/hip/vecops.hip, runs the rendered build.sh with the
 * Debian ROCm 5.2 hipcc (no GPU needed), and checks that the rebuilt code object exports the same
 * kernel symbols with the same kernarg layout as the application's own build, that an edit in src/
 * takes effect, and that the original tree is untouched.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { amdgpuCodeObjects, findKernel, kernargLayout, parseAmdgpuCodeObject } from "../../../../src/codeobj/amdgpu.ts";
import { renderHipReproducer } from "../../../../src/frontends/hip/repro.ts";
import { shellQuote as shq } from "../../../../src/util/shell-quote.ts";

const APP = resolve(import.meta.dir, "../../../apps/hip");
const hipcc = Bun.which("hipcc");
const SKIP_REASON = hipcc ? "" : "(skipped: hipcc not found; run scripts/install-rocm.sh)";
const FLAGS = ["-O2", "-std=c++17", "-DKERNCAP_TEST=1"];
const ARCH = "gfx90a";
const KERNELS = ["saxpy", "_Z13scale_inplace11ScaleParamsPf", "_Z6gatherPKPfPKiS_i"];

let tmp = "";
let appDir = "";
beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), "kerncap-hip-repro-"));
  // A copy of the application tree with a space in its path, standing in for the user's project.
  appDir = join(tmp, "my app");
  mkdirSync(appDir);
  for (const f of ["vecops.hip", "vecops_params.h"]) copyFileSync(join(APP, f), join(appDir, f));
});
afterAll(() => tmp && rmSync(tmp, { recursive: true, force: true }));

describe("renderHipReproducer (no compiler)", () => {
  test("renders build.sh (executable) and README, copies the source, strict on missing fields", () => {
    const r = renderHipReproducer({
      outDir: join(tmp, "r0"),
      kernelName: "saxpy",
      originalSource: join(appDir, "vecops.hip"),
      compileFlags: ["-O2", "-DNAME=a b"],
      arch: ARCH,
    });
    expect(r.files.sort()).toEqual(["README.md", "build.sh", "src/vecops.hip"]);
    expect(statSync(r.buildScript).mode & 0o111).toBe(0o111);
    const sh = readFileSync(r.buildScript, "utf8");
    expect(sh).toContain("--offload-arch=gfx90a");
    expect(sh).toContain("-ivfsoverlay");
    expect(sh).toContain(`-O2 '-DNAME=a b'`);
    expect(sh).toContain(shq(join(appDir, "vecops.hip")));
    expect(readFileSync(join(r.outDir, "README.md"), "utf8")).toContain("src/vecops.hip");
    expect(() => renderHipReproducer({ outDir: join(tmp, "r1"), kernelName: "k", originalSource: "rel.hip", compileFlags: [], arch: ARCH })).toThrow(
      /absolute/,
    );
    expect(() => renderHipReproducer({ outDir: join(tmp, "r1"), kernelName: "k", originalSource: "/nonexistent/x.hip", compileFlags: [], arch: ARCH })).toThrow(
      /not found/,
    );
  });
});

describe("a project's group-writable source (trial 20)", () => {
  test("copied into src/ without group or other write: a file under src/ others may write makes the capture received", () => {
    const proj = join(tmp, "team project");
    mkdirSync(proj);
    copyFileSync(join(APP, "vecops.hip"), join(proj, "vecops.hip"));
    chmodSync(join(proj, "vecops.hip"), 0o664); // umask 002 in a team's tree; copyFileSync keeps the mode
    const r = renderHipReproducer({ outDir: join(tmp, "r-team"), kernelName: "saxpy", originalSource: join(proj, "vecops.hip"), compileFlags: [], arch: ARCH });
    expect(statSync(join(r.outDir, "src/vecops.hip")).mode & 0o777).toBe(0o644);
    expect(statSync(join(r.outDir, "src")).mode & 0o022).toBe(0);
  });
});

describe.skipIf(!hipcc)(`HIP reproducer build with hipcc ${SKIP_REASON}`, () => {
  test("rebuilt code object: same kernel symbols and kernarg layout; edits apply; original untouched", () => {
    const original = join(appDir, "vecops.hip");
    const originalBytes = readFileSync(original, "utf8");
    // The application's own device build (what a capture would hold).
    const ref = join(tmp, "ref.o");
    const b = Bun.spawnSync(["hipcc", `--offload-arch=${ARCH}`, "--cuda-device-only", "-c", ...FLAGS, original, "-o", ref], {
      env: { ...process.env, HIP_PLATFORM: "amd" },
    });
    expect(b.stderr.toString()).toBe("");
    const refCo = parseAmdgpuCodeObject(amdgpuCodeObjects(new Uint8Array(readFileSync(ref)), ARCH)[0]!.bytes);

    const r = renderHipReproducer({
      outDir: join(tmp, "repro"),
      kernelName: "_Z13scale_inplace11ScaleParamsPf",
      demangledName: "scale_inplace(ScaleParams, float*)",
      originalSource: original,
      compileFlags: FLAGS,
      arch: ARCH,
    });
    // Edit the copy: change the kernel body and add a marker kernel.
    const copy = join(r.outDir, "src", "vecops.hip");
    writeFileSync(
      copy,
      readFileSync(copy, "utf8").replace("data[i] * p.factor + p.bias", "data[i] * p.factor - p.bias") +
        '\nextern "C" __global__ void kerncap_edit_marker(int* p) { *p = 1; }\n',
    );
    const run = Bun.spawnSync(["bash", r.buildScript], { cwd: tmp });
    expect(run.stderr.toString()).toBe("");
    expect(run.exitCode).toBe(0);
    const built = new Uint8Array(readFileSync(join(r.outDir, "build", "kernel.hsaco")));
    const co = parseAmdgpuCodeObject(built); // a plain ELF, not a bundle
    expect(co.arch).toBe(ARCH);
    for (const name of KERNELS) {
      const k = findKernel(co, name);
      const rk = findKernel(refCo, name);
      expect(co.symbols.some((s) => s.name === `${name}.kd`)).toBe(true);
      expect(k.kernargSegmentSize).toBe(rk.kernargSegmentSize);
      expect(k.args.map(({ offset, size, valueKind }) => ({ offset, size, valueKind }))).toEqual(
        rk.args.map(({ offset, size, valueKind }) => ({ offset, size, valueKind })),
      );
    }
    expect(kernargLayout(findKernel(co, "_Z13scale_inplace11ScaleParamsPf"))).toEqual([
      { index: 0, offset: 0, size: 12 },
      { index: 1, offset: 16, size: 8 },
    ]);
    // The edited copy was compiled, the original file was not changed.
    expect(co.kernels.some((k) => k.name === "kerncap_edit_marker")).toBe(true);
    expect(refCo.kernels.some((k) => k.name === "kerncap_edit_marker")).toBe(false);
    expect(readFileSync(original, "utf8")).toBe(originalBytes);
  }, 60_000); // two hipcc builds: seconds each on a loaded machine
});
