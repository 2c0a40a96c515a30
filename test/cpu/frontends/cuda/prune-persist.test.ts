/**
 * The pruner's analysis kept between validate processes (src/frontends/cuda/prune/persist.ts, through
 * FastBuildState.load/save in src/frontends/cuda/fast-build.ts): a restored state gives the pruned
 * TU a cold prune gives, for an edit after the reused prefix, before it, and in a header; a state
 * file that is damaged, of another version, names another text, is a link, is another user's or
 * writable by others is ignored (a cold prune). With nvcc: validate-like series (a new state loaded
 * from the work folder at every build) on the heavy reproducer give the kernel build.sh's machine code.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, chownSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "../../fixtures.ts";
import { NVCC } from "../../../nvcc-fixtures.ts";
import { makeHeavyReproducer } from "../../../heavy-fixture.ts";
import { DevicePruner, pruneDeviceTU } from "../../../../src/frontends/cuda/prune/cache.ts";
import { decodePruneState, encodePruneState, loadPruneState, PRUNE_STATE_FILE, savePruneState } from "../../../../src/frontends/cuda/prune/persist.ts";
import { fastBuild, FastBuildState, sameKernelCode } from "../../../../src/frontends/cuda/fast-build.ts";
import { stateSeal, userResultsKey } from "../../../../src/format/state-seal.ts";

const WORK = tempDir("kerncap-prune-persist-");
afterAll(() => rmSync(WORK, { recursive: true, force: true }));

/** gcc -E output: a system header, a project header with many declarations, the primary file. */
function tu(extra = { header: "", early: "", kernel: "" }): string {
  const helpers = Array.from({ length: 40 }, (_, i) => `__attribute__((device)) inline float h${i}(float x) { return x + ${i}; }`);
  return [
    '# 0 "src/slice.cu"',
    '# 0 "<built-in>"',
    '# 1 "src/slice.cu"',
    '# 1 "/usr/include/c++/12/bits/stl_vector.h" 1 3',
    "namespace std {",
    "template<typename _Tp> class vector { public: _Tp* _M_start; void push_back(const _Tp& __x); };",
    "template<typename _Tp> inline void swap(_Tp& __a, _Tp& __b) { _Tp __t = __a; __a = __b; __b = __t; }",
    "}",
    '# 2 "src/slice.cu" 2',
    '# 1 "src/ops.cuh" 1',
    extra.early,
    "struct HostOnly { std::vector<int> v; };",
    "static void host_helper(HostOnly& h) { h.v.push_back(1); }",
    "struct Params { float scale; };",
    ...helpers,
    extra.header,
    "template <typename T> __attribute__((global)) void kern(T* y, Params p) {",
    `  float r = h3(p.scale) + h7(y[0])${extra.kernel};`,
    "  std::swap(r, r);",
    "  y[0] = r;",
    "}",
    '# 3 "src/slice.cu" 2',
    "static void* kerncap_odr_use = (void*)&kern<float>;",
    "",
  ].join("\n");
}

/** A state saved after pruning `text` in one "process", loaded in the next. */
function savedAfter(text: string, name: string) {
  const p = new DevicePruner();
  p.prune(text);
  const path = join(WORK, name);
  savePruneState(path, p.state!);
  return path;
}

function restored(path: string): DevicePruner {
  const st = loadPruneState(path);
  if ("reason" in st) throw new Error(st.reason);
  const p = new DevicePruner();
  p.state = st;
  return p;
}

