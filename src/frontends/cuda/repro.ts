/**
 * CUDA C++ reproducer project: renders templates/cuda/ into a capture folder.
 *
 * Output (copy mode): `src/<TU and its project-local header closure, relative layout kept>`,
 * `src/<tu>.kerncap-slice.cu` (slice mode), `build.sh` (nvcc -cubin -arch=sm_XX with the captured
 * flags, include paths rewritten into src/; prints the cubin's path as its last stdout line, which
 * `kerncap validate` reads), `README.md`. Overlay mode copies only the TU and the definition file
 * and lets every other include resolve in the original tree (include-path shadow).
 *
 * Flags come from the compile database when present (compile-commands.ts, kept by flags.ts); otherwise a default set
 * (captured arch, -O3, -std=c++17, the TU's folder as include path) and the manifest says which were assumed.
 *
 * Templates: `*.hbs` rendered with an isolated Handlebars (strict, noEscape); other files copied
 * with their mode bits.
 */
import { listForTerminal } from "../../escape.ts";
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, realpathSync, writeFileSync, rmSync } from "node:fs";
import { basename, dirname, join, relative, resolve, sep } from "node:path";
import { renderTemplateDir, templatesFolder } from "../templates.ts";
import { CUDA_TEMPLATES } from "./templates.ts";
import { KerncapError } from "../../errors.ts";
import { cubinKernels, cubinParamLayout } from "../../codeobj/cubin.ts";
import { parseElf, SHN_UNDEF, STT_FUNC } from "../../codeobj/elf.ts";
import { pickCubin } from "../../codeobj/fatbin.ts";
import { MANIFEST_FILE, type Manifest } from "../../format/manifest.ts";
import { homeOrAbove, readCaptureBytes, withoutOthersWrite } from "../../format/paths.ts";
import { log } from "../../log.ts";
import { shellPath, shellQuote as shq } from "../../util/shell-quote.ts";
import { locateKernelSource, type KernelLocation, type LocateInput } from "./locate.ts";
import { cudaFlagsFromCommand, defaultCudaFlags, type CudaFlags, type FlagWord } from "./flags.ts";
import { privateTempFolder } from "../../cache.ts";
import { dependencyArgv, findNvcc, parseDeps } from "./nvcc.ts";
import { planSliceMeta, projectHeaders, sliceText, type SliceMeta } from "./slice.ts";
import { flagDefinesIn, includeLeadingTo } from "./slice-directives.ts";
import type { SliceContext } from "./slice-lookup.ts";
import { demangledNames, sameKernelOtherParams } from "./kernel-name.ts";

// ───────────────────────────── header closure ─────────────────────────────

/**
 * Every file the TU includes (`nvcc -M` with the flags, device pass for the arch), absolute.
 * @throws KerncapError E_REPRO with nvcc's message when preprocessing fails.
 */
export function headerClosure(nvcc: string, tu: string, flags: CudaFlags, arch: string, cwd: string): string[] {
  // nvcc's intermediates in a private TMPDIR (its tmpxft_<pid>_… names in a shared /tmp)
  const tmp = privateTempFolder("kerncap-deps-");
  const p = (() => {
    try {
      return Bun.spawnSync(dependencyArgv(nvcc, tu, flags, arch), { cwd, env: { ...process.env, TMPDIR: tmp }, stdout: "pipe", stderr: "pipe" });
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  })();
  if (p.exitCode !== 0) {
    throw new KerncapError("E_REPRO", `nvcc -M on ${tu} failed:\n${p.stderr.toString().trim().split("\n").slice(-20).join("\n")}`, {
      hint: "The include folders or defines are incomplete: pass --compile-commands with the application's compile_commands.json.",
    });
  }
  return parseDeps(p.stdout.toString()).map((d) => resolve(cwd, d));
}

/** Toolkit root folders of an nvcc (as named and resolved through links). */
function toolkitRoots(nvcc: string): string[] {
  const roots = [dirname(dirname(nvcc))];
  try {
    roots.push(dirname(dirname(realpathSync(nvcc))));
  } catch {
    /* a dangling link: the named root only */
  }
  return roots;
}
function realOr(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return p;
  }
}

