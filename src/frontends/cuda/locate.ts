/**
 * Where a captured CUDA kernel's source lives, found three ways (in this order):
 *
 * 1. line-info: the module's DWARF `.debug_line` (present with `nvcc -lineinfo` or `-G`). The
 *    line-number program sequences whose DW_LNE_set_address is relocated against the kernel's
 *    symbol (`.rela.debug_line`) name the files the kernel's code came from; the file that holds
 *    the `__global__` definition is the definition, a `.cu` file of the table is the TU.
 * 2. compile-commands: a `compile_commands.json` (given, or found in the usual build folders under
 *    the source root) gives the TU and its exact flags.
 * 3. source-root: a search of `--source-root` for the `__global__` definition of the kernel's
 *    base name.
 *
 * Pure functions over bytes and files; no GPU. Errors are KerncapError E_SOURCE_NOT_FOUND with
 * where it looked and how to point kerncap at the source.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { KerncapError } from "../../errors.ts";
import { parseElf, type ElfFile } from "../../codeobj/elf.ts";
import { pickCubin } from "../../codeobj/fatbin.ts";

// ───────────────────────────── kernel names ─────────────────────────────

export interface KernelNameParts {
  /** Qualified name with template arguments, e.g. `ns::mul_mat_q<(ggml_type)2, 64, false>`. */
  qualified: string;
  /** Last component without template arguments, e.g. `mul_mat_q`. */
  base: string;
  /** Text between the outermost `<>` of the last component, or undefined for a non-template. */
  templateArgs?: string;
}

/** Index of the last top-level occurrence of `ch` in s, counting `<>` `()` `[]` nesting. */
function lastTopLevel(s: string, ch: string): number {
  let depth = 0;
  let found = -1;
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (depth === 0 && c === ch) found = i;
    if (c === "<" || c === "(" || c === "[") depth++;
    else if (c === ">" || c === ")" || c === "]") depth = Math.max(0, depth - 1);
  }
  return found;
}

/**
 * Split a demangled kernel name (`void ns::k<int, 4>(float*, int)`, or a plain `k` / `k(int)`)
 * into its qualified name, base name and template arguments.
 */
export function kernelNameParts(demangled: string): KernelNameParts {
  let s = demangled.trim();
  const paren = lastTopLevel(s, "(");
  if (paren > 0) s = s.slice(0, paren).trim();
  // return type of a function template: the name is the last top-level word
  const space = lastTopLevel(s, " ");
  if (space >= 0) s = s.slice(space + 1);
  // last component: after the last top-level "::"
  let start = 0;
  for (let i = 0, depth = 0; i < s.length; i++) {
    const c = s[i]!;
    if (c === "<" || c === "(") depth++;
    else if (c === ">" || c === ")") depth--;
    else if (depth === 0 && c === ":" && s[i + 1] === ":") start = i + 2;
  }
  const last = s.slice(start);
  const i = last.indexOf("<");
  return {
    qualified: s,
    base: i >= 0 ? last.slice(0, i) : last,
    templateArgs: i >= 0 ? last.slice(i + 1, last.lastIndexOf(">")) : undefined,
  };
}

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
        if (sub === 1) flush(); // end_sequence
        else if (sub === 2) seqSym = relocSym.get(at + 1) ?? seqSym; // set_address
        else if (sub === 3) {
          const q = { o: at + 1 };
          const f = cstr(b, q);
          unitFiles.push(f);
        }
        p.o = at + n;
      } else if (op === 1) seqFiles.add(file); // copy
      else if (op === 4) file = uleb(b, p); // set_file
      else if (op === 2) uleb(b, p);
      else if (op === 3) sleb(b, p);
      else if (op === 9) p.o += 2; // fixed_advance_pc
      else for (let k = 0; k < (stdLens[op - 1] ?? 0); k++) uleb(b, p);
    }
    unit = end;
  }
  return { files, kernelFiles: [...kernelFiles], version };
}

// ───────────────────────────── compile_commands.json ─────────────────────────────

