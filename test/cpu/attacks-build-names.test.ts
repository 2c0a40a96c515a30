/**
 * The attack suite of "what build.sh names" (docs/security.md): a received capture whose build.sh
 * runs a program that lies in the capture, whose bytes the trust prompt never showed or hashed.
 *  - kerncap's own build.sh (the template's structure) whose flags slot names a program, a plugin
 *    or an option file in the capture (`-ccbin src/tools/gcc`, `-Xcompiler -fplugin=…`, `-B…`,
 *    `--options-file`, `@file`, `-run`) or in a folder another user can write: refused before
 *    anything runs, with --trust too;
 *  - a build.sh of its own that runs `bash src/tools/gen.sh`: every file under src/ is part of the
 *    digest and the private copy, the named one printed; plain --trust is refused, --trust=DIGEST
 *    runs it, and a later change of src/tools/gen.sh asks again instead of running;
 *  - the template matcher: every template rendered with hostile names is kerncap's own; a line
 *    added, a command changed or a `$(…)` in the flags is not.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { overrideSandboxSupport } from "../../src/frontends/sandbox.ts";
afterEach(() => overrideSandboxSupport(undefined));
import { runCommand } from "citty";
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { commands } from "../../src/cli/main.ts";
import { KerncapError } from "../../src/errors.ts";
import { packCapture, unpackArchive } from "../../src/format/archive.ts";
import { readManifest } from "../../src/format/capture-dir.ts";
import { requireTrustedBuild } from "../../src/format/trust.ts";
import { readWhatRuns, type RunFile } from "../../src/format/what-runs.ts";
import { CUDA_TEMPLATES } from "../../src/frontends/cuda/templates.ts";
import { HIP_TEMPLATES } from "../../src/frontends/hip/templates.ts";
import "../../src/frontends/index.ts"; // registers the frontends' reading of build.sh with the trust gate
import { codeLoadingWords, flagWords, readBuildScripts, scriptWords } from "../../src/frontends/stock-build.ts";
import { TEMPLATE_ESCAPES, templateEngine, type TemplateFile } from "../../src/frontends/templates.ts";
import { TRITON_TEMPLATES } from "../../src/frontends/triton/templates.ts";
import { makeCapture, stockBuildSh, tempDir } from "./fixtures.ts";

const saved: Record<string, string | undefined> = {};
beforeAll(() => {
  for (const k of ["XDG_STATE_HOME", "NVCC"]) saved[k] = process.env[k];
  process.env.XDG_STATE_HOME = tempDir("kerncap-state-");
});
afterAll(() => {
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

async function quietly(f: () => unknown): Promise<{ err: string; e?: KerncapError }> {
  let err = "";
  const orig = process.stderr.write.bind(process.stderr);
  process.stderr.write = ((c: string | Uint8Array) => ((err += typeof c === "string" ? c : new TextDecoder().decode(c)), true)) as typeof process.stderr.write;
  try {
    await f();
    return { err };
  } catch (e) {
    if (e instanceof KerncapError) return { err, e };
    throw e;
  } finally {
    process.stderr.write = orig;
  }
}

const validate = async (argv: string[]) => quietly(async () => runCommand(await commands.validate(), { rawArgs: argv }));

/** kerncap's own CUDA build.sh for src/kernel.cu, its flags slot `flags` (shell words, as the renderer writes them): test/cpu/fixtures.ts stockBuildSh. */
const stockCudaBuildSh = stockBuildSh;

/** A capture made in ROOT/made with `script` as build.sh, src/kernel.cu and `more`'s files, packed and unpacked: received. */
async function received(root: string, script: string, more: (made: string) => void = () => {}): Promise<string> {
  const made = join(root, "made");
  await makeCapture(made);
  mkdirSync(join(made, "src/tools"), { recursive: true });
  writeFileSync(join(made, "src/kernel.cu"), "__global__ void scale(float* x, int n) { x[0] *= 2.0f; }\n");
  writeFileSync(join(made, "build.sh"), script, { mode: 0o755 });
  more(made);
  const p = await packCapture(made, join(root, "cap.zip"));
  return (await unpackArchive(p.archive, join(root, "got"))).dir;
}

/** A stand-in nvcc that runs every program its words name whose name holds "payload" (as nvcc runs -ccbin's compiler and gcc loads a plugin), then writes its -o. */
function fakeNvcc(): string {
  const bin = tempDir("kerncap-bin-");
  writeFileSync(
    join(bin, "nvcc"),
    `#!/usr/bin/env bash\nfor a in "$@"; do for w in $(printf '%s' "$a" | tr ',=@' '   '); do case "$w" in -B*) w="\${w#-B}";; esac; case "$w" in *payload*) [ -f "$w" ] && bash "$w";; esac; done; done\nwhile [ $# -gt 0 ]; do if [ "$1" = -o ]; then : >"$2"; fi; shift; done\n`,
    { mode: 0o755 },
  );
  return join(bin, "nvcc");
}

