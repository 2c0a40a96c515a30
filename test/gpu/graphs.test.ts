/**
 * Kernels launched from CUDA graphs (issue 11). On the H200: `list` counts kernel-node executions
 * of every graph launch (stream-captured and hand-built graphs, child graphs, in-place node
 * updates) and never counts a launch recorded during stream capture; `run --dispatch` counts graph
 * executions and captures a top-level kernel node (its ancestors run by kerncap, the app's state
 * put back), with the parameters of that launch; what it cannot capture is named by graph and node.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { APPS, json, kerncap, manifest, run, skipReason, workDir } from "./harness.ts";

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
    expect(l.processes[0].graphs.map((g: any) => [g.kernel_nodes, g.launches])).toEqual([[2, 3], [2, 3]]);
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

  test("run: a kernel node inside a child graph is refused by graph and node", () => {
    const r = kc(["run", "--kernel", "add_one", "--dispatch", "3", "--out", join(WORK, "child"), "--", app]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("inside CUDA graph 1");
    expect(r.stderr).toContain("child graph");
    expect(r.stderr + r.stdout).toContain("x[0]=42 y[0]=43");
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
    writeFileSync(py, `import torch\nln = torch.nn.LayerNorm(1024).cuda()\nx = torch.randn(64, 1024, device="cuda")\ny = ln(x)\ng = torch.cuda.CUDAGraph()\ns = torch.cuda.Stream()\ns.wait_stream(torch.cuda.current_stream())\nwith torch.cuda.stream(s):\n    ln(x)\ntorch.cuda.current_stream().wait_stream(s)\nwith torch.cuda.graph(g):\n    y = ln(x)\nfor i in range(3):\n    x.copy_(torch.randn(64, 1024, device="cuda"))\n    g.replay()\ntorch.cuda.synchronize()\nprint(float(y.sum()))\n`);
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
});
