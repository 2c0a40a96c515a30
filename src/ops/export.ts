/**
 * `kerncap export`'s workflow: the trust gate, then the export (src/export/export.ts). The exported
 * folder's `make run-src` runs the capture's build.sh, and a Triton capture's exported repro.py
 * imports its kernel file: for a received capture those are the sender's code, so the export
 * asks what validate asks (--trust, or --trust=DIGEST for a build.sh of its own or a folder
 * another user can write; docs/security.md), shows the same files, and writes the bytes the gate
 * hashed, never what the folder holds later.
 */
import { shellPath } from "../util/shell-quote.ts";
import { KerncapError } from "../errors.ts";
import { log } from "../log.ts";
import { openCapture } from "../format/capture-dir.ts";
import { approvedDigest } from "../format/staged-build.ts";
import { readWhatRuns } from "../format/what-runs.ts";
import { assertExportableNames, exportCapture, type ExportOptions, type ExportResult } from "../export/export.ts";
import { requireTrustedBuild } from "./gates.ts";

/**
 * Export DIR into OUT once its build is trusted (a capture made here: at once).
 * @param o.trust plain --trust (true), --trust=DIGEST (the digest), or false
 * @throws KerncapError E_UNSAFE_PATH (a name of the capture that export refuses, before the gate), E_UNTRUSTED, E_TRUST_CHANGED (the files changed between the gate's reading and the export's), and exportCapture's errors
 */
export function exportOp(dir: string, out: string, o: Omit<ExportOptions, "trustedFiles"> & { trust: boolean | string }): ExportResult {
  const { manifest: m } = openCapture(dir);
  assertExportableNames(dir, m); // a name export refuses is said before any trust prompt
  requireTrustedBuild(dir, m, o.trust, {
    command: `kerncap export ${shellPath(dir)} -o ${shellPath(out)}`,
    // export runs nothing itself: the exported folder's make run-src (a Triton export's repro.py) runs the sender's build
    gated:
      "would run with the rights of whoever runs the export's make run-src (or a Triton export's repro.py), unconfined: the compile reads whatever the sources #include, your own files too (kerncap's own builds of a received capture are confined); export itself runs nothing, and exports it only once you pass --trust",
  });
  const approved = approvedDigest(dir);
  if (approved === undefined) return exportCapture(dir, out, o); // made here: nothing to hold the files to
  const runs = readWhatRuns(dir, m.kernel.frontend ?? "", true);
  if (runs && runs.digest !== approved)
    throw new KerncapError(
      "E_TRUST_CHANGED",
      `${dir}: the files its build runs changed since they were trusted (digest ${approved}, now ${runs.digest}); nothing was exported`,
      {
        hint: "Someone changed build.sh or the files under src/ meanwhile. Run the export again without --trust to see them, then trust the digest it shows.",
      },
    );
  const r = exportCapture(dir, out, { ...o, trustedFiles: runs?.files ?? [] });
  // the exported project builds outside kerncap: nothing confines the sender's sources there (adversary 80 #08)
  if (r.commands.runSource)
    log.warn(
      `${shellPath(r.out)}: its make run-src compiles the sender's sources with your rights and no confinement (what they #include is read, your own files too): read src/ before you run it; ./repro runs the captured module, no build`,
    );
  return r;
}
