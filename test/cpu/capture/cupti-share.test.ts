/**
 * The CUDA capture library's cuptiSubscribe wrapper (c/cuda/kc_cupti.h) without a GPU: a stand-in
 * libcupti and an application linked against it, run with the library on LD_PRELOAD as kerncap
 * runs it. The application's calls must reach its own libcupti unchanged, and the library's census
 * (kernels.<pid>.json) must record each call with the calling object; the library's own failure
 * (no libcuda here) lands in error.<pid>.txt of that process.
 */
import { afterAll, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { readCensus } from "../../../src/capture/census.ts";

const GCC = Bun.which("gcc");
const LIB = resolve(import.meta.dir, "../../../c/build/libkerncap_cuda.so");
const SRC = resolve(import.meta.dir, "../../../c/test/cupti_app_main.c");
const dir = mkdtempSync(join(tmpdir(), "kerncap-cupti-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test.skipIf(!GCC || !existsSync(LIB))("the application's cuptiSubscribe passes through the wrapper to its own libcupti and is recorded in the census", () => {
  const cc = (args: string[]) => {
    const r = Bun.spawnSync([GCC!, "-O1", "-Wall", ...args], { stderr: "pipe" });
    expect(r.exitCode, r.stderr.toString()).toBe(0);
  };
  cc(["-DFAKE_CUPTI", "-shared", "-fPIC", "-o", join(dir, "libcupti.so"), SRC]);
  const app = join(dir, "app");
  cc(["-o", app, SRC, `-L${dir}`, "-lcupti", `-Wl,-rpath,${dir}`, "-ldl"]);
  // without kerncap: 0 then 39 (the stand-in's one-subscriber rule)
  const plain = Bun.spawnSync([app], { stdout: "pipe" });
  expect(plain.stdout.toString().trim()).toBe("0 39");
  const out = join(dir, "out");
  mkdirSync(out);
  const env = {
    PATH: process.env.PATH ?? "",
    LD_PRELOAD: LIB,
    KERNCAP_OUT: out,
    KERNCAP_MODE: "list",
    KERNCAP_CUPTI_PATH: join(dir, "libcupti.so"),
    LD_LIBRARY_PATH: dir,
  };
  const r = Bun.spawnSync([app], { env, stdout: "pipe", stderr: "pipe" });
  expect(r.exitCode, r.stderr.toString()).toBe(0);
  expect(r.stdout.toString().trim()).toBe("0 39"); // forwarded unchanged
  const c = readCensus(out);
  expect(c.processes).toHaveLength(1);
  const p = c.processes[0]!;
  expect(p.final).toBe(true);
  expect(p.process.pid).toBe(r.pid);
  expect(p.process.cmdline).toEqual([app]);
  expect(p.cupti?.appCalls.map((a) => [a.call, a.caller, a.result, a.kerncapHeld])).toEqual([
    ["cuptiSubscribe", app, 0, false],
    ["cuptiSubscribe", app, 39, false],
  ]);
  // no libcuda on this machine (or no GPU): the library failed in this process and said so in its own file
  expect(p.errors.length).toBeGreaterThan(0);
  expect(existsSync(join(out, `error.${r.pid}.txt`))).toBe(true);
  expect(existsSync(join(out, "processes/0"))).toBe(true);
});
