/**
 * kerncap next to other CUDA tools and the application's own profiler: the injection environment
 * (CUDA_INJECTION64_PATH, LD_PRELOAD) and what to tell the user from the censuses' CUPTI reports
 * (c/cuda/kc_cupti.h writes them).
 *
 * What is caught: another tool that set CUDA_INJECTION64_PATH before kerncap (nsys, ncu and
 * compute-sanitizer inject that way) — kerncap replaces it for the application, and says so;
 * every cuptiSubscribe/cuptiSubscribe_v2 the application makes through the dynamic linker (the
 * library is on LD_PRELOAD, so its wrappers run first): refused while kerncap held CUPTI, or
 * handed over because kerncap's capture was done. Not caught: a libcupti linked statically into
 * the application, calls made through dlsym on a libcupti handle, processes where LD_PRELOAD is
 * ignored (setuid programs, static executables). KERNCAP_NO_PRELOAD=1 leaves LD_PRELOAD alone
 * (then only the hand-back after the capture helps a later profiler, and refusals go unreported).
 */
import { basename } from "node:path";
import { preloadDisabled } from "../env.ts";
import type { Census } from "./census.ts";
import { processLabel } from "./census.ts";

/** CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (cupti_result.h). */
export const CUPTI_MULTIPLE_SUBSCRIBERS = 39;

/** Which NVIDIA tool an injection library path belongs to, as far as its path tells; undefined when unknown. */
export function toolOfInjection(path: string): string | undefined {
  const p = path.toLowerCase();
  if (p.includes("nsight-compute") || p.includes("nsight_compute") || p.includes("/ncu") || p.includes("interceptorinjection")) return "Nsight Compute (ncu)";
  if (p.includes("nsight-systems") || p.includes("nsight_systems") || p.includes("toolsinjection") || p.includes("/nsys")) return "Nsight Systems (nsys)";
  if (p.includes("sanitizer")) return "compute-sanitizer";
  if (p.includes("kerncap")) return "kerncap";
  return undefined;
}

export interface InjectionEnv {
  env: Record<string, string>;
  /** Lines to show the user (a tool's injection that kerncap replaces). */
  warnings: string[];
}

// which tool launched kerncap: in src/native/ beside the CUPTI search, since the replay's kernel clock asks too
export { launchingTool, underSanitizer } from "../native/libcupti-search.ts";

const SANITIZER_TOOLS = new Set(["compute-sanitizer", "cuda-memcheck"]);
/** Commands that run the rest of their command line (options and VAR=value words skipped). */
const WRAPPERS = new Set(["env", "nohup", "time", "nice", "ionice", "stdbuf", "setarch", "chrt", "srun", "mpirun", "mpiexec", "exec"]);
const SHELLS = new Set(["sh", "bash", "dash", "zsh", "ksh"]);

/**
 * The CUDA tool an application command line starts (compute-sanitizer, cuda-memcheck), or
 * undefined: `kerncap run -- compute-sanitizer APP`, also behind wrappers (`env X=1 …`, `srun …`,
 * `nohup …`) and in a shell's `-c` string (`bash -c "compute-sanitizer ./app"`: any command word
 * of it). An argument that merely mentions the tool (`python3 compute-sanitizer.py`) is not it.
 */
