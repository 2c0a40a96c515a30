/**
 * The capture libraries embedded in the executable, written once to a content-hashed cache path
 * (the injected process needs a real file; Bun would otherwise leave a copy in the temp folder at
 * every launch). KERNCAP_CUDA_LIB overrides the path.
 */
import { mkdirSync, existsSync, renameSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import cudaLibFile from "../../c/build/libkerncap_cuda.so" with { type: "file" };
import { KerncapError } from "../errors.ts";

/** Cache folder: $KERNCAP_CACHE, else $XDG_CACHE_HOME/kerncap, else ~/.cache/kerncap. */
export function cacheDir(): string {
  if (process.env.KERNCAP_CACHE) return process.env.KERNCAP_CACHE;
  const base = process.env.XDG_CACHE_HOME || join(homedir(), ".cache");
  return join(base, "kerncap");
}

/** Real path of the CUDA capture library (libkerncap_cuda.so), extracted on first use. */
export async function cudaCaptureLibrary(): Promise<string> {
  if (process.env.KERNCAP_CUDA_LIB) return process.env.KERNCAP_CUDA_LIB;
  const file = Bun.file(cudaLibFile);
  if (!(await file.exists())) {
    throw new KerncapError("E_LIB", `the embedded capture library is missing (${cudaLibFile})`, {
      hint: "Build it with `bash scripts/build-c.sh` (needs gcc and the CUDA headers), then rebuild kerncap.",
    });
  }
  const bytes = new Uint8Array(await file.arrayBuffer());
  const hash = new Bun.CryptoHasher("sha256").update(bytes).digest("hex").slice(0, 16);
  const dir = join(cacheDir(), hash);
  const path = join(dir, "libkerncap_cuda.so");
  if (!existsSync(path)) {
    mkdirSync(dir, { recursive: true });
    const tmp = `${path}.tmp-${process.pid}`;
    writeFileSync(tmp, bytes, { mode: 0o755 });
    renameSync(tmp, path);
  }
  return path;
}
