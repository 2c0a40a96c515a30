/**
 * What pack and unpack share (./archive.ts has the archive's design): the index's format (its
 * entry name, schema, records), the result types, the name rules (portable names, UTF-8 names
 * shown with \xHH escapes, entry paths kept inside the target), the output-path checks, the
 * removal of stale temps and the SIGINT/SIGTERM check between pieces.
 */
import { accessSync, constants as fsConstants, existsSync, lstatSync, readlinkSync, realpathSync, statSync } from "node:fs";
import { basename, dirname, isAbsolute, join, resolve, sep } from "node:path";
import { KerncapError } from "../errors.ts";
import { escapeForTerminal } from "../escape.ts";
import { removeStaleTemps } from "../leftovers.ts";
import { log } from "../log.ts";
import { signalExitCode, StopSignals } from "../process-group.ts";
import type { Extent } from "./sparse-extents.ts";
import { badArchive } from "./zip.ts";
import { refusePlantedLinks } from "../util/write-file.ts";
import { isPythonBytecode } from "./file-names.ts";

export const PACK_INDEX = "kerncap-pack.json";

export const SPARSE_SUFFIX = ".kcsparse";

export const PACK_SCHEMA = "kerncap.pack/1";

/** Bytes read or written at once. */
export const PIECE = 4 << 20;

/** Compressed bytes pushed into the inflater at once (bounds what one push can inflate to). */
export const INFLATE_PIECE = 16 << 10;

/** Permission bits unpack applies at most: no group/other write, no setuid/setgid/sticky. */
export const FILE_MODE_MASK = 0o755;

/**
 * Mode of every folder unpack makes: the files' mask (owner writes, others read and list), set by
 * chmod so that no umask (000 gave 0777 folders) lets another user add or swap a file in it.
 */
export const FOLDER_MODE = 0o755;

/** One file of the packed folder, as the index records it. */
export interface PackedFile {
  /** Path inside the capture folder, `/`-separated. */
  path: string;
  /** Bytes of the file (holes included). */
  size: number;
  /** Permission bits (0o755 for build.sh). */
  mode: number;
  /** Entry name in the archive (ROOT/path, or ROOT/path.kcsparse). */
  entry: string;
  method: "deflated" | "stored" | "sparse";
  /** Sparse files: the data extents [offset, length] whose bytes the entry holds, in order. */
  extents?: Extent[];
}

export interface PackIndex {
  schema: typeof PACK_SCHEMA;
  root: string;
  tool: string;
  files: PackedFile[];
  dirs: string[];
  warnings: string[];
}

/** The why of a file pack leaves out as an editor's temporary or backup, or a hidden name under src/. */
export const EDITOR_LEFT_OUT = "an editor's temporary or backup, Python's bytecode cache, or a hidden name under src/";

export interface PackResult {
  /** The archive written, or that would be (dryRun). */
  archive: string;
  dir: string;
  /** --dry-run: nothing was written (bytes.archive 0). */
  dryRun: boolean;
  files: number;
  sparseFiles: number;
  /** Bytes: of the files (apparent sizes), of their data (holes left out), of the archive. */
  bytes: { files: number; data: number; archive: number };
  /** Every file archived: its path in the capture folder, its bytes (apparent size). */
  list: { path: string; bytes: number }[];
  /** What the capture folder holds that the archive leaves out (build/, unpack's mark, editor temporaries and backups, hidden names under src/: src/format/file-names.ts isLeftOutOfSources …), with why (EDITOR_LEFT_OUT for the editor's). */
  leftOut: { path: string; why: string }[];
  /** Reproducer paths that exist only on this machine (see portabilityWarnings); symbolic links left out. */
  warnings: string[];
  /** The private facts the archive's manifest ships (host name, command line …: src/format/redact.ts privateFields); [] with --redact. */
  privateFields: string[];
  /** Whether the manifest's private fields were removed (--redact). */
  redacted: boolean;
  seconds: number;
}

export interface UnpackResult {
  archive: string;
  dir: string;
  files: number;
  sparseFiles: number;
  bytes: { files: number; data: number };
  /** The index's warnings, from pack time. */
  warnings: string[];
  seconds: number;
}

/**
 * How far a pack or unpack is, for a progress line (src/util/progress.ts): `checking` the memory
 * chunks' kc64 (bytes of stored chunks), `packing` or `unpacking` the files' data (bytes).
 */
export type ArchiveProgress = (phase: "checking" | "packing" | "unpacking", done: number, total: number) => void;

export const UTF8 = new TextDecoder("utf-8", { fatal: true });