const SYSTEM_PREFIXES = ["/usr/include/", "/usr/lib/", "/usr/local/include/", "/usr/lib64/", "/usr/share/"];

/**
 * The CUDA toolkit roots kerncap found here, as named and resolved, each with a trailing "/": the
 * nvcc's (two levels above it), $CUDA_HOME, and each /usr/local/cuda* holding bin/nvcc. A root that
 * is "/", the user's home or a folder above it is left out (an nvcc wrapper at ~/bin/nvcc).
 */
export function cudaToolkitRoots(nvcc: string | undefined): string[] {
  let local: string[] = [];
  try {
    local = readdirSync("/usr/local")
      .filter((n) => n.startsWith("cuda"))
      .map((n) => join("/usr/local", n))
      .filter((r) => existsSync(join(r, "bin/nvcc")));
  } catch {
    /* no /usr/local */
  }
  const cudaHome = process.env.CUDA_HOME;
  const named = [...(nvcc ? toolkitRoots(nvcc) : []), ...(cudaHome?.startsWith("/") ? [resolve(cudaHome)] : []), ...local];
  const roots = named.flatMap((r) => [r, realOr(r)]).filter((r) => !homeOrAbove(r));
  return [...new Set(roots.map((r) => r + sep))];
}

/**
 * Whether a header belongs to the toolchain rather than the project: the path, as named or with
 * links resolved, lies under one of the toolkit roots kerncap found (cudaToolkitRoots) or a system
 * include folder (SYSTEM_PREFIXES), each matched as the exact root and a "/"; never by a folder's
 * name (a ~/cuda-keys/include/ is the user's).
 */
export function toolchainHeader(nvcc: string | undefined): (path: string) => boolean {
  const roots = [...cudaToolkitRoots(nvcc), ...SYSTEM_PREFIXES];
  return (p) => [p, realOr(p)].some((q) => roots.some((t) => q.startsWith(t)));
}

/** Longest common folder of absolute paths. */
export function commonDir(paths: string[]): string {
  const split = paths.map((p) => p.split(sep));
  const first = split[0] ?? [""];
  let n = first.length;
  for (const s of split) {
    let i = 0;
    while (i < n && i < s.length && s[i] === first[i]) i++;
    n = i;
  }
  return first.slice(0, n).join(sep) || sep;
}

// ───────────────────────────── slice ─────────────────────────────

export interface SlicePlan {
  possible: boolean;
  /** Why slicing is not possible (whole TU compiled instead). */
  reason?: string;
  /** Generated TU text (placed beside the TU copy). */
  text?: string;
  /** What the slice is made of, for `kerncap validate` to remake it after an edit (manifest.source.cuda.slice.meta). */
  meta?: SliceMeta;
}

/**
 * Plan the slice TU for a located kernel (src/frontends/cuda/slice.ts explains the two kinds): a template
 * defined in a header → its one instantiation; a non-template kernel, or a template defined in the
 * TU → the TU up to the kernel's definition (or the include that brings it in) without the other
 * kernels' bodies. Not possible when template arguments cannot be written in source, when no
 * `#include` of the TU leads to the definition file, or when the TU does not spell the definition
 * out (a macro expands to it).
 * @param o.tuRel the TU's path under src/ (default its basename); o.includeDirs: the -I/-iquote/-isystem
 *   folders of the compile (to follow includes to the definition).
 */
