/**
 * The CUDA capture library embedded in the executable, written once into the cache (src/cache.ts:
 * the injected process needs a real file). KERNCAP_CUDA_LIB overrides the path.
 */
import cudaLibFile from "../../c/build/libkerncap_cuda.so" with { type: "file" };
import { cachedFolder } from "../cache.ts";
import { cudaLibOverride } from "../env.ts";
import { KerncapError } from "../errors.ts";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";

/**
 * Real path of the CUDA capture library (libkerncap_cuda.so), extracted on first use.
 * @throws KerncapError E_LIB (not built into this kerncap), E_CACHE (no writable cache folder).
 */
export async function cudaCaptureLibrary(): Promise<string> {
  const own = cudaLibOverride();
  if (own) {
    if (!existsSync(own)) throw new KerncapError("E_LIB", `KERNCAP_CUDA_LIB names ${own}, which does not exist`, { hint: "Point KERNCAP_CUDA_LIB at a built libkerncap_cuda.so (bash scripts/build-c.sh writes c/build/libkerncap_cuda.so), or unset it to use the embedded one." });
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
