/**
 * Where kerncap looks for libcuda (KERNCAP_LIBCUDA, else the loader's search for libcuda.so.1)
 * and how a library that does not load is explained: which names were tried and why each failed,
 * which verbs need a GPU. No library is opened here: src/native/libcuda.ts opens it, doctor
 * reports the search (src/doctor.ts).
 */
import { libcudaOverride } from "../env.ts";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { KerncapError } from "../errors.ts";

/**
 * Where libcuda is looked for: KERNCAP_LIBCUDA alone when it is set (explicit means explicit);
 * otherwise, in order, the loader's search path (bare names) and two usual driver folders. A bare name is left out when a file of that name is in the current
 * folder: bun:ffi's dlopen loads it from there (seen by a fresh-user trial: a libcuda.so.1 in the
 * working folder ran its constructor in `kerncap replay`), so the working folder never supplies
 * code to kerncap.
 * @throws KerncapError E_NO_GPU when KERNCAP_LIBCUDA is a path (it has a /) to no file
 */
export function libcudaCandidates(cwd = process.cwd(), environ: Record<string, string | undefined> = process.env): string[] {
  const env = libcudaOverride(environ);
  // an explicit path is authoritative, as KERNCAP_CUPTI_PATH's: a typo must not silently fall back to the usual search
  if (env && env.includes("/") && !existsSync(env)) {
    throw new KerncapError("E_NO_GPU", `KERNCAP_LIBCUDA names a file that does not exist: ${env}`, {
      hint: "Point it at the driver's libcuda.so.1 (e.g. /usr/lib/x86_64-linux-gnu/libcuda.so.1), or unset it to search the usual places.",
    });
  }
  // and the only candidate: a file that does not load (not an ELF, the wrong one) is said, not passed over
  if (env) return [env];
  return [...bareLibraryNames(["libcuda.so.1", "libcuda.so"], cwd, environ), "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so.1"];
}
/**
 * The bare library names that no file of the working folder would shadow: neither in the working
 * folder itself nor in a folder LD_LIBRARY_PATH names by an empty or relative entry (the loader
 * reads those against the working folder: adversary round 70, `LD_LIBRARY_PATH=./lib` loaded a
 * planted lib/libcuda.so.1 in `kerncap doctor` and `replay`). Absolute entries are the user's own
 * statement and stay.
 */
export function bareLibraryNames(names: string[], cwd = process.cwd(), env: Record<string, string | undefined> = process.env): string[] {
  return names.filter((n) => !workingFolders(cwd, env).some((f) => existsSync(join(f, n))));
}

/** The working folder and the folders LD_LIBRARY_PATH names relative to it (its empty and relative entries). */
function workingFolders(cwd: string, env: Record<string, string | undefined>): string[] {
  const relative = (env.LD_LIBRARY_PATH ?? "").split(/[:;]/).filter((e) => !e.startsWith("/"));
  return [cwd, ...relative.map((e) => resolve(cwd, e))];
}
/** dlopen's reason from a loader error, without the library name it repeats (missing file, missing symbol, wrong ELF class). */
export function loaderReason(e: unknown): string {
  const line = String((e as Error)?.message ?? e).split("\n")[0]!;
  const parts = line.split(": ");
  // 'Failed to open library "X": /path/X: cannot open shared object file: No such file or directory'
  const i = parts.findIndex((p) => /^(cannot|undefined symbol|wrong ELF|invalid ELF)/.test(p));
  return (i >= 0 ? parts.slice(i).join(": ") : line).slice(0, 160);
}
/** KERNCAP_LIBCUDA set to a file that does not load (cuda(), probeGpu, doctor say the same). */
export function overrideDoesNotLoad(tried: { name: string; reason: string }[]): KerncapError {
  return new KerncapError("E_NO_GPU", `KERNCAP_LIBCUDA names a library that does not load: ${describeTried(tried)}`, {
    hint: "Point it at the driver's libcuda.so.1 (e.g. /usr/lib/x86_64-linux-gnu/libcuda.so.1), or unset it to search the usual places.",
  });
}
/** The entry point a loader error says the library lacks (bun:ffi: `Symbol "cuX" not found`), or undefined. */
export function missingSymbol(reason: string): string | undefined {
  return /Symbol "([^"]+)" not found/.exec(reason)?.[1] ?? /undefined symbol: (\S+)/.exec(reason)?.[1];
}
/** "a, b, c: reason" when every candidate failed the same way, else "a (reason); b (reason)". */
export function describeTried(tried: { name: string; reason: string }[]): string {
  const reasons = new Set(tried.map((t) => t.reason));
  return reasons.size === 1 ? `${tried.map((t) => t.name).join(", ")}: ${[...reasons][0]}` : tried.map((t) => `${t.name} (${t.reason})`).join("; ");
}
/**
 * The verbs that need an NVIDIA GPU and its driver: capture, replay, Nsight; validate and tune for
 * their replays only (they build without one). Every verb of src/cli/verbs.ts is in this list or
 * in NO_GPU_VERBS (test/cpu/cli.test.ts), and docs/install.md gives both.
 */
