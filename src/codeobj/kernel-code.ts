/**
 * A kernel's machine code in a module, as one digest (what eval's records carry as
 * build.kernelSha256, and what tune compares to say that flags changed nothing).
 */
import { readFileSync } from "node:fs";
import { pickCubin } from "./fatbin.ts";
import { parseElf } from "./elf.ts";
import type { Manifest } from "../format/manifest.ts";

/**
 * The SHA-256 (hex) of the kernel's machine code in a module (a cubin, or a fatbin's cubin for the
 * captured arch): the bytes of its `.text.<kernel>` section, its register count, and the sizes of
 * its `.nv.info`, `.nv.shared` and `.nv.constant0` sections (what src/frontends/cuda/fast-build.ts
 * sameKernelCode compares). Two modules with one digest run one kernel, whatever else differs
 * between them: nvcc names a TU's internal-linkage symbols after a hash of its path, so two copies
 * of one source (eval's candidates) make modules of different bytes. null where the module has no
 * such section (PTX, an AMD code object) or cannot be read.
 */
export function kernelCodeSha256(path: string, m: Pick<Manifest, "kernel" | "device">): string | null {
  try {
    const elf = parseElf(pickCubin(new Uint8Array(readFileSync(path)), m.device.arch).cubin);
    const name = m.kernel.name;
    const text = elf.section(`.text.${name}`);
    if (!text) return null;
    const h = new Bun.CryptoHasher("sha256").update(elf.sectionBytes(text));
    const sizes = [`.nv.info.${name}`, `.nv.shared.${name}`, `.nv.constant0.${name}`].map((s) => elf.section(s)?.size ?? -1);
    return h.update(JSON.stringify([text.info >>> 24, ...sizes])).digest("hex");
  } catch {
    return null;
  }
}
