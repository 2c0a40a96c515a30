/**
 * `kerncap mcp` for long work, through the SDK's own client with a short request timeout (2 s):
 * progress notifications keep a longer call alive (resetTimeoutOnProgress) where the same call
 * without them times out; the evaluate tool (many candidates in one call) reports each finished
 * candidate; a cancelled evaluate ends the eval, its builds and their children.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { tmpdir } from "node:os";
import { RECORD_META_KEY, ToolProgress, type ProgressUpdate } from "../../src/mcp/progress.ts";
import { jsonDocument } from "../../src/format/documents.ts";
import { ToolChildren } from "../../src/mcp/children.ts";
import { makeCapture, recordRendered, tempDir, sandboxOffForMarkers } from "./fixtures.ts";
import { NVCC } from "../nvcc-fixtures.ts";
import { connected, doc, running, until } from "./mcp-client.ts";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

/** A client of a server whose progress notifications come every `progressMs` ms. */
const connectedEvery = (progressMs = 300) => connected({ progressMs });

/**
 * A capture whose build.sh, for a source holding "slow", writes "<its pid> <sleep's pid>" to
 * ../pids and sleeps `seconds`; then fails with a compile error naming src/kernel.cu.
 */
async function slowFailingBuild(seconds: number): Promise<{ dir: string; pids: string }> {
  const dir = join(tempDir(), "cap");
  await makeCapture(dir);
  mkdirSync(join(dir, "src"));
  writeFileSync(join(dir, "src/kernel.cu"), "__global__ void scale(float* x, int n) { slow }\n");
  const pids = join(dirname(dir), "pids");
  writeFileSync(
    join(dir, "build.sh"),
    `#!/usr/bin/env bash
here="$(cd "$(dirname "\${BASH_SOURCE[0]}")" && pwd)"
if grep -q slow "$here/src/kernel.cu"; then sleep ${seconds} & echo "$$ $!" > ${pids}.part && mv ${pids}.part ${pids}; wait; fi
# the dependency list a confined build asks for (-MF FILE in EXTRA_FLAGS), as nvcc -MD writes it before a compile error
d=$(sed -n "s/.*-MF \\([^ ]*\\).*/\\1/p" <<<"\${EXTRA_FLAGS:-}"); if [ -n "$d" ]; then mkdir -p "$(dirname "$d")"; echo "kernel.o:" >"$d"; fi
echo "$here/src/kernel.cu(1): error: identifier \\"slow\\" is undefined" >&2
exit 1
`,
    { mode: 0o755 },
  );
  recordRendered(dir); // stands for the build.sh kerncap wrote (a confined build runs no other)
  return { dir, pids };
}

