/**
 * `kerncap replay DIR --against OTHER`: what the other kernel is. OTHER is either another capture
 * folder of the same launch's memory (the same kernel from another build of the application, or
 * another launch configuration of it: its module, launch configuration and parameter bytes are
 * launched on DIR's memory) or a module image (a reproducer build's cubin: launched with DIR's
 * launch configuration, the kernel looked up by DIR's captured name).
 */
import { existsSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { describeModule } from "../codeobj/index.ts";
import { isOffloadBundle } from "../codeobj/amdgpu.ts";
import { isElf } from "../codeobj/elf.ts";
import { isFatbin } from "../codeobj/fatbin.ts";
import { isKerncapError, KerncapError } from "../errors.ts";
import { readManifest, verifyFiles } from "../format/capture-dir.ts";
import type { Manifest } from "../format/manifest.ts";
import { capturePath, readCaptureBytes, readInputBytes } from "../format/paths.ts";
import type { RunOptions } from "./engine.ts";

export interface AgainstKernel {
  /** "capture" (a folder) or "module" (a file), and its absolute path. */
  kind: "capture" | "module";
  path: string;
  /** What RunOptions the other kernel runs with: its module, its kernel name, its launch (a capture's). */
  run: Pick<RunOptions, "modulePath" | "kernelName" | "launch">;
}

/**
 * Resolve --against OTHER for the capture `m` (of DIR).
 * @throws KerncapError E_USAGE (no such file), E_AGAINST (a capture of other memory: another
 *   region count, VA or size; another device architecture), OTHER's E_MANIFEST / E_CHECKSUM
 */
export function againstKernel(m: Manifest, other: string): AgainstKernel {
  const path = resolve(other);
  if (!existsSync(path))
    throw new KerncapError("E_USAGE", `--against ${path}: no such file or folder`, {
      hint: "Give another capture folder of the same launch, or a module (cubin) built from this capture's reproducer.",
    });
  if (!statSync(path).isDirectory()) {
    checkModuleFile(path, "--against");
    return { kind: "module", path, run: { modulePath: path, kernelName: m.kernel.name } };
  }
  const o = readManifest(path); // its own messages for a folder that is no capture (interrupted, a capture set)
  verifyFiles(path, o);
  const why = otherMemory(m, o);
  if (why) {
    throw new KerncapError("E_AGAINST", `${path} is not a capture of the same memory: ${why}`, {
      hint: "The other kernel runs on this capture's memory: give a capture of the same launch (the same allocations, e.g. the app rebuilt with other flags), or a module built from this capture's reproducer.",
    });
  }
  // OTHER's files by the capture path rule, as the replay opens DIR's (src/format/paths.ts)
  const params = new Uint8Array(readCaptureBytes(path, o.params.file, o.params.size));
  return {
    kind: "capture",
    path,
    run: {
      modulePath: capturePath(path, o.module.file),
      kernelName: o.kernel.name,
      launch: { launch: o.launch, functionAttributes: o.functionAttributes, params },
    },
  };
}

/** Why capture `o`'s launch cannot run on capture `m`'s memory, or undefined when it can (same device architecture, same regions: VA and size). */
export function otherMemory(m: Manifest, o: Manifest): string | undefined {
  if (o.device.vendor !== m.device.vendor || o.device.arch !== m.device.arch)
    return `captured on ${o.device.name} ${o.device.arch}, this one on ${m.device.name} ${m.device.arch}`;
  if (o.regions.length !== m.regions.length) return `${o.regions.length} regions, this capture has ${m.regions.length}`;
  for (const [i, r] of o.regions.entries()) {
    const mine = m.regions[i]!;
    if (BigInt(r.va) !== BigInt(mine.va) || r.size !== mine.size) return `region ${i} is ${r.size} bytes at ${r.va}, here ${mine.size} bytes at ${mine.va}`;
  }
  return undefined;
}

/** The most bytes of a module file given by --module or --against (a fatbin of every architecture of a large library stays far under it). */
const MODULE_MAX_BYTES = 1 << 30;

/**
 * Refuse a file given as a module (--module, --against) that is no module image, on the CPU before
 * any GPU work: an ELF (cubin, AMDGPU), a fatbin, a clang offload bundle or PTX text
 * (src/codeobj/index.ts describeModule).
 * @throws KerncapError E_MODULE_KIND (PTX: the reader's errors) naming the option and the file
 */
export function checkModuleFile(path: string, option: string): void {
  // a regular file of at most MODULE_MAX_BYTES, never a FIFO or a device, through no link another user planted (adversary 85 #07: a FIFO
  // hung the replay, /dev/zero was read until memory ran out, and another user's link to a private file had its first bytes quoted)
  const bytes = new Uint8Array(readInputBytes(path, `${option} module`, "E_MODULE_KIND", { maxBytes: MODULE_MAX_BYTES, followLink: true }));
  // an ELF, a fatbin or a clang offload bundle (hipcc's) is a module kind: whether it is well formed is the load's to say
  if (isElf(bytes) || isFatbin(bytes) || isOffloadBundle(bytes)) return;
  try {
    describeModule(bytes); // PTX text, or E_MODULE_KIND
  } catch (e) {
    if (!isKerncapError(e)) throw e;
    throw new KerncapError(e.code, `${option} ${path}: ${e.message}`, {
      hint: `Give a module a reproducer's build wrote (build.sh prints its path last)${option === "--against" ? ", or another capture folder of the same launch" : ""}; ${e.hint ?? ""}`.replace(
        /; $/,
        ".",
      ),
    });
  }
}