export function planSlice(loc: KernelLocation, tuText: string, o: { tuRel?: string; includeDirs?: string[]; context?: SliceContext } = {}): SlicePlan {
  const tuRel = o.tuRel ?? basename(loc.tu);
  const isTu = loc.definition === loc.tu;
  const cut = isTu || loc.names.templateArgs !== undefined ? undefined : includeLeadingTo(tuText, loc.tu, loc.definition, o.includeDirs ?? []);
  const p = planSliceMeta(loc.names, tuRel, isTu, basename(loc.definition), cut);
  if (!p.meta) return { possible: false, reason: p.reason };
  const t = sliceText(p.meta, tuText, o.context);
  if (!t.ok) return { possible: false, reason: t.reason };
  return { possible: true, text: t.text, meta: p.meta };
}

// ───────────────────────────── render ─────────────────────────────

/**
 * The -arch for build.sh: the captured device's SM ("sm_90"), as the arch-specific variant
 * ("sm_90a") when the application compiled that variant for the same SM (wgmma and friends need it).
 */
export function archFor(deviceArch: string, originalArch: string[]): string {
  const sm = /(\d+)/.exec(deviceArch)?.[1] ?? deviceArch;
  for (const v of ["a", "f"])
    if (originalArch.some((a) => new RegExp(`(sm|compute)_${sm}${v}\\b|\\b${sm}${v}(-real|-virtual)?\\b`).test(a))) return `sm_${sm}${v}`;
  return `sm_${sm}`;
}

export interface CudaReproducerOptions {
  outDir: string;
  /** Mangled kernel name (cubin symbol). */
  kernelName: string;
  demangledName: string;
  /** sm_90 … (the captured device's arch; build.sh compiles -arch=<arch>). */
  arch: string;
  location: KernelLocation;
  /** Flags; default: from location.compileCommand, else defaultCudaFlags. */
  flags?: CudaFlags;
  sourceRoot?: string;
  /** Compile only the captured instantiation when possible (default true). */
  slice?: boolean;
  /** Leave sources in the original tree; compile the edited copies in their place. */
  overlay?: boolean;
  templateDir?: string;
  nvcc?: string;
}

export interface CudaReproducer {
  outDir: string;
  buildScript: string;
  /** Paths written, relative to outDir. */
  files: string[];
  /** The TU build.sh compiles, relative to src/. */
  compiledSource: string;
  /** Definition file copy, relative to src/. */
  definitionCopy: string;
  /** Original root that src/ mirrors. */
  projectRoot: string;
  mode: "copy" | "overlay";
  /** meta: how to remake the slice after an edit (src/frontends/cuda/slice.ts refreshSlice). */
  slice: { used: boolean; reason?: string; meta?: SliceMeta };
  flags: CudaFlags;
  /** Facts for manifest.source.cuda. */
  source: Record<string, unknown>;
}

/**
 * Render the reproducer into opts.outDir (see the file comment for the layout).
 * @throws KerncapError E_REPRO (template missing, nvcc -M fails), E_RDC (relocatable device code
 *   whose kernel needs other TUs is refused at build time, see checkRebuiltModule).
 */
