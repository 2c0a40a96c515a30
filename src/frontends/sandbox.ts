/**
 * The sandbox a confined build runs in (validate/tune/profile --confine, eval's builds: what
 * kerncap mcp runs), where the kernel has one: c/build/kerncap-confine (c/common/kc_confine.c),
 * embedded in kerncap as the capture library is (src/capture/lib.ts) and written once into the
 * cache, runs build.sh
 * - in a file tree holding only what a build needs (`namespace`: a user + mount + network
 *   namespace; a path outside does not exist there, so the preprocessor's `__has_include` of one
 *   says "no" whether or not it exists outside: no bit of the file system reaches the agent), and
 * - under a Landlock ruleset (`landlock`): reads and runs only beneath the same paths, writes only
 *   beneath the build's own output folder and TMPDIR, no TCP. Landlock refuses an open (EACCES) but
 *   does not hide a file: a path that does not exist still fails ENOENT, which gcc tells apart
 *   (`__has_include` of a forbidden file that exists is a fatal error, one that does not is "no"),
 *   so without the namespace a build still answers whether a path exists, one bit per build.
 * Both apply where both are there (`namespace` says the tree, with Landlock too where the kernel
 * has it); neither: `scan`, the source scan and the dependency list alone (src/frontends/confine.ts,
 * ./confine-sources.ts), which also run under the sandbox.
 */
import { existsSync, readFileSync, realpathSync } from "node:fs";
import { dirname, join } from "node:path";
import confineFile from "../../c/build/kerncap-confine" with { type: "file" };
import { cachedFolder } from "../cache.ts";
import { sandboxOff, whichAbsolute } from "../env.ts";
import { homeOrAbove } from "../format/paths.ts";
import { findNvcc } from "./cuda/nvcc.ts";

/** Which confinement a confined build gets here: the namespace tree (with Landlock where the kernel has it), Landlock alone, or the source scan and dependency list alone. */
export type Confinement = "namespace" | "landlock" | "scan";

/** kerncap-confine's exit codes of its own (c/common/kc_confine.c): the sandbox could not be made. */
export const SANDBOX_EXIT_CODES = [121, 122, 123];

/** What kerncap-confine found here: its path, the kernel's Landlock ABI (0: none), whether the namespace tree can be made. */
export interface SandboxSupport {
  helper: string;
  abi: number;
  hide: boolean;
}

let support: SandboxSupport | null | undefined;

/**
 * kerncap-confine written into the cache and asked what this kernel allows (`--probe`: the
 * Landlock ABI, and a namespace made in a child), once per process.
 * @returns null when it cannot be written or run (the build is then confined by the scan alone)
 */
export function sandboxSupport(): SandboxSupport | null {
  if (support !== undefined) return support;
  support = null;
  try {
    const bytes = new Uint8Array(readFileSync(confineFile));
    const helper = join(cachedFolder("confine", [{ path: "kerncap-confine", bytes, mode: 0o755 }]), "kerncap-confine");
    const p = Bun.spawnSync([helper, "--probe"], { stdout: "pipe", stderr: "pipe" });
    const m = /^abi=(\d+) hide=([01])$/m.exec(p.stdout.toString());
    if (p.exitCode === 0 && m) support = { helper, abi: Number(m[1]), hide: m[2] === "1" };
  } catch {
    /* no cache folder, not Linux: the scan alone */
  }
  return support;
}

/** Tests: pretend this machine has `s` (null: no sandbox; undefined: ask kerncap-confine again). */
export function overrideSandboxSupport(s: SandboxSupport | null | undefined): void {
  support = s;
}

/**
 * The confinement a sandboxed confined build gets on this machine: the namespace tree (with
 * Landlock where the kernel has it), Landlock alone, or none (`scan`: also with KERNCAP_SANDBOX=0).
 */
export function machineConfinement(): Confinement {
  if (sandboxOff()) return "scan"; // the user's KERNCAP_SANDBOX=0
  const s = sandboxSupport();
  if (!s) return "scan";
  if (s.hide) return "namespace";
  return s.abi >= 1 ? "landlock" : "scan";
}

/**
 * The confinement a confined build of a `frontend` capture gets on this machine. Only CUDA's
 * build.sh runs in the sandbox (nvcc and the host compiler, whose folders are known); a Triton
 * build (run confined only with --trust-builds) imports Python packages from wherever they are
 * installed, so it is confined by the scan alone.
 */
export function confinementFor(frontend: string): Confinement {
  return frontend === "cuda" ? machineConfinement() : "scan";
}

/** Folders of the system a build reads and runs programs from (missing ones are skipped; /bin, /lib… may be links into /usr). */
const SYSTEM_RO = [
  "/usr/bin",
  "/bin",
  "/usr/lib",
  "/usr/lib64",
  "/usr/lib32",
  "/usr/libexec",
  "/lib",
  "/lib64",
  "/lib32",
  "/usr/include",
  "/usr/local/include",
];
/** Files outside them that the dynamic loader reads. */
const SYSTEM_RO_FILES = ["/etc/ld.so.cache"];

