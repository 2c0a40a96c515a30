/**
 * The capture libraries kerncap injects, written once into the cache (src/cache.ts: the injected
 * process needs a real file). CUDA: libkerncap_cuda.so, embedded with a file import (every build
 * has it: scripts/build.sh runs scripts/build-c.sh). HSA: libkerncap_hsa.so, embedded by
 * scripts/build.sh as an extra entry point (Bun.embeddedFiles) only when scripts/build-hsa.sh found
 * the ROCm headers; run from the sources, c/build/libkerncap_hsa.so. KERNCAP_CUDA_LIB overrides
 * the CUDA one's path.
 */
import cudaLibFile from "../../c/build/libkerncap_cuda.so" with { type: "file" };
import { cachedFolder } from "../cache.ts";
import { cudaLibOverride } from "../env.ts";
import { KerncapError } from "../errors.ts";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";

/**
 * Real path of the CUDA capture library (libkerncap_cuda.so), extracted on first use.
 * @throws KerncapError E_LIB (not built into this kerncap), E_CACHE (no writable cache folder).
 */
export async function cudaCaptureLibrary(): Promise<string> {
  const own = cudaLibOverride();
  if (own) {
    if (!existsSync(own))
      throw new KerncapError("E_LIB", `KERNCAP_CUDA_LIB names ${own}, which does not exist`, {
        hint: "Point KERNCAP_CUDA_LIB at a built libkerncap_cuda.so (bash scripts/build-c.sh writes c/build/libkerncap_cuda.so), or unset it to use the embedded one.",
      });
    return resolve(own); // the application may run in another folder
  }
  const file = Bun.file(cudaLibFile);
  if (!(await file.exists())) {
    throw new KerncapError("E_LIB", `the embedded capture library is missing (${cudaLibFile})`, {
      hint: "Build it with `bash scripts/build-c.sh` (needs gcc and the CUDA headers), then rebuild kerncap.",
    });
  }
  const bytes = new Uint8Array(await file.arrayBuffer());
  return join(cachedFolder("cuda-lib", [{ path: "libkerncap_cuda.so", bytes, mode: 0o755 }]), "libkerncap_cuda.so");
}

/**
 * Real path of the HSA capture library (libkerncap_hsa.so), extracted on first use.
 * @throws KerncapError E_LIB (this kerncap was built without the ROCm headers), E_CACHE.
 */
export async function hsaCaptureLibrary(): Promise<string> {
  // Bun names an embedded file <stem>-<hash>.<ext>
  const embedded = Bun.embeddedFiles.find((b) => /^libkerncap_hsa(-[a-z0-9]+)?\.so$/.test((b as Blob & { name: string }).name));
  const source = join(import.meta.dir, "../../c/build/libkerncap_hsa.so");
  let bytes: Uint8Array;
  if (embedded) bytes = new Uint8Array(await embedded.arrayBuffer());
  else if (existsSync(source)) bytes = readFileSync(source);
  else {
    throw new KerncapError("E_LIB", "this kerncap has no HSA capture library (it was built without the ROCm headers)", {
      hint: "Install them (bash scripts/install-rocm.sh: Debian's libhsa-runtime-dev) and rebuild kerncap (bash scripts/build.sh).",
    });
  }
  return join(cachedFolder("hsa-lib", [{ path: "libkerncap_hsa.so", bytes, mode: 0o755 }]), "libkerncap_hsa.so");
}
