/**
 * src/frontends/compile-settings.ts: which flags of a received build.sh are compile settings only.
 * A flag that writes, runs or reads a file of its own choosing is named; the flags real projects
 * pass (ggml's CMake flags, llm.c's Makefile, Fedora's annobin) are settings.
 */
import { describe, expect, test } from "bun:test";
import { firstNonSetting } from "../../../src/frontends/compile-settings.ts";

describe("compile settings", () => {
  test("real projects' flags are settings", () => {
    const real = [
      // ggml's CMake compile command, arch and output flags removed as the capture removes them
      "-DGGML_BACKEND_BUILD -DGGML_CUDA_PEER_MAX_BATCH_SIZE=128 -DGGML_SCHED_MAX_COPIES=4 -D_GNU_SOURCE -D_XOPEN_SOURCE=600 -Dggml_cuda_EXPORTS -I./src/ggml/src/ggml-cuda/.. -isystem /usr/local/cuda/targets/x86_64-linux/include -O3 -DNDEBUG -std=c++17 -Xcompiler=-fPIC -use_fast_math -extended-lambda",
      // llm.c's Makefile
      "-O3 -t=0 --use_fast_math -std=c++17 -DMULTI_GPU=0 -DENABLE_BF16",
      // options of the -Xcompiler/-Xptxas/-Xcudafe kinds
      "-Xcompiler -Wall,-Wextra,-Wno-unused-function -Xptxas -v,-O3,--warn-on-spills -Xcudafe --diag_suppress=177 -maxrregcount 64 --expt-relaxed-constexpr -lineinfo",
      // CMake's Ninja generator adds the color switch
      "-Xcompiler=-fdiagnostics-color=always -Xcompiler -fvisibility=hidden,-fno-strict-aliasing",
      "-Xcompiler -fplugin=annobin -Xcompiler -Wl,-Bstatic -O3 -ccbin /usr/bin/g++ --default-stream per-thread -diag-suppress 20012",
    ];
    for (const f of real) expect(firstNonSetting(f.split(" ")), f).toBeUndefined();
  });

  test("flags that write, run or read a file of their own are named", () => {
    const hostile: [string[], string][] = [
      [["-O3", "-MD", "-MF", "/home/v/.bashrc", "-MT", "echo x"], "-MD"],
      [["--keep-dir", "/tmp/x", "--keep"], "--keep-dir"],
      [["-odir", "/tmp"], "-odir"],
      [["-Xptxas", "-v,-o/home/v/x"], "-Xptxas -o/home/v/x"],
      [["-Xptxas=--output-file=/x"], "-Xptxas --output-file=/x"],
      [["-Xcompiler", "-Wp,-MD,/x"], "-Xcompiler -Wp"],
      [["-Xcompiler=-wrapper,sh,src/x.cuh"], "-Xcompiler -wrapper"],
      [["-Xcompiler", "-fdump-tree-all"], "-Xcompiler -fdump-tree-all"],
      [["-Xcompiler", "-fplugin=/tmp/p.so"], "-Xcompiler -fplugin=/tmp/p.so"],
      [["-Xcompiler", "-fmodule-mapper=x"], "-Xcompiler -fmodule-mapper=x"],
      [["-Xcompiler", "-Wl,-plugin,/x.so"], "-Xcompiler -Wl,-plugin"],
      [["-Xcompiler", "-mllvm"], "-Xcompiler -mllvm"],
      [["-Xcompiler", "-save-temps=obj"], "-Xcompiler -save-temps=obj"],
      [["-Xlinker", "-plugin"], "-Xlinker"],
      [["-Xnvlink", "x"], "-Xnvlink"],
      [["@opts.txt"], "@opts.txt"],
      [["--options-file", "src/o"], "--options-file"],
      [["-run"], "-run"],
      [["-maxrregcount", "$(id)"], "-maxrregcount $(id)"],
      [["-Xcompiler"], "-Xcompiler"],
      [["-Wl"], "-Wl"],
    ];
    for (const [words, named] of hostile) expect(firstNonSetting(words), words.join(" ")).toBe(named);
  });

  test("a value that a shell line would run, split or read without end is named", () => {
    // nvcc pastes -D values and include folders into the sh -c lines of its steps: `-DX=$(id)` ran id
    const hostile: [string[], string][] = [
      [["-DX=$(id>/tmp/p)"], "-DX=$(id>/tmp/p)"],
      [["-DX=`id`"], "-DX=`id`"],
      [["-DX=a;id"], "-DX=a;id"],
      [["-DX=a -fplugin=/tmp/e.so"], "-DX=a -fplugin=/tmp/e.so"],
      [["-DX=a|id"], "-DX=a|id"],
      [["-DX=a\nid"], "-DX=a\nid"],
      [["-UX=$(id)"], "-UX=$(id)"],
      [["-Xcompiler", "-DX=$(id)"], "-Xcompiler -DX=$(id)"],
      [["-Xcompiler=-DY=1,-DX=`id`"], "-Xcompiler -DX=`id`"],
      [["-I$(id)"], "-I$(id)"],
      [["-I", "src;id"], "-I src;id"],
      [["-isystem", "/x y"], "-isystem /x y"],
      [["-Xcompiler", "-I$(id)"], "-Xcompiler -I$(id)"],
      [["-Xcompiler", "-isystem,$(id)"], "-Xcompiler -isystem $(id)"],
      [["--include-path=$(id)"], "--include-path=$(id)"],
      [["-ccbin", "$(id)"], "-ccbin $(id)"],
      // a device, /proc or /sys as an include: read without end (21 GB of RAM), or the build's own process
      [["-include", "/dev/zero"], "-include /dev/zero"],
      [["-include", "//dev/zero"], "-include //dev/zero"],
      [["-include", "/usr/../dev/zero"], "-include /usr/../dev/zero"],
      [["-include", "../../../../../../../../dev/zero"], "-include ../../../../../../../../dev/zero"],
      // gcc reads -fcompare-debug's value as its own options (-B.. ran ../cc1plus; -Bsrc made src/plugin its plugin folder: adversary 62)
      [["-Xcompiler", "-fcompare-debug=-B.."], "-Xcompiler -fcompare-debug=-B.."],
      [["-Xcompiler=-O2,-fcompare-debug=-Bsrc"], "-Xcompiler -fcompare-debug=-Bsrc"],
      [["-Xcompiler", "-fdiagnostics-add-output=sarif"], "-Xcompiler -fdiagnostics-add-output=sarif"],
      [["-Xcompiler", "-fvisibility=-x"], "-Xcompiler -fvisibility=-x"],
      // a line break in a quoted value: nvcc pastes it into its step's shell line, where it starts a command (adversary 62)
      [["-Xcompiler", "-I\npython3 -I src/p.py"], "-I\npython3 -I src/p.py"],
      // `..` names a file by where the build runs (an export's folder, not the private one: adversary 61)
      [["-include", "../../../dev/stdin"], "-include ../../../dev/stdin"],
      [["-I../inc"], "-I../inc"],
      [["--pre-include=/proc/self/environ"], "--pre-include=/proc/self/environ"],
      [["-I/sys/kernel"], "-I/sys/kernel"],
      [["-Xcompiler", "-include,/dev/zero"], "-Xcompiler -include /dev/zero"],
      [["-Xcompiler", "-I/dev"], "-Xcompiler -I/dev"],
    ];
    for (const [words, named] of hostile) expect(firstNonSetting(words), words.join(" ")).toBe(named);
    // the values real projects give stay settings
    for (const ok of [
      ['-DVERSION="0.9.4"'],
      ["-DN=4", "-DPATH=/a/b-c_d.e", "-DF=1.5f"],
      ["-include", "src/pre.h"],
      ["-I./src/inc", "-isystem", "/usr/include"],
    ])
      expect(firstNonSetting(ok), ok.join(" ")).toBeUndefined();
  });

  test("a response file in any spelling, and an include folder in any spelling that breaks the path rule, are named (trial adv23: -isystem=@src/kc.h ran -wrapper)", () => {
    // nvcc splits an option's value at commas and hands gcc each element as a word of its own:
    // `-isystem=@F`, `-DX=1,@F`, `-I/usr,@F` give gcc `@F`, whose words it reads as options
    const hostile: [string[], string][] = [
      [["-isystem=@src/kc.h"], "-isystem=@src/kc.h"],
      [["--system-include=@src/kc.h"], "--system-include=@src/kc.h"],
      [["-isystem", "@src/kc.h"], "-isystem @src/kc.h"],
      [["-isystem=@/home/a/kc.h"], "-isystem=@/home/a/kc.h"],
      [["-I=@x"], "-I=@x"],
      [["-I@x"], "-I@x"],
      [["-I", "@x"], "-I @x"],
      [["--include-path=@x"], "--include-path=@x"],
      [["-iquote=@x"], "-iquote=@x"],
      [["-include=@x"], "-include=@x"],
      [["--pre-include", "@x"], "--pre-include @x"],
      [["-ccbin=@x"], "-ccbin=@x"],
      [["-DX=1,@x"], "-DX=1,@x"],
      [['-DX=1,"@x"'], '-DX=1,"@x"'],
      [['-DX=1,@"x"'], '-DX=1,@"x"'],
      [["-I/usr,@x"], "-I/usr,@x"],
      [["-include=a.h,@x"], "-include=a.h,@x"],
      [["-Xcompiler=-isystem,@x"], "-Xcompiler=-isystem,@x"],
      [["-Xcompiler", "-include,@x"], "-Xcompiler -include @x"],
      [["-Xcompiler", "-isystem=@x"], "-Xcompiler -isystem=@x"],
      [["-Xcompiler", "@x"], "-Xcompiler @x"],
      [["-Xptxas=@x"], "-Xptxas=@x"],
      [["-Xcudafe", "--diag_suppress=1,@x"], "-Xcudafe @x"],
      // cudafe++'s own options that write a file of its choosing (adversary 60: its messages as SARIF over the export's ./repro)
      [["-Xcudafe", "--output_mode,sarif"], "-Xcudafe --output_mode"],
      [["-Xcudafe", "--error_output,repro"], "-Xcudafe --error_output"],
      [["-Xcudafe=--diag_suppress=177,--list,x"], "-Xcudafe --list"],
      [["-Xcudafe", "-x"], "-Xcudafe -x"],
      [["@x"], "@x"],
      // the include folders' path rule in every spelling: after nvcc's `=`, element by element, no sysroot mark
      [["-isystem=/dev/stdin"], "-isystem=/dev/stdin"],
      [["--system-include=/proc/self/cwd"], "--system-include=/proc/self/cwd"],
      [["-I=/dev/stdin"], "-I=/dev/stdin"],
      [["-I==/dev/stdin"], "-I==/dev/stdin"],
      [["-I/usr,/dev/stdin"], "-I/usr,/dev/stdin"],
      [["-isystem", "/usr,/dev"], "-isystem /usr,/dev"],
      [["--include-path=/usr,/sys"], "--include-path=/usr,/sys"],
      [["-idirafter=/dev"], "-idirafter=/dev"],
      [["-include", "a.h,/dev/zero"], "-include a.h,/dev/zero"],
      [["-Xcompiler", "-isystem=/dev"], "-Xcompiler -isystem=/dev"],
      [["-Xcompiler=-I=/dev/stdin"], "-Xcompiler -I=/dev/stdin"],
      // gcc's long spellings of -fplugin, -B, -specs, -Xlinker: not settings
      [["-Xcompiler", "--plugin=p"], "-Xcompiler --plugin=p"],
      [["-Xcompiler", "--prefix=/x/"], "-Xcompiler --prefix=/x/"],
      [["-Xcompiler", "--specs=/x"], "-Xcompiler --specs=/x"],
      [["-Xcompiler", "--for-linker,-plugin"], "-Xcompiler --for-linker"],
    ];
    for (const [words, named] of hostile) expect(firstNonSetting(words), words.join(" ")).toBe(named);
    // an @ inside a value, and the `=` spellings of a plain folder, stay settings
    for (const ok of [
      ["-DMAIL=a@b.c"],
      ["-isystem=/usr/include"],
      ["-I=./src"],
      ["--system-include=/usr/include"],
      ["-I/usr/include,./src"],
      ["-Xcompiler=-isystem,/usr/include"],
    ])
      expect(firstNonSetting(ok), ok.join(" ")).toBeUndefined();
  });
});