function real(p: string): string | undefined {
  try {
    return realpathSync(p);
  } catch {
    return undefined;
  }
}

/** Whether `root` looks like a CUDA toolkit (bin/nvcc and an include folder), not a prefix such as /usr/local that holds a wrapper script. */
function isToolkit(root: string): boolean {
  // nvcc beside cicc (nvvm/bin/cicc in NVIDIA's layout; bin/cicc in some distributions'), and headers: a prefix that only
  // holds an nvcc wrapper (/usr/local/bin/nvcc execing /usr/local/cuda-13.0/bin/nvcc) is no toolkit, and binding it would
  // show the agent whether any file under /usr/local exists (adversary 28)
  return (
    existsSync(join(root, "bin/nvcc")) &&
    (existsSync(join(root, "nvvm/bin/cicc")) || existsSync(join(root, "bin/cicc"))) &&
    (existsSync(join(root, "include")) || existsSync(join(root, "targets")))
  );
}

/**
 * The paths a confined CUDA build may read and run (`ro`) and write (`rw`): its private copy of the
 * capture (`folder`, read; its build/ written), its private TMPDIR (`tmp`), the captured project's
 * recorded files (`recorded`: ./confine.ts recordedSources; each file alone, never its folder), the CUDA toolkit of each
 * nvcc the build may run (NVCC, the first on the build's PATH, findNvcc's, /usr/local/cuda: their
 * bin folders, and the toolkit roots as named and resolved), the host compiler (gcc, g++, cc, c++ on
 * PATH, each name with the links it goes through, and its install, the folder above its bin/, when it
 * lies outside /usr), the programs build.sh runs (bash, timeout: the same, their folders); a folder
 * of these that is /, the user's home or above it (format/paths.ts homeOrAbove: a wrapper at ~/gcc)
 * is not bound, the program's file alone is; the system's library, program and include
 * folders (SYSTEM_RO), /etc/ld.so.cache, and /dev/null (written).
 */
export function sandboxPaths(o: { folder: string; tmp: string; recorded: { files: string[] }; env: Record<string, string | undefined> }): {
  ro: string[];
  rw: string[];
} {
  const ro = new Set<string>([o.folder, ...SYSTEM_RO, ...SYSTEM_RO_FILES, ...o.recorded.files]);
  const PATH = o.env.PATH ?? "";
  let found: string | undefined;
  try {
    found = findNvcc();
  } catch {
    /* no toolkit: the build fails as it would anyway */
  }
  const nvccs = [o.env.NVCC, whichAbsolute("nvcc", PATH) ?? undefined, found, "/usr/local/cuda/bin/nvcc"].filter((p): p is string => !!p && existsSync(p));
  // a folder that is /, the user's home or above it is never bound whole (a wrapper at ~/gcc, ~/bin/nvcc): the file alone
  const folder = (f: string, file: string) => ro.add(homeOrAbove(f) ? file : f);
  for (const n of nvccs) {
    ro.add(n); // the name itself, with the links on its way
    // its folder where that is a toolkit's bin/ (nvcc runs its siblings), else the file alone (a wrapper in /usr/local/bin)
    if (isToolkit(dirname(dirname(n)))) folder(dirname(n), n);
    for (const root of [dirname(dirname(n)), dirname(dirname(real(n) ?? n))]) if (isToolkit(root) && !homeOrAbove(root)) ro.add(root);
  }
  for (const tool of ["gcc", "g++", "cc", "c++", "bash", "timeout"]) {
    const p = whichAbsolute(tool, PATH);
    const r = p ? real(p) : undefined;
    if (!p || !r) continue;
    ro.add(p); // the name itself: the links on its way (/usr/bin/c++ -> /etc/alternatives/c++ -> g++) are made again in the tree
    if (r.startsWith("/usr/")) continue;
    ro.add(r);
    folder(dirname(p), p);
    folder(tool === "bash" || tool === "timeout" ? dirname(r) : dirname(dirname(r)), r); // a compiler's install: its lib/ and libexec/ beside bin/
  }
  return { ro: [...ro], rw: [join(o.folder, "build"), o.tmp, "/dev/null"] };
}

/**
 * `argv` run through kerncap-confine with `paths` (sandboxPaths): in the namespace tree where
 * `confinement` is `namespace`, under Landlock where the kernel has it.
 */
export function sandboxedArgv(argv: string[], confinement: Confinement, paths: { ro: string[]; rw: string[] }): string[] {
  const s = sandboxSupport();
  if (confinement === "scan" || !s) return argv;
  return [
    s.helper,
    ...(confinement === "namespace" ? ["--hide"] : []),
    ...paths.ro.flatMap((p) => ["--ro", p]),
    ...paths.rw.flatMap((p) => ["--rw", p]),
    "--",
    ...argv,
  ];
}
