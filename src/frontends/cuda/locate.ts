/**
 * Where a captured CUDA kernel's source lives, found three ways (in this order):
 *
 * 1. line-info: the module's DWARF `.debug_line` (present with `nvcc -lineinfo` or `-G`). The
 *    line-number program sequences whose DW_LNE_set_address is relocated against the kernel's
 *    symbol (`.rela.debug_line`) name the files the kernel's code came from; the file that holds
 *    the `__global__` definition is the definition, a `.cu` file of the table is the TU.
 * 2. compile-commands: a compile database (compile_commands.json, a build folder or a build log:
 *    src/frontends/cuda/compile-commands.ts; given, or found in the usual build folders under the
 *    source root) gives the TUs and their exact flags; the TU is the one that defines the kernel,
 *    or that includes (nvcc -M, through any chain of headers) the header that does, and
 *    instantiates the captured template arguments (src/frontends/cuda/includers.ts).
 * 3. source-root: a search of `--source-root` for the `__global__` definition of the kernel's
 *    base name; its .cu files with the default flags stand in for a compile database.
 *
 * No GPU. Errors are KerncapError E_SOURCE_NOT_FOUND with what was tried and what it gave.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, isAbsolute, join, relative, resolve } from "node:path";
import { KerncapError } from "../../errors.ts";
import { findCompileCommands, readCompileCommands, type CompileCommand } from "./compile-commands.ts";
import { defaultCudaFlags, flagArgv } from "./flags.ts";
import { findNvcc } from "./nvcc.ts";
import { instantiatingTu, tusIncluding, type ToolchainFor } from "./includers.ts";
import { parseElf, type ElfFile } from "../../codeobj/elf.ts";
import { pickCubin } from "../../codeobj/fatbin.ts";

import { demangledNames, kernelNameParts, type KernelNameParts } from "./kernel-name.ts";
export { kernelNameParts, type KernelNameParts };

// ───────────────────────────── DWARF line info ─────────────────────────────

export interface LineInfoFiles {
  /** Every file of the line-number program header, absolute where its directory is. */
  files: string[];
  /** Files named by the sequences that belong to the kernel (empty when no relocation says so). */
  kernelFiles: string[];
  /** DWARF version of the line program. */
  version: number;
}

function uleb(b: Uint8Array, p: { o: number }): number {
  let r = 0;
  let shift = 0;
  for (;;) {
    const x = b[p.o++]!;
    r += (x & 0x7f) * 2 ** shift;
    shift += 7;
    if (!(x & 0x80) || p.o >= b.length) return r;
  }
}
function sleb(b: Uint8Array, p: { o: number }): number {
  let r = 0;
  let shift = 0;
  let x = 0;
  do {
    x = b[p.o++]!;
    r += (x & 0x7f) * 2 ** shift;
    shift += 7;
  } while (x & 0x80 && p.o < b.length);
  if (x & 0x40) r -= 2 ** shift;
  return r;
}
function cstr(b: Uint8Array, p: { o: number }): string {
  const start = p.o;
  while (p.o < b.length && b[p.o] !== 0) p.o++;
  return new TextDecoder().decode(b.subarray(start, p.o++));
}

/**
 * File names of a cubin's `.debug_line` (DWARF 2–4 line programs, as nvcc writes them), and which
 * of them the kernel's own sequences use. Returns undefined when the cubin has no `.debug_line`
 * (built without -lineinfo/-G) or when the program is DWARF 5 (not written by nvcc 13).
 */