export const GPU_VERBS = ["run", "list", "replay", "check", "eval", "profile", "validate", "tune"] as const;
/** The verbs that work on a machine without a GPU (doctor reports the missing driver; mcp's validate and replay tools still need one). */
export const NO_GPU_VERBS = ["inspect", "pack", "unpack", "export", "judge", "clean", "schema", "demo", "doctor", "completion", "mcp"] as const;
/** "a, b and c" */
function joined(words: readonly string[]): string {
  return words.length > 1 ? `${words.slice(0, -1).join(", ")} and ${words[words.length - 1]}` : words.join("");
}
/**
 * What works on a machine without a GPU: the one list that the E_NO_GPU hint (noDriverError) and
 * doctor's fix of a failed libcuda or GPU check give (NO_GPU_VERBS, then what validate and tune do
 * without one).
 */
export const WITHOUT_GPU = `kerncap demo (a sample capture to try the verbs on), ${joined(NO_GPU_VERBS.filter((v) => v !== "demo"))} work without a GPU; validate still rebuilds the edited source (a build error is reported first; validate --build-only rebuilds alone, with --watch at each save, and exits 0 when the kernel compiles), tune and eval still build every config and candidate (then E_NO_GPU; with --build-only they judge none and exit 0), and check --rebuild --build-only builds every capture`;
/** What needs the GPU (GPU_VERBS): the one sentence the E_NO_GPU hints and doctor's fix give, before WITHOUT_GPU. */
export const NEEDS_GPU = `kerncap ${GPU_VERBS.filter((v) => v !== "validate" && v !== "tune").join(", ")}, and the replays of validate and tune need an NVIDIA GPU and its driver (or KERNCAP_LIBCUDA set to libcuda.so.1's path)`;
/**
 * The one hint of every E_NO_GPU: short (nu12 #14: the whole lists, NEEDS_GPU and WITHOUT_GPU, in
 * every record of a CI log drowned the signal); `kerncap doctor`'s fix gives them whole.
 */
export const NO_GPU_HINT =
  "Run it on a machine with an NVIDIA GPU and its driver (or set KERNCAP_LIBCUDA to libcuda.so.1's path); builds run without one (validate --build-only, tune --build-only, eval --build-only, check --rebuild --build-only), and kerncap doctor lists what works here.";
/** E_NO_GPU for a machine without the NVIDIA driver (no libcuda among `tried`), with NO_GPU_HINT. */
export function noDriverError(tried: { name: string; reason: string }[]): KerncapError {
  return new KerncapError("E_NO_GPU", `no NVIDIA driver: libcuda could not be loaded; tried ${describeLibcudaSearch(tried)}`, { hint: NO_GPU_HINT });
}
/**
 * What the usual libcuda search (libcudaCandidates without KERNCAP_LIBCUDA) tried, for its failure
 * message: describeTried, then the bare names it left out because a file of that name is in the
 * working folder or a folder LD_LIBRARY_PATH names relative to it (bareLibraryNames), which would otherwise vanish from the list unexplained.
 */
export function describeLibcudaSearch(tried: { name: string; reason: string }[], cwd = process.cwd()): string {
  const shadowed = ["libcuda.so.1", "libcuda.so"].filter((n) => !bareLibraryNames([n], cwd).length);
  const text = describeTried(tried);
  return shadowed.length
    ? `${text}; not tried: ${shadowed.join(", ")} (a file of that name in the working folder, or in a folder LD_LIBRARY_PATH names relative to it, would be loaded instead: kerncap never loads code from there)`
    : text;
}

/**
 * Whether this machine looks like it has an NVIDIA driver, by files alone (nothing is loaded):
 * KERNCAP_LIBCUDA names a file, a usual driver path exists, an absolute LD_LIBRARY_PATH folder
 * holds libcuda.so.1, or the loader's cache (/etc/ld.so.cache) names it. For what a long-lived
 * process says up front (kerncap mcp's instructions); doctor and the verbs load the library to know.
 */
export function driverLikelyPresent(env: Record<string, string | undefined> = process.env, cache = "/etc/ld.so.cache"): boolean {
  const own = libcudaOverride(env);
  if (own) return !own.includes("/") || existsSync(own);
  const folders = (env.LD_LIBRARY_PATH ?? "").split(/[:;]/).filter((e) => e.startsWith("/"));
  if (
    ["/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so.1", ...folders.map((f) => join(f, "libcuda.so.1"))].some((p) =>
      existsSync(p),
    )
  )
    return true;
  try {
    return readFileSync(cache).includes("libcuda.so.1");
  } catch {
    return false;
  }
}
