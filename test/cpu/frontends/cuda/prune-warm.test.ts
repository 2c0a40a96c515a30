/**
 * The warm path of the device-side pruning (src/frontends/cuda/prune/cache.ts): a DevicePruner
 * takes the last call's token arrays over (tokenize's prior, no copy), and reuses the include
 * depths, namespace items and the pruned text's prefix of the items before the first changed
 * character (policy.ts's FinishMemo). Whatever the edit, each output must be the cold prune's,
 * byte for byte, and a state saved (persist.ts) after any of those prunes must load and go on.
 */
import { describe, expect, test } from "bun:test";
import { DevicePruner, type PruneState, pruneDeviceTU } from "../../../../src/frontends/cuda/prune/cache.ts";
import { decodePruneState, encodePruneState } from "../../../../src/frontends/cuda/prune/persist.ts";

/** What the generated TU has: which helpers the kernel calls, extra lines at a few places. */
interface Spec {
  uses: Set<number>;
  /** Lines inserted before helper i of the project header. */
  inserts: Map<number, string>;
  sysExtra: string;
  kernelExtra: string;
  tail: string;
}

const HELPERS = 60;

/** gcc -E output: a system header, a project header (helpers, host code, pragmas, a nested header, namespaces), the primary file. */
function render(s: Spec): string {
  const lines = [
    '# 0 "src/slice.cu"',
    '# 0 "<built-in>"',
    '# 1 "src/slice.cu"',
    '# 1 "/usr/include/c++/12/bits/stl_vector.h" 1 3',
    "namespace std {",
    "template<typename _Tp> class vector { public: _Tp* _M_start; void push_back(const _Tp& __x); };",
    "template<typename _Tp> void vector<_Tp>::push_back(const _Tp& __x) { *_M_start = __x; }",
    "template<typename _Tp> inline void swap(vector<_Tp>& __a, vector<_Tp>& __b) { }",
    "template<typename _Tp> inline void swap(_Tp& __a, _Tp& __b) { _Tp __t = __a; __a = __b; __b = __t; }",
    "namespace __exception_ptr { class exception_ptr { void* _M; }; inline void swap(exception_ptr& a, exception_ptr& b) { } }",
    "using __exception_ptr::swap;",
    s.sysExtra,
    "}",
    '# 2 "src/slice.cu" 2',
    '# 1 "src/ops.cuh" 1',
    "struct HostOnly { std::vector<int> v; void add(int x); };",
    "void HostOnly::add(int x) { v.push_back(x); }",
    "static void host_helper(HostOnly& h) { h.add(1); }",
    "namespace cg = std;",
    "struct Params { float scale; };",
  ];
  for (let i = 0; i < HELPERS; i++) {
    const ins = s.inserts.get(i);
    if (ins !== undefined) lines.push(ins);
    if (i % 7 === 3) lines.push("#pragma nv_exec_check_disable");
    if (i === 20) lines.push('# 1 "src/inner.cuh" 1');
    if (i % 5 === 0) lines.push(`namespace ns${i} { namespace in {`);
    if (i % 3 === 0) lines.push(`int host_fn${i}(int x)`, "{", `  return x + ${i};`, "}");
    lines.push(`__attribute__((device)) inline float h${i}(float x) {`, `  return x + ${i}${i > 0 && i % 4 === 0 ? ` + h${i - 1}(x)` : ""};`, "}");
    if (i % 5 === 0) lines.push(`__attribute__((device)) inline float g${i}(float x) { return h${i}(x); }`, "} }");
    if (i === 40) lines.push('# 30 "src/ops.cuh" 2');
  }
  const calls = [...s.uses].sort((a, b) => a - b).map((i) => (i % 5 === 0 ? ` + ns${i}::in::g${i}(r)` : ` + h${i}(r)`));
  lines.push(
    "template <typename T> __attribute__((global)) void kern(T* y, Params p) {",
    `  float r = p.scale${calls.join("")}${s.kernelExtra};`,
    "  std::swap(r, r);",
    "  y[0] = r;",
    "}",
    '# 3 "src/slice.cu" 2',
    "static void* kerncap_odr_use = (void*)&kern<float>;",
    s.tail,
    "",
  );
  return lines.join("\n");
}

