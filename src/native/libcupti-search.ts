/**
 * Where libcupti is looked for, for the capture library injected into an application
 * (src/capture/injector.ts) and for the replay's kernel clock (./kernel-timer.ts). CUPTI ships with
 * the CUDA toolkit (extras/CUPTI/lib64, targets/<arch>/lib) and with the nvidia-cuda-cupti Python
 * wheel that PyTorch pulls in. And which NVIDIA tool launched this process (launchingTool): such a
 * tool holds CUPTI in every process it follows.
 */
import { closeSync, existsSync, openSync, readdirSync, readSync, statSync } from "node:fs";
import { join } from "node:path";
import { cuptiOverride } from "../env.ts";
import { KerncapError } from "../errors.ts";

/** Candidate libcupti paths, in search order. */
export function cuptiCandidates(env: Record<string, string | undefined> = process.env, systemRoots = true): string[] {
  const out: string[] = [];
  const homes = [env.CUDA_HOME, env.CUDA_PATH, ...(systemRoots ? ["/usr/local/cuda", ...listCudaDirs()] : [])].filter(Boolean) as string[];
  for (const h of [...new Set(homes)]) {
    out.push(join(h, "extras/CUPTI/lib64/libcupti.so"));
    out.push(join(h, "lib64/libcupti.so"));
    for (const t of safeList(join(h, "targets"))) out.push(join(h, "targets", t, "lib/libcupti.so"));
  }
  for (const sp of systemRoots ? pythonSitePackages() : [])
    out.push(join(sp, "nvidia/cuda_cupti/lib/libcupti.so.13"), join(sp, "nvidia/cuda_cupti/lib/libcupti.so.12"), join(sp, "nvidia/cu13/lib/libcupti.so.13"));
  if (systemRoots) out.push("/usr/lib/x86_64-linux-gnu/libcupti.so");
  return out;
}

function safeList(d: string): string[] {
  try {
    return readdirSync(d);
  } catch {
    return [];
  }
}

function listCudaDirs(): string[] {
  return safeList("/usr/local")
    .filter((n) => n.startsWith("cuda-"))
    .sort()
    .reverse()
    .map((n) => join("/usr/local", n));
}

function pythonSitePackages(): string[] {
  const roots = ["/usr/local/lib", "/usr/lib", "/opt/torch/.venv/lib"];
  const out: string[] = [];
  for (const r of roots)
    for (const py of safeList(r).filter((n) => n.startsWith("python3"))) {
      out.push(join(r, py, "site-packages"), join(r, py, "dist-packages"));
    }
  return out;
}

/** Why `path` cannot be a shared library (a folder, not a regular file, no ELF magic), or undefined. */
function notSharedObject(path: string): string | undefined {
  const st = statSync(path);
  if (st.isDirectory()) return "a folder";
  if (!st.isFile()) return "not a regular file";
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (e) {
    return `unreadable: ${(e as NodeJS.ErrnoException).code ?? String(e)}`;
  }
  try {
    const b = Buffer.alloc(4);
    const n = readSync(fd, b, 0, 4, 0);
    return n === 4 && b[0] === 0x7f && b.toString("latin1", 1, 4) === "ELF" ? undefined : "not an ELF file";
  } finally {
    closeSync(fd);
  }
}

/**
 * The first existing libcupti, versioned names (.so.13, .so.12) accepted beside .so; KERNCAP_CUPTI_PATH alone when set (it must name an ELF file).
 * @throws KerncapError E_NO_CUPTI listing every place searched.
 */
export function findCupti(env: Record<string, string | undefined> = process.env, systemRoots = true): string {
  const own = cuptiOverride(env);
  if (own) {
    // an explicit path is authoritative: a typo must not silently fall back to another CUPTI
    const hint = "Point it at libcupti.so (CUDA toolkit: extras/CUPTI/lib64), or unset it to search the usual places.";
    if (!existsSync(own)) throw new KerncapError("E_NO_CUPTI", `KERNCAP_CUPTI_PATH names a file that does not exist: ${own}`, { hint });
    // a folder or a file that is not an ELF object: the capture library's dlopen would fail inside the application
    const why = notSharedObject(own);
    if (why) throw new KerncapError("E_NO_CUPTI", `KERNCAP_CUPTI_PATH names ${own}, which is not a shared library (${why})`, { hint });
    return own;
  }
  const c = cuptiCandidates(env, systemRoots);
  for (const p of c) {
    for (const q of [p, `${p}.13`, `${p}.12`]) if (existsSync(q)) return q;
  }
  throw new KerncapError("E_NO_CUPTI", `libcupti not found; looked in:\n  ${c.join("\n  ")}`, {
    hint: "Install the CUDA toolkit's CUPTI (cuda-cupti) or set KERNCAP_CUPTI_PATH to libcupti.so.",
  });
}

/**
 * The NVIDIA tool that launched kerncap, from the variables its launcher puts in the environment
 * of every process it follows (seen under `ncu --target-processes all` on the H200, Nsight
 * Compute 2025.3: NV_TPS_LAUNCH_TOKEN, NV_NSIGHT_INJECTION_TRANSPORT_TYPE,
 * NV_COMPUTE_PROFILER_PERFWORKS_DIR), or undefined. Such a tool injects itself into the
 * application through CUDA's tool injection, as kerncap does: the two cannot share one process.
 */
export function launchingTool(env: Record<string, string | undefined> = process.env): string | undefined {
  if (underSanitizer(env)) return "compute-sanitizer";
  if (env.NV_COMPUTE_PROFILER_PERFWORKS_DIR || /compute/i.test(env.NV_TPS_LAUNCH_TOKEN ?? "") || env.NV_TPS_LAUNCH_TOKEN === "Interactive Profile")
    return "Nsight Compute (ncu)";
  if (env.NV_TPS_LAUNCH_TOKEN || env.NV_NSIGHT_INJECTION_TRANSPORT_TYPE) return "an Nsight tool (nsys or ncu)";
  return undefined;
}

/**
 * Whether compute-sanitizer launched this process: its launcher injects into every process it
 * follows through CUDA's tool injection and preloads (CUDA_INJECTION64_PATH / LD_PRELOAD naming a
 * library under compute-sanitizer/ or a libsanitizer-*.so), and sets variables of its own
 * (NV_SANITIZER_*, COMPUTE_SANITIZER_*). Checked first: its launcher is the one Nsight tools use
 * (NV_TPS_LAUNCH_TOKEN), so launchingTool would otherwise name it as an Nsight tool. Not verified
 * on the H200 which of these compute-sanitizer 2025 sets (the GPU test runs kerncap under it).
 */
export function underSanitizer(env: Record<string, string | undefined> = process.env): boolean {
  const names = (v: string | undefined) => /compute-sanitizer|libsanitizer|sanitizer-collection/i.test(v ?? "");
  if (names(env.CUDA_INJECTION64_PATH) || names(env.LD_PRELOAD) || /sanitizer/i.test(env.NV_TPS_LAUNCH_TOKEN ?? "")) return true;
  return Object.keys(env).some((k) => /^(NV_SANITIZER|COMPUTE_SANITIZER|NV_COMPUTE_SANITIZER)/i.test(k));
}