export function renderCudaReproducer(opts: CudaReproducerOptions): CudaReproducer {
  const templateDir = opts.templateDir ?? templatesFolder("cuda", CUDA_TEMPLATES); // at first use: importing this module writes nothing to the cache;
  if (!existsSync(templateDir)) throw new KerncapError("E_REPRO", `CUDA template folder not found: ${templateDir}`);
  const loc = opts.location;
  const nvcc = opts.nvcc ?? findNvcc();
  const flags =
    opts.flags ??
    (loc.compileCommand ? cudaFlagsFromCommand(loc.compileCommand.argv, loc.compileCommand.directory, loc.tu) : defaultCudaFlags(loc.tu, opts.sourceRoot));
  const arch = archFor(opts.arch, flags.originalArch);
  const tree = sourceTree(opts, nvcc, flags, arch);
  const { projectRoot, copied, referenced } = tree;
  const overlay = !!opts.overlay;

  const outDir = resolve(opts.outDir);
  const srcDir = join(outDir, "src");
  mkdirSync(srcDir, { recursive: true });
  const files = copySources(copied, projectRoot, srcDir);
  const flagWords = bashFlagWords(flags, tree, overlay, srcDir);
  const tuRel = relative(projectRoot, loc.tu);
  const { compiledSource, slice: sliceRes } = writeSlice(opts, flags, tuRel, srcDir, files, flagWords);

  const ctx = {
    kernelName: opts.kernelName,
    kernelDisplayName: opts.demangledName,
    arch,
    originalSource: loc.tu,
    definitionCopy: relative(projectRoot, loc.definition),
    compiledSource,
    tuSource: tuRel,
    // the slice's __BASE_FILE__ is the TU's, as the whole TU's compile names it (build.sh compiles both from src/ after
    // src/…, -fmacro-prefix-map): an edit cannot tell the slice it is judged by from the TU (adversary 42)
    sliceBaseFile: `-D__BASE_FILE__="src/${tuRel}"`,
    sliced: sliceRes.used,
    sliceKind: sliceRes.meta?.kind === "prefix" ? "the TU up to the kernel's definition, without the other kernels' bodies" : "only the captured instantiation",
    sliceReason: sliceRes.reason ?? "",
    overlay,
    projectRoot,
    flags: flagWords.join(" "),
    // README.md's command, pasted in the capture folder: build.sh's "$here/src" is ./src there (nu13: $here pasted into a shell was empty)
    readmeFlags: flagWords.join(" ").split('"$here/src"').join("./src"),
    flagsFrom: flags.from === "compile-commands" ? `compile_commands.json (${loc.compileCommand?.from})` : "a default set (no compile_commands.json)",
    assumed: flags.assumed.join(" "),
    missing: flags.missing.join(", "),
    rdc: flags.rdc,
    method: loc.method,
    copiedCount: copied.length,
    referenced: referenced.length,
  };
  files.push(...renderTemplateDir(templateDir, outDir, ctx));

  const source = {
    method: loc.method,
    tu: loc.tu,
    definition: loc.definition,
    tuReason: loc.tuReason,
    tuCertain: loc.tuCertain,
    otherTuCandidates: loc.otherCandidates,
    compileCommands: loc.compileCommand?.from ?? null,
    responseFiles: loc.compileCommand?.responseFiles ?? [],
    flagsFrom: flags.from,
    flags: flags.words.map((w) => w.text),
    assumedFlags: flags.assumed,
    missingFlags: flags.missing,
    originalArch: flags.originalArch,
    rdc: flags.rdc,
    mode: overlay ? "overlay" : "copy",
    slice: sliceRes,
    projectRoot,
    copied: copied.map((f) => relative(projectRoot, f)),
    referencedOutsideRoot: referenced,
    // overlay: the project's headers build.sh reads from the original tree, by name (what a confined build may read of it: src/frontends/confine.ts)
    ...(overlay ? { readInPlace: tree.inPlace } : {}),
    compiledSource: `src/${compiledSource}`,
  };
  return {
    outDir,
    buildScript: join(outDir, "build.sh"),
    files,
    compiledSource,
    definitionCopy: ctx.definitionCopy,
    projectRoot,
    mode: overlay ? "overlay" : "copy",
    slice: sliceRes,
    flags,
    source,
  };
}

/** The project files of a reproducer: its root, what is copied into src/ and the local headers outside the root that stay referenced. */
interface SourceTree {
  /** The original folder that src/ mirrors: --source-root, else the common folder of the TU and its local headers. */
  projectRoot: string;
  /** Absolute paths copied into src/: the TU and every local header under the root (copy mode), or the TU and the definition file (overlay). */
  copied: string[];
  /** Local headers outside the root, included from where they are. */
  referenced: string[];
  /** Overlay mode: the local headers under the root that are not copied, read from the original tree (absolute); [] in copy mode. */
  inPlace: string[];
  /** Whether a path lies under projectRoot. */
  under: (p: string) => boolean;
}

