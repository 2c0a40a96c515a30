/**
 * The compile-command reader on the forms build tools write (no nvcc needed): `command` strings
 * and `arguments` arrays, a relative `directory`, nested response files (nvcc's --options-file /
 * -optf, the host compilers' @file), compiler launchers, -ccbin, -Xcompiler, the -gencode forms,
 * a build folder given instead of the JSON file (its compile_commands.json, or a Ninja build's
 * `ninja -t compdb`), and what a CMake build folder without a database says.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KerncapError } from "../../../../src/errors.ts";
import { compileDatabase, expandResponseFiles, readBuildLog, readCompileCommands, withoutLauncher } from "../../../../src/frontends/cuda/compile-commands.ts";
import { cudaFlagsFromCommand, includeDirs } from "../../../../src/frontends/cuda/flags.ts";
import { instantiationPattern } from "../../../../src/frontends/cuda/includers.ts";
import { kernelNameParts } from "../../../../src/frontends/cuda/locate.ts";

const WORK = mkdtempSync(join(tmpdir(), "kerncap-compile-commands-"));
afterAll(() => rmSync(WORK, { recursive: true, force: true }));

function caught(f: () => unknown): KerncapError {
  try {
    f();
  } catch (e) {
    if (e instanceof KerncapError) return e;
    throw e;
  }
  throw new Error("no error thrown");
}

/** A project folder with a build folder, returned as paths. */
function project(name: string): { root: string; build: string } {
  const root = join(WORK, name);
  const build = join(root, "build");
  mkdirSync(join(build, "CMakeFiles", "k.dir"), { recursive: true });
  mkdirSync(join(root, "src"), { recursive: true });
  writeFileSync(join(root, "src", "k.cu"), "__global__ void k() {}\n");
  return { root, build };
}

describe("launchers", () => {
  test("ccache, sccache, env VAR=…, a launcher named by path: dropped before nvcc; other commands unchanged", () => {
    expect(withoutLauncher(["ccache", "/usr/local/cuda/bin/nvcc", "-c", "a.cu"])).toEqual(["/usr/local/cuda/bin/nvcc", "-c", "a.cu"]);
    expect(withoutLauncher(["/usr/bin/sccache", "nvcc", "-c", "a.cu"])).toEqual(["nvcc", "-c", "a.cu"]);
    expect(withoutLauncher(["env", "CCACHE_DIR=/c", "ccache", "nvcc-12.4", "x.cu"])).toEqual(["nvcc-12.4", "x.cu"]);
    expect(withoutLauncher(["/opt/tools/my-launcher", "/usr/local/cuda/bin/nvcc", "x.cu"])).toEqual(["/usr/local/cuda/bin/nvcc", "x.cu"]);
    expect(withoutLauncher(["g++", "-c", "x.cpp"])).toEqual(["g++", "-c", "x.cpp"]);
  });
});

describe("response files", () => {
  test("--options-file, -optf=, comma lists and @file, nested, relative to the command's folder", () => {
    const { build } = project("rsp");
    const dir = join(build, "CMakeFiles", "k.dir");
    writeFileSync(join(dir, "includes_CUDA.rsp"), `-I/p/include "-I/p/with space" --options-file CMakeFiles/k.dir/defines.rsp\n`);
    writeFileSync(join(dir, "defines.rsp"), "-DA=1 @CMakeFiles/k.dir/host.rsp\n");
    writeFileSync(join(dir, "host.rsp"), "-DFROM_AT\n");
    writeFileSync(join(dir, "a.rsp"), "-DCOMMA_A\n");
    writeFileSync(join(dir, "b.rsp"), "-DCOMMA_B\n");
    const e = expandResponseFiles(
      [
        "nvcc",
        "--options-file",
        "CMakeFiles/k.dir/includes_CUDA.rsp",
        "-optf=CMakeFiles/k.dir/a.rsp,CMakeFiles/k.dir/b.rsp",
        "-Xcompiler",
        "@host-only.rsp",
        "-c",
        "k.cu",
      ],
      build,
    );
    expect(e.argv).toEqual([
      "nvcc",
      "-I/p/include",
      "-I/p/with space",
      "-DA=1",
      "-DFROM_AT",
      "-DCOMMA_A",
      "-DCOMMA_B",
      "-Xcompiler",
      "@host-only.rsp",
      "-c",
      "k.cu",
    ]);
    expect(e.files).toEqual(["includes_CUDA.rsp", "defines.rsp", "host.rsp", "a.rsp", "b.rsp"].map((f) => join(dir, f)));
  });

  test("a missing response file names it and the folder; a file that names itself stops at the depth limit", () => {
    const err = caught(() => expandResponseFiles(["nvcc", "--options-file", "gone.rsp", "k.cu"], "/nowhere/build"));
    expect(err.code).toBe("E_COMPILE_COMMANDS");
    expect(err.message).toContain("/nowhere/build/gone.rsp");
    expect(err.hint).toContain("cmake -S SRC -B BUILD");
    const loop = caught(() => expandResponseFiles(["nvcc", "@self.rsp"], "/b", () => "-DX @self.rsp"));
    expect(loop.code).toBe("E_COMPILE_COMMANDS");
    expect(loop.message).toContain("nest more than 16 deep");
  });
});