describe("the pruner's analysis kept on disk", () => {
  const base = tu();
  const path = savedAfter(base, "base.bin");

  test("a hit: the edit in the kernel reuses the declarations before it; the pruned TU is the cold prune's", () => {
    const edited = tu({ header: "", early: "", kernel: " + h11(1.0f)" });
    const p = restored(path);
    const r = p.prune(edited);
    expect(p.reused).toBeGreaterThan(40);
    expect(r.text).toBe(pruneDeviceTU(edited).text);
    expect(r.text).toContain("h11"); // the edit reached the pruned TU
  });

  test("an edit before the reused prefix (the start of the header): fewer declarations reused, the same result as cold", () => {
    const edited = tu({ header: "", early: "__attribute__((device)) inline float h3(double x) { return x; }", kernel: "" });
    const p = restored(path);
    const r = p.prune(edited);
    expect(p.reused).toBeLessThan(5);
    expect(r.text).toBe(pruneDeviceTU(edited).text);
    expect(r.text).toContain("h3(double x)"); // the new overload of a name the kernel uses stays
  });

  test("a header change after the edit point of the saved text, and the identical text (nothing changed): the cold prune's result", () => {
    const edited = tu({ header: "__attribute__((device)) inline float h7(double x) { return 2 * x; }", early: "", kernel: "" });
    expect(restored(path).prune(edited).text).toBe(pruneDeviceTU(edited).text);
    const same = restored(path);
    expect(same.prune(base).text).toBe(pruneDeviceTU(base).text);
    expect(same.reused).toBeGreaterThan(40);
  });

  test("a state saved from a restored one keeps the string ids of its prefix and decodes to the same state", () => {
    const p = restored(path);
    const prev = p.state!;
    const edited = tu({ header: "", early: "", kernel: " + h12(2.0f)" });
    p.prune(edited);
    const again = decodePruneState(encodePruneState(p.state!, prev));
    if ("reason" in again) throw new Error(again.reason);
    expect(again.text).toBe(p.state!.text);
    expect(again.t.text).toEqual(p.state!.t.text.slice(0, p.state!.t.n));
    expect(again.items).toEqual(p.state!.items);
    const q = new DevicePruner();
    q.state = again;
    expect(q.prune(edited).text).toBe(pruneDeviceTU(edited).text);
  });
});

describe("a state file that is not this user's kerncap's whole output is ignored", () => {
  const text = tu();
  const bytes = (() => {
    const p = new DevicePruner();
    p.prune(text);
    return encodePruneState(p.state!);
  })();
  const header = () => JSON.parse(Buffer.from(bytes).toString("latin1").split("\n")[0]!);
  /** A header line as the writer pads it (the sections start at a multiple of 8 bytes; their offsets are from there). */
  const lineOf = (h: object) => {
    const line = JSON.stringify(h);
    return Buffer.from(line.padEnd(((line.length + 8) & ~7) - 1, " ") + "\n", "latin1");
  };
  const withHeader = (h: object) => Buffer.concat([lineOf(h), Buffer.from(bytes.subarray(Buffer.from(bytes).indexOf(10) + 1))]);
  const reason = (b: Uint8Array) => {
    const r = decodePruneState(b);
    return "reason" in r ? r.reason : "accepted";
  };

  test("damaged bytes, a truncated file, another kerncap version, another schema, a text whose sha256 differs", () => {
    expect(reason(bytes)).toBe("accepted");
    const flipped = Uint8Array.from(bytes);
    flipped[flipped.length - 100]! ^= 0xff;
    expect(reason(flipped)).toContain("checksum");
    expect(reason(bytes.subarray(0, bytes.length - 64))).toContain("checksum");
    expect(reason(withHeader({ ...header(), kerncap: "0.0.0-other" }))).toContain("made by kerncap");
    expect(reason(withHeader({ ...header(), schema: "kerncap.prune-state/0" }))).toContain("schema");
    expect(reason(withHeader({ ...header(), textSha256: "0".repeat(64) }))).toContain("sha256");
    expect(reason(Buffer.from("not a state\n"))).not.toBe("accepted");
  });

  test("a consistent file whose token ids name other texts (checksum made again) is refused: a token's text must be its span", () => {
    const h = header();
    const body = Uint8Array.from(bytes.subarray(Buffer.from(bytes).indexOf(10) + 1));
    const [idsAt] = h.sections.ids as [number, number];
    const ids = new Int32Array(body.buffer, idsAt, 8);
    [ids[0], ids[5]] = [ids[5]!, ids[0]!]; // two tokens of different lengths swap their texts
    const forged = Buffer.concat([lineOf({ ...h, check: String(Bun.hash(body)) }), body]);
    expect(reason(forged)).toMatch(/token \d+ is out of its text/);
  });

  test("on disk: a link, a file others may write, another user's file, a file with no seal of this user's for its folder are not read", () => {
    const good = join(WORK, "good.bin");
    writeFileSync(good, bytes);
    chmodSync(good, 0o644);
    // written whole by a sender (its check field is an unkeyed hash anyone can make: adversary 57): no seal, not read
    expect(loadPruneState(good)).toEqual({ reason: "not sealed" });
    const key = userResultsKey()!;
    expect(key).toBeDefined(); // the suite's state folder holds the user's key
    writeFileSync(`${good}.seal`, stateSeal("kerncap.prune-state/1", WORK, [bytes], key));
    expect("reason" in loadPruneState(good)).toBe(false);
    // sealed for another folder (a copy's): not read
    const elsewhere = join(WORK, "elsewhere");
    mkdirSync(elsewhere, { recursive: true });
    writeFileSync(join(elsewhere, "good.bin"), bytes);
    writeFileSync(join(elsewhere, "good.bin.seal"), readFileSync(`${good}.seal`));
    expect(loadPruneState(join(elsewhere, "good.bin"))).toMatchObject({ reason: expect.stringContaining("its seal does not hold") });
    const link = join(WORK, "link.bin");
    symlinkSync(good, link);
    expect(loadPruneState(link)).toMatchObject({ reason: expect.stringContaining("cannot be opened") });
    const open = join(WORK, "open.bin");
    writeFileSync(open, bytes);
    chmodSync(open, 0o666);
    expect(loadPruneState(open)).toEqual({ reason: "others may write it" });
    expect(loadPruneState(join(WORK, "none.bin"))).toEqual({ reason: "none saved" });
    if (process.geteuid?.() === 0) {
      const theirs = join(WORK, "theirs.bin");
      writeFileSync(theirs, bytes);
      chmodSync(theirs, 0o644);
      chownSync(theirs, 12345, 12345);
      expect(loadPruneState(theirs)).toMatchObject({ reason: expect.stringContaining("not this user's") });
    }
  });
});