/** The TU's header closure (nvcc -M with the flags, in the compile's folder) sorted into what is copied and what stays referenced. */
function sourceTree(opts: CudaReproducerOptions, nvcc: string, flags: CudaFlags, arch: string): SourceTree {
  const loc = opts.location;
  const cwd = loc.compileCommand?.directory ?? dirname(loc.tu);
  const deps = headerClosure(nvcc, loc.tu, flags, arch, cwd);
  const isSystem = toolchainHeader(nvcc);
  const local = deps.filter((d) => !isSystem(d) && d !== loc.tu);
  const projectRoot = opts.sourceRoot ? resolve(opts.sourceRoot) : commonDir([dirname(loc.tu), ...local.map(dirname)]);
  const under = (p: string) => p === projectRoot || p.startsWith(projectRoot + sep);
  const copied = opts.overlay ? [loc.tu, ...(loc.definition !== loc.tu ? [loc.definition] : [])] : [loc.tu, ...local.filter(under)];
  const inPlace = opts.overlay ? local.filter((d) => under(d) && !copied.includes(d)) : [];
  return { projectRoot, copied, referenced: local.filter((d) => !under(d)), inPlace, under };
}

/** Copy the files into srcDir at their paths under projectRoot; returns their paths relative to the reproducer (src/…). */
function copySources(copied: string[], projectRoot: string, srcDir: string): string[] {
  const files: string[] = [];
  for (const f of copied) {
    const rel = relative(projectRoot, f);
    mkdirSync(dirname(join(srcDir, rel)), { recursive: true });
    copyFileSync(f, join(srcDir, rel));
    files.push(`src/${rel}`);
  }
  withoutOthersWrite(srcDir); // a project's 0664 sources: no group write in the capture (else it counts as received)
  return files;
}

/**
 * The flags as bash words of build.sh: project paths point into src/ (copy mode; an -I folder is
 * made there); overlay mode keeps the original paths and adds the copies' original folders after.
 */
function bashFlagWords(flags: CudaFlags, tree: SourceTree, overlay: boolean, srcDir: string): string[] {
  const word = (w: FlagWord): string => {
    if (!w.path) return shq(w.text);
    if (overlay || !tree.under(w.path)) return w.prefix!.endsWith(" ") ? `${w.prefix!.trim()} ${shq(w.path)}` : shq(w.text);
    const rel = relative(tree.projectRoot, w.path);
    if (!w.prefix!.endsWith(" ") && w.prefix === "-I") mkdirSync(join(srcDir, rel), { recursive: true });
    const target = `"$here/src"${rel ? "/" + shq(rel) : ""}`;
    return w.prefix!.endsWith(" ") ? `${w.prefix!.trim()} ${target}` : `${w.prefix}${target}`;
  };
  const flagWords = flags.words.map(word);
  if (overlay) {
    // quoted includes search the includer's folder first (the copy's), then -I: the original folders
    for (const f of tree.copied) flagWords.push(shq(`-I${dirname(f)}`));
  }
  return flagWords;
}

/**
 * The slice of the TU build.sh compiles instead of the whole TU, written into srcDir and added to
 * `files` when slicing is on and possible; else why not. compiledSource: the slice's path or the
 * TU's (tuRel), relative to src/.
 */
function writeSlice(
  opts: CudaReproducerOptions,
  flags: CudaFlags,
  tuRel: string,
  srcDir: string,
  files: string[],
  flagWords: string[],
): { compiledSource: string; slice: CudaReproducer["slice"] } {
  const loc = opts.location;
  if (!(opts.slice ?? true)) return { compiledSource: tuRel, slice: { used: false, reason: "slicing turned off" } };
  const plan = planSlice(loc, readFileSync(loc.tu, "utf8"), {
    tuRel,
    includeDirs: flags.words.filter((w) => w.path && w.prefix !== "-include").map((w) => w.path!),
    // build.sh is not written yet: the flags its words will hold say what they may define
    context: { ...projectHeaders(dirname(srcDir), { tu: tuRel }), flagDefines: flagDefinesIn(flagWords.join(" ")) },
  });
  if (!plan.possible) return { compiledSource: tuRel, slice: { used: false, reason: plan.reason } };
  const compiledSource = plan.meta!.slice;
  writeFileSync(join(srcDir, compiledSource), plan.text!);
  files.push(`src/${compiledSource}`);
  return { compiledSource, slice: { used: true, meta: plan.meta } };
}

