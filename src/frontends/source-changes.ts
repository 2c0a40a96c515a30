/**
 * What of a capture's src/ differs from what the capture wrote (manifest.sources), as export and
 * pack warn of it: the copy that goes to someone else ships the sources as they are now.
 */
import { isLeftOutOfSources } from "../format/file-names.ts";
import type { Manifest } from "../format/manifest.ts";
import { differingFiles } from "../format/source-digests.ts";
import { frontendOf } from "./index.ts";

/**
 * The src/ files of a capture (or of what an export or archive ships of it) that differ from what the capture wrote (manifest.sources: edited, added,
 * gone, as `kerncap inspect` reads them), the frontend's generated files (CUDA's slice; unless one
 * is not what kerncap makes of the sources: edited by hand) and the files the export leaves out passed over; [] when the manifest records no digests.
 * @returns one entry per file, edited first, then added, then gone
 */
export function sourcesChanged(capDir: string, m: Manifest, leftOut: readonly string[]): SourceChange[] {
  if (!m.sources) return [];
  let generated: string[] = [];
  try {
    const f = frontendOf(m);
    // a generated file kerncap did not make from the sources (CUDA's slice edited by hand, built as it is) is compared as any source
    if (f.generatedState?.(capDir, m).state !== "edited") generated = (f.generatedSources?.(m) ?? []).map((g) => `src/${g}`);
  } catch {
    // a frontend this kerncap does not know: every file compared
  }
  const ignore = (p: string) => generated.includes(p) || leftOut.includes(p) || isLeftOutOfSources(p);
  const d = differingFiles(capDir, m.sources, { ignore });
  return [
    ...d.edited.map((path) => ({ path, change: "edited" as const })),
    ...d.added.map((path) => ({ path, change: "added" as const })),
    ...d.gone.map((path) => ({ path, change: "gone" as const })),
  ];
}

/** An exported src/ file that differs from what the capture wrote: its path (relative to the capture, `src/x.cu`) and how (inspect's reproducer.sources lists). */
export interface SourceChange {
  path: string;
  change: "edited" | "added" | "gone";
}

/** A change as the warning and the README say it: `src/x.cu (edited)`. */
export const sourceChangeText = (c: SourceChange) => `${c.path} (${c.change})`;