export function cubinLineFiles(cubin: Uint8Array | ElfFile, kernel?: string): LineInfoFiles | undefined {
  const elf = cubin instanceof Uint8Array ? parseElf(cubin) : cubin;
  const sec = elf.section(".debug_line");
  if (!sec) return undefined;
  const b = elf.sectionBytes(sec);
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  // set_address operand offset in .debug_line → symbol name (from .rela.debug_line)
  const relocSym = new Map<number, string>();
  const rela = elf.section(".rela.debug_line");
  if (rela) {
    const rb = elf.sectionBytes(rela);
    const rv = new DataView(rb.buffer, rb.byteOffset, rb.byteLength);
    const syms = elf.symbols();
    for (let o = 0; o + 24 <= rb.length; o += 24) {
      const off = Number(rv.getBigUint64(o, true));
      const symIdx = Number(rv.getBigUint64(o + 8, true) >> 32n);
      const s = syms[symIdx];
      if (s) relocSym.set(off, s.name || s.section);
    }
  }
  const files: string[] = [];
  const kernelFiles = new Set<string>();
  let version = 0;
  let unit = 0;
  while (unit + 4 <= b.length) {
    const len = dv.getUint32(unit, true);
    if (len === 0xffffffff || len === 0) break; // 64-bit DWARF: not written by nvcc
    const end = unit + 4 + len;
    version = dv.getUint16(unit + 4, true);
    if (version < 2 || version > 4) return undefined;
    const headerLen = dv.getUint32(unit + 6, true);
    const progStart = unit + 10 + headerLen;
    const p = { o: unit + 10 };
    p.o += 1; // minimum_instruction_length
    if (version >= 4) p.o += 1; // maximum_operations_per_instruction
    p.o += 3; // default_is_stmt, line_base, line_range: lines are not needed, only files
    const opcodeBase = b[p.o++]!;
    const stdLens = [...b.subarray(p.o, p.o + opcodeBase - 1)];
    p.o += opcodeBase - 1;
    const dirs = [""];
    for (let d = cstr(b, p); d; d = cstr(b, p)) dirs.push(d);
    const unitFiles: string[] = [""];
    for (let f = cstr(b, p); f; f = cstr(b, p)) {
      const dir = dirs[uleb(b, p)] ?? "";
      uleb(b, p); // mtime
      uleb(b, p); // length
      const path = isAbsolute(f) || !dir ? f : join(dir, f);
      unitFiles.push(path);
      if (!files.includes(path)) files.push(path);
    }
    // Run the program only far enough to see which file each sequence uses.
    p.o = progStart;
    let file = 1;
    let seqSym = "";
    const seqFiles = new Set<number>();
    const flush = () => {
      if (kernel && (seqSym === kernel || seqSym === `.text.${kernel}`)) for (const f of seqFiles) if (unitFiles[f]) kernelFiles.add(unitFiles[f]!);
      seqFiles.clear();
      seqSym = "";
      file = 1;
    };
    while (p.o < end) {
      const op = b[p.o++]!;
      if (op >= opcodeBase) {
        seqFiles.add(file);
      } else if (op === 0) {
        const n = uleb(b, p);
        const at = p.o;
        const sub = b[p.o]!;
        if (sub === 1)
          flush(); // end_sequence
        else if (sub === 2)
          seqSym = relocSym.get(at + 1) ?? seqSym; // set_address
        else if (sub === 3) {
          const q = { o: at + 1 };
          const f = cstr(b, q);
          unitFiles.push(f);
        }
        p.o = at + n;
      } else if (op === 1)
        seqFiles.add(file); // copy
      else if (op === 4)
        file = uleb(b, p); // set_file
      else if (op === 2) uleb(b, p);
      else if (op === 3) sleb(b, p);
      else if (op === 9)
        p.o += 2; // fixed_advance_pc
      else for (let k = 0; k < (stdLens[op - 1] ?? 0); k++) uleb(b, p);
    }
    unit = end;
  }
  return { files, kernelFiles: [...kernelFiles], version };
}
// ───────────────────────────── source search ─────────────────────────────

const SOURCE_EXT = /\.(cu|cuh|h|hh|hpp|hxx|inl|inc|cpp|cc|cxx)$/;
const SKIP_DIRS = new Set([".git", "node_modules", ".hg", ".svn", "__pycache__", "CMakeFiles"]);

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/**
 * True when text holds a `__global__` definition (not only a declaration) of a function named base:
 * `__global__` then, before any `;` `{` `}`, the name followed by `(`; the balanced parameter list
 * is followed by `{` before any `;`.
 */
export function definesKernel(text: string, base: string): boolean {
  const re = new RegExp(`__global__\\b[^;{}]*?\\b${escapeRe(base)}\\s*\\(`, "g");
  for (let m = re.exec(text); m; m = re.exec(text)) {
    let i = m.index + m[0].length;
    for (let depth = 1; i < text.length && depth > 0; i++) {
      if (text[i] === "(") depth++;
      else if (text[i] === ")") depth--;
    }
    const rest = text.slice(i, i + 4000);
    const brace = rest.indexOf("{");
    const semi = rest.indexOf(";");
    if (brace >= 0 && (semi < 0 || brace < semi)) return true;
  }
  return false;
}