/** A file name's bytes as printable text: valid UTF-8 characters kept (control characters excepted), every other byte as \xHH. */
export function escapedName(b: Uint8Array): string {
  let out = "";
  for (let i = 0; i < b.length; ) {
    let ch = "";
    for (let n = 1; n <= 4 && !ch && i + n <= b.length; n++) {
      try {
        ch = UTF8.decode(b.subarray(i, i + n)); // fatal: throws until the bytes are one whole character
      } catch {
        /* try one byte more */
      }
    }
    if (ch && !/[\x00-\x1f\x7f]/.test(ch)) {
      out += ch;
      i += Buffer.byteLength(ch);
    } else out += `\\x${b[i++]!.toString(16).padStart(2, "0")}`;
  }
  return out;
}

/**
 * A tool's own files, at any depth of an archive: each names commands or code that tool runs when it
 * is started in the folder that holds it (git's hooks and filters, npm's scripts, pytest's `addopts = -p
 * plugin` and conftest.py, Bun's preload, pdb's and gdb's start-up commands, a task runner's recipes, a
 * CI workflow, an editor's tasks), so a received capture's src/ holding one would run the sender's code
 * when the user runs that tool there (adversary 28: src/pytest.ini with a plugin beside it). `HEAD`:
 * a folder holding HEAD, objects/ and refs/ is a bare git repository whatever its name, whose config
 * names commands git runs there (core.fsmonitor at `git status`, or a shell prompt's; adversary 38),
 * and git finds no repository without a HEAD. And an AI agent's or an editor's (adversary 52):
 * Claude Code's `.claude/` hooks, `.mcp.json` and `.cursor/` MCP servers, agents' standing
 * instructions (CLAUDE.md, AGENTS.md, GEMINI.md, .cursorrules…), cuda-gdb's and neovim's start-up
 * files, clangd's configuration (a compiler it runs), bazel's, asdf's, nix's and deno's. And
 * `node_modules`: Node and Bun load a package from it for any script below it that requires the
 * package's name (adversary 79 #27: an archive unpacked as ~/node_modules served `require("src")`).
 */
const TOOL_FILE =
  /^(HEAD|\.(git(attributes|modules)?|github|hg|hgrc|svn|bzr|cargo|npmrc|yarnrc(\.yml)?|envrc|direnv|env|vscode|idea|devcontainer|exrc|dir-locals\.el|mise\.toml|pdbrc|gdbinit|cuda-gdbinit|lldbinit|husky|pre-commit-config\.ya?ml|justfile|claude|mcp\.json|cursor|cursorrules|windsurfrules|continue|aider[^/]*|nvim\.lua|nvimrc|clangd|bazelrc|tool-versions)|mise\.toml|conftest\.py|pytest\.ini|tox\.ini|setup\.cfg|pyproject\.toml|noxfile\.py|package\.json|bunfig\.toml|justfile|taskfile\.ya?ml|claude\.md|agents\.md|gemini\.md|flake\.nix|deno\.jsonc?|node_modules)$/i;

/**
 * Why a name in an archive (its root folder, or a `/`-separated path inside it) is not portable
 * (a phrase), or undefined: each part is letters, digits and `._+-` only, and starts with no `-`.
 * Names are data: such a name can reach a shell or a compiler's command line unquoted (nvcc runs
 * its steps through sh), and a terminal (escape sequences), so unpack refuses anything else.
 */
export function unportableName(name: string): string | undefined {
  for (const part of name.split("/")) {
    if (part === "") return "has an empty part";
    if (!/^[A-Za-z0-9._+-]+$/.test(part)) return "holds a character outside letters, digits and ._+- (a space, shell syntax, a control character, …)";
    if (part.startsWith("-")) return "has a part starting with - (read as an option)";
    if (TOOL_FILE.test(part))
      return "names a tool's own files (git's, a bare repository's HEAD included, Mercurial's, cargo's, npm's, Bun's, direnv's, pytest's, tox's, a debugger's, a task runner's, CI's, an editor's, an AI agent's, Node's node_modules): they name commands or code that tool runs";
    // Python would run a cached bytecode file in place of the source shown (adversary 58): pack and export leave them out
    if (isPythonBytecode(part))
      return "is Python's bytecode cache (__pycache__, .pyc): Python would run it in place of the source beside it, and pack and export leave it out";
    // pack and export leave hidden files out of src/: a build that read one would build otherwise from them (adversary 52)
    if (part.startsWith(".") && part !== "." && part !== "..")
      return "is a hidden name (pack and export leave hidden files out, so a build that read one would compile otherwise from an archive or an export)";
  }
  return undefined;
}

