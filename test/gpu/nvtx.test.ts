/**
 * NVTX range selection on the GPU (`run`/`list` --nvtx-include/--nvtx-exclude): a CUDA app that
 * launches one kernel with a distinct tag in each NVTX place (test/apps/nvtx_ranges.cu: nested
 * push/pop ranges, a range pushed before cuInit, a start/end range, a named domain) is listed and
 * captured through the expressions, and only the launches inside the ranges named count; the
 * captured launch's tag (its second kernel parameter) says which one was taken. Then PyTorch's own
 * ranges (test/apps/torch_nvtx.py: torch.cuda.nvtx.range, record_function under emit_nvtx), when
 * torch with CUDA is installed.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { APPS, json, kerncap, run, skipReason, workDir } from "./harness.ts";

const SKIP = !!skipReason("nvtx tests");
const WORK = workDir("kerncap-nvtx-");
const kc = (args: string[]) => kerncap(WORK, args);
const MARK = "_Z4markPii";
const INNER = "_Z5innerPi";
let app = "";
beforeAll(() => {
  if (SKIP) return;
  app = join(WORK, "nvtx_ranges");
  const p = run(["nvcc", "-O2", "-arch=sm_90", "-o", app, join(APPS, "nvtx_ranges.cu"), "-ldl"], { cwd: WORK }); // NVTX 3 dlopens its tool (libdl before glibc 2.34)
  if (p.code !== 0) throw new Error(p.stderr);
});

/** `list --json` with these options: launches of mark and inner (0 when not listed). */
function counts(opts: string[]): { mark: number; inner: number; launches: number; stderr: string } {
  const r = kc(["list", "--json", ...opts, "--", app]);
  expect(r.code, r.stderr).toBe(0);
  const l = json(r);
  const n = (name: string) => l.kernels.find((k: any) => k.name === name)?.count ?? 0;
  return { mark: n(MARK), inner: n(INNER), launches: l.launches, stderr: r.stderr };
}

describe.skipIf(SKIP)("NVTX range selection (CUDA app)", () => {
  test("without --nvtx every launch counts", () => {
    expect(counts([])).toMatchObject({ mark: 8, inner: 1, launches: 9 });
  });

  test("list counts only the launches inside the ranges named", () => {
    const all = counts([]);
    const a = counts(["--nvtx", "--nvtx-include", "A/"]);
    expect(a).toMatchObject({ mark: 3, inner: 1, launches: 4 }); // tags 2, 3, 4 and inner
    expect(a.stderr).toContain(`${all.launches - a.launches} launches outside the NVTX selection were not counted`);
    expect(counts(["--nvtx-include", "A/B/"])).toMatchObject({ mark: 1, inner: 1 });
    expect(counts(["--nvtx-include", "A]"])).toMatchObject({ mark: 2, inner: 0 }); // A innermost: tags 2 and 4
    expect(counts(["--nvtx-include", "[init]"])).toMatchObject({ mark: 1, inner: 0 }); // pushed before cuInit
    expect(counts(["--nvtx-include", "S"])).toMatchObject({ mark: 1, inner: 0 }); // start/end
    expect(counts(["--nvtx-include", "lib@A/"])).toMatchObject({ mark: 1, inner: 0 }); // a named domain is its own
    expect(counts(["--nvtx-include", "regex:^[AC]$/"])).toMatchObject({ mark: 4, inner: 1 }); // tags 2, 3, 4, 5
    expect(counts(["--nvtx-include", "A/", "--nvtx-include", "C/"])).toMatchObject({ mark: 4, inner: 1 });
    expect(counts(["--nvtx-exclude", "A/"])).toMatchObject({ mark: 5, inner: 0 }); // tags 0, 1, 5, 6, 7
    expect(counts(["--nvtx-include", "A/", "--nvtx-exclude", "A/B/"])).toMatchObject({ mark: 2, inner: 0 });
  });

  test("list --print-summary per-nvtx: each launch under the ranges open in its thread", () => {
    const r = kc(["list", "--print-summary", "per-nvtx", "--json", "--", app]);
    expect(r.code, r.stderr).toBe(0);
    const ranges = json(r).processes[0].nvtx.ranges as { range: string; kernel: string; count: number }[];
    const got = Object.fromEntries(ranges.map((x) => [`${x.range} ${x.kernel}`, x.count]));
    expect(got).toEqual({
      [`init/ ${MARK}`]: 1,
      [` ${MARK}`]: 2, // tag 1, and tag 6 (inside start/end range S only)
      [`A/ ${MARK}`]: 2,
      [`A/B/ ${MARK}`]: 1,
      [`A/B/ ${INNER}`]: 1,
      [`C/ ${MARK}`]: 1,
      [`lib@A/ ${MARK}`]: 1,
    });
    const text = kc(["list", "--print-summary", "per-nvtx", "--", app]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toMatch(/^\s*A\/B\/\s+1\s+inner\(int\*\)$/m);
    expect(text.stdout).toMatch(/^\s*\(no range\)\s+2\s+mark\(int\*, int\)$/m);
  });

  test("run: --dispatch counts only the launches inside the range, and that launch is captured", () => {
    const out = join(WORK, "cap-a1");
    const r = kc(["run", "--nvtx-include", "A/", "--kernel", "^mark", "--dispatch", "1", "--out", out, "--json", "--", app]);
    expect(r.code, r.stderr).toBe(0);
    const params = readFileSync(join(out, "kernel/params.bin"));
    expect(params.readInt32LE(8)).toBe(3); // the 2nd launch of mark inside A: tag 3 (inside A/B)
    const s = kc(["run", "--nvtx-include", "S", "--kernel", "^mark", "--out", join(WORK, "cap-s"), "--json", "--", app]);
    expect(s.code, s.stderr).toBe(0);
    expect(readFileSync(join(WORK, "cap-s", "kernel/params.bin")).readInt32LE(8)).toBe(6);
    const rp = kc(["replay", out, "--json"]);
    expect(rp.code, rp.stderr).toBe(0);
  });

  test("a selection no launch is inside: run says no launch matched", () => {
    const r = kc(["run", "--nvtx-include", "nowhere/", "--out", join(WORK, "cap-none"), "--", app]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/\d+ launches outside the NVTX selection were not counted/);
  });
});

const TORCH = run(["python3", "-c", "import torch; assert torch.cuda.is_available()"], { cwd: "/" }).code === 0;
describe.skipIf(SKIP || !TORCH)("NVTX range selection (PyTorch)", () => {
  const names = (opts: string[]): string[] => {
    const r = kc(["list", "--json", ...opts, "--", "python3", join(APPS, "torch_nvtx.py")]);
    expect(r.code, r.stderr).toBe(0);
    return json(r).kernels.map((k: any) => k.demangled ?? k.name);
  };

  test("torch.cuda.nvtx.range: only x.sin()'s kernels", () => {
    const k = names(["--nvtx-include", "fwd/"]);
    expect(k.length).toBeGreaterThan(0);
    expect(k.some((n) => /sin/.test(n))).toBe(true);
    expect(k.some((n) => /cos|exp|tanh/.test(n))).toBe(false);
  });

  test("record_function under emit_nvtx: only x.exp()'s kernels", () => {
    const k = names(["--nvtx-include", "regex:^blk/"]);
    expect(k.some((n) => /exp/.test(n))).toBe(true);
    expect(k.some((n) => /sin|cos|tanh/.test(n))).toBe(false);
  });
});
