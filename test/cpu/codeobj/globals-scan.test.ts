/**
 * The capture library's module-globals scan (c/cuda/kc_symbols.h, C) on modules nvcc builds here:
 * a cubin and fatbins stored plain, LZ4- and zstd-compressed. The names it reports are what the
 * library asks cuModuleGetGlobal about at capture time. Skips without nvcc or gcc.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { buildFixtures, NVCC } from "../../nvcc-fixtures.ts";

const GCC = Bun.which("gcc");
const dir = mkdtempSync(join(tmpdir(), "kerncap-symbols-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const GLOBALS = ["const_coef", "const_init", "dev_counter", "dev_table", "man_val"];

describe.skipIf(!NVCC || !GCC)("module globals scan (c/cuda/kc_symbols.h)", () => {
  const exe = join(dir, "symbols_main");
  const scan = (bytes: Uint8Array, sm: number) => {
    const f = join(dir, `m-${sm}-${bytes.length}`);
    writeFileSync(f, bytes);
    const p = Bun.spawnSync([exe, f, String(sm)], { stdout: "pipe", stderr: "pipe" });
    expect(p.exitCode, p.stderr.toString()).toBe(0);
    const lines = p.stdout.toString().trim().split("\n");
    return { names: [...new Set(lines.slice(0, -1))].sort(), skipped: Number(lines.at(-1)!.split(" ")[1]) };
  };

  test("cubin and fatbins (plain, LZ4, zstd): the __device__/__constant__/__managed__ variables, for the device's SM only", async () => {
    const cc = Bun.spawnSync([GCC!, "-O1", "-Wall", "-o", exe, resolve(import.meta.dir, "../../../c/test/symbols_main.c"), "-ldl"], { stderr: "pipe" });
    expect(cc.exitCode, cc.stderr.toString()).toBe(0);
    const fx = await buildFixtures();
    const want = (names: string[]) => GLOBALS.every((g) => names.includes(g));
    const cubin = scan(fx.cubin.sm_90, 90);
    expect(want(cubin.names), cubin.names.join(",")).toBe(true);
    expect(cubin.names.some((n) => n.startsWith("_Z2tk"))).toBe(false); // functions are not data
    for (const [what, img] of [
      ["plain", fx.fatbinPlain],
      ["lz4", fx.fatbinLz4],
      ["zstd", fx.fatbinZstd],
      ["default", fx.fatbin],
    ] as const) {
      const r = scan(img, 90);
      // a compressed entry counts as skipped only where libzstd/liblz4 are missing
      expect(want(r.names) || r.skipped > 0, `${what}: ${r.names.join(",")} skipped ${r.skipped}`).toBe(true);
      if (what === "plain") expect(r).toEqual(cubin);
    }
    expect(scan(fx.fatbinPlain, 75)).toEqual({ names: [], skipped: 0 }); // no cubin for sm_75
  }, 120_000);
});