// ───────────────────────────── checks on the rebuilt module ─────────────────────────────

/**
 * Undefined functions that a cubin may list without needing another TU: what the CUDA driver
 * resolves at load (the device runtime's `vprintf`, `malloc`, `free`, `__assertfail`, and the
 * `__cuda_syscall_*` entries of dynamic parallelism and cooperative groups) and what the toolkit's
 * device libraries define: libcudadevrt (`__cudaCDP2*`, the device-side `cuda*` runtime API, `cnp*`,
 * `__cudaDeviceSynchronizeDeprecationAvoidance`, `__cuda_sm20_*`), libdevice (`__nv_*`).
 * Source: `readelf -s` of nvcc 13 cubins using assert/printf/malloc/device launches, and the
 * device symbols of libcudadevrt.a.
 */
export function toolkitProvided(name: string): boolean {
  return /^(vprintf|malloc|free|__assertfail|__cuda_syscall_\w+|__cudaCDP\d*\w*|__cudaDeviceSynchronizeDeprecationAvoidance|__cuda_sm\d+_\w+|cuda[A-Z]\w*|cnp[A-Z]\w*|__nv_\w+)$/.test(
    name,
  );
}

/** The capture folder a rebuilt module lies in (the nearest folder above it with a kerncap.json), shell-quoted for a hint; "DIR" where none is. */
function captureOf(modulePath: string): string {
  for (let d = dirname(resolve(modulePath)); d !== dirname(d); d = dirname(d)) if (existsSync(join(d, MANIFEST_FILE))) return shellPath(d);
  return "DIR";
}

/** ELF e_type of a linked (loadable) cubin; 1 (ET_REL) is an unlinked -rdc cubin. */
const ET_EXEC = 2;

/**
 * Before launching a rebuilt module: the kernel must still be there, with the captured parameter
 * layout (cubinParamLayout of the rebuilt cubin vs manifest.params.layout), and the cubin must be
 * loadable without device code of other TUs. A linked cubin (ET_EXEC: every whole-program build,
 * and an -rdc build after `nvcc -dlink`) cannot call other TUs: ptxas/nvlink refuse an unresolved
 * function, so its undefined functions are the driver's (vprintf, __assertfail …) and nothing is
 * refused. A relocatable cubin (ET_REL, -rdc without a device link) is refused: E_RDC naming the
 * functions other TUs would have to define, else E_BUILD (the driver loads only linked cubins).
 * @throws KerncapError exit 2: E_BUILD, E_RDC, E_KERNEL_NOT_FOUND, E_PARAM_LAYOUT (names each
 *   differing parameter; or the kernel defined under another parameter list: sameKernelOtherParams).
 */