describe("the template matcher", () => {
  const HOSTILE = 'evil\n touch PWNED_NL\n$(touch PWNED_SUB)`touch PWNED_BT`\'"*/"""\u202e#';
  const ctx = (extra: Record<string, unknown> = {}) => {
    const h = HOSTILE;
    return {
      kernelName: h,
      kernelDisplayName: h,
      arch: h,
      originalSource: h,
      definitionCopy: h,
      compiledSource: h,
      tuSource: h,
      sliceKind: h,
      sliceReason: h,
      projectRoot: h,
      flags: `${TEMPLATE_ESCAPES.shq!(`-DX=${h}`)} -I"$here/src"/${TEMPLATE_ESCAPES.shq!(h)} -O3`,
      flagsFrom: h,
      assumed: h,
      missing: h,
      method: h,
      copiedCount: 1,
      referenced: 0,
      overlay: true,
      rdc: false,
      sliced: true,
      sourceCopy: h,
      files: [
        { original: h, copy: h },
        { original: "a", copy: "b" },
      ],
      kernelFile: h,
      tritonVersion: h,
      python: PRINTABLE_HOSTILE,
      sliceBaseFile: h,
      ...extra,
    };
  };
  const render = (templates: readonly TemplateFile[], c: Record<string, unknown>) =>
    templateEngine().compile(templates.find((t) => t.path === "build.sh.hbs")!.text, { strict: true, noEscape: true })(c);
  const files = (script: string, extra: RunFile[] = []): RunFile[] => [{ name: "build.sh", bytes: Buffer.from(script) }, ...extra];

  /** Plain names in the slots nvcc and hipcc paste into their shell lines (the sources, the architecture). */
  const plainPasted = {
    arch: "sm_90",
    tuSource: "sub/kernel.cu",
    compiledSource: "kernel.kerncap-slice.cu",
    originalSource: "/proj/k.hip",
    sliceBaseFile: '-D__BASE_FILE__="src/sub/kernel.cu"',
  };
  /** HOSTILE as a path may print it: shell syntax and quotes, no control or format character (a shell word holds those raw). */
  const PRINTABLE_HOSTILE = '$(touch PWNED_SUB)`touch PWNED_BT`\'"*/"""#';

  test("every build.sh template rendered with hostile names (newlines, $(…), backticks, quotes, U+202E) in every slot but those a compiler driver pastes into a shell is kerncap's own; its flags read back word for word", () => {
    for (const [sliced, rdc, overlay] of [
      [true, false, true],
      [false, true, false],
      [true, true, false],
    ]) {
      // hostile names in every slot but the flags and the pasted ones: the template's own
      const plainFlags = `-DX=1 -I"$here/src"/${TEMPLATE_ESCAPES.shq!("inc")} -O3`;
      const script = render(CUDA_TEMPLATES, ctx({ sliced, rdc, overlay, flags: plainFlags, ...plainPasted }));
      const r = readBuildScripts(CUDA_TEMPLATES, files(script));
      expect(r.stock, `cuda sliced=${sliced} rdc=${rdc}`).toBe(true);
      expect(r.programs).toEqual([]);
      // a hostile source or architecture (nvcc pastes `src/$(id).cu` into sh -c, and runs id whether or not the file exists): no rendering of kerncap's (adversary 55)
      for (const field of ["arch", "tuSource", "compiledSource"] as const) {
        if (field === "compiledSource" && !sliced) continue;
        const pasted = readBuildScripts(
          CUDA_TEMPLATES,
          files(
            render(
              CUDA_TEMPLATES,
              ctx({
                sliced,
                rdc,
                overlay,
                flags: plainFlags,
                ...plainPasted,
                [field]: "$(id).cu",
                ...(field === "tuSource" ? { sliceBaseFile: '-D__BASE_FILE__="src/$(id).cu"' } : {}),
              }),
            ),
          ),
        );
        expect(pasted.stock, field).toBe(false);
        expect(pasted.why).toContain("paste into a shell line");
      }
      // in the flags too: the template matches, but a value nvcc would paste into a shell line is no compile setting
      const hostile = readBuildScripts(CUDA_TEMPLATES, files(render(CUDA_TEMPLATES, ctx({ sliced, rdc, overlay, ...plainPasted }))));
      expect(hostile.stock).toBe(false);
      expect(hostile.why).toContain("\\u202e, a control or format character no build.sh this kerncap writes holds");
      const printable = readBuildScripts(
        CUDA_TEMPLATES,
        files(render(CUDA_TEMPLATES, ctx({ sliced, rdc, overlay, ...plainPasted, flags: TEMPLATE_ESCAPES.shq!(`-DX=${PRINTABLE_HOSTILE}`) }))),
      );
      expect(printable.stock).toBe(false);
      expect(printable.why).toContain(`build.sh's compile flags pass ${JSON.stringify(`-DX=${PRINTABLE_HOSTILE}`)}`);
    }
    expect(readBuildScripts(HIP_TEMPLATES, files(render(HIP_TEMPLATES, ctx({ flags: "-O3 -DX=1", ...plainPasted })))).stock).toBe(true);
    // a bare quote in the overlay's YAML strings (JSON escapes every one): no rendering, an extra mapping written (adversary 62)
    const hip = render(HIP_TEMPLATES, ctx({ flags: "-O3", ...plainPasted, files: [{ original: "a", copy: "b" }] }));
    expect(readBuildScripts(HIP_TEMPLATES, files(hip)).stock).toBe(true);
    expect(readBuildScripts(HIP_TEMPLATES, files(hip.replace(`'name': "a"`, `'name': "a", 'x': "y"`))).stock).toBe(false);
    expect(readBuildScripts(HIP_TEMPLATES, files(render(HIP_TEMPLATES, ctx()))).stock).toBe(false);
    for (const field of ["arch", "originalSource"] as const) {
      const hip = readBuildScripts(HIP_TEMPLATES, files(render(HIP_TEMPLATES, ctx({ flags: "-O3 -DX=1", ...plainPasted, [field]: "/p/$(id).hip" }))));
      expect(hip.stock, field).toBe(false);
      expect(hip.why).toContain("paste into a shell line");
    }
    const triton = readBuildScripts(
      TRITON_TEMPLATES,
      files(render(TRITON_TEMPLATES, ctx()), [{ name: "repro.py", bytes: Buffer.from(TRITON_TEMPLATES.find((t) => t.path === "repro.py")!.text) }]),
    );
    expect(triton.stock).toBe(true);
    expect(triton.programs).toEqual([{ flag: "build.sh's Python", value: PRINTABLE_HOSTILE, kind: "program" }]);
    // a control or format character in a shell word is held raw: no rendering of kerncap's passes it (adversary 60)
    for (const python of ["/usr/bin/python3\u202e", "/usr/bin/\x1b]0;x\x07python3"]) {
      const raw = readBuildScripts(
        TRITON_TEMPLATES,
        files(render(TRITON_TEMPLATES, ctx({ python })), [{ name: "repro.py", bytes: Buffer.from(TRITON_TEMPLATES.find((t) => t.path === "repro.py")!.text) }]),
      );
      expect(raw.stock, JSON.stringify(python)).toBe(false);
    }
    expect(flagWords(ctx().flags as string)).toEqual([`-DX=${HOSTILE}`, `-I./src/${HOSTILE}`, "-O3"]);
    // the demo kerncap writes is the current template's
    expect(readBuildScripts(CUDA_TEMPLATES, files(readFileSync(join(import.meta.dir, "../../demo/capture/build.sh"), "utf8"))).stock).toBe(true);
  });

  test("adversary 60: a slot holds what its field's rendering puts there, the same in every slot of the field, and no control character: else not kerncap's own", () => {
    const stock = render(CUDA_TEMPLATES, ctx({ sliced: true, rdc: false, overlay: false, flags: "-O3", ...plainPasted }));
    expect(readBuildScripts(CUDA_TEMPLATES, files(stock)).stock).toBe(true);
    const base = `'-D__BASE_FILE__="src/sub/kernel.cu"'`;
    expect(stock).toContain(base);
    const echoed = `src/sub/kernel.cu changed since`;
    expect(stock).toContain(echoed);
    for (const [what, text] of [
      // gcc reads a file of options named in the slice's compile; `-wrapper sh,-c,…` in it runs a command (the round's 01)
      ["the slice's __BASE_FILE__ slot holding an options file", stock.replace(base, "-Xcompiler=@src/x.rsp")],
      ["the slice's __BASE_FILE__ naming another TU", stock.replace(base, `'-D__BASE_FILE__="src/other.cu"'`)],
      // a message echoed by make names one source while the compile names another
      ["an echoed source that is not the compiled one", stock.replace(echoed, "src/other.cu changed since")],
      // ESC ] 52 writes the terminal's clipboard; ESC [2J clears it (the round's 03)
      ["an echo with ESC", stock.replace(echoed, "src/sub/kernel.cu\x1b]52;c;ZWNobw==\x07\x1b[2J changed since")],
      ["an echo with C1 and U+202E", stock.replace(echoed, "src/sub/kernel.cu\x9b2J\u202e changed since")],
    ] as const) {
      expect(text, what).not.toBe(stock);
      const r = readBuildScripts(CUDA_TEMPLATES, files(text));
      expect(r.stock, what).toBe(false);
      expect(r.why, what).toMatch(/not the one this kerncap writes|a control or format character no build.sh this kerncap writes holds/);
    }
  });

  test("adversary 61: a build.sh that a shell in a multi-byte locale (GBK, Shift JIS) reads otherwise is not kerncap's own: bytes that are no UTF-8, a character past ASCII outside a comment", () => {
    const repro = [{ name: "repro.py", bytes: Buffer.from(TRITON_TEMPLATES.find((t) => t.path === "repro.py")!.text) }];
    const triton = (tritonVersion: string) => render(TRITON_TEMPLATES, ctx({ tritonVersion, python: "/usr/bin/python3" }));
    expect(readBuildScripts(TRITON_TEMPLATES, files(triton("3.6.0"), repro)).stock).toBe(true);
    // in a comment's slot, any text: a comment ends at its newline in every locale
    expect(readBuildScripts(CUDA_TEMPLATES, files(render(CUDA_TEMPLATES, ctx({ flags: "-O3", ...plainPasted, kernelName: "café" })))).stock).toBe(true);
    // U+00E9 in the version, echoed by a line that runs: under GBK its last byte and a following backslash are one character
    const accented = readBuildScripts(TRITON_TEMPLATES, files(triton("3.6.0é"), repro));
    expect(accented.stock).toBe(false);
    expect(accented.why).toContain("build.sh holds a character past ASCII in a line that runs");
    // 0x95 before an escaped quote (the round's 02): no UTF-8 at all
    const text = Buffer.from(triton('3.6.0\ufffd"; fi; id; if false; then echo \ufffd"'));
    const bytes = Buffer.from(text.toString("latin1").replaceAll("\xef\xbf\xbd", "\x95"), "latin1");
    const raw = readBuildScripts(TRITON_TEMPLATES, [{ name: "build.sh", bytes }, ...repro]);
    expect(raw.stock).toBe(false);
    expect(raw.why).toContain("build.sh is not UTF-8 text");
  });

  test("a line added, a command changed, an unquoted $(…) or ; in the flags, another repro.py: not kerncap's own", () => {
    const stock = stockCudaBuildSh("-O3 -std=c++17");
    expect(readBuildScripts(CUDA_TEMPLATES, files(stock)).stock).toBe(true);
    const changed = [
      stock + "bash src/tools/gen.sh\n",
      stock.replace("set -euo pipefail\n", "set -euo pipefail\nsource src/env.sh\n"),
      stock.replace('compile "$tu" "$cubin"', 'compile "$tu" "$cubin"; ./src/tools/post'),
      stockCudaBuildSh("-O3 $(touch x)"),
      stockCudaBuildSh("-O3 ; touch x"),
      stockCudaBuildSh('-O3 "$(id)"'),
      stock.replace("# Rebuild the cubin of k from", "# Rebuild the cubin of k\ntouch x\n# from"),
    ];
    for (const s of changed) expect(readBuildScripts(CUDA_TEMPLATES, files(s)).stock, s.slice(0, 0)).toBe(false);
    const repro = { name: "repro.py", bytes: Buffer.from("import os\n") };
    expect(readBuildScripts(TRITON_TEMPLATES, files(render(TRITON_TEMPLATES, ctx()), [repro])).why).toContain("repro.py is not the one this kerncap writes");
    // a very long line is no template's, and says so quickly
    const t0 = performance.now();
    expect(readBuildScripts(CUDA_TEMPLATES, files(stock.replace("# Rebuild the cubin of k", `# Rebuild the cubin of ${"k (".repeat(400_000)}`))).stock).toBe(
      false,
    );
    expect(performance.now() - t0).toBeLessThan(2000);
  });

  test("the options that run or load a program are read in every spelling (nvcc's -Xcompiler values, gcc's -W?, and -B, clang's -Xclang pairs, @files)", () => {
    const named = (ws: string[]) => codeLoadingWords(ws).map((p) => `${p.flag} ${p.value}`);
    expect(named(["-ccbin", "src/g", "--compiler-bindir=/opt/g", "-arbin", "a"])).toEqual(["-ccbin src/g", "--compiler-bindir /opt/g", "-arbin a"]);
    expect(named(["-Xcompiler", "-O3,-fplugin=src/p.so", "-Xcompiler=-Bsrc/b", "--compiler-options", "-wrapper,src/w,x"])).toEqual([
      "-fplugin src/p.so",
      "-B src/b",
      "-wrapper ", // refused as such: a program list follows it (sh,src/x runs a source as a script)
    ]);
    expect(named(["-Xclang", "-load", "-Xclang", "src/l.so", "-Wp,-fplugin=q.so", "-Wl,-Bstatic,-plugin,src/lto.so"])).toEqual([
      "-load src/l.so",
      "-fplugin q.so",
      "-plugin src/lto.so",
    ]);
    expect(named(["@src/opts", "-optf", "o", "--options-file=p", "-specs=s", "-run", "--dependency-drive-prefix", "x"])).toEqual([
      "@file src/opts",
      "-optf o",
      "--options-file p",
      "-specs s",
      "-run ",
      "--dependency-drive-prefix ",
    ]);
    expect(named(["-O3", "-I./src", "-DX=1", "-std=c++17", "-Xptxas=-v", "-Wl,-Bdynamic"])).toEqual([]);
    // a response file as any option's value: nvcc hands gcc `-isystem "@F"`, `-D "@F"` (it splits values at commas), gcc reads F's words as options
    for (const w of [
      ["-isystem=@src/kc.h"],
      ["--system-include=@src/kc.h"],
      ["-isystem", "@src/kc.h"],
      ["-I=@src/kc.h"],
      ["-I@src/kc.h"],
      ["-DX=1,@src/kc.h"],
      ["-I/usr,@src/kc.h"],
      ["-Xcompiler=-isystem,@src/kc.h"],
      ["-Xcompiler", "-include,@src/kc.h"],
      ["-Xcompiler", "-isystem=@src/kc.h"],
      ["-Xptxas=@src/kc.h"],
      ["-Wp,@src/kc.h"],
    ])
      expect(codeLoadingWords(w), w.join(" ")).toEqual([{ flag: "@file", value: "src/kc.h", kind: "options" }]);
    expect(named(["-DMAIL=a@b.c", "-I./src", "@"])).toEqual([]);
    // gcc's long spellings: --plugin=P is -fplugin=P, --prefix is -B, --specs, --for-linker (-Xlinker)
    expect(named(["-Xcompiler", "--plugin=src/p.so,--prefix=src/b,--specs=s", "-Xcompiler=--for-linker,-plugin,-Xcompiler=--for-linker,src/l.so"])).toEqual([
      "-fplugin src/p.so",
      "--prefix src/b",
      "--specs s",
    ]);
    expect(codeLoadingWords(["-Xcompiler", "--for-linker", "-Xcompiler", "-plugin", "-Xcompiler", "--for-linker", "-Xcompiler", "src/l.so"])).toEqual([
      { flag: "-plugin", value: "src/l.so", kind: "file" },
    ]);
    // a script read lexically: comments dropped, quotes removed, $here/ read as the build's folder
    expect(scriptWords(`# -ccbin x\nLD_PRELOAD="$here/src/x.so" nvcc -ccbin '\${here}/src/g' # c\n`)).toEqual([
      "LD_PRELOAD=./src/x.so",
      "nvcc",
      "-ccbin",
      "./src/g",
    ]);
  });
});