/**
 * Why a capture folder's own name (an archive's root, the folder pack packs) is not one unpack
 * writes, or undefined: unportableName's reasons, and a hidden name (`.ssh`, `.vim`: unpacked in
 * the home folder it would be the user's own configuration).
 */
export function unfitRootName(name: string): string | undefined {
  if (!name || name.includes("/") || name.includes("\0")) return "is not one folder name (empty, or holding / or NUL)";
  if (name.startsWith(".")) return "starts with . (a hidden folder such as ~/.ssh or ~/.vim: a capture folder is never one)";
  return unportableName(name);
}

/** `name` for a message: quoted, on one line, every control, bidi control and line separator escaped (src/escape.ts). */
export const escapedForMessage = (name: string) => escapeForTerminal(JSON.stringify(name), { oneLine: true });

/** Whether an archive entry's name could not be written inside a folder: empty, absolute, with `\\`, NUL, or a `..`, `.` or empty part (what safeEntryPath refuses). */
export function unsafeEntryName(rel: string): boolean {
  const parts = rel.replace(/\/+$/, "").split("/");
  return !rel || isAbsolute(rel) || rel.includes("\\") || rel.includes("\0") || parts.some((p) => p === ".." || p === "." || p === "");
}

/**
 * A path from the archive, made safe: relative, `/`-separated, no `..`, no empty part, inside dest.
 * @throws KerncapError E_ARCHIVE (zip-slip)
 */
export function safeEntryPath(archive: string, dest: string, rel: string): string {
  const parts = rel.replace(/\/+$/, "").split("/");
  if (unsafeEntryName(rel)) {
    throw new KerncapError("E_ARCHIVE", `${archive}: entry ${JSON.stringify(rel)} would be written outside the capture folder`, {
      hint: "The archive is malicious or damaged; nothing was unpacked.",
    });
  }
  const p = resolve(dest, ...parts);
  if (!p.startsWith(resolve(dest) + sep))
    throw new KerncapError("E_ARCHIVE", `${archive}: entry ${JSON.stringify(rel)} would be written outside the capture folder`, {
      hint: "The archive is malicious or damaged; nothing was unpacked.",
    });
  return p;
}

/**
 * `p` with every symbolic link in it resolved, for a path that may not exist yet: the real path of
 * its longest existing ancestor, then the rest as written.
 */
export function realPathLoose(p: string): string {
  let head = p;
  const rest: string[] = [];
  for (;;) {
    try {
      return join(realpathSync(head), ...rest.reverse());
    } catch {
      const up = dirname(head);
      if (up === head) return p;
      rest.push(basename(head));
      head = up;
    }
  }
}

/**
 * The folder build.sh and validate write their outputs into (the rebuilt module, the pruned build's
 * TU, plan and check record): left out of an archive, since the receiver rebuilds it and its files
 * carry the packer's PATH and absolute paths (a new user's trial found plan.json in a pack).
 */
export const BUILD_DIR = "build";

/**
 * The checks on an output path that cost one lstat/access, before any work: a dangling symbolic
 * link (existsSync follows it and says no; the rename would fail ENOTDIR), a parent that is
 * missing, not a folder, or not writable (access W_OK: EACCES, EROFS). `option`: the option that
 * named it, for the hints (default -o; eval's results file: --jsonl).
 * @throws KerncapError E_USAGE (dangling link, missing or non-folder parent), E_IO (parent not writable)
 */
