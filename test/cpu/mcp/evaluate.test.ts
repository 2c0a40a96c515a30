/**
 * src/mcp/evaluate.ts writeCandidates: a patch candidate with bare names (`--- kernel.cu` /
 * `+++ kernel.cu`, diff -u inside src/) is written for eval, not refused (nu10 #19: "writes src/,
 * which is empty"); one whose names lead nowhere is refused with how names are read and what to do.
 */
import { expect, test } from "bun:test";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { writeCandidates } from "../../../src/mcp/evaluate.ts";
import { materialise, listedCandidates } from "../../../src/eval/candidates.ts";
import { captureWithSource, evaluateRefusal, tempDir } from "../fixtures.ts";

/** The first line of src/kernel.cu once `patch`, written by evaluate as candidate `name`, is applied to a private copy of `cap`; the candidate must not be refused. */
async function firstLineApplied(cap: string, name: string, patch: string): Promise<string> {
  const { folder } = writeCandidates(cap, [{ name, patch }]);
  try {
    const [c] = listedCandidates(join(folder, "candidates.json"));
    expect(c!.refused).toBeUndefined();
    const dest = join(tempDir(), "copy");
    await materialise(cap, c!, dest);
    return readFileSync(join(dest, "src/kernel.cu"), "utf8").split("\n")[0]!;
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}

test("evaluate {patch} with bare names: written and applied as -p0; a bare name beside a/ b/ ones that names nothing: refused with the -p1 rule", async () => {
  const cap = await captureWithSource();
  const text = readFileSync(join(cap, "src/kernel.cu"), "utf8");
  const first = text.split("\n")[0]!;
  const patch = `--- kernel.cu\n+++ kernel.cu\n@@ -1 +1 @@\n-${first}\n+// edited\n`;
  expect(await firstLineApplied(cap, "plain", patch)).toBe("// edited");
  const r = evaluateRefusal(cap, { name: "mixed", patch: `--- other.cu\n+++ b/other.cu\n@@ -1 +1 @@\n-x\n+y\n` });
  expect(r.code).toBe("E_PATCH");
  expect(r.reason).toContain("which is empty; its file names are read with their first folder taken off (as git apply -p1)");
  expect(r.reason).toContain("a bare kernel.cu, as diff -u writes it there, is read as it is");
});

test("evaluate {patch} made by `diff -u FILE EDITED` inside src/ (+++ the edited copy's absolute path): written and applied to FILE, as eval applies the same patch from a file (nu16 #1: MCP refused it, E_PATCH `src//tmp/…`)", async () => {
  const cap = await captureWithSource();
  const first = readFileSync(join(cap, "src/kernel.cu"), "utf8").split("\n")[0]!;
  const patch = `--- kernel.cu\t2026-12-07 01:00:00\n+++ /tmp/edited/kernel.cu\t2026-12-07 01:01:00\n@@ -1 +1 @@\n-${first}\n+// edited\n`;
  expect(await firstLineApplied(cap, "hoist", patch)).toBe("// edited");
  // a --- name src/ does not hold still leaves the +++ name as the one written: refused, the absolute name said as given
  const r = evaluateRefusal(cap, { name: "abs", patch: `--- other.cu\n+++ /tmp/edited/other.cu\n@@ -1 +1 @@\n-x\n+y\n` });
  expect(r.code).toBe("E_PATCH");
  expect(r.reason).not.toContain("src//");
});

test("evaluate {files} that cannot be one tree: a path both a file and another's folder, or more than src/ may hold, is that candidate's refusal, its files unwritten; the others are written (adversary 61: E_IO for the whole call; 232 000 inodes from one call)", async () => {
  const cap = await captureWithSource();
  const clash = evaluateRefusal(cap, { name: "clash", files: { "src/k.cuh": "x", "src/k.cuh/x.cuh": "y" } });
  expect(clash.code).toBe("E_CANDIDATE");
  expect(clash.reason).toContain(`names "src/k.cuh" both as a file and as a folder`);
  const many: Record<string, string> = {};
  for (let i = 0; i < 700; i++) many[`src/d${i}/e/f.cuh`] = "";
  const flood = evaluateRefusal(cap, { name: "flood", files: many });
  expect(flood.code).toBe("E_CANDIDATE");
  expect(flood.reason).toContain("more than the 2000 files and folders");
  const { folder } = writeCandidates(cap, [
    { name: "clash", files: { "src/k.cuh": "x", "src/k.cuh/x.cuh": "y" } },
    { name: "good", files: { "src/kernel.cu": "// edited\n" } },
  ]);
  try {
    const [bad, good] = listedCandidates(join(folder, "candidates.json"));
    expect(bad!.refused?.code).toBe("E_CANDIDATE");
    expect(good!.refused).toBeUndefined();
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
});

test("one evaluate call's candidates give at most 20 000 files together (adversary 62: 1024 candidates of 2000 files made 2 million inodes), refused before anything is written", async () => {
  const cap = await captureWithSource();
  const files: Record<string, string> = {};
  for (let i = 0; i < 1500; i++) files[`src/f${i}.cuh`] = "";
  const list = Array.from({ length: 14 }, (_, i) => ({ name: `c${i}`, files }));
  expect(() => writeCandidates(cap, list)).toThrow(/the candidates give 21000 files and folders in all: one evaluate call writes at most 20000/);
  // folders count: 312 candidates of 64 files 30 folders deep (within each candidate's 2000) made 619 000 inodes (adversary 62)
  const deep: Record<string, string> = {};
  for (let i = 0; i < 64; i++) deep[`src/d${i}/${"a/".repeat(29)}k.cuh`] = "";
  expect(() =>
    writeCandidates(
      cap,
      Array.from({ length: 12 }, (_, i) => ({ name: `d${i}`, files: deep })),
    ),
  ).toThrow(/the candidates give 23808 files and folders in all/);
});

test("a patch candidate writing more files and folders than src/ may hold is its own refusal (adversary 62: a 872 KB patch made 93 000)", async () => {
  const cap = await captureWithSource();
  const patch = Array.from({ length: 700 }, (_, i) => `--- /dev/null\n+++ b/d${i}/e/f.cuh\n@@ -0,0 +1 @@\n+x\n`).join("");
  const r = evaluateRefusal(cap, { name: "flood", patch });
  expect(r.code).toBe("E_CANDIDATE");
  expect(r.reason).toContain("more than the 2000 files and folders");
});

test("a progressToken longer than 256 characters gets no progress (adversary 62: a 20 MB token echoed in every notification took the server to 5.7 GB)", async () => {
  const { progressSender } = await import("../../../src/mcp/progress.ts");
  const sent: unknown[] = [];
  const send = async (n: unknown) => void sent.push(n);
  expect(progressSender({ progressToken: "t".repeat(257) }, send as never)).toBeUndefined();
  const ok = progressSender({ progressToken: "t".repeat(256) }, send as never)!;
  ok({ progress: 1 } as never);
  expect(sent.length).toBe(1);
  expect(progressSender({ progressToken: 7 }, send as never)).toBeDefined();
});