describe("compile_commands.json", () => {
  test("command strings and arguments arrays, relative directory and file, launchers and response files, only CUDA TUs", () => {
    const { root, build } = project("db");
    writeFileSync(join(build, "CMakeFiles", "k.dir", "includes_CUDA.rsp"), "-I../include -isystem ../third_party\n");
    writeFileSync(
      join(build, "compile_commands.json"),
      JSON.stringify([
        {
          directory: ".",
          command: "ccache /usr/local/cuda/bin/nvcc -DK=1 --options-file CMakeFiles/k.dir/includes_CUDA.rsp -x cu -c ../src/k.cu -o k.o",
          file: "../src/k.cu",
        },
        { directory: "sub", arguments: ["sccache", "nvcc", "-DSUB", "-c", "../../src/k.cu"], file: "../../src/k.cu" },
        { directory: build, arguments: ["/usr/bin/c++", "-c", "host.cpp"], file: "host.cpp" },
        { directory: build, command: "nvcc -x cu -c ../src/kernel.cpp", file: "../src/kernel.cpp" },
      ]),
    );
    const cmds = readCompileCommands(build); // the folder, not the file
    expect(cmds.map((c) => [c.file, c.directory])).toEqual([
      [join(root, "src", "k.cu"), build],
      [join(root, "src", "k.cu"), join(build, "sub")],
      [join(root, "src", "kernel.cpp"), build],
    ]);
    expect(cmds[0]!.argv).toEqual([
      "/usr/local/cuda/bin/nvcc",
      "-DK=1",
      "-I../include",
      "-isystem",
      "../third_party",
      "-x",
      "cu",
      "-c",
      "../src/k.cu",
      "-o",
      "k.o",
    ]);
    expect(cmds[0]!.responseFiles).toEqual([join(build, "CMakeFiles", "k.dir", "includes_CUDA.rsp")]);
    expect(cmds[0]!.from).toBe(join(build, "compile_commands.json"));
    expect(cmds[1]!.argv).toEqual(["nvcc", "-DSUB", "-c", "../../src/k.cu"]);
    // the include folders of the response file, absolute from the command's folder
    const dirs = includeDirs(cudaFlagsFromCommand(cmds[0]!.argv, cmds[0]!.directory, cmds[0]!.file));
    expect(dirs.angled).toEqual([join(root, "include"), join(root, "third_party")]);
  });

  test("a build folder: its compile_commands.json; a Ninja build without one: ninja -t compdb; a CMake build without one: the reconfigure command", () => {
    const { build } = project("folders");
    expect(caught(() => compileDatabase(join(build, "missing"))).code).toBe("E_USAGE");
    writeFileSync(join(build, "CMakeCache.txt"), "CMAKE_HOME_DIRECTORY:INTERNAL=/p\n");
    const cm = caught(() => readCompileCommands(build));
    expect(cm.code).toBe("E_USAGE");
    expect(cm.message).toContain("is a folder without a compile_commands.json");
    expect(cm.hint).toBe(`Write it without building: cmake -DCMAKE_EXPORT_COMPILE_COMMANDS=ON ${build}`);
    writeFileSync(join(build, "log.txt"), "nvcc -c ../src/k.cu\n");
    expect(compileDatabase(join(build, "log.txt"))).toEqual({ kind: "log", path: join(build, "log.txt") });
    if (Bun.which("ninja")) {
      writeFileSync(
        join(build, "build.ninja"),
        "rule CUDA\n  command = ccache nvcc -DNINJA --options-file k.rsp -c $in -o $out\nbuild k.o: CUDA ../src/k.cu\n",
      );
      writeFileSync(join(build, "k.rsp"), "-I/from/rsp\n");
      expect(compileDatabase(build)).toEqual({ kind: "ninja", dir: build });
      const cmds = readCompileCommands(build);
      expect(cmds.map((c) => c.argv)).toEqual([["nvcc", "-DNINJA", "-I/from/rsp", "-c", "../src/k.cu", "-o", "k.o"]]);
      expect(cmds[0]!.from).toBe(`${build} (ninja -t compdb)`);
    }
    writeFileSync(join(build, "compile_commands.json"), "[]");
    expect(compileDatabase(build)).toEqual({ kind: "json", path: join(build, "compile_commands.json") });
  });

  test("a build log's launchers and response files are read the same way", () => {
    const { build } = project("log");
    writeFileSync(join(build, "flags.rsp"), "-DFROM_RSP\n");
    const cmds = readBuildLog(join(build, "make.log"), `cd ${build} && /usr/bin/ccache nvcc -optf flags.rsp -c ../src/k.cu -o k.o\n`);
    expect(cmds[0]!.argv).toEqual(["nvcc", "-DFROM_RSP", "-c", "../src/k.cu", "-o", "k.o"]);
    expect(cmds[0]!.responseFiles).toEqual([join(build, "flags.rsp")]);
  });
});