export function checkRebuiltModule(modulePath: string, m: Pick<Manifest, "kernel" | "params" | "device">): void {
  const bytes = new Uint8Array(readFileSync(modulePath));
  let elf: ReturnType<typeof parseElf>;
  try {
    elf = parseElf(pickCubin(bytes, m.device.arch).cubin);
  } catch (e) {
    const why = (e as Error).message;
    // another architecture's code (EXTRA_FLAGS=-arch=sm_80: nu12 #4 read "not a readable cubin") says so, and how to build for it
    const other = /the cubin is for (sm_\w+)/.exec(why)?.[1];
    throw new KerncapError(
      "E_BUILD",
      other
        ? `the module build.sh produced (${modulePath}) is built for ${other}, not the captured ${m.device.arch}`
        : `the module build.sh produced (${modulePath}) is not a readable cubin or fatbin for ${m.device.arch}: ${why}`,
      {
        hint: other
          ? `To see whether the edit compiles for ${other}, run kerncap validate ${captureOf(modulePath)} --build-only --arch ${other} (no -arch in EXTRA_FLAGS); a replay judges it on a ${m.device.arch} GPU.`
          : "build.sh must compile with -cubin (or -fatbin) for the captured arch and print that file's path last.",
      },
    );
  }
  if (elf.header.type !== ET_EXEC) {
    const undef = elf.symbols().filter((s) => s.index > 0 && s.shndx === SHN_UNDEF && s.type === STT_FUNC && s.name && !toolkitProvided(s.name));
    if (undef.length) throw rdcError(undef.map((s) => s.name));
    throw new KerncapError(
      "E_BUILD",
      `the module build.sh produced (${modulePath}) is a relocatable cubin (-rdc without a device link): the driver does not load it`,
      {
        hint: `Device-link it: nvcc -dlink -cubin -arch=${m.device.arch} ${basename(modulePath)} -lcudadevrt -o kernel.cubin, and print that path last.`,
      },
    );
  }
  if (!cubinKernels(elf).includes(m.kernel.name)) {
    // the kernel under another parameter list (a C++ name carries its parameters): the layout changed, as for an extern "C" kernel (nu15, nu16 #2)
    const defined = definedKernels(cubinKernels(elf).slice(0, 8));
    if (sameKernelOtherParams(m.kernel.demangled, defined))
      throw new KerncapError(
        "E_PARAM_LAYOUT",
        `the edit changed the kernel's parameter list; nothing was launched: the capture launched ${m.kernel.demangled} (${m.kernel.name}); it defines ${defined}`,
        { hint: "The replay passes the captured parameter bytes unchanged: keep the parameter list (types, order, struct layouts) as captured." },
      );
    throw new KerncapError("E_KERNEL_NOT_FOUND", `the rebuilt module does not define ${m.kernel.demangled} (${m.kernel.name})`, {
      hint: `Keep the kernel's name, template arguments and parameter list; the rebuilt module defines: ${definedKernels(cubinKernels(elf).slice(0, 8)) || "no kernels"}.`,
    });
  }
  const got = cubinParamLayout(elf, m.kernel.name);
  const want = m.params.layout;
  const diffs: string[] = [];
  for (let i = 0; i < Math.max(got.length, want.length); i++) {
    const g = got[i];
    const w = want[i];
    if (!g || !w || g.offset !== w.offset || g.size !== w.size) {
      diffs.push(
        `parameter ${i}: captured ${w ? `${w.size} bytes at offset ${w.offset}` : "absent"}, rebuilt ${g ? `${g.size} bytes at offset ${g.offset}` : "absent"}`,
      );
    }
  }
  if (diffs.length) {
    throw new KerncapError("E_PARAM_LAYOUT", `the edit changed the kernel's parameter layout; nothing was launched:\n  ${diffs.join("\n  ")}`, {
      hint: "The replay passes the captured parameter bytes unchanged: keep the parameter list (types, order, struct layouts) as captured.",
    });
  }
}

