/**
 * `kerncap run` and `kerncap list` on AMD, end to end on the CPU: the real CLI injects the HSA
 * capture library through HSA_TOOLS_LIB (src/capture/injector.ts), the "application" is
 * fake_hsa_runtime.c (it finds the tool library as ROCr does and hands it a stub HSA API table),
 * the runtime probe loads fake_libhsa.c (KERNCAP_HSA_PATH), and finalize turns the raw capture
 * into a capture folder. Exercised: --runtime hsa and its detection, the injection variable, the
 * KERNCAP_* settings, the library's raw_version 2 output, finalize. NOT exercised: ROCr, an AMD GPU
 * (no AMD GPU ever ran kerncap's HSA path).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { chooseRuntime, injectorFor } from "../../src/capture/injector.ts";
import { buildFakeHsa, buildFakeHsaApp } from "../hip-fixture.ts";

const ROOT = resolve(import.meta.dir, "../..");
const MAIN = join(ROOT, "src/cli/main.ts");
const LIB = join(ROOT, "c/build/libkerncap_hsa.so");
const INC = process.env.HSA_INCLUDE ?? "/usr/include"; // as scripts/build-hsa.sh reads it
const haveHeaders = existsSync(`${INC}/hsa/hsa.h`) && existsSync(`${INC}/hsa/hsa_ext_amd.h`);
const SKIP = !haveHeaders || !Bun.which("gcc");

let tmp = "";
let app = "";
let fakeHsa = "";
let co = "";
beforeAll(() => {
  if (SKIP) return;
  tmp = mkdtempSync(join(tmpdir(), "kerncap-hsa-run-"));
  if (!existsSync(LIB)) Bun.spawnSync(["bash", join(ROOT, "scripts/build-hsa.sh")]);
  app = join(tmp, "fake_hsa_runtime");
  buildFakeHsaApp(app, INC);
  fakeHsa = join(tmp, "libfake_hsa.so");
  buildFakeHsa(fakeHsa);
  co = join(tmp, "module.co");
  Bun.write(co, new Uint8Array([0x7f, 0x45, 0x4c, 0x46, ...new TextEncoder().encode("_Z5scalePffi other")]));
});
afterAll(() => tmp && rmSync(tmp, { recursive: true, force: true }));

function kerncap(args: string[], extra: Record<string, string> = {}) {
  const p = Bun.spawnSync([process.execPath, MAIN, ...args], {
    env: { ...process.env, KERNCAP_HSA_PATH: fakeHsa, KERNCAP_CACHE: join(tmp, "cache"), KERNCAP_TRITON: "0", ...extra },
    cwd: tmp,
    stdout: "pipe",
    stderr: "pipe",
    timeout: 60_000,
  });
  return { code: p.exitCode, stdout: p.stdout.toString(), stderr: p.stderr.toString() };
}

test("the runtime: --runtime wins; else libcuda first, then libhsa-runtime64, else CUDA (whose probe says what is missing)", () => {
  const has = (cuda: boolean, hsa: boolean) => ({ cuda: () => cuda, hsa: () => hsa });
  expect(chooseRuntime("hsa", has(true, false))).toBe("hsa");
  expect(chooseRuntime(undefined, has(true, true))).toBe("cuda");
  expect(chooseRuntime(undefined, has(false, true))).toBe("hsa");
  expect(chooseRuntime(undefined, has(false, false))).toBe("cuda");
  expect(injectorFor("hsa").variable).toBe("HSA_TOOLS_LIB");
  expect(injectorFor("cuda").variable).toBe("CUDA_INJECTION64_PATH");
  expect(() => injectorFor("rocm")).toThrow(/--runtime "rocm"/);
});

describe.skipIf(SKIP)("kerncap run/list --runtime hsa on the fake HSA runtime", () => {
  test("run: captures the 2nd matching dispatch into a capture folder (vendor amd, hashed on the CPU)", () => {
    const out = join(tmp, "cap");
    const r = kerncap(["run", "--runtime", "hsa", "--kernel", "^scale\\(", "--dispatch", "1", "-o", out, "--json", "--", app, co]);
    expect(r.stderr).not.toContain("E_");
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ dir: out, kernel: "scale(float*, float, int)", regions: 3 });
    const m = JSON.parse(readFileSync(join(out, "kerncap.json"), "utf8"));
    expect(m.kernel).toMatchObject({ name: "_Z5scalePffi", frontend: "hip", matchIndex: 1, launchIndex: 3 });
    expect(m.device).toMatchObject({ vendor: "amd", arch: "gfx90a", name: "Fake MI210" });
    expect(m.tool.library).toMatch(/^kerncap_hsa /);
    expect(m.regions.map((g: { hashedOn: string; changed: boolean }) => [g.hashedOn, g.changed])).toEqual([
      ["cpu", true],
      ["cpu", false],
      ["cpu", false],
    ]);
    expect(m.hsa).toMatchObject({ kernel_object: "0x1001", group_segment_size: 512 });
    expect(existsSync(join(out, "raw.json"))).toBe(false); // finalized
    // what was injected: the cache's copy of c/build/libkerncap_hsa.so (src/capture/lib.ts)
    expect(readdirSync(join(tmp, "cache")).some((n) => n.startsWith("hsa-lib-"))).toBe(true);
    expect(readFileSync(join(out, "kernel/params.bin")).length).toBe(16);
  });

  test("list: counts every dispatch of every kernel through the same injection", () => {
    const r = kerncap(["list", "--runtime", "hsa", "--json", "--", app, co]);
    expect(r.stderr).not.toContain("E_");
    expect(r.code).toBe(0);
    const doc = JSON.parse(r.stdout);
    expect(doc.launches).toBe(6);
    expect(doc.kernels.map((k: { name: string; count: number }) => [k.name, k.count]).sort()).toEqual([
      ["_Z5scalePffi", 3],
      ["other", 3],
    ]);
  });

  test("without a ROCm runtime, --runtime hsa is a clear error (exit 2) before the application runs", () => {
    const r = kerncap(["run", "--runtime", "hsa", "-o", join(tmp, "none"), "--", app, co], { KERNCAP_HSA_PATH: join(tmp, "no-such-libhsa.so") });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("libhsa-runtime64 not found");
    expect(existsSync(join(tmp, "none"))).toBe(false);
  });
});
