import { describe, expect, test } from "bun:test";
import { runCommand } from "citty";
import { chmodSync, lchownSync, mkdirSync, readFileSync, symlinkSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { commands } from "../../../src/cli/verbs.ts";
import { describeAgainst, describeComparison } from "../../../src/cli/format.ts";
import { KerncapError } from "../../../src/errors.ts";
import { readManifest } from "../../../src/format/capture-dir.ts";
import { makeCapture, noGpuResult, tempDir } from "../fixtures.ts";
import { againstKernel, otherMemory } from "../../../src/replay/against.ts";
import { compareTimings } from "../../../src/replay/stats.ts";

async function two(): Promise<[string, string]> {
  const root = tempDir();
  await makeCapture(join(root, "a"));
  await makeCapture(join(root, "b"));
  return [join(root, "a"), join(root, "b")];
}

async function replayFails(args: string[]): Promise<KerncapError> {
  try {
    await runCommand(await commands.replay(), { rawArgs: args });
  } catch (e) {
    if (e instanceof KerncapError) return e;
    throw e;
  }
  throw new Error("replay did not fail");
}

describe("replay --against", () => {
  test("another capture of the same memory: its module, kernel name, launch configuration and parameter bytes", async () => {
    const [a, b] = await two();
    const k = againstKernel(readManifest(a), b);
    expect(k.kind).toBe("capture");
    expect(k.run.modulePath).toBe(join(b, "kernel/module.cubin"));
    expect(k.run.kernelName).toBe("_Z5scalePfi");
    expect(k.run.launch!.launch.grid).toEqual([4, 1, 1]);
    expect(k.run.launch!.params).toEqual(new Uint8Array(readFileSync(join(b, "kernel/params.bin"))));
  });
  test("a module file: launched with this capture's launch, looked up by the captured name", async () => {
    const [a] = await two();
    const cubin = join(tempDir(), "k.cubin");
    writeFileSync(cubin, readFileSync(join(a!, "kernel/module.cubin")));
    expect(againstKernel(readManifest(a), cubin)).toEqual({ kind: "module", path: cubin, run: { modulePath: cubin, kernelName: "_Z5scalePfi" } });
  });
  test("a file that is no module image (a patch given by mistake): E_MODULE_KIND naming the option, before any GPU work", async () => {
    // found by a new user: --module and --against of a text file said E_NO_GPU
    const [a] = await two();
    const patch = join(tempDir(), "fix.patch");
    writeFileSync(patch, "--- a/k.cu\n+++ b/k.cu\n");
    expect(() => againstKernel(readManifest(a), patch)).toThrow(`--against ${patch}: unknown module image (first bytes 2d 2d 2d 20)`);
    const e = await replayFails([a!, "--module", patch]);
    expect(e.code).toBe("E_MODULE_KIND");
    expect(e.message).toStartWith(`--module ${patch}: unknown module image`);
  });
  test("a module file that is a FIFO, a device, past the bound or another user's planted link: refused before a byte is read (adversary 85 #07)", async () => {
    const [a] = await two();
    const m = readManifest(a);
    const d = tempDir();
    const fifo = join(d, "k.cubin");
    expect(Bun.spawnSync(["mkfifo", fifo]).exitCode).toBe(0);
    symlinkSync("/dev/zero", join(d, "zero.cubin"));
    for (const p of [fifo, join(d, "zero.cubin")]) {
      const t0 = performance.now();
      expect(() => againstKernel(m, p), p).toThrow("is not a regular file");
      expect(performance.now() - t0).toBeLessThan(5000); // a FIFO hung, /dev/zero was read until memory ran out
    }
    // past the bound, sparse: refused by its size
    const big = join(d, "big.cubin");
    writeFileSync(big, "");
    truncateSync(big, (1 << 30) + 1);
    expect(() => againstKernel(m, big)).toThrow("more than the 1024 MiB");
    // a link another user made in a sticky folder: refused, its target never read
    if (process.getuid?.() === 0) {
      const sticky = join(d, "shared");
      mkdirSync(sticky);
      chmodSync(sticky, 0o1777);
      const secret = join(d, "secret");
      writeFileSync(secret, "secret");
      symlinkSync(secret, join(sticky, "m.cubin"));
      lchownSync(join(sticky, "m.cubin"), 65534, 65534);
      let err: unknown;
      try {
        againstKernel(m, join(sticky, "m.cubin"));
      } catch (e) {
        err = e;
      }
      expect((err as KerncapError).code).toBe("E_UNSAFE_PATH");
      expect((err as KerncapError).message).not.toContain("73 65 63 72");
      // the same link reached through a link of the user's own to that folder (adversary 86 #02: the parent read by lstat was the user's link)
      symlinkSync(sticky, join(d, "mine"));
      expect(() => againstKernel(m, join(d, "mine/m.cubin"))).toThrow("is a symbolic link that another user (uid 65534) made");
      // and in a folder others may write that is not sticky (adversary 87 #03c: a 0777 folder of root's or the user's own)
      const open = join(d, "open");
      mkdirSync(open);
      chmodSync(open, 0o777);
      symlinkSync(secret, join(open, "m.cubin"));
      lchownSync(join(open, "m.cubin"), 65534, 65534);
      expect(() => againstKernel(m, join(open, "m.cubin"))).toThrow("a folder others may write");
      // another user's link that a link of the user's names as its target (adversary 87 #03a: only the typed path was walked)
      mkdirSync(join(d, "private"));
      writeFileSync(join(d, "private/k.cubin"), "secret");
      symlinkSync(join(d, "private"), join(sticky, "proj"));
      lchownSync(join(sticky, "proj"), 65534, 65534);
      symlinkSync(join(sticky, "proj"), join(d, "proj-mine"));
      expect(() => againstKernel(m, join(d, "proj-mine/k.cubin"))).toThrow(`"${join(sticky, "proj")}" is a symbolic link that another user (uid 65534) made`);
    }
  });
  test("a capture of other memory is refused, naming the region; a damaged one by its checksum", async () => {
    const [a, b] = await two();
    const m = readManifest(a);
    const moved = { ...m, regions: m.regions.map((r, i) => (i === 1 ? { ...r, va: "0x7f0000020000" } : r)) };
    expect(otherMemory(m, moved)).toBe("region 1 is 8192 bytes at 0x7f0000020000, here 8192 bytes at 0x7f0000010000");
    expect(otherMemory(m, { ...m, regions: m.regions.slice(1) })).toBe("1 regions, this capture has 2");
    expect(otherMemory(m, { ...m, device: { ...m.device, arch: "sm_100" } })).toContain("sm_100");
    expect(otherMemory(m, m)).toBeUndefined();
    writeFileSync(join(b, "kernel/params.bin"), new Uint8Array(12).fill(1));
    expect(() => againstKernel(m, b)).toThrow(/checksum mismatch in kernel\/params.bin/);
  });
  test("usage errors before any GPU work: no such OTHER, --module with it, fewer than 5 pairs", async () => {
    const [a, b] = await two();
    expect((await replayFails([a, "--against", join(a, "nope")])).message).toContain("no such file or folder");
    expect((await replayFails([a, "--against", b, "--module", join(b, "kernel/module.cubin")])).message).toContain("--against and --module together");
    expect((await replayFails([a, "--against", b, "--iters", "3"])).message).toContain("--iters must be a whole number from 5");
  });
  test("the text: the other kernel's verdict and its time against the baseline's", () => {
    const A = [10, 10.1, 9.9, 10, 10.2, 10, 9.8, 10.1, 10, 10.3, 9.9, 10, 10, 10.1, 9.9, 10];
    const c = compareTimings(
      A,
      A.map((x, i) => x * (0.8 + 0.001 * (i % 3))),
    );
    expect(describeComparison(c)).toMatch(/^kernel time 10\.00 → 8\.0\d µs: 1\.2\d× faster \(1\.2\d–1\.2\d\), 16 interleaved launch pairs$/);
    // too few pairs for an interval: said, never a claim
    expect(
      describeComparison(
        compareTimings(
          A.slice(0, 6),
          A.slice(0, 6).map((x) => x * 0.8),
        ),
      ),
    ).toContain("no difference claimed: 6 launch pairs are too few");
    expect(describeComparison(null)).toContain("not compared");
    expect(describeAgainst("b", noGpuResult("k", true), c)).toStartWith("  against b: MISMATCH (1 region not as the app left them: its time says little)");
  });
});