/** A deterministic pseudo-random sequence (xorshift32). */
function rng(seed: number): () => number {
  let x = seed;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

/** The next spec: one edit of the kinds a watch sees (the kernel's calls, a header line, the system header, a namespace, the TU's end). */
function edit(s: Spec, r: () => number, step: number): Spec {
  const n: Spec = { uses: new Set(s.uses), inserts: new Map(s.inserts), sysExtra: s.sysExtra, kernelExtra: s.kernelExtra, tail: s.tail };
  const k = Math.floor(r() * 7);
  const i = Math.floor(r() * HELPERS);
  if (k <= 1) {
    // the kernel calls one more helper or one less: early declarations become kept or dropped
    if (n.uses.has(i)) n.uses.delete(i);
    else n.uses.add(i);
  } else if (k === 2) n.kernelExtra = n.kernelExtra ? "" : ` * ${step}.0f`;
  else if (k === 3) {
    // a header line: a comment, a new overload of a helper, or one taken away
    if (n.inserts.has(i)) n.inserts.delete(i);
    else n.inserts.set(i, r() < 0.5 ? `// edit ${step}` : `__attribute__((device)) inline double h${(i + 5) % HELPERS}(double x) { return x * ${step}; }`);
  } else if (k === 4) n.sysExtra = n.sysExtra ? "" : `template<typename _Tp> struct hash_${step} { _Tp v; };`;
  else if (k === 5)
    n.tail = n.tail ? "" : `namespace fresh${step} { int z; }`; // a namespace appears or goes
  else n.tail = n.tail.startsWith("//") ? "" : `// saved ${step}`;
  return n;
}

/** The state a fresh process would have after `st` was saved (persist.ts), the ids of `prev` reused. */
function roundTrip(st: PruneState, prev?: PruneState): PruneState {
  const back = decodePruneState(encodePruneState(st, prev));
  if ("reason" in back) throw new Error(back.reason);
  return back;
}

describe("DevicePruner: a watch's series of edits", () => {
  test("every warm prune is the cold prune's, byte for byte: edits in the kernel, a header, the system header, new namespaces; saves and loads of the state between them", () => {
    const r = rng(12345);
    let spec: Spec = { uses: new Set([3, 7, 10]), inserts: new Map(), sysExtra: "", kernelExtra: "", tail: "" };
    let p = new DevicePruner();
    let onDisk: PruneState | undefined;
    let reusedSome = 0,
      keptChanged = 0;
    let lastKept = -1;
    for (let step = 0; step < 80; step++) {
      spec = edit(spec, r, step);
      const text = render(spec);
      const warm = p.prune(text);
      const cold = pruneDeviceTU(text);
      expect(warm.text).toBe(cold.text);
      expect(warm.kept).toBe(cold.kept);
      if (p.reused > 0) reusedSome++;
      if (lastKept >= 0 && warm.kept !== lastKept) keptChanged++;
      lastKept = warm.kept;
      // every third step a validate-like process boundary: the state saved (ids of the last
      // saved one reused) and loaded into a fresh pruner
      if (step % 3 === 2) {
        const st = roundTrip(p.state!, onDisk);
        onDisk = p.state!;
        expect(st.text).toBe(text);
        expect(st.t.text).toEqual(p.state!.t.text.slice(0, p.state!.t.n));
        p = new DevicePruner();
        p.state = st;
        onDisk = st;
      }
    }
    // the series did what it is for: most prunes were warm, and the kept set changed along the way
    expect(reusedSome).toBeGreaterThan(40);
    expect(keptChanged).toBeGreaterThan(10);
  });

  test("a state saved after each warm prune (its tokens taken over from the one saved before) decodes to the pruner's own tokens and prunes on like it", () => {
    let spec: Spec = { uses: new Set([4, 9]), inserts: new Map(), sysExtra: "", kernelExtra: "", tail: "" };
    const p = new DevicePruner();
    p.prune(render(spec));
    let prev = p.state!;
    roundTrip(prev);
    const r = rng(777);
    for (let step = 0; step < 12; step++) {
      spec = edit(spec, r, step);
      const text = render(spec);
      p.prune(text);
      const st = roundTrip(p.state!, prev); // prev's token arrays are p.state's now: prev's ids come from its table
      expect(st.t.n).toBe(p.state!.t.n);
      expect(st.t.text).toEqual(p.state!.t.text.slice(0, p.state!.t.n));
      expect(Array.from(st.t.start)).toEqual(Array.from(p.state!.t.start.subarray(0, p.state!.t.n)));
      const q = new DevicePruner();
      q.state = st;
      const next = render(edit(spec, rng(step + 1), 100 + step));
      expect(q.prune(next).text).toBe(pruneDeviceTU(next).text);
      prev = p.state!;
    }
  });

  test("an edit that changes which early declarations are kept: the pruned text is made again from the first one that changed", () => {
    const base: Spec = { uses: new Set([30, 31]), inserts: new Map(), sysExtra: "", kernelExtra: "", tail: "" };
    const p = new DevicePruner();
    p.prune(render(base));
    for (const uses of [[30, 31, 2], [30, 31], [1, 30, 31, 55], [55]]) {
      const text = render({ ...base, uses: new Set(uses) });
      const warm = p.prune(text).text;
      expect(p.reused).toBeGreaterThan(50); // the edit is in the kernel: the header's analysis is reused
      expect(warm).toBe(pruneDeviceTU(text).text);
      for (const i of uses) expect(warm).toContain(i % 5 === 0 ? `g${i}(float x)` : `h${i}(float x)`);
    }
  });

  test("a namespace that appears at the end changes what an early declaration declares (`float Qual::qf(…)`: its class, then qf): the names of the reused declarations are read again", () => {
    const spec: Spec = {
      uses: new Set([3]),
      inserts: new Map([[2, "__attribute__((device)) float Qual::qf(float x) { return x; }"]]),
      sysExtra: "",
      kernelExtra: " + qf(r)",
      tail: "",
    };
    const p = new DevicePruner();
    const before = render(spec);
    expect(p.prune(before).text).toBe(pruneDeviceTU(before).text);
    const after = render({ ...spec, tail: "namespace Qual { }" });
    const warm = p.prune(after).text;
    expect(warm).toBe(pruneDeviceTU(after).text);
    expect(warm).toContain("Qual::qf(float x)"); // a definition of qf in namespace Qual, which the kernel calls
    expect(p.prune(before).text).toBe(pruneDeviceTU(before).text); // and back
  });

  test("a state whose tokens a later prune took over, set back on a pruner, prunes cold (same result) and is not saved", () => {
    const a = render({ uses: new Set([3]), inserts: new Map(), sysExtra: "", kernelExtra: "", tail: "" });
    const b = render({ uses: new Set([3, 8]), inserts: new Map(), sysExtra: "", kernelExtra: "", tail: "" });
    const p = new DevicePruner();
    p.prune(a);
    const old = p.state!;
    p.prune(b);
    expect(p.reused).toBeGreaterThan(50);
    expect(() => encodePruneState(old)).toThrow(/taken over/);
    p.state = old;
    expect(p.prune(b).text).toBe(pruneDeviceTU(b).text);
    expect(p.reused).toBe(0);
  });

  test("two states decoded from the same bytes do not share token arrays: a warm prune of one (writing its next tokens in place) leaves the other whole", () => {
    const spec: Spec = { uses: new Set([3, 8]), inserts: new Map(), sysExtra: "", kernelExtra: "", tail: "" };
    const p = new DevicePruner();
    p.prune(render(spec));
    const bytes = encodePruneState(p.state!);
    const [s1, s2] = [decodePruneState(bytes), decodePruneState(bytes)];
    if ("reason" in s1 || "reason" in s2) throw new Error("not decoded");
    // a header edit: the tokens after it (dropped helpers among them) move
    const inHeader = render({ ...spec, inserts: new Map([[10, "__attribute__((device)) inline double h15(double x) { return x * 2; }"]]) });
    const atEnd = render({ ...spec, tail: "// saved" });
    const a = new DevicePruner();
    a.state = s1;
    expect(a.prune(inHeader).text).toBe(pruneDeviceTU(inHeader).text);
    const b = new DevicePruner();
    b.state = s2;
    expect(b.prune(atEnd).text).toBe(pruneDeviceTU(atEnd).text);
    expect(b.reused).toBeGreaterThan(50);
  });

  test("a long series keeps no earlier state alive: the pruner holds the last one only", () => {
    let spec: Spec = { uses: new Set([3]), inserts: new Map(), sysExtra: "", kernelExtra: "", tail: "" };
    const p = new DevicePruner();
    const refs: WeakRef<PruneState>[] = [];
    const r = rng(99);
    for (let step = 0; step < 30; step++) {
      spec = edit(spec, r, step);
      p.prune(render(spec));
      refs.push(new WeakRef(p.state!));
    }
    Bun.gc(true);
    const alive = refs.slice(0, -1).filter((w) => w.deref() !== undefined).length;
    expect(alive).toBeLessThanOrEqual(2); // (a conservative collector may see one or two on the stack)
    expect(refs[refs.length - 1]!.deref()).toBe(p.state);
  });
});