describe("flags of a command", () => {
  test("-ccbin made absolute, -Xcompiler values kept as the host's, every -gencode/-arch form recorded and left to build.sh", () => {
    const argv = [
      "nvcc",
      "-ccbin",
      "../tools/g++-12",
      "--compiler-bindir=/usr/bin/g++",
      "-Xcompiler",
      "-MD",
      "-Xcompiler=-fPIC,-Wall",
      "--compiler-options",
      "-fopenmp",
      "-gencode",
      "arch=compute_80,code=sm_80",
      "-gencode=arch=compute_90a,code=[sm_90a,compute_90a]",
      "--generate-code=arch=compute_90,code=sm_90",
      "--generate-code",
      "arch=compute_100,code=sm_100",
      "-arch=sm_90",
      "--gpu-architecture",
      "compute_90",
      "-code=sm_90",
      "-MD",
      "-MT",
      "k.o",
      "-MF",
      "k.o.d",
      "-c",
      "/p/src/k.cu",
      "-o",
      "k.o",
    ]; // prettier-ignore
    const f = cudaFlagsFromCommand(argv, "/p/build", "/p/src/k.cu");
    expect(f.words.map((w) => w.text)).toEqual([
      "-ccbin",
      "/p/tools/g++-12",
      "--compiler-bindir=/usr/bin/g++",
      "-Xcompiler",
      "-MD",
      "-Xcompiler=-fPIC,-Wall",
      "--compiler-options",
      "-fopenmp",
    ]);
    expect(f.originalArch).toEqual([
      "-gencode arch=compute_80,code=sm_80",
      "-gencode=arch=compute_90a,code=[sm_90a,compute_90a]",
      "--generate-code=arch=compute_90,code=sm_90",
      "--generate-code arch=compute_100,code=sm_100",
      "-arch=sm_90",
      "--gpu-architecture compute_90",
      "-code=sm_90",
    ]);
    expect(cudaFlagsFromCommand(["nvcc", "-ccbin", "g++-12", "-c", "/a.cu"], "/b", "/a.cu").words.map((w) => w.text)).toEqual(["-ccbin", "g++-12"]); // a name on PATH stays a name
  });
});

describe("the captured instantiation in source", () => {
  test("instantiationPattern: the template or a launcher named after it, any spacing and integer suffixes; not other arguments", () => {
    const re = instantiationPattern(kernelNameParts("void sgemm_tiled<128, 128, 8, 8, 8>(int, int, int, float, float const*, float const*, float, float*)"))!;
    expect(re.test("sgemm_tiled<128,128,8,8,8><<<g, b>>>(")).toBe(true);
    expect(re.test("launch_sgemm_tiled< 128, 128, 8u, 8, 8 >(M, N")).toBe(true);
    expect(re.test("sgemm_tiled<128, 128, 8, 8, 4>")).toBe(false);
    expect(re.test("not_sgemm_tiledx<128, 128, 8, 8, 8>")).toBe(false);
    expect(re.test("sgemm_tiled<BM, BN, BK, TM, TN>")).toBe(false);
    expect(instantiationPattern(kernelNameParts("plain(float*)"))).toBeUndefined();
    expect(instantiationPattern(kernelNameParts("void ns::k<float, Op<2>>(float*)"))!.test("k<float, Op<2>>(p)")).toBe(true);
  });
});