/** A failed build.sh's E_RDC: an -rdc device link that found device functions no file of the reproducer defines (nvlink's "Undefined reference" lines). */
export function rdcLinkError(stderr: string): KerncapError | undefined {
  const undef = [...new Set([...stderr.matchAll(/nvlink error\s*:\s*Undefined reference to '([^']+)'/g)].map((x) => x[1]!))];
  return undef.length ? rdcError(undef) : undefined;
}

/** E_RDC: the kernel's TU calls device functions that only other TUs define (names: mangled). */
export function rdcError(names: string[]): KerncapError {
  return new KerncapError(
    "E_RDC",
    `the rebuilt module calls device functions defined in other translation units (${listForTerminal(names, 5)}): relocatable device code (-rdc) spread over several TUs is not supported by the reproducer`,
    {
      hint: "Move the called device functions into the kernel's TU or a header (then build without -rdc), or replay the captured module with `kerncap replay`.",
    },
  );
}

// ───────────────────────────── capture hook ─────────────────────────────

export interface CudaReproOptions {
  sourceRoot?: string;
  compileCommands?: string;
  slice?: boolean;
  overlay?: boolean;
}

/**
 * finalizeCapture's `beforeRename` hook for CUDA captures: locate the source, render the
 * reproducer into the capture folder, record manifest.source.cuda. A source that cannot be found
 * or preprocessed does not fail the capture (replay needs no source): the reason is logged and
 * stored as manifest.source.cuda.error. The hook runs while the folder still has its temporary
 * name (`dir`); every message names `finalDir`, the folder the capture is renamed to.
 */
export function cudaReproducerHook(o: CudaReproOptions): (dir: string, m: Manifest, finalDir?: string) => Promise<void> {
  return async (dir, m, finalDir = dir) => {
    if (m.kernel.frontend !== "cuda") return;
    const shown = (text: string) => inFinalDir(text, dir, finalDir);
    try {
      const r = await buildCudaReproducer(dir, m, o);
      m.source = { ...(m.source ?? {}), cuda: r.source };
      if (!r.source.tuCertain)
        log.warn(
          `reproducer: the TU ${r.source.tu} is a guess (${r.source.tuReason}); the other candidates: ${(r.source.otherTuCandidates as string[]).join(", ")}`,
        );
      log.info(
        `reproducer: ${r.source.method} → ${r.source.tu}${r.slice.used ? ` (slice: ${r.slice.meta?.kind === "prefix" ? "the TU without the other kernels" : "the captured instantiation"})` : ` (whole TU: ${r.slice.reason})`}; edit ${join(finalDir, "src", r.definitionCopy)}`,
      );
    } catch (e) {
      const msg = shown((e as Error).message);
      const hint = (e as KerncapError).hint ? shown((e as KerncapError).hint!) : undefined;
      m.source = { ...(m.source ?? {}), cuda: { error: msg, hint: hint ?? null } };
      // asked for (--source-root/--compile-commands): a warning; otherwise (line info only) a note
      (o.sourceRoot || o.compileCommands ? log.warn : log.info)(`no reproducer project: ${msg}${hint ? `\n${hint}` : ""}`);
    }
  };
}

/** A message text with the temporary capture folder's path replaced by the final one. */
export function inFinalDir(text: string, tmpDir: string, finalDir: string): string {
  return tmpDir === finalDir ? text : text.split(tmpDir).join(finalDir);
}

/** Locate + render for a capture folder whose module is at dir/m.module.file. */
export async function buildCudaReproducer(dir: string, m: Manifest, o: CudaReproOptions): Promise<CudaReproducer> {
  const input: LocateInput = {
    kernel: m.kernel.name,
    demangled: m.kernel.demangled,
    module: new Uint8Array(readCaptureBytes(dir, m.module.file, m.module.size)),
    arch: m.device.arch,
    sourceRoot: o.sourceRoot,
    compileCommands: o.compileCommands,
  };
  const location = await locateKernelSource(input);
  return renderCudaReproducer({
    outDir: dir,
    kernelName: m.kernel.name,
    demangledName: m.kernel.demangled,
    arch: m.device.arch,
    location,
    sourceRoot: o.sourceRoot,
    slice: o.slice,
    overlay: o.overlay,
  });
}

/** Kernel symbols as a hint shows them: demangled, the symbol after it ("saxpy(Saxpy const*, int) (_Z5saxpyPK5Saxpyi)"). */
function definedKernels(names: string[]): string {
  const shown = demangledNames(names);
  return names.map((n, i) => (shown[i] !== n ? `${shown[i]} (${n})` : n)).join(", ");
}
