/**
 * The sample capture that `kerncap demo` writes: demo/capture/, embedded in the
 * executable file by file. It is the saxpy kernel of demo/app/saxpy.cu, its fatbin built with
 * sm_90 machine code and compute_80 PTX, and its after state computed on the CPU by
 * scripts/make-demo.ts (which regenerates the folder; the manifest's device.name and tool.library
 * say it was not captured on a GPU). With it, inspect, pack/unpack, validate's rebuild and the MCP
 * tools can be tried on any machine; its replay needs a GPU from sm_80 (elsewhere than sm_90 the
 * driver JIT-compiles the PTX).
 */
import { jsonText, listForTerminal } from "../escape.ts";
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { moveIntoPlace } from "./finalize.ts";
import { assertNotNested, assertReplaceable } from "../format/capture-dir.ts";
import { KerncapError } from "../errors.ts";
import { assertOutputPath } from "../format/archive.ts";
import { readManifest, verifyFiles } from "../format/capture-dir.ts";
import type { Manifest } from "../format/manifest.ts";
import { markTemp, tempFor, TEMP_MARKER } from "../leftovers.ts";
import { makePrivateTemp } from "../util/write-file.ts";
import { trustOwnBuild } from "../format/trust.ts";
import { hostIdentity } from "../format/received.ts";
import { sealMadeHere } from "../format/made-here.ts";
import { differingFiles, sourceDigests } from "../format/source-digests.ts";
import { frontendOf } from "../frontends/index.ts";
import { parseManifest } from "../format/manifest.ts";
import { createHash } from "node:crypto";
import { log } from "../log.ts";
import readme from "../../demo/capture/README.md" with { type: "file" };
import buildSh from "../../demo/capture/build.sh" with { type: "file" };
// tsc types a .json import as its content; Bun's `type: "file"` gives its path, as for the others
import manifestFile from "../../demo/capture/kerncap.json" with { type: "file" };
import fatbin from "../../demo/capture/kernel/module.fatbin" with { type: "file" };
import params from "../../demo/capture/kernel/params.bin" with { type: "file" };
import after from "../../demo/capture/memory/after.bin" with { type: "file" };
import before from "../../demo/capture/memory/before.bin" with { type: "file" };
import source from "../../demo/capture/src/saxpy.cu" with { type: "file" };
import slice from "../../demo/capture/src/saxpy.kerncap-slice.cu" with { type: "file" };

const manifest = manifestFile as unknown as string;

/** Every file of the demo capture: its path in the folder, the embedded copy, its mode bits. */
export const DEMO_FILES: { path: string; embedded: string; mode: number }[] = [
  { path: "README.md", embedded: readme, mode: 0o644 },
  { path: "build.sh", embedded: buildSh, mode: 0o755 },
  { path: "kerncap.json", embedded: manifest, mode: 0o644 },
  { path: "kernel/module.fatbin", embedded: fatbin, mode: 0o644 },
  { path: "kernel/params.bin", embedded: params, mode: 0o644 },
  { path: "memory/after.bin", embedded: after, mode: 0o644 },
  { path: "memory/before.bin", embedded: before, mode: 0o644 },
  { path: "src/saxpy.cu", embedded: source, mode: 0o644 },
  { path: "src/saxpy.kerncap-slice.cu", embedded: slice, mode: 0o644 },
];

/**
 * Write the demo capture into `dir` (as `dir.tmp-<pid>`, renamed when complete) and check it as
 * any capture is checked (readManifest, verifyFiles).
 * @returns the folder (absolute) and its manifest.
 * @throws KerncapError E_USAGE (empty name, missing parent), E_EXISTS (dir exists: --force
 *   replaces a previous capture only), E_IO (parent not writable).
 */
/**
 * Before --force replaces a demo folder: name the files of `out` that differ from the demo's own
 * (an edited src/saxpy.cu) and those it does not hold (kerncap-judge.json, notes), build/ aside
 * (a new user's edits went without a word). Log only: --force is the user's word.
 */
function sayWhatForceLoses(out: string): void {
  // the same comparison as inspect's of src/ with what the capture wrote (src/format/source-digests.ts)
  const own = DEMO_FILES.map((f) => ({ path: f.path, sha256: createHash("sha256").update(readFileSync(f.embedded)).digest("hex") }));
  // kerncap's own files are not the user's: the manifest, build/, and the sources kerncap generates (the CUDA slice, remade by validate)
  const m = parseManifest(JSON.parse(readFileSync(manifest, "utf8")));
  const generated = new Set((frontendOf(m).generatedSources?.(m) ?? []).map((g) => `src/${g}`));
  const { edited, added } = differingFiles(out, own, {
    under: "",
    ignore: (p) => p === "kerncap.json" || p.startsWith("build/") || generated.has(p),
  });
  const lost = [...edited.map((p) => `${p} (edited)`), ...added];
  if (lost.length) log.warn(`--force: replacing ${out} loses ${lost.length} file${lost.length === 1 ? "" : "s"} of yours: ${listForTerminal(lost, 10)}`);
}

export function writeDemo(dir: string, force: boolean): { dir: string; manifest: Manifest } {
  if (!dir.trim()) throw new KerncapError("E_USAGE", "the demo's folder name is empty", { hint: "Give a folder to write, e.g. kerncap demo kerncap-demo." });
  const out = resolve(dir);
  if (existsSync(out)) {
    // refused before anything is written; the demo takes its folder as DIR, not -o
    assertReplaceable(out, force, "DIR (kerncap demo writes a new folder there)");
    sayWhatForceLoses(out);
  }
  assertOutputPath(out, "demo capture");
  assertNotNested(out, { output: true });
  // made 0700 and held open: every file goes in through its fd, never by a name another user may swap (src/util/write-file.ts)
  const t = makePrivateTemp(tempFor(out));
  const tmp = t.at;
  try {
    markTemp(tmp);
    for (const f of DEMO_FILES) {
      const p = join(tmp, f.path);
      mkdirSync(dirname(p), { recursive: true, mode: 0o755 });
      writeFileSync(p, readFileSync(f.embedded));
      chmodSync(p, f.mode);
    }
    // this machine's host, as a real capture records it (src/capture/finalize.ts): the user's own demo
    // is made here, not received (the embedded manifest names none: it is made on every machine)
    // its sources as written, as a capture records them (inspect says which the user edits)
    const mf = join(tmp, "kerncap.json");
    writeFileSync(mf, jsonText({ ...JSON.parse(readFileSync(mf, "utf8")), host: hostIdentity(), sources: sourceDigests(tmp) }, 2) + "\n");
    sealMadeHere(tmp); // the user's own, made here (src/format/made-here.ts): the rename below keeps the folder's identity
    rmSync(join(tmp, TEMP_MARKER));
    chmodSync(tmp, 0o755); // no group write whatever the umask: a group-writable capture counts as received (src/format/received.ts)
    moveIntoPlace(t.path, out, force, (dest) => t.placeAt(dest));
    const m = readManifest(out);
    verifyFiles(out, m);
    // a machine without a machine-id counts every capture as received (src/format/received.ts): the
    // build.sh of the demo is this executable's own, so it runs without --trust all the same (read
    // through the fd still open, and recorded only while `out` is still the folder written here)
    trustOwnBuild(out, m, t);
    return { dir: out, manifest: m };
  } catch (e) {
    throw t.unfd(e, out); // no /proc/self/fd path reaches the user
  } finally {
    t.dispose();
  }
}