export interface CompileCommand {
  /** Absolute path of the TU. */
  file: string;
  /** Working folder of the compile. */
  directory: string;
  /** argv of the compile, compiler first. */
  argv: string[];
  /** The compile_commands.json it came from. */
  from: string;
}

/** Split a shell command line into words (POSIX quoting: '' "" and backslash). */
export function shellWords(cmd: string): string[] {
  const out: string[] = [];
  let cur = "";
  let have = false;
  for (let i = 0; i < cmd.length; i++) {
    const c = cmd[i]!;
    if (c === "'") {
      const j = cmd.indexOf("'", i + 1);
      cur += cmd.slice(i + 1, j < 0 ? undefined : j);
      i = j < 0 ? cmd.length : j;
      have = true;
    } else if (c === '"') {
      i++;
      for (; i < cmd.length && cmd[i] !== '"'; i++) {
        if (cmd[i] === "\\" && i + 1 < cmd.length && '"\\$`'.includes(cmd[i + 1]!)) i++;
        cur += cmd[i];
      }
      have = true;
    } else if (c === "\\" && i + 1 < cmd.length) {
      cur += cmd[++i];
      have = true;
    } else if (/\s/.test(c)) {
      if (have) out.push(cur);
      cur = "";
      have = false;
    } else {
      cur += c;
      have = true;
    }
  }
  if (have) out.push(cur);
  return out;
}

/**
 * Read a compile_commands.json into absolute-path entries (only CUDA TUs: .cu, or -x cu). A file
 * whose first non-blank character is not `[` is read as a build log instead (readBuildLog): the
 * way to give the exact flags of a Makefile project, which writes no compile_commands.json.
 */
export function readCompileCommands(path: string, o: { logDir?: string } = {}): CompileCommand[] {
  let json: unknown;
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    throw new KerncapError("E_COMPILE_COMMANDS", `cannot read ${path}: ${(e as Error).message}`, { hint: "Regenerate it (cmake -DCMAKE_EXPORT_COMPILE_COMMANDS=ON, or bear -- make)." });
  }
  if (!/^\s*\[/.test(text)) return readBuildLog(path, text, o.logDir);
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new KerncapError("E_COMPILE_COMMANDS", `cannot read ${path}: ${(e as Error).message}`, { hint: "Regenerate it (cmake -DCMAKE_EXPORT_COMPILE_COMMANDS=ON, or bear -- make)." });
  }
  if (!Array.isArray(json)) throw new KerncapError("E_COMPILE_COMMANDS", `${path} is not a JSON array of compile commands`);
  const out: CompileCommand[] = [];
  for (const e of json as { file: string; directory: string; command?: string; arguments?: string[] }[]) {
    const argv = e.arguments ?? shellWords(e.command ?? "");
    const file = resolve(e.directory, e.file);
    const xi = argv.indexOf("-x");
    if (!file.endsWith(".cu") && !(xi >= 0 && argv[xi + 1] === "cu")) continue;
    out.push({ file, directory: e.directory, argv, from: path });
  }
  return out;
}

/** A compiler word (argv[0] after any launcher): nvcc, a cross or versioned nvcc, nvcc.exe. */
const NVCC_WORD = /(^|\/)([\w.-]*-)?nvcc(-[\d.]+)?(\.exe)?$/;
/** Launchers that may stand before the compiler in a build log. */
const LAUNCHERS = new Set(["ccache", "sccache", "distcc", "env", "time"]);
/** Linker-only words of a compile-and-link command: nothing of the device compile (with their argument when separate). */
const LINK_WITH_ARG = new Set(["-Xlinker", "--linker-options", "-L", "--library-path", "-l", "--library", "-Xnvlink", "--nvlink-options"]);
const LINK_WORD = /^(-l\S|-L\S|--library=|--library-path=|-Wl,|--linker-options=|-Xlinker=|-Xnvlink=|--nvlink-options=)/;
/** Inputs that are not sources: objects, archives, shared libraries. */
const NON_SOURCE_INPUT = /\.(o|obj|a|lib|so(\.\d+)*|dll|res)$/;

