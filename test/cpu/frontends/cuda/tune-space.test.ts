import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import {
  cudaBuildFlags,
  cudaConfigKey,
  cudaConfigLabel,
  nvccTuneFlags,
  parseCudaSpace,
  type CudaSpaceSpec,
} from "../../../../src/frontends/cuda/tune-space.ts";

const spec = (o: Partial<CudaSpaceSpec>): CudaSpaceSpec => ({ configs: [], defines: [], nvccFlags: [], ...o });
const flags = (o: Partial<CudaSpaceSpec>) => parseCudaSpace(spec(o)).map((c) => cudaBuildFlags(c).join(" "));

describe("tune (CUDA): the config space", () => {
  test("--define NAME=a,b (repeatable) and --maxrregcount N,M: the product, -D for each value, -maxrregcount last", () => {
    expect(flags({ defines: ["TILE=16,32"], maxrregcount: "32,64" })).toEqual([
      "-DTILE=16 -maxrregcount=32",
      "-DTILE=16 -maxrregcount=64",
      "-DTILE=32 -maxrregcount=32",
      "-DTILE=32 -maxrregcount=64",
    ]);
    expect(flags({ defines: ["TILE=16,32", "USE_LDG=0,1", "T=float,double"] })).toHaveLength(8);
    expect(flags({ maxrregcount: "64,64,064" })).toEqual(["-maxrregcount=64"]);
    expect(flags({ defines: ["SCALE=0.5f,-1,1e+3"] })).toEqual(["-DSCALE=0.5f", "-DSCALE=-1", "-DSCALE=1e+3"]);
  });
  test("--config words: maxrregcount is nvcc's option, any other name a macro; --define words join every spec; specs joined without duplicates", () => {
    const c = parseCudaSpace(spec({ configs: ["TILE=16,32 maxrregcount=32", "TILE=16 maxrregcount=32"], defines: ["UNROLL=2"] }));
    expect(c).toEqual([
      { defines: { TILE: "16", UNROLL: "2" }, maxrregcount: 32, flags: [] },
      { defines: { TILE: "32", UNROLL: "2" }, maxrregcount: 32, flags: [] },
    ]);
    // a Triton option name is a macro here
    expect(flags({ configs: ["num_warps=4"] })).toEqual(["-Dnum_warps=4"]);
  });
  test("--nvcc-flag: each use one alternative (several words, or none), an axis of its own", () => {
    const c = parseCudaSpace(spec({ maxrregcount: "32,64", nvccFlags: ["", "-Xptxas=-O1", "--use_fast_math --extra-device-vectorization"] }));
    expect(c.map(cudaConfigLabel)).toEqual([
      "maxrregcount=32",
      "maxrregcount=32 -Xptxas=-O1",
      "maxrregcount=32 --use_fast_math --extra-device-vectorization",
      "maxrregcount=64",
      "maxrregcount=64 -Xptxas=-O1",
      "maxrregcount=64 --use_fast_math --extra-device-vectorization",
    ]);
    expect(
      flags({ nvccFlags: ["-Xptxas=-O1,-v", "--ptxas-options=--allow-expensive-optimizations=true", "--ftz=true --prec-div=false --fmad=false --dopt=on"] }),
    ).toHaveLength(3);
  });
  test("the nvcc words: macros sorted, then -maxrregcount, then the flags; the label keeps the order given", () => {
    const c = { defines: { ZED: "1", ALPHA: "2" }, maxrregcount: 40, flags: ["-Xptxas=-O2"] };
    expect(cudaBuildFlags(c)).toEqual(["-DALPHA=2", "-DZED=1", "-maxrregcount=40", "-Xptxas=-O2"]);
    expect(cudaConfigLabel(c)).toBe("ZED=1 ALPHA=2 maxrregcount=40 -Xptxas=-O2");
    expect(cudaConfigKey(c)).toBe(cudaConfigKey({ defines: { ALPHA: "2", ZED: "1" }, maxrregcount: 40, flags: ["-Xptxas=-O2"] }));
    expect(cudaBuildFlags({ defines: {}, flags: [] })).toEqual([]);
  });
  test("refused, naming the word: bad words and values, a name twice, no axis, flags that are not code generation's", () => {
    expect(() => parseCudaSpace(spec({}))).toThrow(/no config space/);
    expect(() => parseCudaSpace(spec({ configs: ["  "] }))).toThrow(/--config is empty/);
    expect(() => parseCudaSpace(spec({ defines: ["TILE"] }))).toThrow(/"TILE" is not NAME=V1,V2/);
    expect(() => parseCudaSpace(spec({ defines: ["TILE=16", "TILE=32"] }))).toThrow(/TILE is given twice/);
    expect(() => parseCudaSpace(spec({ configs: ["TILE=16"], defines: ["TILE=32"] }))).toThrow(/TILE is given twice/);
    expect(() => parseCudaSpace(spec({ maxrregcount: "32,abc" }))).toThrow(/maxrregcount "abc" is not a whole number from 1 to 255/);
    expect(() => parseCudaSpace(spec({ maxrregcount: "0" }))).toThrow(/from 1 to 255/);
    expect(() => parseCudaSpace(spec({ maxrregcount: "256" }))).toThrow(/from 1 to 255/);
    for (const bad of ["$(id)", "a;b", "a b", "`x`", "*", "'q'", "a/b"])
      expect(() => parseCudaSpace(spec({ defines: [`X=${bad}`] })), bad).toThrow(/not NAME=V1,V2|is not a value for macro X/);
    expect(() => nvccTuneFlags("-DTILE=4")).toThrow(/--define/);
    expect(() => nvccTuneFlags("-maxrregcount=32")).toThrow(/--maxrregcount/);
    for (const bad of ["-ccbin=/tmp/evil", "--run", "-Xcompiler=-fplugin=x.so", "-I/home", "-include=x.h", "-O3", "-Xptxas", "--ftz=maybe"])
      expect(() => nvccTuneFlags(bad), bad).toThrow(/not a flag kerncap tune sweeps/);
    expect(nvccTuneFlags("")).toEqual([]);
    // ptxas options: settings only, by name; nothing that reads or writes a file, no unknown one (trial 15: ptxas read the build's own script as options)
    for (const bad of [
      "-Xptxas=--output-file=/etc/x",
      "-Xptxas=--options-file=build.sh",
      "-Xptxas=-optf=src",
      "--ptxas-options=--options-file=build.sh",
      "-Xptxas=-v,--options-file=build.sh",
      "-Xptxas=--input-as-string=.version",
      "-Xptxas=-knob=x",
      "-Xptxas=--knobs-file=x",
    ])
      expect(() => nvccTuneFlags(bad), bad).toThrow(/is not one kerncap tune passes/);
    expect(nvccTuneFlags("-Xptxas=-O1,-v --ptxas-options=--maxrregcount=64 -Xptxas=--def-load-cache=cg")).toHaveLength(3);
  });
  test("the product's size is the product of the axes' sizes (property)", () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 1, max: 255 }), { minLength: 1, maxLength: 4 }),
        fc.uniqueArray(fc.integer({ min: 0, max: 99 }), { minLength: 1, maxLength: 4 }),
        (regs, tiles) => {
          const c = parseCudaSpace(spec({ defines: [`T=${tiles.join(",")}`], maxrregcount: regs.join(",") }));
          expect(c).toHaveLength(regs.length * tiles.length);
          expect(new Set(c.map(cudaConfigKey)).size).toBe(c.length);
        },
      ),
    );
  });
});
