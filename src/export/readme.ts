/**
 * What `kerncap export` says of what it ships, and its README's context (templates/export/README.md.hbs):
 * the files it leaves out, the sources that differ from what built the captured module, why the
 * reproducer may not rebuild elsewhere (as pack says it), how the captured module was built.
 */
import { cubinToolVersion } from "../codeobj/cubin.ts";
import { pickCubin } from "../codeobj/fatbin.ts";
import { escapeForTerminal } from "../escape.ts";
import type { Manifest } from "../format/manifest.ts";
import { portabilityWarnings } from "../format/pack.ts";
import { redactManifest } from "../format/redact.ts";
import { sourcesChanged, sourceChangeText, type SourceChange } from "../frontends/source-changes.ts";
import { log } from "../log.ts";
import { describeJudging } from "../replay/judge-settings.ts";
import { leftOutLine } from "../util/format.ts";
import type { ExportResult } from "./export.ts";
import type { ExportFiles, ExportPlan } from "./plan.ts";

/**
 * Warn of what the export ships that its user may not expect, each in one line: the files left out
 * (editor temporaries, backups, hidden names under src/), the src/ files that differ from what the
 * capture wrote (sourcesChanged), why the reproducer may not rebuild elsewhere (pack's
 * portabilityWarnings: absolute paths in build.sh, overlay mode).
 * @returns the changed sources ({path: "src/x.cu", change: "edited"}) and the portability warnings
 */
export function sayWhatShips(capDir: string, m: Manifest, leftOut: readonly string[]): { changedSources: SourceChange[]; warnings: string[] } {
  if (leftOut.length) log.warn(leftOutLine(leftOut));
  const changedSources = sourcesChanged(capDir, m, leftOut);
  if (changedSources.length) {
    const named = changedSources.slice(0, 8).map((f) => escapeForTerminal(sourceChangeText(f), { oneLine: true }));
    log.warn(
      `src/ differs from the source the captured module was built from: ${named.join(", ")}${changedSources.length > 8 ? ", …" : ""}; the export ships it as it is now (its README.md says so: make run-src builds the edited source, ./repro runs the captured module)`,
    );
  }
  // what pack says of the same capture: the export is the copy that goes to someone else
  const warnings = portabilityWarnings(capDir, m);
  for (const w of warnings) log.warn(`the reproducer may not rebuild elsewhere: ${escapeForTerminal(w, { oneLine: true })}`);
  return { changedSources, warnings };
}

/** The context of the export's README.md (templates/export/README.md.hbs): the launch, the files, the judging. */
export function readmeContext(
  m: Manifest,
  p: ExportPlan,
  f: ExportFiles,
  editable: string | null,
  commands: ExportResult["commands"],
  t: { storedPointer: { region: string; offset: number; va: string } | null } | null,
  data: ExportResult["data"],
  judging: ExportResult["judging"],
): Record<string, unknown> {
  return {
    // manifest text, raw: the template puts each through its Markdown escape (mdCode, mdText: src/frontends/templates.ts)
    kernel: p.demangled,
    mangled: p.kernel,
    // where it came from: a GPU's launch, or kerncap demo's capture made on the CPU (driver 0, as inspect tells them)
    origin:
      m.device.driverVersion === 0 ? `made by kerncap demo without a GPU (for ${m.device.arch})` : `captured by kerncap on ${m.device.name} (${m.device.arch})`,
    arch: m.device.arch,
    hsa: Boolean(p.hsa),
    frontend: m.kernel.frontend,
    grid: p.grid.join(", "),
    block: p.block.join(", "),
    sharedMem: p.sharedMemBytes,
    regions: p.regions.length,
    globals: p.globals.length,
    chunkBytes: p.chunkBytes,
    module: f.module,
    moduleKind: m.module.kind,
    sass: p.sass.join(", ") || "none",
    ptx: p.ptx,
    ptxFile: f.ptx,
    before: f.before,
    after: f.after,
    params: f.params,
    paramsBytes: p.paramsBytes,
    liveBytes: m.memory.beforeBytes,
    storedBefore: m.memory.storedBeforeBytes,
    storedAfter: m.memory.storedAfterBytes,
    editable: editable ?? "",
    runSource: commands.runSource ?? "",
    triton: Boolean(t),
    storedPointer: t?.storedPointer ? `${t.storedPointer.va} at offset ${t.storedPointer.offset} of region ${t.storedPointer.region}` : "",
    tolerance: p.tolerance.atol || p.tolerance.rtol ? `within atol ${p.tolerance.atol}, rtol ${p.tolerance.rtol} (float elements)` : "bit for bit",
    // the judging settings: where they came from, the multiset regions, what the programs cannot apply
    judgingFrom: judging.fromCapture.length ? `the capture's judging settings (kerncap judge): ${describeJudging(judging.settings)}` : "",
    judgingIgnored: judging.ignored ?? "",
    multisets: p.regions
      .filter((r) => r.multiset)
      .map((r) => `0x${r.va.toString(16)} (${r.dtype})`)
      .join(", "),
    notApplied: judging.notApplied.join(" "),
    dataShared: data.some((d) => d.shared === "reflink") ? "reflinked (copy-on-write clones of the capture's files)" : "copied",
    // data/'s own settings file (written when the programs judge with any setting): the same judging for `kerncap replay data`
    judgeFile: data.some((d) => d.path === "data/kerncap-judge.json") ? describeJudging(judging.settings) : "",
  };
}

/**
 * The export README's toolchain facts (raw manifest text: the template escapes it): the GPU and
 * its driver's CUDA version (cuDriverGetVersion), the tool that assembled the captured module's
 * machine code for the captured architecture (.note.nv.tkinfo: ptxas and its release), how the
 * module was loaded (module.source), the CUDA frontend's compile flags, where they came from, and
 * what was not recovered when they were assumed (the capture README's "Assumed flags" warning).
 */
export function toolchainContext(m: Manifest, image: Uint8Array): Record<string, unknown> {
  const drv = m.device.driverVersion;
  let assembler = "";
  if (m.device.vendor === "nvidia" && m.module.kind !== "ptx") {
    try {
      assembler = cubinToolVersion(pickCubin(image, m.device.arch).cubin) ?? "";
    } catch {
      assembler = ""; // no cubin for the captured architecture (PTX only): nothing assembled it
    }
  }
  // as data/kerncap.json holds them: the project's root in an -I path redacted (src/format/redact.ts)
  const cuda = (redactManifest({ source: m.source }).json.source as { cuda?: Record<string, unknown> } | undefined)?.cuda;
  const words = (x: unknown) => (Array.isArray(x) ? x.filter((w): w is string => typeof w === "string") : []);
  const flags = words(cuda?.flags);
  const assumed = words(cuda?.assumedFlags).length > 0;
  return {
    gpu: `${m.device.name} (${m.device.arch})`,
    driver:
      drv === 0
        ? "none (made without a GPU)"
        : m.device.vendor === "amd"
          ? `HSA runtime version ${drv}`
          : `CUDA ${Math.floor(drv / 1000)}.${Math.floor((drv % 1000) / 10)} (cuDriverGetVersion ${drv})`,
    assembler,
    moduleSource: m.module.source,
    compileFlags: flags.join(" "),
    flagsFrom: assumed ? "assumed: kerncap found no compile command for the kernel's source" : typeof cuda?.flagsFrom === "string" ? cuda.flagsFrom : "",
    flagsGuessed: assumed,
    flagsMissing: words(cuda?.missingFlags).join(", "),
  };
}

export { sourceChangeText, type SourceChange };
