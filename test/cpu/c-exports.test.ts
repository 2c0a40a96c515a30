/**
 * The CUDA capture library's exported symbols (`nm -D`): exactly the injection entry points
 * (InitializeInjection for CUDA_INJECTION64_PATH, kerncap_set_ignore_launches for the frontend
 * shims, the cuptiSubscribe/cuptiSubscribe_v2 wrappers for LD_PRELOAD: c/cuda/kerncap_cuda.c), so that
 * none of its units' functions can shadow or be shadowed by the application's; and no link
 * against libcuda or libcupti (both are dlopen'ed inside the application). Built by
 * scripts/build-c.sh (scripts/test.sh runs it first); skipped without nm or the library.
 */
import { expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "../..");
const LIB = join(ROOT, "c/build/libkerncap_cuda.so");

function dynamicSymbols(lib: string, which: "--defined-only" | "--undefined-only"): string[] {
  const r = Bun.spawnSync(["nm", "-D", which, lib], { stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(r.stderr.toString());
  return r.stdout
    .toString()
    .split("\n")
    .map((l) => l.trim().split(/\s+/))
    .filter((f) => (which === "--defined-only" ? f.length === 3 && /[TDBRVWi]/.test(f[1]!) : f.length === 2))
    .map((f) => f[f.length - 1]!.replace(/@.*$/, ""));
}

test.skipIf(!Bun.which("nm") || !existsSync(LIB))("libkerncap_cuda.so exports exactly its injection entry points and links neither libcuda nor libcupti", () => {
  expect(dynamicSymbols(LIB, "--defined-only").sort()).toEqual(["InitializeInjection", "cuptiSubscribe", "cuptiSubscribe_v2", "kerncap_set_ignore_launches"]);
  const undef = dynamicSymbols(LIB, "--undefined-only");
  expect(undef.filter((s) => /^cu[A-Z]|^cupti/.test(s))).toEqual([]);
  expect(undef).toContain("dlopen"); // libcuda and libcupti are found at run time
  const needed = Bun.spawnSync(["readelf", "-d", LIB], { stdout: "pipe" }).stdout.toString();
  expect(needed).not.toMatch(/NEEDED.*lib(cuda|cupti)/);
});