/**
 * The nvcc commands of a build log (the output of `make -n -B TARGET VARS…`, `make V=1`, `ninja
 * -v`, or any verbose build log): one entry per `.cu` file an nvcc command names (a command that
 * compiles several names each with the others left out). Lines continued with a backslash are
 * joined; a line is split at `&&`, `||` and `;` words, and `cd DIR` before the compiler sets its
 * folder for that line; `make[N]: Entering directory 'DIR'` (make -w, or a recursive make) and the
 * matching Leaving line set it for the lines between; otherwise `dir` (locateKernelSource passes
 * --source-root: where a plain `make -n` ran) or else the log's own folder. Launchers
 * (ccache, env VAR=…) before the compiler are skipped; link-only words (-l, -L, -Wl,, -Xlinker)
 * and object/library inputs are left out, so a compile-and-link line (`nvcc … app.cu -lcublas -o
 * app`, as llm.c's Makefile runs it) gives the device compile's flags.
 * @throws KerncapError E_COMPILE_COMMANDS when the log has no nvcc command naming a .cu file.
 */
export function readBuildLog(path: string, text: string, dir0?: string): CompileCommand[] {
  const out: CompileCommand[] = [];
  const dirs: string[] = [resolve(dir0 ?? dirname(resolve(path)))];
  const lines = text.replace(/\\\r?\n/g, " ").split(/\r?\n/);
  for (const line of lines) {
    const enter = /^\S*make(\[\d+\])?: Entering directory [`'"](.+)['"]\s*$/.exec(line);
    if (enter) {
      dirs.push(resolve(enter[2]!));
      continue;
    }
    if (/^\S*make(\[\d+\])?: Leaving directory /.test(line)) {
      if (dirs.length > 1) dirs.pop();
      continue;
    }
    if (!line.includes("nvcc")) continue;
    let dir = dirs[dirs.length - 1]!;
    const words = shellWords(line);
    const segments: string[][] = [[]];
    for (const w of words) {
      if (w === "&&" || w === "||" || w === ";") segments.push([]);
      else segments[segments.length - 1]!.push(w);
    }
    for (const seg of segments) {
      if (seg[0] === "cd" && seg[1]) {
        dir = resolve(dir, seg[1]);
        continue;
      }
      let k = 0;
      while (k < seg.length && (LAUNCHERS.has(seg[k]!.split("/").pop()!) || /^[A-Za-z_]\w*=/.test(seg[k]!))) k++;
      if (k >= seg.length || !NVCC_WORD.test(seg[k]!)) continue;
      const argv: string[] = [seg[k]!];
      const sources: string[] = [];
      for (let i = k + 1; i < seg.length; i++) {
        const a = seg[i]!;
        if (LINK_WITH_ARG.has(a)) {
          i++;
          continue;
        }
        if (LINK_WORD.test(a)) continue;
        if (a === "-o" || a === "--output-file") {
          argv.push(a, seg[++i] ?? "");
          continue;
        }
        if (!a.startsWith("-") && NON_SOURCE_INPUT.test(a)) continue;
        if (!a.startsWith("-") && a.endsWith(".cu")) sources.push(a);
        argv.push(a);
      }
      for (const src of sources) {
        const file = resolve(dir, src);
        out.push({ file, directory: dir, argv: argv.filter((a) => a === src || !sources.includes(a)), from: path });
      }
    }
  }
  if (!out.length) {
    throw new KerncapError("E_COMPILE_COMMANDS", `${path} is neither a compile_commands.json nor a build log with an nvcc command that compiles a .cu file`, {
      hint: "For a Makefile project: `make -n -B TARGET VARS… > build-commands.txt` (the build's own variables, e.g. NO_MULTI_GPU=1), then --compile-commands build-commands.txt; for CMake: -DCMAKE_EXPORT_COMPILE_COMMANDS=ON.",
    });
  }
  return out;
}

/** Build folders where a compile_commands.json usually sits, relative to a source root. */
export const COMPILE_COMMANDS_PLACES = ["", "build", "out", "cmake-build-release", "cmake-build-debug", "build/release", "build/Release", "build/debug", "_build", "builddir"];

/** The compile_commands.json files found under root's usual build folders (and build* folders). */
export function findCompileCommands(root: string): { found: string[]; looked: string[] } {
  const looked: string[] = [];
  const places = new Set(COMPILE_COMMANDS_PLACES);
  try {
    for (const n of readdirSync(root)) if (/^(build|cmake-build)/i.test(n)) places.add(n);
  } catch {
    /* root unreadable: nothing found */
  }
  const found: string[] = [];
  for (const p of places) {
    const f = join(root, p, "compile_commands.json");
    looked.push(f);
    if (existsSync(f)) found.push(f);
  }
  return { found, looked };
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
  /** The TU's compile command, when a compile_commands.json has one. */
  compileCommand?: CompileCommand;
  /** The TU was one of several candidates (none of the facts singled it out); the others. */
  otherCandidates: string[];
  /** Source-level facts for the manifest. */
  lineInfoFiles?: string[];
  /** Every place looked at, in order, for messages. */
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
   * --compile-commands: a compile_commands.json, a folder that holds one, or a build log with the
   * nvcc command lines (`make -n -B TARGET …` output: readBuildLog; its relative paths are taken
   * from the source root unless make -w names the folder).
   */
  compileCommands?: string;
}

function includesFile(tuText: string, header: string): boolean {
  const name = header.split(sep).pop()!;
  return new RegExp(`#\\s*include\\s*["<][^">]*\\b${escapeRe(name)}[">]`).test(tuText);
}

/**
 * Find the kernel's definition, its TU and (when there is one) its compile command.
 * @throws KerncapError E_SOURCE_NOT_FOUND naming every place it looked and the options to pass.
 */
export function locateKernelSource(inp: LocateInput): KernelLocation {
  const names = kernelNameParts(demangle(inp.demangled || inp.kernel));
  const looked: string[] = [];

  // compile commands: explicit, else the usual build folders under the source root
  let commands: CompileCommand[] = [];
  if (inp.compileCommands) {
    const p = existsSync(inp.compileCommands) && statSync(inp.compileCommands).isDirectory() ? join(inp.compileCommands, "compile_commands.json") : inp.compileCommands;
    if (!existsSync(p)) throw new KerncapError("E_SOURCE_NOT_FOUND", `--compile-commands ${inp.compileCommands}: no such file`, { hint: "Point it at a compile_commands.json (cmake -DCMAKE_EXPORT_COMPILE_COMMANDS=ON writes one into the build folder)." });
    commands = readCompileCommands(p, { logDir: inp.sourceRoot }); // a build log's relative paths: from the source root
    looked.push(p);
  } else if (inp.sourceRoot) {
    const f = findCompileCommands(inp.sourceRoot);
    looked.push(`compile_commands.json in ${resolve(inp.sourceRoot)}/{${f.looked.map((p) => relative(resolve(inp.sourceRoot!), dirname(p))).join(",")}}`);
    for (const p of f.found) commands.push(...readCompileCommands(p));
  }
  const commandFor = (tu: string) => commands.find((c) => c.file === tu);

  // 1. line info
  let lineFiles: string[] | undefined;
  if (inp.module) {
    let cubin: Uint8Array | undefined;
    try {
      cubin = pickCubin(inp.module, inp.arch).cubin;
    } catch {
      cubin = undefined;
    }
    const li = cubin ? cubinLineFiles(cubin, inp.kernel) : undefined;
    looked.push(li ? `line info of the captured module (${li.files.length} files)` : "line info of the captured module (none: built without -lineinfo)");
    if (li) {
      lineFiles = li.files;
      const order = [...li.kernelFiles, ...li.files.filter((f) => !li.kernelFiles.includes(f))];
      const existing = order.filter((f) => existsSync(f));
      const definition = existing.find((f) => definesKernel(readFileSync(f, "utf8"), names.base));
      if (definition) {
        const tus = li.files.filter((f) => f.endsWith(".cu") && existsSync(f));
        let tu: string | undefined = definition.endsWith(".cu") ? definition : tus[0];
        let others: string[] = [];
        if (!tu && commands.length) ({ tu, others } = pickTu(commands, definition));
        if (!tu && inp.sourceRoot) ({ tu, others } = tuIncluding(resolve(inp.sourceRoot), definition));
        if (!tu) looked.push(`a TU that includes ${definition} (line info names the definition but no .cu; pass --compile-commands or --source-root)`);
        if (tu) return { method: "line-info", tu, definition, compileCommand: commandFor(tu), otherCandidates: others, lineInfoFiles: li.files, looked, names };
      }
    }
  }

  // 2. compile commands: search the TUs' folders for the definition
  if (commands.length) {
    const direct = commands.find((c) => existsSync(c.file) && definesKernel(readFileSync(c.file, "utf8"), names.base));
    if (direct) return { method: "compile-commands", tu: direct.file, definition: direct.file, compileCommand: direct, otherCandidates: [], lineInfoFiles: lineFiles, looked, names };
    const roots = inp.sourceRoot ? [resolve(inp.sourceRoot)] : [...new Set(commands.map((c) => dirname(c.file)))];
    for (const r of roots) {
      looked.push(`${r} (search for __global__ ${names.base})`);
      const defs = searchKernelDefinition(r, names.base);
      for (const def of defs) {
        const { tu, others } = pickTu(commands, def);
        if (tu) return { method: "compile-commands", tu, definition: def, compileCommand: commandFor(tu), otherCandidates: others, lineInfoFiles: lineFiles, looked, names };
      }
    }
  }

  // 3. source root search
  if (inp.sourceRoot) {
    const root = resolve(inp.sourceRoot);
    looked.push(`${root} (search for __global__ ${names.base})`);
    const defs = searchKernelDefinition(root, names.base);
    const def = defs[0];
    if (def) {
      let tu = def.endsWith(".cu") ? def : undefined;
      let others: string[] = [];
      if (!tu) ({ tu, others } = tuIncluding(root, def));
      if (tu) return { method: "source-root", tu, definition: def, compileCommand: commandFor(tu), otherCandidates: others, lineInfoFiles: lineFiles, looked, names };
    }
  }

  throw new KerncapError("E_SOURCE_NOT_FOUND", `the source of kernel ${names.qualified} was not found; looked in:\n  ${looked.join("\n  ") || "(nowhere: no line info, no --source-root, no --compile-commands)"}`, {
    hint: "Pass --source-root DIR (the project's source tree) and, for the exact flags, --compile-commands FILE (cmake -DCMAKE_EXPORT_COMPILE_COMMANDS=ON); building with -lineinfo lets kerncap find it by itself.",
  });
}

/** A mangled name through c++filt (binutils) when the capture holds no demangled name; else as is. */
function demangle(name: string): string {
  if (!name.startsWith("_Z")) return name;
  const filt = Bun.which("c++filt") ?? Bun.which("cu++filt");
  if (!filt) return name;
  const out = Bun.spawnSync([filt, name], { stdout: "pipe" }).stdout.toString().trim();
  return out || name;
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

/** The .cu files under root that include the definition header directly (by file name). */
function tuIncluding(root: string, definition: string): { tu?: string; others: string[] } {
  return bySize(listCu(root).filter((f) => includesFile(readFileSync(f, "utf8"), definition)));
}

/**
 * Several TUs include the definition and nothing says which one instantiated the kernel: take the
 * smallest (an explicit-instantiation file such as ggml's template-instances/*.cu is the likely
 * one, and in slice mode only its preprocessor lines are used); the others are reported.
 */
function bySize(cands: string[]): { tu?: string; others: string[] } {
  const sorted = [...cands].sort((a, b) => statSync(a).size - statSync(b).size || a.localeCompare(b));
  return { tu: sorted[0], others: sorted.slice(1) };
}

/** The TU among compile commands that includes the definition header (directly, by file name). */
function pickTu(commands: CompileCommand[], definition: string): { tu?: string; others: string[] } {
  if (commands.some((c) => c.file === definition)) return { tu: definition, others: [] };
  const cands = commands.filter((c) => existsSync(c.file) && includesFile(readFileSync(c.file, "utf8"), definition)).map((c) => c.file);
  return bySize(cands);
}