export function assertOutputPath(out: string, what: string, option = "-o"): void {
  refusePlantedLinks(
    dirname(resolve(out)),
    `the ${what}`,
    `Choose another ${option} in a folder of your own (the folder the link names, if it is yours, by its own path).`,
  );
  let link = false;
  try {
    link = lstatSync(out).isSymbolicLink();
  } catch {
    /* nothing there */
  }
  if (link && !existsSync(out)) {
    throw new KerncapError(
      "E_USAGE",
      `${out} is a dangling symbolic link (to ${(() => {
        try {
          return escapedForMessage(readlinkSync(out));
        } catch {
          return "?"; // no longer a link: it changed meanwhile
        }
      })()})`,
      { hint: `Remove the link, or choose another ${option} for the ${what}.` },
    );
  }
  const parent = dirname(out);
  if (!existsSync(parent))
    throw new KerncapError("E_USAGE", `the folder that would hold ${out} does not exist`, { hint: `Create ${parent} first, or choose another ${option}.` });
  if (!statSync(parent).isDirectory())
    throw new KerncapError("E_USAGE", `${parent} is not a folder: it cannot hold ${out}`, { hint: `Choose another ${option}.` });
  try {
    accessSync(parent, fsConstants.W_OK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new KerncapError(
      "E_IO",
      `cannot write ${out}: the folder ${parent} is ${code === "EROFS" ? "on a read-only file system" : "not writable (permission denied)"}`,
      {
        hint: `Choose another ${option} for the ${what}, or check the folder's permissions.`,
      },
    );
  }
}

/** Say which stale temps (of kerncap processes that are gone) next to `target` were removed. */
export function removeStale(target: string, verb: "pack" | "unpack"): void {
  for (const p of removeStaleTemps(target, existsSync(target))) {
    log.info(`removed ${p}: left by an interrupted kerncap ${verb} (process ${/\.(?:tmp|old)-(\d+)(?:-[0-9a-z]+)?$/.exec(p)?.[1]}, which is gone)`);
  }
}

/**
 * The SIGINT/SIGTERM check between pieces: a macrotask turn (so that a signal's handler runs),
 * then E_INTERRUPTED (exit 130/143) when one came. Cost: one setImmediate per 4 MiB piece.
 */
export function interruptCheck(stops: StopSignals, what: string): () => Promise<void> {
  return async () => {
    await new Promise<void>((r) => setImmediate(r));
    if (stops.signal)
      throw new KerncapError("E_INTERRUPTED", `${what} interrupted (${stops.signal}); the partial output was removed`, {
        exitCode: signalExitCode(stops.signal),
      });
  };
}

/**
 * A capture's own folders as an archive holds them (a capture holds no other). processes/ holds one
 * empty file per process of the captured job, named by its number (c/common/kc_process.c; read by
 * src/capture/census.ts). build/ is not one: what builds write on the machine that holds the
 * capture (rebuilt modules, eval's kept copies and locks, the pruned build's plan), which pack
 * leaves out (src/format/pack.ts); an archive's is the sender's (adversary 34: a module at build/
 * unpacked where a verb reading build/ would take it as built here).
 */
const CAPTURE_FOLDERS = new Set(["src", "kernel", "memory", "profile", "processes"]);
/**
 * A build tool's, a test runner's or a debugger's configuration by its name: what `make`, `pytest`,
 * `tox`, `cmake --preset`, `npm`, `gdb`, `just`, `ninja`… read from the folder they run in, and
 * which runs commands or imports modules (pytest.ini's `addopts = -p evil`, a GNUmakefile's
 * recipes, .gdbinit's commands: a trial). Outside src/ a capture holds none (the sources' own
 * Makefile or CMakeLists.txt lie under src/).
 */
const TOOL_CONFIG_NAME =
  /^(gnumakefile|makefile|justfile|rakefile|taskfile\.ya?ml|build\.ninja|meson\.build|meson_options\.txt|cmakelists\.txt|cmake(user)?presets\.json|pytest\.ini|tox\.ini|setup\.cfg|pyproject\.toml|pipfile|package\.json|cargo\.toml|go\.mod|gemfile|dockerfile|containerfile|vagrantfile|build(\.bazel)?|workspace(\.bazel)?|module\.bazel)$/i;

/** A program or a module by its name: what a language's loader, a shell or an editor runs or imports. */
const CODE_NAME = /\.(py|pyc|pyw|pth|js|mjs|cjs|ts|node|so|dylib|dll|pl|pm|rb|lua|vim|sh|bash|zsh|fish|el|jar|class)$|^__(init|main)__/i;

/**
 * Why an archive's entry `path` (below its root, `/`-separated) is not part of a capture, or
 * undefined: outside src/ a capture holds its own files and folders only, and no program or module
 * but build.sh and repro.py. An archive names its root folder, and unpacked where Python or Node
 * look up modules (the home folder, a project) a root `json` with `__init__.py`, or
 * `node_modules` with `lodash/index.js`, would be imported in place of the real one (a trial).
 * `members`: the root's folders that are captures of a capture set (each holds kerncap.json).
 */
export function foreignEntry(path: string, members: ReadonlySet<string>): string | undefined {
  if (unsafeEntryName(path)) return undefined; // a path out of the folder: safeEntryPath's refusal, said as such
  const parts = path.split("/");
  const rel = parts.length > 1 && members.has(parts[0]!) ? parts.slice(1) : parts;
  if (rel[0] === BUILD_DIR)
    return `lies in ${BUILD_DIR}/, which holds what builds write on the machine that holds the capture (rebuilt modules, kept copies) and which pack leaves out`;
  if (rel.length > 1 && !CAPTURE_FOLDERS.has(rel[0]!))
    return `lies in ${rel[0]}/, which is no folder of a capture (${[...CAPTURE_FOLDERS].map((f) => `${f}/`).join(", ")})`;
  if (rel[0] === "src") return undefined; // sources: compiled, not imported from where they lie
  const name = rel[rel.length - 1]!;
  // a hidden name outside src/ (.pdbrc, .gdbinit, .lldbinit, .clangd, .tool-versions…): kerncap writes none there
  if (rel.some((p) => p.startsWith("."))) return "is a hidden name, which a capture holds only under src/ (a tool's configuration: .gdbinit, .pdbrc…)";
  if (TOOL_CONFIG_NAME.test(name)) return "names a build tool's or test runner's configuration (make, pytest, cmake…), which a capture holds only under src/";
  if (rel[0] === "processes" && !(rel.length === 2 && /^\d{1,9}$/.test(name)))
    return "lies in processes/, which holds only one file per process, named by its number";
  // kernel/ and memory/ hold data: a module there (kernel/__init__.py) was imported from the capture's folder (a trial)
  if (rel.length > 1) return CODE_NAME.test(name) ? "is a program or a module by its name, which a capture holds only under src/" : undefined;
  if (name === "build.sh" || name === "repro.py") return undefined;
  if (CODE_NAME.test(name)) return "is a program or a module by its name, which a capture holds only under src/";
  return undefined;
}

/**
 * Why an archive's folder `path` (below its root, `/`-separated; listed in its index's `dirs`) is
 * not a capture's, or undefined: the same rule as foreignEntry's for the folders a file may lie in
 * (a capture's own folders and what lies under them, a capture set's members), so that an index
 * cannot make a folder, build/ or node_modules/, that no file of it could be in (adversary 54).
 */
export function foreignFolder(path: string, members: ReadonlySet<string>): string | undefined {
  if (unsafeEntryName(path)) return undefined; // a path out of the folder: safeEntryPath's refusal, said as such
  const parts = path.replace(/\/+$/, "").split("/");
  const rel = members.has(parts[0]!) ? parts.slice(1) : parts;
  if (!rel.length) return undefined; // a member of a capture set itself
  if (rel[0] === BUILD_DIR)
    return `is ${BUILD_DIR}/ or lies in it, which holds what builds write on the machine that holds the capture, and which pack leaves out`;
  if (!CAPTURE_FOLDERS.has(rel[0]!)) return `is no folder of a capture (${[...CAPTURE_FOLDERS].map((f) => `${f}/`).join(", ")})`;
  if (rel[0] === "src") return undefined; // sources' folders: unportableName holds their names
  if (rel.some((p) => p.startsWith("."))) return "is a hidden name, which a capture holds only under src/";
  if (rel[0] === "processes" && rel.length > 1) return "lies in processes/, which holds only one file per process, named by its number";
  return undefined;
}

/** The folders of `files` (root-relative paths) that hold a kerncap.json: a capture set's members. */
export function captureMembers(files: readonly string[]): Set<string> {
  return new Set(files.filter((f) => /^[^/]+\/kerncap\.json$/.test(f)).map((f) => f.split("/")[0]!));
}

/**
 * The archive's root folder name and every folder and file name in its index: no separator, no
 * `.`/`..`, no control character, portable (unportableName): names are data, refused before any
 * folder is made. @throws KerncapError E_ARCHIVE
 */
export function refuseUnsafeNames(archive: string, idx: PackIndex): void {
  if (!/^[^/\\\0]+$/.test(idx.root) || idx.root === "." || idx.root === "..") throw badArchive(archive, `bad root folder name ${JSON.stringify(idx.root)}`);
  if (/[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/.test(idx.root))
    throw badArchive(
      archive,
      `the root folder name ${JSON.stringify(idx.root)} holds a control character (an escape sequence, a newline, a bidi override): it would not be shown as it is`,
    );
  // names are data: a root or entry name outside the portable set is refused before any folder is made
  const members = captureMembers(idx.files.map((f) => f.path));
  for (const [what, name] of [
    ["root folder name", idx.root] as const,
    ...idx.dirs.map((d) => ["folder", d.replace(/\/+$/, "")] as const),
    ...idx.files.map((f) => ["file", f.path] as const),
  ]) {
    const why =
      what === "root folder name"
        ? unfitRootName(name)
        : (unportableName(name) ?? (what === "file" ? foreignEntry(name, members) : foreignFolder(name, members)));
    if (why)
      throw new KerncapError("E_ARCHIVE", `${archive}: the ${what} ${escapedForMessage(name)} ${why}`, {
        hint: "kerncap unpacks only portable names (letters, digits and ._+-); nothing was unpacked. Ask the sender to rename it and pack again.",
      });
  }
}