/** Files under root (skipping VCS and build-system folders) that define the kernel base name. */
export function searchKernelDefinition(root: string, base: string, limit = 200_000): string[] {
  const hits: string[] = [];
  let seen = 0;
  const walk = (dir: string) => {
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      return;
    }
    for (const n of names) {
      if (SKIP_DIRS.has(n) || ++seen > limit) continue;
      const p = join(dir, n);
      let st;
      try {
        st = statSync(p);
      } catch {
        continue;
      }
      if (st.isDirectory()) walk(p);
      else if (SOURCE_EXT.test(n) && st.size < 8 << 20) {
        const text = readFileSync(p, "utf8");
        if (text.includes(base) && definesKernel(text, base)) hits.push(p);
      }
    }
  };
  walk(root);
  return hits.sort((a, b) => Number(b.endsWith(".cu")) - Number(a.endsWith(".cu")) || a.localeCompare(b));
}

// ───────────────────────────── locate ─────────────────────────────

export type LocateMethod = "line-info" | "compile-commands" | "source-root";

export interface KernelLocation {
  /** How the definition was found. */
  method: LocateMethod;
  /** Absolute path of the translation unit to compile. */
  tu: string;
  /** Absolute path of the file holding the kernel's `__global__` definition (the TU or a header). */
  definition: string;
  /** The TU's compile command, when a compile database has one. */
  compileCommand?: CompileCommand;
  /** Other TUs that include the definition and were not ruled out (a guess when tuCertain is false). */
  otherCandidates: string[];
  /** Why this TU (the only includer, the spelled instantiation, its PTX entry, a guess …). */
  tuReason: string;
  /** False when nothing singled the TU out (then otherCandidates are as likely). */
  tuCertain: boolean;
  /** Source-level facts for the manifest. */
  lineInfoFiles?: string[];
  /** Every place looked at and what it gave, in order, for messages. */
  looked: string[];
  names: KernelNameParts;
}

export interface LocateInput {
  /** Mangled kernel name (cubin symbol). */
  kernel: string;
  /** Demangled kernel name. */
  demangled: string;
  /** Captured module image (cubin, fatbin or host ELF) and the device arch (sm_90). */
  module?: Uint8Array;
  arch: string;
  /** --source-root. */
  sourceRoot?: string;
  /**
   * --compile-commands: a compile_commands.json, a build folder (its compile_commands.json, or a
   * Ninja build's `ninja -t compdb`), or a build log with the nvcc command lines (`make -n -B
   * TARGET …` output: readBuildLog; its relative paths are taken from the source root unless make
   * -w names the folder).
   */
  compileCommands?: string;
  /** nvcc for the dependency listings and PTX checks (default findNvcc(); without one, text only). */
  nvcc?: string;
}

/**
 * Find the kernel's definition, its TU and (when there is one) its compile command: line info
 * first, then the compile database (the TU that defines the kernel, or that includes the header
 * that does: includers.ts), then a search of the source root.
 * @throws KerncapError E_SOURCE_NOT_FOUND saying what was tried with what result (the database
 *   read and its TUs, whether a definition was found and where, why no TU matched) and what to do
 *   that was not done; E_USAGE / E_COMPILE_COMMANDS for an unusable --compile-commands.
 */
export async function locateKernelSource(inp: LocateInput): Promise<KernelLocation> {
  const names = kernelNameParts(demangle(inp.demangled || inp.kernel));
  const tc = toolchainFor(inp);
  const looked: string[] = [];
  const s: Search = { inp, names, tc, looked, commands: compileCommandsOf(inp, looked), searched: new Map() };
  return (await byLineInfo(s)) ?? (await byCompileCommands(s)) ?? (await bySourceRoot(s)) ?? notFound(s);
}

/** What one locateKernelSource call has found so far, shared by its steps. */
interface Search {
  inp: LocateInput;
  names: KernelNameParts;
  /** nvcc and the arch for the dependency listings and PTX checks; undefined: text evidence only. */
  tc: ToolchainFor | undefined;
  /** Every place looked at and what it gave, in order, for messages. */
  looked: string[];
  commands: CompileCommand[];
  /** The files the module's line info names (step 1), for the manifest. */
  lineFiles?: string[];
  /** The files under each root that define the kernel (searchKernelDefinition, asked once a root). */
  searched: Map<string, string[]>;
}

/** The TU chosen for a definition, with the others that were not ruled out and why. */
interface TuChoice {
  tu: string;
  others?: string[];
  reason: string;
  certain: boolean;
}

/** The nvcc (given, else findNvcc) and the captured device's arch (sm_90), or undefined without an nvcc. */
function toolchainFor(inp: LocateInput): ToolchainFor | undefined {
  let nvcc = inp.nvcc;
  if (!nvcc) {
    try {
      nvcc = findNvcc();
    } catch {
      nvcc = undefined; // text evidence only; the reproducer's own build says that nvcc is missing
    }
  }
  return nvcc ? { nvcc, arch: `sm_${/(\d+)/.exec(inp.arch)?.[1] ?? "90"}` } : undefined;
}