describe.skipIf(!NVCC)("validate-like fast builds, one state per process, on a real reproducer (nvcc)", () => {
  test("each build starts from the work folder's state: the prefix's analysis is reused, the pruned TU is the cold prune's, the kernel's code is build.sh's", async () => {
    const out = join(WORK, "heavy-capture");
    const { kernel, header } = await makeHeavyReproducer(WORK, out);
    const env = { ...process.env, NVCC: NVCC! };
    const saved = process.env.NVCC;
    process.env.NVCC = NVCC!;
    try {
      const buildSh = () => {
        const p = Bun.spawnSync(["bash", join(out, "build.sh")], { cwd: out, stdout: "pipe", stderr: "pipe", env });
        expect(p.exitCode, p.stderr.toString()).toBe(0);
        return new Uint8Array(readFileSync(p.stdout.toString().trim().split("\n").pop()!));
      };
      const work = join(WORK, "heavy-work");
      // a "process": its state loaded from the work folder, one build, saved
      const validate = async () => {
        const st = FastBuildState.load(work);
        const f = await fastBuild(out, work, { force: false }, st);
        st.save(work);
        return { f, st };
      };
      await validate(); // the first: no state yet, a cold prune; the state is written
      expect(loadPruneState(join(work, PRUNE_STATE_FILE))).not.toHaveProperty("reason");
      const common = join(out, "src", "lib", "common.cuh");
      for (const [what, edit] of [
        [
          "the kernel's header, after the prefix",
          () => writeFileSync(header, readFileSync(header, "utf8").replace("* a * traits<T>::vec", "* a * a * traits<T>::vec")),
        ],
        [
          "a header before the kernel's",
          () => writeFileSync(common, readFileSync(common, "utf8").replace("constexpr int warps_for", "constexpr int unused_k = 3;\nconstexpr int warps_for")),
        ],
      ] as const) {
        edit();
        const { f, st } = await validate();
        expect(st.pruner.reused, what).toBeGreaterThan(0);
        // the same pruned TU a fresh, cold pruner makes of this process's text
        const fresh = new DevicePruner().prune(st.pruner.state!.text).text;
        expect(readFileSync(join(work, "pruned.cpp1.ii"), "latin1"), what).toBe(fresh);
        expect(sameKernelCode(buildSh(), new Uint8Array(readFileSync(f.module)), kernel), what).toBeNull();
      }
    } finally {
      if (saved === undefined) delete process.env.NVCC;
      else process.env.NVCC = saved;
    }
  }, 240_000);
});