describe("progress notifications", () => {
  sandboxOffForMarkers(); // build.sh writes markers outside the capture
  test("a validate that builds for 4 s outlives a 2 s client timeout with progress; without, the client times out", async () => {
    const c = await connectedEvery();
    const { dir } = await slowFailingBuild(4);
    const seen: ProgressUpdate[] = [];
    const r = await c.callTool({ name: "validate", arguments: { dir } }, undefined, {
      timeout: 2000,
      resetTimeoutOnProgress: true,
      onprogress: (p) => void seen.push(p),
    });
    expect(doc(r).error.code).toBe("E_BUILD"); // the build's answer came back: the call was not cut
    expect(seen.length).toBeGreaterThanOrEqual(5);
    for (let i = 1; i < seen.length; i++) expect(seen[i]!.progress).toBeGreaterThan(seen[i - 1]!.progress);
    expect(seen.some((p) => /kerncap validate running/.test(p.message ?? ""))).toBe(true);
    const plain = await c.callTool({ name: "validate", arguments: { dir } }, undefined, { timeout: 2000 }).catch((e) => e);
    expect(String(plain?.message)).toMatch(/timed out/i);
    await c.close();
  }, 30_000);

  test("--jobs 1: a second call waits for the first's child, with progress while it waits; both answer", async () => {
    const c = await connected({ progressMs: 300, jobs: 1 });
    const a = await slowFailingBuild(2);
    const b = await slowFailingBuild(2);
    const seen: ProgressUpdate[] = [];
    const t0 = performance.now();
    const first = c.callTool({ name: "validate", arguments: { dir: a.dir } }, undefined, { timeout: 20_000 });
    await until(() => existsSync(a.pids)); // the first holds the slot
    const second = c.callTool({ name: "validate", arguments: { dir: b.dir } }, undefined, {
      timeout: 1500,
      resetTimeoutOnProgress: true,
      onprogress: (p) => void seen.push(p),
    });
    await until(() => seen.length > 0);
    expect(existsSync(b.pids)).toBe(false); // queued: its build has not started
    for (const r of await Promise.all([first, second])) expect(doc(r).error.code).toBe("E_BUILD");
    expect(performance.now() - t0).toBeGreaterThan(4000); // one after the other
    expect(seen.some((p) => /queued: 1 tool call running, this one is number 1 in line/.test(p.message ?? ""))).toBe(true);
    // once its child started, its heartbeats say it runs (a trial's kept saying "queued" until the call ended)
    const started = seen.findIndex((p) => p.message === "kerncap validate running");
    expect(started, JSON.stringify(seen.map((p) => p.message))).toBeGreaterThan(0);
    expect(seen.slice(started).filter((p) => /queued/.test(p.message ?? ""))).toEqual([]);
    await c.close();
  }, 30_000);

  test("--jobs 1: an evaluate call in line holds no files until it runs; one that cannot run is refused at once", async () => {
    const c = await connected({ progressMs: 200, jobs: 1 });
    const a = await slowFailingBuild(3);
    const b = await slowFailingBuild(0);
    // this process's candidate folders made since (other test files in this process may leave theirs)
    const earlier = new Set(readdirSync(tmpdir()));
    const mine = () => readdirSync(tmpdir()).filter((n) => n.startsWith(`kerncap-evaluate-${process.pid}-`) && !earlier.has(n));
    const first = c.callTool({ name: "validate", arguments: { dir: a.dir } }, undefined, { timeout: 20_000 });
    await until(() => existsSync(a.pids)); // the first holds the slot
    const seen: ProgressUpdate[] = [];
    const candidates = [1, 2, 3].map((i) => ({
      name: `v${i}`,
      files: { "src/kernel.cu": `__global__ void scale(float* x, int n) { v${i} }\n`, "src/d/e/f.cuh": "\n" },
    }));
    const ev = c.callTool({ name: "evaluate", arguments: { dir: b.dir, candidates } }, undefined, { timeout: 20_000, onprogress: (p) => void seen.push(p) });
    await until(() => seen.some((p) => /queued/.test(p.message ?? "")));
    // adversary 62: 60 calls in line wrote their candidates before they waited and held 974 000 inodes
    expect(mine()).toEqual([]);
    const bad = await c.callTool({ name: "evaluate", arguments: { dir: b.dir, candidates: [candidates[0], candidates[0]] } }, undefined, { timeout: 20_000 });
    expect(doc(bad).error.code).toBe("E_USAGE"); // refused while the first still runs, not after its wait
    expect(existsSync(a.pids) && running(Number(readFileSync(a.pids, "utf8").split(" ")[1]))).toBe(true);
    expect(mine()).toEqual([]);
    expect(doc(await first).error.code).toBe("E_BUILD");
    const e = doc(await ev);
    // written once it ran: each candidate built (and failed on its own source), then the folder removed
    expect(e.candidates.map((x: any) => [x.label, x.verdict])).toEqual(candidates.map((x) => [x.name, "compile-error"]));
    expect(mine()).toEqual([]);
    await c.close();
  }, 30_000);

  test("a call cancelled while it waits for a slot never starts; the slot passes to the next in line", async () => {
    const kids = new ToolChildren(1);
    const held = await kids.slot();
    const ctl = new AbortController();
    const queued: number[] = [];
    const cancelled = kids
      .slot(ctl.signal, (n) => queued.push(n))
      .then(
        () => "started",
        (e) => e.code,
      );
    let nextGot = false;
    const next = kids.slot(undefined, (n) => queued.push(n)).then((r) => ((nextGot = true), r));
    ctl.abort();
    expect(await cancelled).toBe("E_INTERRUPTED");
    expect(queued).toEqual([1, 2]);
    expect(nextGot).toBe(false);
    held();
    held(); // a second give-back is a no-op
    (await next)();
    expect(nextGot).toBe(true);
    const again = await kids.slot(); // both slots given back: one free again at once
    again();
    expect(() => new ToolChildren(0)).toThrow(/at least 1/);
  });

  test("a queued call's heartbeats say its place in line as it changes; from its start on, that it runs", async () => {
    const kids = new ToolChildren(1);
    const held = await kids.slot();
    const got: Record<string, ProgressUpdate[]> = { a: [], b: [] };
    const a = new ToolProgress((x) => got.a!.push(x), "kerncap tune", 1_000_000);
    const b = new ToolProgress((x) => got.b!.push(x), "kerncap tune", 1_000_000);
    const queue = (p: ToolProgress) => (_n: number, place: () => number) =>
      p.queued(() => `queued: 1 tool call running, this one is number ${place()} in line`);
    const slotA = kids.slot(undefined, queue(a));
    const slotB = kids.slot(undefined, queue(b));
    // said at once, not first at the next heartbeat (nu10 #6: a client timeout under the interval cut a queued call)
    expect(got.a!.map((p) => p.message)).toEqual(["kerncap tune queued: 1 tool call running, this one is number 1 in line"]);
    expect(got.b!.map((p) => p.message)).toEqual(["kerncap tune queued: 1 tool call running, this one is number 2 in line"]);
    (b as any).beat();
    expect(got.b!.at(-1)!.message).toBe("kerncap tune queued: 1 tool call running, this one is number 2 in line");
    held();
    const releaseA = await slotA;
    a.running();
    expect(got.a!.at(-1)!.message).toBe("kerncap tune running"); // said at once
    (b as any).beat();
    expect(got.b!.at(-1)!.message).toBe("kerncap tune queued: 1 tool call running, this one is number 1 in line");
    releaseA();
    await slotB;
    b.running();
    (b as any).beat();
    b.line("kerncap: building 2 configs");
    (b as any).beat();
    expect(got.b!.map((p) => p.message)).toEqual([
      "kerncap tune queued: 1 tool call running, this one is number 2 in line",
      "kerncap tune queued: 1 tool call running, this one is number 2 in line",
      "kerncap tune queued: 1 tool call running, this one is number 1 in line",
      "kerncap tune running",
      "kerncap tune running",
      "kerncap tune running: kerncap: building 2 configs",
    ]);
    for (let i = 1; i < got.b!.length; i++) expect(got.b![i]!.progress).toBeGreaterThan(got.b![i - 1]!.progress);
  });

  test("the value strictly increases: heartbeats stay below the next finished item; a count gives the total", () => {
    const got: ProgressUpdate[] = [];
    const p = new ToolProgress((x) => got.push(x), "kerncap eval", 1_000_000);
    (p as any).beat();
    (p as any).beat();
    p.line("[1/3] compile-error  c1");
    (p as any).beat();
    p.line("[1/3] again: ignored");
    p.line("some other line");
    (p as any).beat();
    p.line("[3/3] match  c3");
    expect(got.map((g) => g.total)).toEqual([undefined, undefined, 3, 3, 3, 3]);
    expect(got.map((g) => g.progress)).toEqual([0.5, 1 - 1 / 3, 1, 1.5, 2 - 1 / 3, 3]);
    expect(got[4]!.message).toBe("kerncap eval running: some other line");
  });

  test("a record before the first count line carries the total the call expects (evaluate: its candidates; nu3: a fraction with no total)", () => {
    const got: ProgressUpdate[] = [];
    const p = new ToolProgress((x) => got.push(x), "kerncap evaluate", 1_000_000);
    p.expectTotal(3);
    p.stdoutLine(JSON.stringify(jsonDocument("eval-record", { label: "a", input: "cap1", verdict: "match", code: null })));
    p.line("[1/3] match  a  cap1");
    p.expectTotal(7); // a total already known is kept
    p.line("[2/3] match  b  cap1");
    expect(got.map((g) => g.total)).toEqual([3, 3, 3]);
    expect(got.map((g) => g.progress)).toEqual([0.5, 1, 2]);
    const q: ProgressUpdate[] = [];
    const r = new ToolProgress((x) => q.push(x), "kerncap evaluate", 1_000_000);
    r.expectTotal(0); // nothing to expect: no total until a count line
    r.stdoutLine(JSON.stringify(jsonDocument("eval-record", { label: "a", input: "cap1", verdict: "match", code: null })));
    expect(q[0]!.total).toBeUndefined();
  });

  test("an eval record on the child's stdout goes out at once, whole, in the notification's _meta (nu10 #5: the message was padded table text only)", () => {
    const got: ProgressUpdate[] = [];
    const p = new ToolProgress((x) => got.push(x), "kerncap evaluate", 1_000_000);
    const record = { label: "good", input: "cap", verdict: "error", code: "E_NO_GPU", reason: "no NVIDIA driver" };
    p.line("[1/2] error  good  cap  no NVIDIA driver (E_NO_GPU)");
    p.stdoutLine(JSON.stringify(jsonDocument("eval-record", record)));
    p.stdoutLine(JSON.stringify(jsonDocument("eval", { summary: {} }))); // the document: no notification
    p.stdoutLine("not JSON");
    p.stdoutLine(JSON.stringify(jsonDocument("eval-record", { ...record, label: "wrong", verdict: "mismatch", code: null })));
    p.line("[2/2] mismatch  wrong  cap");
    expect(got.map((g) => g._meta?.[RECORD_META_KEY] as any).map((r) => r && `${r.label}:${r.verdict}`)).toEqual([
      undefined,
      "good:error",
      "wrong:mismatch",
      undefined,
    ]);
    expect((got[1]!._meta![RECORD_META_KEY] as any).schema).toBe("kerncap.eval-record/1");
    expect(got[1]!.message).toBe("kerncap evaluate: good on cap: error E_NO_GPU");
    for (let i = 1; i < got.length; i++) expect(got[i]!.progress).toBeGreaterThan(got[i - 1]!.progress);
    expect(got.at(-1)!.progress).toBe(2);
  });
});