/** The compile commands: --compile-commands, else the usual build folders under the source root; what was read goes to `looked`. */
function compileCommandsOf(inp: LocateInput, looked: string[]): CompileCommand[] {
  const commands: CompileCommand[] = [];
  if (inp.compileCommands) {
    commands.push(...readCompileCommands(inp.compileCommands, { logDir: inp.sourceRoot })); // a build log's relative paths: from the source root
    const rsp = new Set(commands.flatMap((c) => c.responseFiles ?? []));
    looked.push(
      `${commands[0]?.from ?? resolve(inp.compileCommands)}: ${commands.length} CUDA TU${commands.length === 1 ? "" : "s"}${rsp.size ? ` (${rsp.size} response file${rsp.size === 1 ? "" : "s"} read)` : ""}`,
    );
  } else if (inp.sourceRoot) {
    const f = findCompileCommands(inp.sourceRoot);
    for (const p of f.found) commands.push(...readCompileCommands(p));
    looked.push(
      `compile_commands.json in ${resolve(inp.sourceRoot)}/{${f.looked.map((p) => relative(resolve(inp.sourceRoot!), dirname(p))).join(",")}}: ${f.found.length ? `${f.found.join(", ")} (${commands.length} CUDA TUs)` : "none"}`,
    );
  }
  return commands;
}

/** The location found by `method`, with what the search gathered on the way. */
function found(s: Search, method: LocateMethod, definition: string, c: TuChoice): KernelLocation {
  return {
    method,
    tu: c.tu,
    definition,
    compileCommand: s.commands.find((cc) => cc.file === c.tu),
    otherCandidates: c.others ?? [],
    tuReason: c.reason,
    tuCertain: c.certain,
    lineInfoFiles: s.lineFiles,
    looked: s.looked,
    names: s.names,
  };
}

/** The TU among `cands` (compile commands, or the source root's .cu files) that compiles the kernel defined in a header. */
async function chooseTu(s: Search, definition: string, cands: CompileCommand[]): Promise<TuChoice | undefined> {
  const inc = await tusIncluding(definition, cands, s.tc);
  s.looked.push(...inc.tried.map((t) => `  ${t}`));
  if (!inc.tus.length) return undefined;
  const ch = await instantiatingTu(inc.tus, s.names, s.inp.kernel, definition, s.tc);
  return { tu: ch.tu.file, others: ch.others.map((c) => c.file), reason: ch.reason, certain: ch.certain };
}

/** The files under root that define the kernel, searched once per root and said in `looked`. */
function definitionsUnder(s: Search, root: string): string[] {
  let defs = s.searched.get(root);
  if (!defs) {
    const base = s.names.base;
    defs = searchKernelDefinition(root, base);
    s.searched.set(root, defs);
    s.looked.push(
      `${root}: ${defs.length ? `__global__ ${base} defined in ${defs.map((d) => relative(root, d)).join(", ")}` : `no file defines __global__ ${base}`}`,
    );
  }
  return defs;
}

/** Step 1: the captured module's line info names the file that defines the kernel, and its TU or the TUs that include it. */
async function byLineInfo(s: Search): Promise<KernelLocation | undefined> {
  const { inp, commands } = s;
  if (!inp.module) return undefined;
  let cubin: Uint8Array | undefined;
  try {
    cubin = pickCubin(inp.module, inp.arch).cubin;
  } catch {
    cubin = undefined;
  }
  const li = cubin ? cubinLineFiles(cubin, inp.kernel) : undefined;
  s.looked.push(li ? `line info of the captured module (${li.files.length} files)` : "line info of the captured module (none: built without -lineinfo)");
  if (!li) return undefined;
  s.lineFiles = li.files;
  const order = [...li.kernelFiles, ...li.files.filter((f) => !li.kernelFiles.includes(f))];
  const existing = order.filter((f) => existsSync(f));
  const definition = existing.find((f) => definesKernel(readFileSync(f, "utf8"), s.names.base));
  if (!definition) return undefined;
  const tus = li.files.filter((f) => f.endsWith(".cu") && existsSync(f));
  if (definition.endsWith(".cu")) return found(s, "line-info", definition, { tu: definition, reason: "it defines the kernel (line info)", certain: true });
  if (tus[0]) return found(s, "line-info", definition, { tu: tus[0], reason: "the line info of the kernel's module names it", certain: true });
  const c = commands.length
    ? await chooseTu(s, definition, commands)
    : inp.sourceRoot
      ? await chooseTu(s, definition, rootTus(resolve(inp.sourceRoot), s.tc))
      : undefined;
  if (c) return found(s, "line-info", definition, c);
  s.looked.push(`  line info names ${definition} but no TU that includes it`);
  return undefined;
}

