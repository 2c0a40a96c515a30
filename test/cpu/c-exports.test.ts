/**
 * The CUDA capture library's exported symbols (`nm -D`): exactly the injection entry points
 * (InitializeInjection for CUDA_INJECTION64_PATH, InitializeInjectionNvtx2 for NVTX_INJECTION64_PATH, kerncap_set_ignore_launches for the frontend
 * shims, the cuptiSubscribe/cuptiSubscribe_v2 wrappers for LD_PRELOAD: c/cuda/kerncap_cuda.c), so that
 * none of its units' functions can shadow or be shadowed by the application's; and no link
 * against libcuda or libcupti (both are dlopen'ed inside the application). Built by
 * scripts/build-c.sh (scripts/test.sh runs it first); skipped without nm or the library. And the
 * library's units call downwards only (no cycle between them): skipped without gcc or the CUDA headers.
 */
import { expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
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

test.skipIf(!Bun.which("nm") || !existsSync(LIB))(
  "libkerncap_cuda.so exports exactly its injection entry points and links neither libcuda nor libcupti",
  () => {
    expect(dynamicSymbols(LIB, "--defined-only").sort()).toEqual([
      "InitializeInjection",
      "InitializeInjectionNvtx2",
      "cuptiSubscribe",
      "cuptiSubscribe_v2",
      "kerncap_set_ignore_launches",
    ]);
    const undef = dynamicSymbols(LIB, "--undefined-only");
    expect(undef.filter((s) => /^cu[A-Z]|^cupti/.test(s))).toEqual([]);
    expect(undef).toContain("dlopen"); // libcuda and libcupti are found at run time
    const needed = Bun.spawnSync(["readelf", "-d", LIB], { stdout: "pipe" }).stdout.toString();
    expect(needed).not.toMatch(/NEEDED.*lib(cuda|cupti)/);
  },
);

// The CUDA library's units call downwards only (c/cuda/kc_state.h gives the order): each unit's
// object is compiled alone and its undefined symbols are looked up among the other units' defined ones.
const CUDA_UNITS = ["kerncap_cuda", "kc_graphs", "kc_capture", "kc_snapshot", "kc_out", "kc_cupti", "kc_nvtx", "kc_nvtx_filter"];
const cudaInclude = ["/usr/local/cuda", process.env.CUDA_HOME ?? ""]
  .filter(Boolean)
  .flatMap((h) => [`${h}/include`, `${h}/extras/CUPTI/include`])
  .filter((d) => existsSync(join(d, "cuda.h")) || existsSync(join(d, "cupti.h")));
test.skipIf(!Bun.which("gcc") || !Bun.which("nm") || !existsSync(join(ROOT, "c/build/kc_scan_fatbin.h")) || !cudaInclude.length)(
  "the CUDA library's units call only the units below them",
  () => {
    const tmp = mkdtempSync(join(tmpdir(), "kerncap-c-units-"));
    try {
      const defined = new Map<string, string>();
      const undef = new Map<string, string[]>();
      for (const u of CUDA_UNITS) {
        const o = join(tmp, `${u}.o`);
        const cc = Bun.spawnSync(
          [
            "gcc",
            "-std=gnu11",
            "-O0",
            "-fPIC",
            "-fvisibility=hidden",
            "-c",
            `-I${join(ROOT, "c/build")}`,
            `-I${join(ROOT, "c/cuda")}`,
            `-I${join(ROOT, "c/common")}`,
            ...cudaInclude.map((d) => `-I${d}`),
            "-o",
            o,
            join(ROOT, "c/cuda", `${u}.c`),
          ],
          { stderr: "pipe" },
        );
        expect(cc.exitCode, cc.stderr.toString()).toBe(0);
        const syms = Bun.spawnSync(["nm", o])
          .stdout.toString()
          .split("\n")
          .map((l) => l.trim().split(/\s+/));
        for (const f of syms) if (f.length === 3 && /[Tt]/.test(f[1]!)) defined.set(f[2]!, u); // functions (the state `kc` is data, shared by all)
        undef.set(
          u,
          syms.filter((f) => f.length === 2 && f[0] === "U").map((f) => f[1]!),
        );
      }
      const calls = CUDA_UNITS.map(
        (u) =>
          [
            u,
            [
              ...new Set(
                undef
                  .get(u)!
                  .map((s) => defined.get(s))
                  .filter((v): v is string => !!v && v !== u),
              ),
            ].sort(),
          ] as const,
      );
      for (const [u, to] of calls) for (const v of to) expect(CUDA_UNITS.indexOf(v), `${u} calls ${v}, above it`).toBeGreaterThan(CUDA_UNITS.indexOf(u));
      expect(Object.fromEntries(calls).kerncap_cuda).toContain("kc_capture"); // the graph is read at all
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  },
  60_000,
);