describe("a received capture's build.sh that names a program in the capture", () => {
  const CASES: [string, string][] = [
    ["-ccbin src/tools/payload", "-ccbin"],
    ['-ccbin "$here/src"/tools/payload', "-ccbin"],
    ["-Xcompiler -fplugin=src/tools/payload", "-fplugin"],
    ["-Xcompiler=-O2,-fplugin=src/tools/payload", "-fplugin"],
    ["-Xcompiler -Bsrc/tools/payload", "-B"],
    ["--options-file src/tools/payload", "--options-file"],
    ["@src/tools/payload", "@file"],
    ["-run", "-run"],
    // a response file as an option's value (trial adv23: nvcc hands gcc `-isystem "@src/kc.h"`, and -wrapper in it ran a command)
    ["-isystem=@src/tools/payload", "@file"],
    ["--system-include=@src/tools/payload", "@file"],
    ["-isystem @src/tools/payload", "@file"],
    ['-isystem=@"$here/src"/tools/payload', "@file"],
    ["-I=@src/tools/payload", "@file"],
    ["--include-path=@src/tools/payload", "@file"],
    ["-include=@src/tools/payload", "@file"],
    ["-DX=1,@src/tools/payload", "@file"],
    ["-I/usr/include,@src/tools/payload", "@file"],
    ["-Xcompiler=-isystem,@src/tools/payload", "@file"],
    ["-Xcompiler -include,@src/tools/payload", "@file"],
    ["-Xptxas=@src/tools/payload", "@file"],
    // gcc's long spellings of -fplugin and -B
    ["-Xcompiler --plugin=src/tools/payload", "-fplugin"],
    ["-Xcompiler --prefix=src/tools/payload", "--prefix"],
    // paths the kernel resolves per process: in the compiler, /proc/self/cwd is the build's folder (src/ is there)
    ["-Xcompiler=-fplugin=/proc/self/cwd/src/tools/payload", "-fplugin"],
    ["-Xcompiler=-iplugindir=/proc/thread-self/cwd/src/tools,-fplugin=payload", "-iplugindir"],
    ["-Xcompiler -fplugin=/dev/fd/../cwd/src/tools/payload", "-fplugin"],
    ["-ccbin=/proc/self/cwd/src/tools/payload", "-ccbin"],
    // relative names without a slash: the build's folder (`..` is the temporary folder every user writes)
    ["-ccbin ..", "-ccbin"],
    ["--compiler-bindir=..", "--compiler-bindir"],
    ["-ccbin src", "-ccbin"],
    // a bare name: nvcc takes it from the folder it runs in before PATH (adversary 61: an export's data/gcc)
    ["-ccbin gcc", "-ccbin"],
    ["--compiler-bindir=g++-12", "--compiler-bindir"],
    // gcc -wrapper runs every step through the program list that follows: `sh,src/x` runs a source file
    ["'-Xcompiler=-wrapper,sh\\,src/tools/payload'", "-wrapper"],
    ["-Xcompiler -wrapper -Xcompiler sh,src/tools/payload", "-wrapper"],
  ];
  for (const [flags, flag] of CASES) {
    test(`kerncap's own build.sh with ${flags}: refused (E_UNSAFE_PATH naming ${flag}) before anything runs, --trust or not`, async () => {
      const root = tempDir();
      const marker = join(root, "payload-ran");
      process.env.NVCC = fakeNvcc();
      const dir = await received(root, stockCudaBuildSh(flags), (made) =>
        writeFileSync(join(made, "src/tools/payload"), `touch ${JSON.stringify(marker)}\n`, { mode: 0o755 }),
      );
      for (const argv of [[dir], [dir, "--trust"]]) {
        const { e } = await validate(argv);
        expect(e).toMatchObject({ code: "E_UNSAFE_PATH", exitCode: 2 });
        expect(e!.message).toContain(`(${flag})`);
        expect(existsSync(marker)).toBe(false);
      }
    }, 60_000);
  }

  test("a compiler in a folder every user can write (not sticky) is refused; root's compiler by its path is not", async () => {
    const root = tempDir();
    const open = join(root, "open");
    mkdirSync(open);
    writeFileSync(join(open, "g++"), "#!/bin/sh\n", { mode: 0o755 });
    chmodSync(open, 0o777);
    process.env.NVCC = fakeNvcc();
    const bad = await received(join(root, "a"), stockCudaBuildSh(`-ccbin ${open}/g++`));
    const { e } = await validate([bad, "--trust"]);
    expect(e?.code).toBe("E_UNSAFE_PATH");
    expect(e!.message).toContain("its group or every user can write");
    // root's compiler, as it exists on this machine (a path that does not exist is refused too)
    const rootCompiler = ["/usr/bin/g++", "/usr/bin/gcc", "/usr/bin/cc", "/bin/sh"].find((p) => existsSync(p))!;
    for (const flags of [`-ccbin ${rootCompiler} -Xcompiler -fplugin=annobin`, "-Xcompiler -Wl,-Bstatic -O3"]) {
      const ok = await received(tempDir(), stockCudaBuildSh(flags));
      const r = await validate([ok, "--trust"]);
      expect(r.e?.code, flags).not.toBe("E_UNSAFE_PATH"); // the build ran (and failed or needed a GPU)
      expect(r.e?.code, flags).not.toBe("E_UNTRUSTED");
    }
    chmodSync(open, 0o755);
  }, 60_000);

  test("compile flags that write a file of their choosing (-MD -MF PATH -MT TEXT, --keep-dir): not kerncap's own build.sh, plain --trust refused", async () => {
    process.env.NVCC = fakeNvcc();
    for (const flags of [`-O3 -MD -MF ${tempDir()}/.bashrc -MT 'echo PWNED;'`, `--keep-dir ${tempDir()}`, "-Xptxas -v,-o/tmp/x.cubin"]) {
      const cap = await received(tempDir(), stockCudaBuildSh(flags));
      const { e } = await validate([cap, "--trust"]);
      expect(e?.code, flags).toBe("E_UNTRUSTED");
      expect(e!.message, flags).toContain("an option kerncap does not know to be only a compile setting");
      expect(e!.message, flags).toContain("plain --trust is not enough");
    }
  }, 60_000);

  test("a received build.sh naming its source $(…).cu (nvcc pastes the source's path into sh -c and runs what it names, file or no file): not kerncap's own, plain --trust refused, nothing run (adversary 55)", async () => {
    process.env.NVCC = fakeNvcc();
    const root = tempDir();
    const mark = join(root, "PWNED");
    const cap = await received(root, stockCudaBuildSh("-O3", { tuSource: `$(touch ${mark}).cu` }));
    const { e } = await validate([cap, "--trust"]);
    expect(e?.code).toBe("E_UNTRUSTED");
    expect(e!.message).toContain("paste into a shell line");
    expect(e!.message).toContain("plain --trust is not enough");
    expect(existsSync(mark)).toBe(false);
  }, 60_000);

  test("export of a received capture asks what validate asks: nothing exported without --trust; --trust=DIGEST for a build.sh of its own; the bytes shown are the bytes exported", async () => {
    const exportCmd = async (argv: string[]) => quietly(async () => runCommand(await commands.export(), { rawArgs: argv }));
    const stock = await received(tempDir(), stockCudaBuildSh("-O3"));
    const out = join(tempDir(), "x");
    const refused = await exportCmd([stock, "-o", out]);
    expect(refused.e?.code).toBe("E_UNTRUSTED");
    expect(refused.e!.hint).toContain(`kerncap export ${stock} -o ${out} --trust=`);
    expect(existsSync(out)).toBe(false);
    expect((await exportCmd([stock, "-o", out, "--trust"])).e).toBeUndefined();
    expect(readFileSync(join(out, "build.sh"), "utf8")).toBe(readFileSync(join(stock, "build.sh"), "utf8"));
    // a build.sh of its own (it writes a file when make run-src runs it): plain --trust is not enough; the digest shown is
    const own = await received(tempDir(), `${stockCudaBuildSh("-O3")}touch "$HOME/pwned"\n`);
    const out2 = join(tempDir(), "y");
    const plain = await exportCmd([own, "-o", out2, "--trust"]);
    expect(plain.e?.code).toBe("E_UNTRUSTED");
    const digest = /--trust=([0-9a-f]{64})/.exec(plain.e!.hint ?? "")![1]!;
    expect(existsSync(out2)).toBe(false);
    expect((await exportCmd([own, "-o", out2, `--trust=${digest}`])).e).toBeUndefined();
    expect(readFileSync(join(out2, "build.sh"), "utf8")).toContain('touch "$HOME/pwned"');
  }, 60_000);

  test("export of a received capture ships the slice kerncap makes from its TU, not the sender's slice stamped as the TU's with another kernel (adversary 50)", async () => {
    const { writeDemo } = await import("../../src/capture/demo.ts");
    const { sliceMetaOf } = await import("../../src/frontends/cuda/slice.ts");
    const { createHash } = await import("node:crypto");
    const root = tempDir();
    const { dir: made, manifest } = writeDemo(join(root, "made"), false);
    const slice = join(made, "src", sliceMetaOf(manifest)!.slice);
    const text = readFileSync(slice, "utf8");
    const nl = text.indexOf("\n");
    const body = text.slice(nl + 1).replace("p->a * p->x.data[i] + p->y.data[i]", "0.0f /*EVIL*/");
    expect(body).toContain("EVIL");
    const first = text.slice(0, nl).replace(/body=[0-9a-f]{64}/, `body=${createHash("sha256").update(body).digest("hex")}`);
    writeFileSync(slice, `${first}\n${body}`);
    const p = await packCapture(made, join(root, "cap.zip"));
    const got = (await unpackArchive(p.archive, join(root, "got"))).dir;
    const out = join(root, "x");
    const exported = await quietly(async () => runCommand(await commands.export(), { rawArgs: [got, "-o", out, "--trust"] }));
    expect(exported.e).toBeUndefined();
    expect(readFileSync(join(out, "src", sliceMetaOf(manifest)!.slice), "utf8")).not.toContain("EVIL");
    expect(readFileSync(join(out, "src", "saxpy.cu"), "utf8")).toBe(readFileSync(join(made, "src", "saxpy.cu"), "utf8"));
  }, 60_000);

  test("a file of more options is refused wherever it lies, one of this user's own too (@file in every spelling, --options-file, -specs)", async () => {
    const own = join(tempDir(), "opts.rsp");
    writeFileSync(join(own), "-O2\n", { mode: 0o600 });
    process.env.NVCC = fakeNvcc();
    for (const [flags, flag] of [
      [`@${own}`, "@file"],
      [`-isystem=@${own}`, "@file"],
      [`-Xcompiler=-DX=1,@${own}`, "@file"],
      [`--options-file ${own}`, "--options-file"],
      [`-Xcompiler --specs=${own}`, "--specs"],
    ]) {
      const cap = await received(tempDir(), stockCudaBuildSh(flags!));
      const { e } = await validate([cap, `--trust=${"0".repeat(64)}`]);
      expect(e?.code, flags).toBe("E_UNSAFE_PATH");
      expect(e!.message, flags).toContain(`(${flag})`);
      expect(e!.message, flags).toContain("a file of more options");
    }
  }, 60_000);

  test("an include folder in every spelling goes through the path rule (-isystem=/dev/stdin, -I=…, a comma list): not kerncap's own build.sh, plain --trust refused", async () => {
    process.env.NVCC = fakeNvcc();
    for (const flags of ["-isystem=/dev/stdin", "--system-include=/proc/self/cwd", "-I=/dev/stdin", "-I/usr/include,/dev/stdin", "-Xcompiler=-isystem=/dev"]) {
      const cap = await received(tempDir(), stockCudaBuildSh(flags));
      const { e } = await validate([cap, "--trust"]);
      expect(e?.code, flags).toBe("E_UNTRUSTED");
      expect(e!.message, flags).toContain("an option kerncap does not know to be only a compile setting");
    }
  }, 60_000);

  // trial adv23's repro, with the real nvcc: its gcc -E step reads @src/kc.h as options, and -wrapper in it runs a shell
  test.skipIf(!existsSync("/usr/local/bin/nvcc") && !Bun.which("nvcc"))(
    "end to end with nvcc: -isystem=@src/kc.h (a header holding `-wrapper /bin/sh,-c,CMD`) is refused before anything runs, --trust or not; CMD never runs",
    async () => {
      const root = tempDir();
      const marker = join(root, "PWNED");
      delete process.env.NVCC;
      for (const flags of ["-isystem=@src/kc.h", "--system-include=@src/kc.h", "-DX=1,@src/kc.h", `-isystem=@${join(root, "kc.h")}`]) {
        writeFileSync(join(root, "kc.h"), `/nonexistent -wrapper '/bin/sh,-c,touch ${marker};exec "$0" "$@"'\n`);
        const cap = await received(join(root, flags.replace(/\W/g, "_")), stockCudaBuildSh(`-O2 ${flags}`), (made) =>
          writeFileSync(join(made, "src/kc.h"), `/nonexistent -wrapper '/bin/sh,-c,touch ${marker};exec "$0" "$@"'\n`),
        );
        for (const argv of [[cap, "--trust"], [cap]]) {
          const { e } = await validate(argv);
          expect(existsSync(marker), flags).toBe(false);
          expect(e?.code, flags).toBe("E_UNSAFE_PATH");
          expect(e!.message, flags).toContain("(@file)");
        }
      }
    },
    120_000,
  );

  test("a link to /proc/self/cwd in a folder of this user's: refused (it resolves to another folder in the compiler); a plugin that does not exist here: refused", async () => {
    const root = tempDir();
    const links = join(root, "links");
    mkdirSync(links);
    symlinkSync("/proc/self/cwd", join(links, "here"));
    process.env.NVCC = fakeNvcc();
    const viaLink = await received(join(root, "a"), stockCudaBuildSh(`-Xcompiler -fplugin=${links}/here/src/tools/payload.so`));
    const a = await validate([viaLink, "--trust"]);
    expect(a.e?.code).toBe("E_UNSAFE_PATH");
    const missing = await received(join(root, "b"), stockCudaBuildSh("-Xcompiler -fplugin=/nonexistent/plugin.so"));
    const b = await validate([missing, "--trust"]);
    expect(b.e?.code).toBe("E_UNSAFE_PATH");
    expect(b.e!.message).toContain("which does not exist here");
  }, 60_000);
});