describe("evaluate", () => {
  sandboxOffForMarkers(); // build.sh writes markers outside the capture
  test("many candidates in one call: each reported as it finishes, the ranked document back; bad candidates refused by name", async () => {
    const c = await connectedEvery();
    const { dir } = await slowFailingBuild(0);
    const seen: ProgressUpdate[] = [];
    const r = await c.callTool(
      {
        name: "evaluate",
        arguments: {
          dir,
          candidates: [
            { name: "one", files: { "src/kernel.cu": "__global__ void scale(float* x, int n) { one }\n" } },
            {
              name: "two",
              patch:
                "--- a/kernel.cu\n+++ b/kernel.cu\n@@ -1 +1 @@\n-__global__ void scale(float* x, int n) { slow }\n+__global__ void scale(float* x, int n) { two }\n",
            },
            { name: "three", patch: "--- a/kernel.cu\n+++ b/kernel.cu\n@@ -1 +1 @@\n-not in the file\n+x\n" },
          ],
        },
      },
      undefined,
      { timeout: 30_000, onprogress: (p) => void seen.push(p) },
    );
    const d = doc(r);
    // three.patch could not be judged (E_PATCH: an error, not a compile error): the call is isError, as eval exits 2; the document is still its content
    expect(r.isError).toBe(true);
    expect(d.schema).toBe("kerncap.eval/1");
    expect(d.candidates.map((x: any) => `${x.label}:${x.verdict}`).sort()).toEqual([
      "one:compile-error",
      "three:error", // a diff that does not apply was never compiled (E_PATCH)
      "two:compile-error", // a patch is labelled by its name, as files are
    ]);
    expect(d.candidates.find((x: any) => x.label === "three").reason).toContain("does not apply");
    expect(seen.filter((p) => p.total === 3).map((p) => p.progress)).toContain(3);
    // each finished candidate's record came in a notification's _meta, as it finished (nu10 #5)
    const metas = seen.map((p) => (p as { _meta?: Record<string, any> })._meta?.[RECORD_META_KEY]).filter(Boolean);
    // each record's notification carries the call's total, also one that came before the first count line
    expect(seen.filter((p) => (p as { _meta?: Record<string, any> })._meta?.[RECORD_META_KEY]).map((p) => p.total)).toEqual([3, 3, 3]);
    expect(metas.map((x) => `${x.label}:${x.verdict}:${x.code}`).sort()).toEqual([
      "one:compile-error:E_BUILD",
      "three:error:E_PATCH",
      "two:compile-error:E_BUILD",
    ]);
    // an agent's candidates are not kept in the capture (a trial filled the disk with build/eval copies, call after call)
    expect(existsSync(join(dir, "build/eval")) ? readdirSync(join(dir, "build/eval")) : []).toEqual([]);
    // a candidate of the wrong shape is its own refusal; the call's other candidates are evaluated (nu89 #3)
    const both = await c.callTool({
      name: "evaluate",
      arguments: { dir, buildOnly: true, candidates: [{ name: "pc", patch: "x", config: "A=1" }, { name: "none" }, { name: "empty", files: {} }] },
    });
    const refused = Object.fromEntries(doc(both).candidates.map((x: any) => [x.label, [x.verdict, x.code, x.reason]]));
    expect(Object.keys(refused).sort()).toEqual(["empty", "none", "pc"]);
    for (const r of Object.values(refused) as string[][]) expect(r.slice(0, 2)).toEqual(["error", "E_CANDIDATE"]);
    expect(refused.pc[2]).toContain("gives patch and config; give exactly one");
    expect(refused.none[2]).toContain("gives none of files, patch, config");
    expect(refused.empty[2]).toContain("gives no files");
    await c.close();
  }, 60_000);

  test("an unfit candidate is its own record, error with its code, never written nor built; the others are evaluated; each labelled by its name", async () => {
    const c = await connectedEvery();
    const { dir } = await slowFailingBuild(0);
    // every build says which source it compiled
    const builds = join(dirname(dir), "builds");
    const sh = readFileSync(join(dir, "build.sh"), "utf8");
    writeFileSync(join(dir, "build.sh"), sh.replace("#!/usr/bin/env bash\n", `#!/usr/bin/env bash\ncat "$(dirname "$0")/src/kernel.cu" >> ${builds}\n`));
    recordRendered(dir);
    const r = await c.callTool(
      {
        name: "evaluate",
        arguments: {
          dir,
          candidates: [
            { name: "v1", patch: "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n" },
            { name: "v2", files: { "src/kernel.cu": "garbage ;;;\n" } },
            { name: "v3", config: "BLOCK=4" },
            { name: "v4", files: { "../escape.cu": "x" } },
            { name: "v5", files: { "src/kernel.cu": "v5 ;\n", "src/run.sh": "id\n" } },
            {
              name: "mine",
              patch: "--- a/kernel.cu\n+++ b/kernel.cu\n@@ -1 +1 @@\n-__global__ void scale(float* x, int n) { slow }\n+mine ;\n",
            },
          ],
        },
      },
      undefined,
      { timeout: 30_000 },
    );
    const d = doc(r);
    expect(d.schema).toBe("kerncap.eval/1");
    expect(r.isError).toBe(true); // candidates that could not be judged: eval's exit 2
    const by = Object.fromEntries(d.records.map((x: any) => [x.label, x]));
    expect(Object.keys(by).sort()).toEqual(["mine", "v1", "v2", "v3", "v4", "v5"]);
    expect(by.v1).toMatchObject({ verdict: "error", code: "E_NOT_SOURCE", input: "(build)" });
    expect(by.v1.reason).toContain("candidate v1's patch writes src/x, which is not a source file of the reproducer");
    expect(by.v1.reason).not.toContain("edit_file");
    expect(by.v3).toMatchObject({ verdict: "error", code: "E_CANDIDATE", kind: "config" });
    expect(by.v3.reason).toContain("needs a Triton capture");
    expect(by.v4).toMatchObject({ verdict: "error", code: "E_CANDIDATE" });
    expect(by.v4.reason).toContain("is not under src/");
    expect(by.v5).toMatchObject({ verdict: "error", code: "E_NOT_SOURCE" });
    expect(by.v2.verdict).toBe("compile-error");
    expect(by.mine.verdict).toBe("compile-error");
    // only the fit candidates were built
    expect(readFileSync(builds, "utf8").split("\n").filter(Boolean).sort()).toEqual(["garbage ;;;", "mine ;"]);
    await c.close();
  }, 60_000);

  test.skipIf(!NVCC)(
    "a candidate that builds but cannot be judged here (no GPU) is its record's error; the call is isError, as eval's exit 2 (the eval document still its content)",
    async () => {
      const c = await connectedEvery();
      const dir = join(tempDir(), "cap");
      await makeCapture(dir);
      const m = JSON.parse(readFileSync(join(dir, "kerncap.json"), "utf8"));
      m.kernel.name = "scale";
      writeFileSync(join(dir, "kerncap.json"), JSON.stringify(m));
      mkdirSync(join(dir, "src"));
      writeFileSync(join(dir, "src/kernel.cu"), 'extern "C" __global__ void scale(float* x, int n) { x[0] *= 2.0f; }\n');
      writeFileSync(
        join(dir, "build.sh"),
        `#!/usr/bin/env bash\nset -e\nhere="$(cd "$(dirname "$0")" && pwd)"\nmkdir -p "$here/build"\n"${NVCC}" -cubin -arch=sm_90 "$here/src/kernel.cu" -o "$here/build/kernel.cubin" >&2\necho "$here/build/kernel.cubin"\n`,
        { mode: 0o755 },
      );
      const r = await c.callTool(
        {
          name: "evaluate",
          arguments: {
            dir,
            candidates: [{ name: "triple", files: { "src/kernel.cu": 'extern "C" __global__ void scale(float* x, int n) { x[0] *= 3.0f; }\n' } }],
          },
        },
        undefined,
        { timeout: 60_000 },
      );
      // docs/agent-skill.md: exit 2 is isError for every tool; an agent that reads isError must not think every candidate was judged
      expect(r.isError).toBe(true);
      expect(doc(r).schema).toBe("kerncap.eval/1");
      expect(doc(r).candidates).toMatchObject([{ label: "triple", verdict: "error" }]);
      expect(doc(r).exitCode).toBe(2);
      await c.close();
    },
    60_000,
  );

  test("a cancelled evaluate ends the eval and its builds (their children too)", async () => {
    const c = await connectedEvery();
    const { dir, pids } = await slowFailingBuild(60);
    const ac = new AbortController();
    const call = c.callTool(
      { name: "evaluate", arguments: { dir, candidates: [{ name: "slow", files: { "src/kernel.cu": "__global__ void scale(float* x, int n) { slow }\n" } }] } },
      undefined,
      { signal: ac.signal, timeout: 60_000 },
    );
    call.catch(() => {});
    await until(() => existsSync(pids));
    const procs = readFileSync(pids, "utf8").trim().split(" ").map(Number);
    expect(procs.every(running)).toBe(true);
    ac.abort();
    await expect(call).rejects.toThrow();
    await until(() => !procs.some(running), 15_000);
    await c.close();
  }, 40_000);
});