/** Step 2: a TU of the compile commands that defines the kernel, else one that includes a file under the roots that does. */
async function byCompileCommands(s: Search): Promise<KernelLocation | undefined> {
  const { inp, commands } = s;
  if (!commands.length) return undefined;
  const direct = commands.find((c) => existsSync(c.file) && definesKernel(readFileSync(c.file, "utf8"), s.names.base));
  if (direct) return found(s, "compile-commands", direct.file, { tu: direct.file, reason: "it defines the kernel", certain: true });
  const roots = inp.sourceRoot ? [resolve(inp.sourceRoot)] : [...new Set(commands.map((c) => dirname(c.file)))];
  for (const r of roots) {
    for (const def of definitionsUnder(s, r)) {
      const c = await chooseTu(s, def, commands);
      if (c) return found(s, "compile-commands", def, c);
    }
  }
  return undefined;
}

/** Step 3: the source root's .cu that defines the kernel, else (without a compile database) its .cu files that include a header that does. */
async function bySourceRoot(s: Search): Promise<KernelLocation | undefined> {
  if (!s.inp.sourceRoot) return undefined;
  const root = resolve(s.inp.sourceRoot);
  const defs = definitionsUnder(s, root);
  const cu = defs.find((d) => d.endsWith(".cu"));
  if (cu) return found(s, "source-root", cu, { tu: cu, reason: "it defines the kernel", certain: true });
  if (defs.length && !s.commands.length) {
    const tus = rootTus(root, s.tc);
    s.looked.push(`  ${tus.length} .cu files under ${root}, with the default flags (no compile database)`);
    for (const def of defs) {
      const c = await chooseTu(s, def, tus);
      if (c) return found(s, "source-root", def, c);
    }
  }
  return undefined;
}

/** The E_SOURCE_NOT_FOUND error: what was tried, with what result, and what to do that was not done. */
function notFound(s: Search): never {
  const { inp, names, commands, looked } = s;
  const defined = [...s.searched.values()].some((d) => d.length);
  const given = `${inp.sourceRoot ? "--source-root" : ""}${inp.sourceRoot && inp.compileCommands ? " and " : ""}${inp.compileCommands ? "--compile-commands" : ""}`;
  const hint =
    !inp.sourceRoot && !inp.compileCommands
      ? "Pass --source-root DIR (the project's source tree) and, for the exact flags, --compile-commands FILE (cmake -DCMAKE_EXPORT_COMPILE_COMMANDS=ON); building with -lineinfo lets kerncap find it by itself."
      : defined
        ? `The definition was found but no TU ${commands.length ? "of the compile database" : "under the source root"} includes it: give the compile database of the build that made the application (${inp.compileCommands ? "the one given lists other TUs" : "--compile-commands BUILD_DIR"}); when includes need the build's flags, nvcc -M's messages above say which.`
        : `No file under ${inp.sourceRoot ? "the source root" : "the TUs' folders"} defines __global__ ${names.base}: ${inp.sourceRoot ? "give --source-root as the tree the application was built from" : "add --source-root, the tree the application was built from"}${inp.module ? "; building with -lineinfo names the file in the module" : ""}.`;
  throw new KerncapError(
    "E_SOURCE_NOT_FOUND",
    `the source of kernel ${names.qualified} was not found${given ? ` with ${given}` : ""}; tried:\n  ${looked.join("\n  ") || "(nothing: no line info, no --source-root, no --compile-commands)"}`,
    { hint },
  );
}

/** The .cu files under root as compile commands with the default flags (defaultCudaFlags): the TUs of a project without a compile database. */
function rootTus(root: string, tc: ToolchainFor | undefined): CompileCommand[] {
  return listCu(root).map((file) => ({
    file,
    directory: dirname(file),
    argv: [tc?.nvcc ?? "nvcc", ...flagArgv(defaultCudaFlags(file, root)), file],
    from: "--source-root",
  }));
}

/** A mangled name through the demangler (./kernel-name.ts demangledNames) when the capture holds no demangled name; else as is. */
function demangle(name: string): string {
  return demangledNames([name])[0]!;
}

function listCu(root: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const n of readdirSync(d)) {
      if (SKIP_DIRS.has(n)) continue;
      const p = join(d, n);
      const st = statSync(p);
      if (st.isDirectory()) walk(p);
      else if (n.endsWith(".cu")) out.push(p);
    }
  };
  walk(root);
  return out.sort();
}