describe("a received capture's build.sh of its own", () => {
  const SCRIPT = `#!/usr/bin/env bash\nset -euo pipefail\nbash src/tools/gen.sh\nmkdir -p build\n: >build/k.o\necho build/k.o\n`;

  test("a received 'script' of many MiB: the refusal prints the first 256 KiB in all, says how much more there is, and its digest covers all of it (trial 14 F3: 500 MiB printed whole)", async () => {
    const root = tempDir();
    const big = `#!/bin/sh\n${"A".repeat(4 << 20)}\n`;
    const dir = await received(root, SCRIPT, (made) => writeFileSync(join(made, "src/tools/gen.sh"), big));
    const refused = await validate([dir]);
    expect(refused.e).toMatchObject({ code: "E_UNTRUSTED" });
    expect(refused.err.length).toBeLessThan(400 << 10);
    expect(refused.err).toContain(`──── src/tools/gen.sh (${big.length} bytes, sha256 ${new Bun.CryptoHasher("sha256").update(big).digest("hex")}) ────`);
    expect(refused.err).toMatch(/… \(\d+ bytes more, not shown here: read src\/tools\/gen\.sh whole before you trust it; read_file reads it\)/);
  });

  test("bash src/tools/gen.sh: the refusal prints gen.sh and lists every file of src/; plain --trust is refused; --trust=DIGEST runs it; gen.sh changed afterwards asks again and never runs", async () => {
    overrideSandboxSupport(null); // the trust rules on a machine that cannot make the sandbox: its stand-in tools write outside (a received build's sandbox: test/cpu/frontends/sandbox.test.ts)
    const root = tempDir();
    const marker = join(root, "gen-ran");
    const changed = join(root, "changed-gen-ran");
    const dir = await received(root, SCRIPT, (made) => writeFileSync(join(made, "src/tools/gen.sh"), `touch ${JSON.stringify(marker)}\n`));
    const refused = await validate([dir]);
    expect(refused.e).toMatchObject({ code: "E_UNTRUSTED", exitCode: 2 });
    expect(refused.err).toContain("NOT kerncap's own build: build.sh is not the one this kerncap writes");
    expect(refused.err).toMatch(/──── src\/tools\/gen\.sh \(\d+ bytes, sha256 [0-9a-f]{64}\) ────\ntouch /); // printed whole: build.sh names it
    expect(refused.err).toMatch(/──── src\/kernel\.cu \(\d+ bytes, sha256 [0-9a-f]{64}; build.sh can reach it: part of the digest, not printed\) ────/);
    const digest = /what the build would run \(one digest of all of it: sha256 ([0-9a-f]{64})\)/.exec(refused.err)![1]!;
    expect(refused.e!.hint).toContain(`--trust=${digest}`);
    // plain --trust: not enough for a build.sh of its own
    const plain = await validate([dir, "--trust"]);
    expect(plain.e).toMatchObject({ code: "E_UNTRUSTED", exitCode: 2 });
    expect(plain.e!.message).toContain("plain --trust is not enough here: build.sh is not the one this kerncap writes");
    expect(existsSync(marker)).toBe(false);
    // the digest shown: runs, from the private copy of src/
    await validate([dir, `--trust=${digest}`]);
    expect(existsSync(marker)).toBe(true);
    rmSync(marker);
    // the sender's file changes after the user trusted it (build.sh unchanged): asks again, never runs
    writeFileSync(join(dir, "src/tools/gen.sh"), `touch ${JSON.stringify(changed)}\n`);
    expect((await validate([dir])).e?.code).toBe("E_UNTRUSTED");
    expect((await validate([dir, `--trust=${digest}`])).e?.code).toBe("E_TRUST_CHANGED");
    expect(existsSync(changed)).toBe(false);
    // the MCP server's --trust-builds is plain --trust: not enough either
    const mcp = await quietly(() => requireTrustedBuild(dir, readManifest(dir), true, { inMessage: true }));
    expect(mcp.e?.code).toBe("E_UNTRUSTED");
    expect(existsSync(changed)).toBe(false);
  }, 60_000);

  test("eval's candidate replaces src/tools/gen.sh of a trusted build.sh of its own: refused (E_UNTRUSTED, CLI with --trust=DIGEST and confined), the candidate never runs; the trusted bytes as a candidate pass the gate", async () => {
    const root = tempDir();
    const marker = join(root, "candidate-ran");
    const dir = await received(root, SCRIPT, (made) => writeFileSync(join(made, "src/tools/gen.sh"), "true\n"));
    const refused = await validate([dir]);
    const digest = /what the build would run \(one digest of all of it: sha256 ([0-9a-f]{64})\)/.exec(refused.err)![1]!;
    await validate([dir, `--trust=${digest}`]); // the user read build.sh and src/: recorded for these bytes
    const cands = join(root, "cands");
    mkdirSync(join(cands, "evil"), { recursive: true });
    mkdirSync(join(cands, "same"), { recursive: true });
    writeFileSync(join(cands, "evil/gen.sh"), `touch ${JSON.stringify(marker)}\n`);
    writeFileSync(join(cands, "same/gen.sh"), "true\n");
    const evalCmd = async (argv: string[]) => quietly(async () => runCommand(await commands.eval(), { rawArgs: argv }));
    // the command line: the digest the user trusted is the capture's, not the candidate's
    const cli = await evalCmd([dir, join(cands, "evil/gen.sh"), `--trust=${digest}`, "--jobs", "1"]);
    expect(cli.e).toMatchObject({ code: "E_UNTRUSTED", exitCode: 2 });
    expect(cli.e!.message).toContain("candidate gen.sh changes files that the build of the received capture");
    expect(cli.err).toContain(`touch ${JSON.stringify(marker)}`); // shown, never run
    // kerncap mcp's evaluate (eval --confine, no --trust: the record holds the capture's bytes only): the files in the message
    const confined = await evalCmd([dir, join(cands, "evil/gen.sh"), "--confine", "--jobs", "1"]);
    expect(confined.e).toMatchObject({ code: "E_UNTRUSTED", exitCode: 2 });
    expect(confined.e!.message).toContain(`touch ${JSON.stringify(marker)}`);
    expect(existsSync(marker)).toBe(false);
    // the exact bytes the user trusted, given as a candidate: past the gate (the build runs; no GPU here ends it later)
    const same = await evalCmd([dir, join(cands, "same/gen.sh"), "--confine", "--jobs", "1"]);
    expect(same.e?.code).not.toBe("E_UNTRUSTED");
    // kerncap's own build.sh (its digest does not cover src/): an agent's kernel.cu candidate builds, confined, as before
    process.env.NVCC = fakeNvcc();
    const stock = await received(tempDir(), stockCudaBuildSh());
    await validate([stock, "--trust"]);
    writeFileSync(join(cands, "kernel.cu"), "__global__ void scale(float* x, int n) { x[0] *= 3.0f; }\n");
    const built = await evalCmd([stock, join(cands, "kernel.cu"), "--confine", "--jobs", "1"]);
    expect(built.e?.code).not.toBe("E_UNTRUSTED");
    expect(built.err).not.toContain("E_UNTRUSTED");
  }, 90_000);

  test("a build.sh of its own whose words name a program in the capture (LD_PRELOAD=src/…, -ccbin src/…, NVCC_PREPEND_FLAGS=-ccbin src/…): refused before anything runs", async () => {
    for (const line of [
      "LD_PRELOAD=src/tools/x.so nvcc -c src/kernel.cu",
      'nvcc -ccbin "$here/src/tools" -c src/kernel.cu',
      "export NVCC_PREPEND_FLAGS='-ccbin src/tools/gcc'",
    ]) {
      const root = tempDir();
      const dir = await received(root, `#!/usr/bin/env bash\nhere="$(dirname "$0")"\n${line}\necho build/k.o\n`);
      const { e } = await quietly(() => readWhatRuns(dir, "cuda", true));
      expect(e?.code, line).toBe("E_UNSAFE_PATH");
      expect(e!.message).toContain("a path inside the build's folder");
    }
  }, 60_000);
});
