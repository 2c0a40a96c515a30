/**
 * The nvcc kerncap runs (findNvcc) and nvcc's dependency listing of a TU with a command's flags
 * (dependencyArgv, parseDeps): shared by the locator, the reproducer, the includers' search and
 * the confined build.
 */
import { existsSync } from "node:fs";
import { KerncapError } from "../../errors.ts";
import { type CudaFlags, flagArgv } from "./flags.ts";

/** Path of the nvcc that will compile ($NVCC, /usr/local/cuda/bin/nvcc, /usr/local/bin/nvcc, PATH; its toolkit root is two levels up). */
export function findNvcc(): string {
  const p = [process.env.NVCC, "/usr/local/cuda/bin/nvcc", "/usr/local/bin/nvcc", Bun.which("nvcc")].find((x): x is string => !!x && existsSync(x));
  if (!p) throw new KerncapError("E_NO_NVCC", "nvcc not found", { hint: "Install the CUDA toolkit or set NVCC to its nvcc." });
  return p;
}

/** `nvcc -M` of a TU with these flags, device pass for the arch (sm_90): make-style output on stdout. */
export function dependencyArgv(nvcc: string, tu: string, flags: CudaFlags, arch: string): string[] {
  return [nvcc, "-M", "-x", "cu", `-arch=${arch}`, ...flagArgv(flags), tu];
}

/** Parse make-style dependency output (`target: a b \` …) into paths. */
export function parseDeps(text: string): string[] {
  const body = text.replace(/\\\r?\n/g, " ");
  const out: string[] = [];
  for (const line of body.split("\n")) {
    const colon = line.search(/:(\s|$)/);
    if (colon < 0) continue;
    const rest = line.slice(colon + 1);
    let cur = "";
    for (let i = 0; i < rest.length; i++) {
      const c = rest[i]!;
      if (c === "\\" && rest[i + 1] === " ") {
        cur += " ";
        i++;
      } else if (/\s/.test(c)) {
        if (cur) out.push(cur);
        cur = "";
      } else cur += c;
    }
    if (cur) out.push(cur);
  }
  return [...new Set(out)];
}
