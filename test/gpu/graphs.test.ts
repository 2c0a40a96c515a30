/**
 * Kernels launched from CUDA graphs (issue 11). On the H200: `list` counts kernel-node executions
 * of every graph launch (stream-captured and hand-built graphs, child graphs, in-place node
 * updates) and never counts a launch recorded during stream capture; `run --dispatch` counts graph
 * executions and captures a kernel node, top-level or inside (nested) child graphs (its ancestors
 * run by kerncap, the app's state put back), with the parameters of that launch (after
 * cuGraphExecKernelNodeSetParams and cuGraphExecUpdate) and its launch attributes (a cluster);
 * torch.compile(mode="reduce-overhead") kernels launched from its CUDA graphs are captured too.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { APPS, BIN, json, kerncap, manifest, run, skipReason, workDir } from "./harness.ts";

const SKIP = !!skipReason("graph tests");
const WORK = workDir("kerncap-graphs-");
const kc = (args: string[]) => kerncap(WORK, args);
let app = "";
beforeAll(() => {
  if (SKIP) return;
  app = join(WORK, "graphs");
  const p = run(["nvcc", "-O2", "-arch=sm_90", "-o", app, join(APPS, "graphs.cu")], { cwd: WORK });
  if (p.code !== 0) throw new Error(p.stderr);
});

describe.skipIf(SKIP)("CUDA graphs", () => {
  test("list: graph executions counted per kernel node, graphs named, stream-capture recordings apart", () => {
    const r = kc(["list", "--json", "--", app]);
    expect(r.code, r.stderr).toBe(0);
    const l = json(r);
    const scale = l.kernels.find((k: any) => k.name === "_Z5scalePffi");
    const add = l.kernels.find((k: any) => k.name === "_Z7add_onePfi");
    expect(scale).toMatchObject({ count: 7, graph: 6, recorded: 1 }); // 1 eager + 3 launches of each graph
    expect(add).toMatchObject({ count: 6, graph: 6, recorded: 1 }); // one of them in a child graph
    // recorded twice: the graph and the graph of its cuGraphExecUpdate
    expect(l.kernels.find((k: any) => k.name === "_Z9update_mePffi")).toMatchObject({ count: 2, graph: 2, recorded: 2 });
    expect(l.kernels.find((k: any) => k.name === "_Z9cluster_kPfi")).toMatchObject({ count: 2, graph: 2 });
    expect(l.kernels.find((k: any) => k.name === "_Z7child_kPfPii")).toMatchObject({ count: 2, graph: 2 }); // two child graphs deep
    expect(l.processes[0].graphs.map((g: any) => [g.kernel_nodes, g.launches])).toEqual([
      [2, 3],
      [2, 3],
      [1, 2],
      [1, 2],
      [3, 2],
    ]);
    expect(l.processes[0].graphs[4].nodes).toBe(5);
    const text = kc(["list", "--", app]);
    expect(text.stdout).toMatch(/graph/);
  });

  test("run: a kernel node of a stream-captured graph is captured (its ancestor ran first) and replays bit-exact", () => {
    const out = join(WORK, "g0-add");
    const r = kc(["run", "--kernel", "add_one", "--dispatch", "0", "--out", out, "--json", "--", app]);
    expect(r.code, r.stderr).toBe(0);
    const m = manifest(out);
    expect(m.graph).toEqual({ id: 0, kernelNode: 1 });
    expect(r.stderr + r.stdout).toContain("x[0]=42 y[0]=43"); // the app computed what it computes without kerncap
    const rep = kc(["replay", out, "--json", "--iters", "3"]);
    expect(rep.code, rep.stderr).toBe(0);
    expect(json(rep).verdict).toBe("match");
  });

  test("run: the updated parameters of the launch captured (cuGraphExecKernelNodeSetParams between launches)", () => {
    // scale: launch 0 eager, 1-3 graph 0, 4-6 graph 1 with a = 1, 2, 3: dispatch 5 is a = 2
    const out = join(WORK, "g1-scale");
    const r = kc(["run", "--kernel", "scale", "--dispatch", "5", "--out", out, "--", app]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr + r.stdout).toContain("x[0]=42 y[0]=43");
    const m = manifest(out);
    expect(m.graph).toEqual({ id: 1, kernelNode: 0 });
    expect(readFileSync(join(out, m.params.file)).readFloatLE(8)).toBe(2);
    const rep = kc(["replay", out, "--json", "--iters", "3"]);
    expect(rep.code, rep.stderr).toBe(0);
    expect(json(rep).verdict).toBe("match");
  });

  test("run: a kernel node inside a child graph is captured (the parent's updated kernel node and memcpy node ran first) and replays bit-exact", () => {
    // add_one: 0-2 graph 0, 3 = graph 1's first launch (its child graph; scale's a = 1 set just before)
    const out = join(WORK, "child");
    const r = kc(["run", "--kernel", "add_one", "--dispatch", "3", "--out", out, "--", app]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr + r.stdout).toContain("x[0]=42 y[0]=43");
    const m = manifest(out);
    expect(m.graph).toEqual({ id: 1, kernelNode: 1 });
    const rep = kc(["replay", out, "--json", "--iters", "3"]);
    expect(rep.code, rep.stderr).toBe(0);
    expect(json(rep).verdict).toBe("match");
  });

  test("run: a kernel node two child graphs deep is captured after its ancestors at every level (it traps otherwise)", () => {
    // child_k traps unless stage_a (top level) and stage_b (first child graph) ran just before it
    const out = join(WORK, "nested");
    const r = kc(["run", "--kernel", "child_k", "--dispatch", "1", "--out", out, "--", app]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout + r.stderr).toContain("v[0]=27 cnt=2,2,2");
    const m = manifest(out);
    expect(m.graph).toEqual({ id: 4, kernelNode: 2 });
    expect(m.fault).toBeUndefined();
    const rep = kc(["replay", out, "--json", "--iters", "3"]);
    expect(rep.code, rep.stderr).toBe(0);
    expect(json(rep).verdict).toBe("match");
  });

  test("run: the parameters after cuGraphExecUpdate are those captured (a = 2 before the update, 5 after)", () => {
    for (const [dispatch, a] of [
      [0, 2],
      [1, 5],
    ]) {
      const out = join(WORK, `upd${dispatch}`);
      const r = kc(["run", "--kernel", "update_me", "--dispatch", String(dispatch), "--out", out, "--", app]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout + r.stderr).toContain("z[0]=6 ");
      const m = manifest(out);
      expect(m.graph).toEqual({ id: 2, kernelNode: 0 });
      expect(readFileSync(join(out, m.params.file)).readFloatLE(8)).toBe(a);
      const rep = kc(["replay", out, "--json", "--iters", "3"]);
      expect(rep.code, rep.stderr).toBe(0);
      expect(json(rep).verdict).toBe("match");
    }
  });

  test("run: a kernel node's cluster dimension (node launch attribute) is captured and applied on replay", () => {
    // cluster_k adds its block's rank in the cluster + 1: a replay without the cluster would not match
    const out = join(WORK, "cluster");
    const r = kc(["run", "--kernel", "cluster_k", "--dispatch", "1", "--out", out, "--", app]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout + r.stderr).toContain("w[0]=2 w[256]=4 ");
    const m = manifest(out);
    expect(m.graph).toEqual({ id: 3, kernelNode: 0 });
    expect(m.launch.cluster).toEqual([2, 1, 1]);
    expect(m.launch.attributes.map((a: any) => a.name)).toContain("CLUSTER_DIMENSION");
    const rep = kc(["replay", out, "--json", "--iters", "3"]);
    expect(rep.code, rep.stderr).toBe(0);
    expect(json(rep).verdict).toBe("match");
  });

  test("an eager launch next to the graphs is captured as before", () => {
    const c = kc(["run", "--kernel", "scale", "--dispatch", "0", "--out", join(WORK, "eager"), "--", app]);
    expect(c.code, c.stderr).toBe(0);
    expect(manifest(join(WORK, "eager")).graph).toBeUndefined();
    const rep = kc(["replay", join(WORK, "eager"), "--json", "--iters", "3"]);
    expect(rep.code, rep.stderr).toBe(0);
  });

  test("torch.cuda.CUDAGraph around a LayerNorm, replayed 3 times with new inputs: counted, and a graph-launched execution captured and replayed", () => {
    const py = join(WORK, "ln_graph.py");
    writeFileSync(
      py,
      `import torch\nln = torch.nn.LayerNorm(1024).cuda()\nx = torch.randn(64, 1024, device="cuda")\ny = ln(x)\ng = torch.cuda.CUDAGraph()\ns = torch.cuda.Stream()\ns.wait_stream(torch.cuda.current_stream())\nwith torch.cuda.stream(s):\n    ln(x)\ntorch.cuda.current_stream().wait_stream(s)\nwith torch.cuda.graph(g):\n    y = ln(x)\nfor i in range(3):\n    x.copy_(torch.randn(64, 1024, device="cuda"))\n    g.replay()\ntorch.cuda.synchronize()\nprint(float(y.sum()))\n`,
    );
    const l = json(kc(["list", "--json", "--", "python3", py]));
    const ln = l.kernels.find((k: any) => /layer_norm/i.test(k.demangled));
    expect(ln, JSON.stringify(l.kernels.map((k: any) => k.demangled))).toBeDefined();
    expect(ln.graph).toBe(3);
    // launches 0, 1 eager (and the stream-capture recording, not counted); 2 = the first graph replay
    const out = join(WORK, "ln");
    const r = kc(["run", "--kernel", "layer_norm", "--dispatch", "2", "--out", out, "--", "python3", py]);
    expect(r.code, r.stderr).toBe(0);
    expect(manifest(out).graph).toBeDefined();
    const rep = kc(["replay", out, "--json", "--iters", "3"]);
    expect(rep.code, rep.stderr).toBe(0);
    expect(json(rep).verdict).toBe("match");
  });

  test("torch.cuda.CUDAGraph around a LayerNorm and a cuBLAS GEMM, inputs changed between replays: the GEMM node (the LayerNorm its ancestor) captured from the 2nd replay, bit-exact", () => {
    const py = join(WORK, "ln_gemm_graph.py");
    writeFileSync(
      py,
      `import torch\ntorch.manual_seed(0)\nln = torch.nn.LayerNorm(1024).cuda()\nw = torch.randn(1024, 2048, device="cuda")\nx = torch.randn(256, 1024, device="cuda")\ndef step():\n    return ln(x) @ w\ny = step()\ng = torch.cuda.CUDAGraph()\ns = torch.cuda.Stream()\ns.wait_stream(torch.cuda.current_stream())\nwith torch.cuda.stream(s):\n    step()\ntorch.cuda.current_stream().wait_stream(s)\nwith torch.cuda.graph(g):\n    y = step()\nsums = []\nfor i in range(3):\n    x.copy_(torch.randn(256, 1024, device="cuda"))\n    g.replay()\n    sums.append(float(y.sum()))\ntorch.cuda.synchronize()\nprint("sums", " ".join(f"{v:.6e}" for v in sums))\n`,
    );
    const l = kc(["list", "--json", "--", "python3", py]);
    expect(l.code, l.stderr).toBe(0);
    const names = JSON.stringify(json(l).kernels.map((k: any) => [k.demangled ?? k.name, k.count, k.graph]));
    // cuBLAS names its GEMM kernels sm90_xmma_gemm_…, cutlass…, …sgemm…: the one executed from the graph
    const gemm = json(l)
      .kernels.filter((k: any) => /gemm|xmma|cutlass/i.test(k.demangled ?? k.name) && (k.graph ?? 0) > 0)
      .sort((a: any, b: any) => b.graph - a.graph)[0];
    expect(gemm, names).toBeDefined();
    expect(gemm.graph).toBe(3); // one execution per replay
    const eager = gemm.count - gemm.graph; // the warm-up calls
    const re = "^" + gemm.name.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") + "$";
    const out = join(WORK, "ln-gemm");
    const r = kc(["run", "--kernel", re, "--dispatch", String(eager + 1), "--out", out, "--", "python3", py]);
    expect(r.code, r.stderr).toBe(0);
    const m = manifest(out);
    expect(m.kernel.name).toBe(gemm.name);
    expect(m.graph).toBeDefined();
    const sums = (t: string) => t.match(/sums .*/)?.[0];
    expect(sums(r.stdout + r.stderr)).toBe(sums(l.stdout + l.stderr)); // the app computed what it computes without kerncap
    const rep = kc(["replay", out, "--json", "--iters", "3"]);
    expect(rep.code, rep.stderr).toBe(0);
    expect(json(rep).verdict).toBe("match");
  });

  test('torch.compile(mode="reduce-overhead"): a kernel executed from its CUDA graph is listed, captured from a graph launch, replayed bit-exact', () => {
    const env = { TORCHINDUCTOR_CACHE_DIR: join(WORK, "inductor-cache"), TRITON_CACHE_DIR: join(WORK, "triton-cache"), TORCHINDUCTOR_COMPILE_THREADS: "1" };
    const py = ["python3", join(APPS, "torch_compile_graphs.py")];
    const kc150 = (args: string[]) => run([BIN, ...args], { cwd: WORK, env, timeoutMs: 150_000 });
    const l = kc150(["list", "--json", "--", ...py]);
    expect(l.code, l.stderr).toBe(0);
    expect(l.stdout + l.stderr).not.toContain("checksum nan");
    // the Triton kernel with the most graph executions (Inductor names vary: triton_poi_fused_…)
    const kernels = json(l).kernels.filter((k: any) => /^triton_/.test(k.name) && (k.graph ?? 0) > 0);
    expect(kernels.length, JSON.stringify(json(l).kernels.map((k: any) => [k.name, k.count, k.graph]))).toBeGreaterThan(0);
    const k = kernels.sort((a: any, b: any) => b.graph - a.graph)[0];
    expect(k.graph).toBeGreaterThanOrEqual(4); // 6 calls: warm-up (eager), recording (not executed), then graph replays
    // --dispatch counts executions, benchmark launches excluded: the last one is a graph replay
    const last = k.count - (k.benchmark ?? 0) - 1;
    const out = join(WORK, "compiled");
    const r = kc150(["run", "--kernel", `^${k.name}$`, "--dispatch", String(last), "--out", out, "--", ...py]);
    expect(r.code, r.stderr).toBe(0);
    const m = manifest(out);
    expect(m.kernel.name).toBe(k.name);
    expect(m.graph).toBeDefined();
    const check = (s: string) => s.match(/checksum \S+/)?.[0];
    expect(check(r.stdout + r.stderr)).toBe(check(l.stdout + l.stderr)); // the app computed what it computes without kerncap
    const rep = kc150(["replay", out, "--json", "--iters", "3"]);
    expect(rep.code, rep.stderr).toBe(0);
    expect(json(rep).verdict).toBe("match");
  }, 400_000);
});
