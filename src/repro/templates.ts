/**
 * Reproducer templates (templates/<frontend>/), embedded in the executable as text. In a source
 * checkout the folder itself is used; inside the compiled binary the embedded copies are written
 * once to a content-hashed folder of the cache (with their mode bits), so the renderers can walk a
 * real folder either way.
 */
import { chmodSync, existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { cacheDir } from "../capture/lib.ts";
import cudaBuild from "../../templates/cuda/build.sh.hbs" with { type: "text" };
import cudaReadme from "../../templates/cuda/README.md.hbs" with { type: "text" };
import hipBuild from "../../templates/hip/build.sh.hbs" with { type: "text" };
import hipReadme from "../../templates/hip/README.md.hbs" with { type: "text" };
import tritonBuild from "../../templates/triton/build.sh.hbs" with { type: "text" };
import tritonReadme from "../../templates/triton/README.md.hbs" with { type: "text" };
import tritonRepro from "../../templates/triton/repro.py" with { type: "text" };

/** Every template file: path under templates/, text, mode bits. */
export const EMBEDDED_TEMPLATES: { path: string; text: string; mode: number }[] = [
  { path: "cuda/build.sh.hbs", text: cudaBuild, mode: 0o755 },
  { path: "cuda/README.md.hbs", text: cudaReadme, mode: 0o644 },
  { path: "hip/build.sh.hbs", text: hipBuild, mode: 0o755 },
  { path: "hip/README.md.hbs", text: hipReadme, mode: 0o644 },
  { path: "triton/build.sh.hbs", text: tritonBuild, mode: 0o755 },
  { path: "triton/README.md.hbs", text: tritonReadme, mode: 0o644 },
  { path: "triton/repro.py", text: tritonRepro, mode: 0o755 },
];

let root: string | undefined;

/** Folder holding cuda/, hip/, triton/ templates: the checkout's templates/ or the cache copy. */
export function templateRoot(): string {
  if (root) return root;
  const checkout = resolve(import.meta.dir, "../../templates");
  if (existsSync(join(checkout, "cuda"))) return (root = checkout);
  const h = new Bun.CryptoHasher("sha256");
  for (const t of EMBEDDED_TEMPLATES) h.update(`${t.path}\0${t.mode}\0${t.text}\0`);
  const dir = join(cacheDir(), `templates-${h.digest("hex").slice(0, 16)}`);
  if (!existsSync(dir)) {
    const tmp = `${dir}.tmp-${process.pid}`;
    rmSync(tmp, { recursive: true, force: true });
    for (const t of EMBEDDED_TEMPLATES) {
      const p = join(tmp, t.path);
      mkdirSync(dirname(p), { recursive: true });
      writeFileSync(p, t.text);
      chmodSync(p, t.mode);
    }
    try {
      renameSync(tmp, dir);
    } catch {
      rmSync(tmp, { recursive: true, force: true }); // another kerncap won the race
    }
  }
  return (root = dir);
}
