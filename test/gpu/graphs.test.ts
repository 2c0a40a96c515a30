/**
 * Kernels launched from CUDA graphs (issue 11, the part that is built: seeing them). On the H200:
 * `list` counts kernel-node executions of every graph launch (stream-captured and hand-built
 * graphs, child graphs, in-place node updates) and never counts a launch recorded during stream
 * capture; `run --dispatch` counts graph executions and says so, by graph and node, when the
 * selected one ran inside a graph, instead of a misleading "only N launches".
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { APPS, json, kerncap, run, skipReason, workDir } from "./harness.ts";

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

  test("run: the selected launch inside a graph is named (graph, node), the eager one is captured and replays", () => {
    const r = kc(["run", "--kernel", "add_one", "--out", join(WORK, "in-graph"), "--", app]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("inside CUDA graph 0 (kernel node 1 of 2");
    const c = kc(["run", "--kernel", "scale", "--dispatch", "0", "--out", join(WORK, "eager"), "--", app]);
    expect(c.code, c.stderr).toBe(0);
    const rep = kc(["replay", join(WORK, "eager"), "--json", "--iters", "3"]);
    expect(rep.code, rep.stderr).toBe(0);
    expect(json(rep).verdict).toBe("match");
  });

  test("torch.cuda.CUDAGraph around a LayerNorm, replayed 3 times: list shows the graph executions", () => {
    const py = join(WORK, "ln_graph.py");
    writeFileSync(py, `import torch\nln = torch.nn.LayerNorm(1024).cuda()\nx = torch.randn(64, 1024, device="cuda")\ny = ln(x)\ng = torch.cuda.CUDAGraph()\ns = torch.cuda.Stream()\ns.wait_stream(torch.cuda.current_stream())\nwith torch.cuda.stream(s):\n    ln(x)\ntorch.cuda.current_stream().wait_stream(s)\nwith torch.cuda.graph(g):\n    y = ln(x)\nfor i in range(3):\n    x.copy_(torch.randn(64, 1024, device="cuda"))\n    g.replay()\ntorch.cuda.synchronize()\nprint(float(y.sum()))\n`);
    const l = json(kc(["list", "--json", "--", "python3", py]));
    const ln = l.kernels.find((k: any) => /layer_norm/i.test(k.demangled));
    expect(ln, JSON.stringify(l.kernels.map((k: any) => k.demangled))).toBeDefined();
    expect(ln.graph).toBe(3);
    const r = kc(["run", "--kernel", "layer_norm", "--dispatch", "2", "--out", join(WORK, "ln"), "--", "python3", py]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("inside CUDA graph");
  });
});