export function toolAsApp(argv: string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (i > 0 && (a.startsWith("-") || /^[A-Za-z_][A-Za-z0-9_]*=/.test(a))) continue; // a wrapper's option or VAR=value
    const exe = basename(a);
    if (SANITIZER_TOOLS.has(exe)) return exe;
    if (SHELLS.has(exe)) {
      const c = argv.findIndex((x, j) => j > i && /^-[a-z]*c[a-z]*$/.test(x));
      const script = c > 0 ? argv[c + 1] : undefined;
      if (!script) return undefined;
      // command words: the first word of the string and of each part after ; & | ( or a newline
      for (const part of script.split(/[;&|()\n`]+/)) {
        const words = part
          .trim()
          .split(/\s+/)
          .filter((w) => !/^[A-Za-z_][A-Za-z0-9_]*=/.test(w));
        let k = 0;
        while (k < words.length && WRAPPERS.has(basename(words[k]!))) {
          k++;
          while (k < words.length && words[k]!.startsWith("-")) k++;
        }
        const w = words[k] ? basename(words[k]!) : "";
        if (SANITIZER_TOOLS.has(w)) return w;
      }
      return undefined;
    }
    if (!WRAPPERS.has(exe)) return undefined; // the application itself
  }
  return undefined;
}

/**
 * The process of the application whose capture library found CUPTI held by another tool, from
 * its census error (c/cuda/kc_cupti.h kc_cupti_busy_message: "CUPTI is already held by …"). Seen on
 * the H200 (compute-sanitizer 2025, CUDA 13.0): `kerncap run -- bash run.sh` where run.sh execs
 * compute-sanitizer; the sanitizer's own process leaves no census (the preloaded library never
 * wrote one there), the application's process reports CUPTI taken. Undefined when none.
 */
export function cuptiHeldBy(c: Census): Census["processes"][number] | undefined {
  return c.processes.find((p) => p.errors.some((e) => e.includes("CUPTI is already held")));
}

/** What to do instead of running kerncap and compute-sanitizer on one application: check the replay. */
export const SANITIZER_WAY_OUT =
  "Capture without compute-sanitizer, then run it on the replay: `compute-sanitizer --tool memcheck kerncap replay DIR` (kerncap replay needs no CUPTI; a capture that faulted prints that command).";

/**
 * The variables that inject the CUDA capture library `lib` into the application: CUDA_INJECTION64_PATH,
 * and LD_PRELOAD with lib first (kept: whatever was already there, e.g. a tool's own preload).
 */
export function injectionEnv(lib: string, env: Record<string, string | undefined> = process.env): InjectionEnv {
  const warnings: string[] = [];
  const prev = env.CUDA_INJECTION64_PATH;
  if (prev && prev !== lib) {
    const tool = toolOfInjection(prev);
    warnings.push(
      `CUDA_INJECTION64_PATH was already set (${prev}${tool ? `: ${tool}` : ""}); kerncap replaces it for the application, so that tool does not see the application's CUDA work. ` +
        `Run the tool on the replay instead (e.g. \`ncu kerncap replay DIR\`, \`nsys profile kerncap replay DIR\`, \`compute-sanitizer kerncap replay DIR\`).`,
    );
  }
  const out: Record<string, string> = { CUDA_INJECTION64_PATH: lib };
  if (!preloadDisabled(env)) {
    const pre = (env.LD_PRELOAD ?? "").split(/[ :]/).filter((x) => x && x !== lib);
    out.LD_PRELOAD = [lib, ...pre].join(":");
  }
  return { env: out, warnings };
}

/**
 * What the user must hear about CUPTI sharing, one line each: the application's CUPTI requests
 * that were refused while kerncap held CUPTI (which call, which library, which process, the
 * consequence, the way out), and those kerncap handed over after its capture.
 */
export function cuptiNotes(c: Census): { warnings: string[]; infos: string[] } {
  const warnings: string[] = [];
  const infos: string[] = [];
  for (const p of c.processes) {
    for (const a of p.cupti?.appCalls ?? []) {
      const who = `${processLabel(p.process)}: the application's ${a.call} (from ${basename(a.caller) || "an unknown library"}, ${a.tS.toFixed(2)} s after CUDA initialized)`;
      if (a.result === CUPTI_MULTIPLE_SUBSCRIBERS && a.kerncapHeld) {
        warnings.push(
          `${who} was refused because kerncap held CUPTI: the application's profiler (torch.profiler/Kineto or another CUPTI client) recorded no CUDA activity in that process. ` +
            `Start the profiler after the captured launch (kerncap hands CUPTI back once the capture is written), or capture a run without the profiler.`,
        );
      } else if (a.handedBack) {
        infos.push(
          `${who}: kerncap had finished (${p.cupti?.releasedWhy ?? "capture done"}) and handed CUPTI over; the application's profiler works from there on`,
        );
      } else if (a.result !== 0 && a.result !== -1) {
        warnings.push(`${who} failed with CUptiResult ${a.result} (kerncap did not hold CUPTI then)`);
      }
    }
  }
  return { warnings, infos };
}