describe("the builds of one call", () => {
  test("a call's share of the CPUs: the CPU count over the calls that run at once, at least 1; each confined build's memory at most the machine's over its CPUs", async () => {
    const { buildsPerCall } = await import("../../src/mcp/server.ts");
    const { CONFINED_DATA_KIB } = await import("../../src/frontends/build.ts");
    const { availableParallelism, totalmem } = await import("node:os");
    const cpus = availableParallelism();
    expect(buildsPerCall({ jobs: 1 })).toBe(cpus);
    expect(buildsPerCall({ jobs: cpus * 4 })).toBe(1);
    expect(buildsPerCall({ jobs: 2 })).toBe(Math.max(1, Math.floor(cpus / 2)));
    // every call at once, each with its share: no more builds than CPUs, no more memory than the machine's (or 1 GiB a build)
    for (const jobs of [1, 2, 3, 8]) expect(jobs * buildsPerCall({ jobs })).toBeLessThanOrEqual(Math.max(cpus, jobs));
    expect(CONFINED_DATA_KIB * 1024 * cpus).toBeLessThanOrEqual(Math.max(totalmem(), cpus * (1 << 30)));
  });
});

describe("a killed server", () => {
  sandboxOffForMarkers(); // build.sh writes markers outside the capture
  test("kill -9 of kerncap mcp ends its tool children and their builds (each child watches its parent)", async () => {
    const { dir, pids } = await slowFailingBuild(60);
    const main = join(import.meta.dir, "../../src/cli/main.ts");
    const env = { ...process.env } as Record<string, string>; // KERNCAP_SANDBOX=0 too (the transport's default passes a few variables only)
    const transport = new StdioClientTransport({ command: process.execPath, args: [main, "mcp", "--root", dirname(dir)], stderr: "ignore", env });
    const client = new Client({ name: "test", version: "1" });
    await client.connect(transport);
    const server = transport.pid!;
    const call = client.callTool({ name: "validate", arguments: { dir } }, undefined, { timeout: 60_000 });
    call.catch(() => {});
    await until(() => existsSync(pids));
    const procs = readFileSync(pids, "utf8").trim().split(" ").map(Number); // build.sh and its sleep
    expect(procs.every(running)).toBe(true);
    process.kill(server, "SIGKILL");
    await until(() => !procs.some(running), 15_000);
    await client.close().catch(() => {});
  }, 40_000);
});

