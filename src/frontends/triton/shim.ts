/**
 * The Triton side of `kerncap run`: the Python shim (sitecustomize.py, embedded in the executable
 * and written once to a content-hashed cache folder) put first on the application's PYTHONPATH,
 * and, after the capture, the join of its records with the captured cubin (manifest.source,
 * kernel.frontend = "triton", the reproducer project).
 */
import { existsSync, readFileSync, rmSync } from "node:fs";
import { delimiter, join } from "node:path";
import shimFile from "./sitecustomize.py" with { type: "file" };
import { cachedFolder } from "../../cache.ts";
import { tritonKeepCaches, tritonShimEnabled, tritonShimOverride } from "./env.ts";
import { sha256File } from "../../format/capture-dir.ts";
import { log } from "../../log.ts";
import type { Enrichment, RawLaunch } from "../frontend.ts";
import { renderTritonReproducer } from "./repro.ts";
import { joinTriton, parseTritonJsonl, type TritonSource } from "./join.ts";

/** The shim's records (compiles and launches, one JSON object a line), in the capture library's output folder. */
export const TRITON_RECORDS = "triton.jsonl";
/**
 * The shim's copies of the kernels' source files (sitecustomize.py: triton-src/<sha16>-<name>), in
 * the same folder: the reproducer copies the captured kernel's into src/original/, and the folder
 * goes before the rename (a capture holds no folder but src/, kernel/, memory/, profile/,
 * processes/: pack refused every Triton capture that kept it).
 */
export const TRITON_SOURCE_COPIES = "triton-src";

/** Folder holding sitecustomize.py (KERNCAP_TRITON_SHIM overrides it). */
export async function tritonShimDir(): Promise<string> {
  const own = tritonShimOverride();
  if (own) return own;
  const bytes = new Uint8Array(await Bun.file(shimFile).arrayBuffer());
  return cachedFolder("triton-shim", [{ path: "sitecustomize.py", bytes, mode: 0o644 }]);
}

/** PYTHONPATH with the shim first; the app's own entries (and its sitecustomize, chained) after. */
export function shimPythonPath(shimDir: string, existing: string | undefined): string {
  return [shimDir, ...(existing ? existing.split(delimiter).filter((p) => p !== shimDir) : [])].join(delimiter);
}

/** Environment for the application: the shim on PYTHONPATH (KERNCAP_OUT is set by the capture session). */
export async function tritonEnv(): Promise<Record<string, string>> {
  if (!tritonShimEnabled()) return {};
  return {
    PYTHONPATH: shimPythonPath(await tritonShimDir(), process.env.PYTHONPATH),
    // Inductor compiles Triton kernels in worker processes and serves them from its own caches,
    // where no Triton hook fires; compiling in-process and uncached lets the shim see every kernel.
    // This changes compile time only, never what the kernels compute. KERNCAP_TRITON_CACHES=1 keeps them.
    ...(tritonKeepCaches() ? {} : { TORCHINDUCTOR_COMPILE_THREADS: "1", TORCHINDUCTOR_FORCE_DISABLE_CACHES: "1" }),
  };
}

/**
 * After a capture: when the captured module is a cubin that the shim saw Triton compile, mark the
 * raw capture as Triton and return the finalize options that store manifest.source and render the
 * reproducer. Returns {} for other kernels. Never throws for a missing or partial triton.jsonl.
 */
export function tritonFinalize(
  tmpDir: string,
  raw: Pick<RawLaunch, "frontend" | "module" | "launch" | "device"> & { kernel: Omit<RawLaunch["kernel"], "demangled"> },
  pattern: string,
  command: string[],
): Enrichment {
  const jsonl = join(tmpDir, TRITON_RECORDS);
  const copies = join(tmpDir, TRITON_SOURCE_COPIES);
  const dropCopies = () => rmSync(copies, { recursive: true, force: true });
  const notTriton = () => (dropCopies(), {});
  if (!existsSync(jsonl) || !raw.module || raw.module.kind !== "cubin") return notTriton();
  let source: TritonSource | undefined;
  try {
    const records = parseTritonJsonl(readFileSync(jsonl, "utf8"));
    source = joinTriton(
      records,
      sha256File(join(tmpDir, raw.module.file)),
      raw.kernel.name,
      pattern,
      raw.kernel.match_index,
      raw.kernel.counts_benchmarks ?? true,
    );
  } catch (e) {
    log.warn(`Triton metadata not joined: ${(e as Error).message}`);
    return notTriton();
  }
  if (!source) {
    log.debug("no Triton compile record has the captured cubin's hash: not a Triton kernel");
    return notTriton();
  }
  raw.frontend = "triton";
  if (source.launch.kind === "autotune-benchmark") {
    log.warn(
      `the captured launch is an autotuner benchmark launch (config timing), not the application's own call; ${source.launch.appLaunchesBefore} app launches came before it`,
    );
  }
  const s = source;
  return {
    source: s as unknown as Record<string, unknown>,
    beforeRename: (dir, _m, finalDir) => {
      try {
        const r = renderTritonReproducer({
          outDir: dir,
          source: s,
          sourceCopies: copies,
          command,
          match: pattern,
          matchIndex: raw.kernel.match_index,
          device: `${raw.device.name} (${raw.device.arch})`,
          sharedMemBytes: raw.launch.shared_mem_bytes,
        });
        log.debug(`Triton reproducer: ${r.files.join(", ")}`);
      } catch (e) {
        log.warn(`no Triton reproducer: ${(e as Error).message.split(dir).join(finalDir)}`);
      } finally {
        dropCopies();
      }
    },
  };
}