describe("a child whose event loop is blocked", () => {
  test("still ends after its parent's kill -9: the watcher beside it sends SIGTERM, then SIGKILL (adversary 65 02: a regex held an orphaned tool child for minutes)", async () => {
    const dir = tempDir();
    const child = join(dir, "child.ts");
    // a SIGTERM handler, as kerncap's (it runs on the event loop, which the loop below blocks), then a long synchronous step
    writeFileSync(
      child,
      `import { endWithParent } from ${JSON.stringify(join(import.meta.dir, "../../src/process-group.ts"))};\nendWithParent(process.ppid);\nprocess.on("SIGTERM", () => {});\nrequire("node:fs").writeFileSync(${JSON.stringify(join(dir, "ready"))}, String(process.pid));\nconst t = Date.now();\nwhile (Date.now() - t < 60_000) {}\n`,
    );
    const sh = Bun.spawn(["sh", "-c", '"$0" "$1" & wait', process.execPath, child], { stdout: "ignore", stderr: "ignore" });
    await until(() => existsSync(join(dir, "ready")), 15_000);
    const pid = Number(readFileSync(join(dir, "ready"), "utf8"));
    expect(running(pid)).toBe(true);
    sh.kill("SIGKILL");
    const t0 = Date.now();
    await until(() => !running(pid), 20_000);
    expect(Date.now() - t0).toBeLessThan(12_000); // a second to see it, 5 s for a SIGTERM handler that cannot run, then SIGKILL
  }, 40_000);
});
