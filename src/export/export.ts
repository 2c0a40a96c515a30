/**
 * `kerncap export DIR -o OUT`: a folder that reproduces the captured launch with the CUDA toolkit
 * alone (and, for a Triton kernel, Python with Triton and PyTorch), nothing of kerncap:
 *
 *   data/            the capture (kerncap.json, module image, parameter bytes, memory images), its
 *                    files shared with the capture by reflink where the file system can, else copied
 *   repro.c repro_common.h capture.h CMakeLists.txt Makefile   the driver-API program
 *                    (templates/export/repro.c); for an AMD (hip) capture the HSA program instead
 *                    (templates/export/hsa/), which has never run on AMD hardware: it is built
 *                    against Debian's ROCm headers and run on a stand-in runtime by the tests
 *   build.sh src/    the capture's reproducer project (the kernel's source to edit), when it has one
 *   repro.py kcdata.py   the Triton script, for Triton captures
 *   kernel.ptx       the module's PTX, when its image holds some (the program JITs it where the GPU
 *                    has no machine code in the image)
 *   kernel.hsaco     an AMD capture's code object for its architecture, when the captured module
 *                    is an offload bundle
 *   README.md kerncap-export.json
 *
 * Hard links are never made: a capture file with a second name is refused by every reader of a
 * capture (src/format/paths.ts: a hard link may share data with a file outside the folder), so a
 * hard-linked export would break the capture it came from.
 */
import { escapeForTerminal, jsonText } from "../escape.ts";
import {
  chmodSync,
  closeSync,
  constants,
  copyFileSync,
  existsSync,
  ftruncateSync,
  openSync,
  readSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { dirname, join, resolve, sep } from "node:path";
import { describeModule, fatbinEntries, isFatbin } from "../codeobj/index.ts";
import { amdgpuCodeObjects, findKernel, isOffloadBundle, parseAmdgpuCodeObject } from "../codeobj/amdgpu.ts";
import { KerncapError } from "../errors.ts";
import { sharedParentRisk } from "../cache.ts";
import { assertOutputPath } from "../format/archive.ts";
import { openCapture, verifyFiles, verifyRegions } from "../format/capture-dir.ts";
import { openImageInCapture, PIECE_BYTES } from "../format/file-image.ts";
import { dataExtentsOfFd, writeSparse } from "../format/sparse-extents.ts";
import { runs } from "../format/chunks.ts";
import { MANIFEST_FILE, type Manifest } from "../format/manifest.ts";
import { shippedManifestOf } from "../format/redact.ts";
import { capturePath, openInCapture, readCaptureBytes, readInputFile, refuseExisting, resolveInCapture } from "../format/paths.ts";
import { renderTemplateDir, templatesFolder } from "../frontends/templates.ts";
import { remakeGeneratedSources } from "../frontends/build.ts";
import { runsTrustedCopy } from "../format/staged-build.ts";
import { receivedBecause } from "../format/received.ts";
import { tritonSourceOf } from "../frontends/triton/numerics.ts";
import { markTemp, removeStaleTemps, tempFor, TEMP_MARKER } from "../leftovers.ts";
import { log } from "../log.ts";
import { filesNotIn, someFiles } from "../format/files-not-in.ts";
import { digestOf } from "../format/source-digests.ts";
import { makePrivateTemp, type PrivateTemp } from "../util/write-file.ts";
import { writeMask } from "../util/folder-modes.ts";
import { replaceFolder } from "../util/replace-folder.ts";
import { describeJudging, judgingInEffect, mergeJudging, writeJudging, type JudgingOptions } from "../replay/judge-settings.ts";
import type { JudgeSettings } from "../format/judge-file.ts";
import { captureHeader, exportPlan, storedPointer, tritonArgs, type ExportFiles, type ExportPlan, type HsaDispatch, type TritonArg } from "./plan.ts";
import { EXPORT_TEMPLATES } from "./templates.ts";
import { dataDigests, digestTables } from "./digests.ts";
import { planProject, type ProjectEntry } from "./project-names.ts";
import { readmeContext, sayWhatShips, sourceChangeText, toolchainContext, type SourceChange } from "./readme.ts";
export { assertExportableNames } from "./project-names.ts";
/** The marker of an export folder (`--force` replaces only a folder that holds it), and the Triton script's data: src/format/file-names.ts. */
export { EXPORT_FILE } from "../format/file-names.ts";
import { EXPORT_FILE, JUDGE_FILE } from "../format/file-names.ts";
export { EXPORT_FORMAT } from "./document.ts";
import { EXPORT_FORMAT, exportDocument, pinnedOf } from "./document.ts";

export interface ExportOptions {
  force?: boolean;
  /**
   * The judging of the exported programs, each over the capture's judging setting in force
   * (`kerncap judge`; a received capture's once accepted: judgingInEffect, as replay reads them):
   * tolerance (default 0, 0: bit for bit); dtype for regions the signature does not type, dtypes
   * per region (regionNumericsPlan); regions compared as multisets (multisetRegions' names).
   */
  atol?: number;
  rtol?: number;
  dtype?: string;
  dtypes?: Record<string, string>;
  multiset?: string[];
  /**
   * The files a received capture's build runs, as the trust gate read and hashed them
   * (src/format/what-runs.ts RunFile: capture-relative name and bytes; src/ops/export.ts): the
   * export writes these bytes at their names, not what the folder holds by the time it copies.
   */
  trustedFiles?: readonly { name: string; bytes: Buffer }[];
}

export interface ExportResult {
  dir: string;
  out: string;
  kernel: string;
  /** The kernel's symbol (its mangled name, the manifest's kernel.name): the same in every document. */
  symbol: string;
  frontend: string;
  /** The driver-API program's and, for Triton, the script's commands, run in `out`. */
  commands: { build: string; run: string; runSource: string | null; triton: string | null };
  /** The kernel source to edit (relative to out), null when the capture has no reproducer project. */
  editable: string | null;
  module: { file: string; kind: string; sass: string[]; ptx: string | null; ptxFile: string | null };
  /** The Triton script and why it may not reproduce the launch (pointers stored in memory), null for other kernels. */
  triton: { script: string; storedPointer: { region: string; offset: number; va: string } | null } | null;
  /** Every data file and how it was shared with the capture: a reflink (copy-on-write clone) or a copy. */
  data: { path: string; bytes: number; shared: "reflink" | "copy" }[];
  /** Bytes of the export's files (sparse holes counted as written), and of the capture folder's data files. */
  bytes: { export: number; data: number; copied: number; reflinked: number };
  tolerance: { atol: number; rtol: number };
  /**
   * The judging the programs apply (the capture's settings in force under the export's options:
   * mergeJudging), which of its settings came from the capture (`fromCapture`), the settings a
   * received capture holds that are not used until accepted (`ignored`, null otherwise), and what
   * the programs cannot apply (`notApplied`: sentences, also in the warnings and README.md).
   */
  judging: { settings: JudgingOptions; fromCapture: string[]; ignored: string | null; notApplied: string[] };
  /** Files of the capture's project left out: editor temporaries and backups, hidden names under src/ (src/format/file-names.ts isLeftOutOfSources). */
  leftOut: string[];
  /**
   * The exported src/ files that differ from what the capture wrote (manifest.sources, as inspect
   * says: {path: "src/x.cu", change: "edited" | "added" | "gone"}): the module in data/ was not built from them.
   */
  changedSources: SourceChange[];
  /** Why the reproducer may not rebuild elsewhere (pack's portabilityWarnings: absolute paths in build.sh …). */
  warnings: string[];
  seconds: number;
}

/**
 * Write the export of capture `dir` into `outPath` (as `OUT.tmp-<pid>`, renamed when complete).
 * The capture is checked first as pack checks it (verifyFiles, verifyRegions: every file's and
 * memory chunk's checksum).
 * Every name the export would hold of the capture is checked first (planProject: portable names).
 * @throws KerncapError E_NOT_CAPTURE/E_MANIFEST/E_UNSAFE_PATH/E_CHECKSUM (the capture; E_UNSAFE_PATH
 *   also a name outside the portable set, or a Triton kernel name that is no identifier), E_USAGE (OUT
 *   inside the capture or the capture inside OUT, bad tolerance), E_EXISTS (OUT exists: only a
 *   previous export is replaced, with force), E_CODEOBJ/E_ARCH (an AMD capture whose code object
 *   lacks the kernel or its architecture), E_IO
 */
export function exportCapture(dir: string, outPath: string, o: ExportOptions = {}): ExportResult {
  const t0 = performance.now();
  const { manifest: m } = openCapture(dir);
  const capDir = realpathSync(dir);
  // checked as pack checks it: an export of altered memory would replay into a MISMATCH that has
  // nothing to do with the kernel
  verifyFiles(capDir, m);
  verifyRegions(capDir, m);
  // names are data: the whole tree is planned and its names checked before anything is written
  const project = planProject(capDir, m);
  const out = resolve(outPath);
  checkOutput(capDir, out, Boolean(o.force));
  const { changedSources, warnings } = sayWhatShips(capDir, m, project.leftOut);
  const params = new Uint8Array(readCaptureBytes(capDir, m.params.file, m.params.size));
  const image = new Uint8Array(readCaptureBytes(capDir, m.module.file, m.module.size));
  const amd = m.device.vendor === "amd";
  let archs: string[] = [];
  try {
    if (!amd) archs = describeModule(image).archs;
  } catch (e) {
    // the program loads the image as it is; only the note on architectures and PTX is lost
    log.warn(`${m.module.file} could not be read as a module image (${(e as Error).message}): the export names no architecture for it`);
  }
  const hsa = amd ? hsaCodeObject(m, image) : null;
  const judging = exportJudging(capDir, m, o);
  const plan = exportPlan(m, params, archs, judging.settings, hsa?.dispatch ?? null);
  for (const w of judging.notApplied) log.warn(w);

  // what a killed export left beside OUT (its pid gone, kerncap's mark inside)
  for (const p of removeStaleTemps(out, existsSync(out))) log.info(`removed ${p}, left by an export that was killed`);
  // made 0700 and held open: every file goes in through its fd, never by a name another user may swap (src/util/write-file.ts)
  const received = receivedBecause(capDir, m) !== undefined || runsTrustedCopy(capDir);
  const t = makePrivateTemp(tempFor(out));
  const tmp = t.at;
  try {
    markTemp(tmp);
    const { data, ptxFile, files, digests } = writeData(capDir, m, tmp, { params, image, plan, hsa });
    // data/ holds the judging the programs apply, so that `kerncap replay data` (once accepted: data/ counts as received) judges as ./repro does (nu16 #8)
    const judgeFile = writeJudging(join(tmp, "data"), judging.settings as JudgeSettings);
    if (judgeFile) data.push({ path: `data/${JUDGE_FILE}`, bytes: statSync(judgeFile).size, shared: "copy" });
    const editable = copyProject(capDir, m, tmp, project.entries);
    for (const f of o.trustedFiles ?? []) if (existsSync(join(tmp, f.name))) writeFileSync(join(tmp, f.name), f.bytes);
    // a received capture's generated sources (CUDA's slice: unkeyed stamps) made anew, as validate does (adversary 50)
    if (received && existsSync(join(tmp, "src"))) remakeGeneratedSources(tmp, m);
    const triton = !amd && tritonSourceOf(m) ? tritonPart(capDir, m, params, plan) : null;
    const doc = exportDocument(m, plan, files, triton, digests, triton ? pinnedOf(capDir, o.trustedFiles) : undefined, !received);
    // repro.py runs only the kernel file pinned.json names (shown and hashed by trust): without one it says so and stops; ./repro still runs the module
    if (triton && (doc.triton as { kernelFile: string | null }).kernelFile === null)
      log.warn(
        `${escapeForTerminal(capDir, { oneLine: true })}: no kernel file named by a pinned.json kerncap may run (a received capture's is the one its pinned.json names): the exported repro.py will refuse to run; ./repro runs the captured module`,
      );
    writeFileSync(join(tmp, EXPORT_FILE), jsonText(doc, 2) + "\n");
    const hasBuild = existsSync(join(tmp, "build.sh"));
    const commands = {
      build: "make",
      run: "./repro",
      runSource: hasBuild && !triton ? "make run-src" : null,
      triton: triton ? "python3 repro.py" : null,
    };
    const context = {
      ...readmeContext(m, plan, files, editable, commands, triton, data, judging),
      ...toolchainContext(m, image),
      changedSources: changedSources.map(sourceChangeText).join(", "),
    };
    renderTemplateDir(templatesFolder("export", EXPORT_TEMPLATES), tmp, context);
    if (!triton) for (const f of ["repro.py", "kcdata.py"]) rmSync(join(tmp, f), { force: true });
    // the HSA program and its build files in place of the CUDA ones (templates/export/hsa/)
    if (amd) for (const f of readdirSync(join(tmp, "hsa"))) renameSync(join(tmp, "hsa", f), join(tmp, f));
    rmSync(join(tmp, "hsa"), { recursive: true, force: true });
    rmSync(join(tmp, TEMP_MARKER));
    const exportBytes = folderBytes(tmp);
    chmodSync(tmp, 0o777 & ~writeMask()); // the folder's mode as a plain mkdir gives it; a setgid parent's group given (src/util/folder-modes.ts)
    place(t, out, Boolean(o.force));
    const bytes = { export: exportBytes, data: data.reduce((a, d) => a + d.bytes, 0), copied: 0, reflinked: 0 };
    for (const d of data) bytes[d.shared === "copy" ? "copied" : "reflinked"] += d.bytes;
    return {
      dir: capDir,
      out,
      kernel: plan.demangled,
      symbol: m.kernel.name,
      frontend: m.kernel.frontend,
      commands,
      editable,
      module: { file: files.module, kind: m.module.kind, sass: plan.sass, ptx: plan.ptx || null, ptxFile },
      triton: triton ? { script: "repro.py", storedPointer: triton.storedPointer } : null,
      data,
      bytes,
      tolerance: plan.tolerance,
      judging,
      leftOut: project.leftOut,
      changedSources,
      warnings,
      seconds: (performance.now() - t0) / 1000,
    };
  } catch (e) {
    throw t.unfd(e, out); // no /proc/self/fd path reaches the user
  } finally {
    t.dispose();
  }
}

/**
 * The export's data and the program's header, written into `tmp`: data/ (the capture's files,
 * copyData), the module's PTX (writePtx; none for an AMD capture), an offload bundle's code object
 * for the captured architecture (kernel.hsaco: ROCr loads ELF code objects only), and capture.h
 * with the tables of `plan` and the checksums of the data files, which the program checks before
 * it runs (./digests.ts).
 * @returns the data files and how each was shared, the PTX file (relative to tmp; null: none), the files the program reads,
 *   their checksums (capture.h's tables, also written into kerncap-export.json for repro.py)
 * @throws KerncapError E_IO
 */
function writeData(
  capDir: string,
  m: Manifest,
  tmp: string,
  x: { params: Uint8Array; image: Uint8Array; plan: ExportPlan; hsa: { unbundled: Uint8Array | null } | null },
): { data: ExportResult["data"]; ptxFile: string | null; files: ExportFiles; digests: ReturnType<typeof dataDigests> } {
  const { params, image, plan, hsa } = x;
  const data = copyData(capDir, m, join(tmp, "data"));
  const ptxFile = m.device.vendor === "amd" ? null : writePtx(m, image, plan, tmp);
  // an offload bundle's code object for the captured architecture, beside the data (ROCr loads ELF code objects only)
  if (hsa?.unbundled) writeFileSync(join(tmp, "kernel.hsaco"), hsa.unbundled);
  const module = hsa?.unbundled ? "kernel.hsaco" : `data/${m.module.file}`;
  const files: ExportFiles = {
    module,
    ptx: ptxFile ?? "",
    params: `data/${m.params.file}`,
    before: `data/${m.memory.before}`,
    after: `data/${m.memory.after}`,
  };
  // the data files' checksums, which the program checks before it runs (./digests.ts)
  const whole = [
    { path: files.params, bytes: params },
    { path: `data/${m.module.file}`, bytes: image },
    ...(hsa?.unbundled ? [{ path: module, bytes: hsa.unbundled }] : []),
    ...(ptxFile && ptxFile !== `data/${m.module.file}` ? [{ path: ptxFile, bytes: new Uint8Array(readFileSync(join(tmp, ptxFile))) }] : []),
  ];
  const digests = dataDigests(m, { before: files.before, after: files.after }, whole);
  writeFileSync(join(tmp, "capture.h"), captureHeader(plan, files, digestTables(digests)));
  return { data, ptxFile, files, digests };
}

/**
 * The judging an export's programs apply: the capture's judging settings in force (judgingInEffect:
 * the user's own capture's, a received one's only once accepted, as every replay reads them) under
 * the export's options (mergeJudging: an option given wins), and what the programs, which run the
 * kernel once and judge that run, cannot apply.
 * @throws KerncapError as readJudging (a settings file that does not read)
 */
function exportJudging(capDir: string, m: Manifest, o: ExportOptions): ExportResult["judging"] {
  const { settings: stored, ignored } = judgingInEffect(capDir, m);
  const { options, fromCapture } = mergeJudging(stored, { atol: o.atol, rtol: o.rtol, dtype: o.dtype, dtypes: o.dtypes, multiset: o.multiset });
  const notApplied: string[] = [];
  if (options.nondeterministic)
    notApplied.push(
      "the capture's judging settings expect the kernel to be nondeterministic: kerncap replay judges such a kernel by the spread of 8 checked runs (the run-to-run envelope); the exported programs run it once and judge that run by the tolerance alone, so a result kerncap calls MATCH may be a MISMATCH there",
    );
  if (fromCapture.length) log.info(`the export judges with the capture's judging settings: ${describeJudging(options)}`);
  return { settings: options, fromCapture, ignored: ignored ?? null, notApplied };
}

/**
 * OUT must not be the capture, inside it or hold it (a --force would delete the capture), and may
 * exist only as an empty folder (written into as it is: `mkdir repro && kerncap export cap -o repro`)
 * or, with force, a previous export (a folder holding the marker kerncap-export.json that an
 * export writes: isPreviousExport). Any other folder or file is refused, with --force too.
 * @throws KerncapError E_USAGE, E_EXISTS, E_IO
 */
function checkOutput(capDir: string, out: string, force: boolean): void {
  assertOutputPath(out, "export");
  // an export is a program you build (make): in a folder others can write and that is not sticky, another user could
  // swap the finished folder for one of theirs before you do (a trial: their GNUmakefile ran at make)
  const shared = sharedParentRisk(out);
  if (shared)
    throw new KerncapError("E_UNSAFE_PATH", `-o ${out}: ${shared}, so another user could put a folder of theirs at its name before you build it`, {
      hint: "Export into a folder only you can write (or a sticky one like /tmp), then move it. A team folder others write should be sticky (chmod +t DIR; mode 3770 with the group's setgid): then no one renames another's entries, and captures there count as their makers'.",
    });
  const real = existsSync(out) ? realpathSync(out) : join(realpathSync(dirname(out)), out.split(sep).pop()!);
  const within = (a: string, b: string) => a === b || a.startsWith(b + sep);
  if (within(real, capDir) || within(capDir, real)) {
    throw new KerncapError("E_USAGE", `${out} ${within(real, capDir) ? "is inside" : "holds"} the capture folder ${capDir}`, {
      hint: "Export to a folder beside the capture, e.g. -o export.",
    });
  }
  if (!existsSync(out)) return;
  const st = lstatSync(out);
  if (st.isDirectory() && readdirSync(out).length === 0) return; // an empty folder: the export goes there as it is
  if (!isPreviousExport(out))
    throw new KerncapError(
      "E_EXISTS",
      `${out} exists and is ${st.isDirectory() ? "a folder that is neither empty nor a kerncap export (no kerncap-export.json)" : "not a folder"}; --force replaces only a previous export, never another folder`,
      { hint: `Choose another output folder (-o), or move or remove ${out} yourself if it should go.` },
    );
  refuseExisting(out, force, { found: "a previous export", why: "", replaces: "a previous export", another: "output folder (-o)" });
}

/** The most bytes of a previous export's kerncap-export.json read to tell it is one. */
const EXPORT_RECORD_MAX_BYTES = 1 << 20;

/** Whether `out` is a folder a kerncap export wrote: it holds kerncap-export.json of format kerncap-export (no link followed). */
function isPreviousExport(out: string): boolean {
  try {
    if (!lstatSync(out).isDirectory() || !lstatSync(join(out, EXPORT_FILE)).isFile()) return false;
    // read as any file a user names: bounded (what an export writes is under 4 KiB), no link, no FIFO (adversary 86 #05: a 1.5 GB
    // sparse kerncap-export.json another user put in the folder was read whole)
    const text = readInputFile(join(out, EXPORT_FILE), "export record", "E_EXISTS", EXPORT_RECORD_MAX_BYTES);
    return (JSON.parse(text) as { format?: unknown }).format === EXPORT_FORMAT;
  } catch {
    return false;
  }
}

/**
 * Rename the complete temp folder into place (PrivateTemp.placeAt: refused when another user
 * swapped the folder at its name); a previous export stays until the new one is there, and a
 * folder swapped in at OUT meanwhile is never removed.
 */
function place(t: PrivateTemp, out: string, force: boolean): void {
  if (!existsSync(out)) return t.placeAt(out);
  checkOutputAgain(out, force);
  sayWhatForceLoses(out, t.at);
  // judged again where no one else can swap it, and removed through a held fd (src/util/replace-folder.ts)
  replaceFolder(out, {
    refuse: (old) => (readdirSync(old).length === 0 || isPreviousExport(old) ? undefined : "neither an empty folder nor a kerncap export"),
    place: (d) => t.placeAt(d),
  });
}

/**
 * Before --force replaces the previous export at `out` with the one written at `fresh`: a warning
 * for the files it held that the new one does not (notes of the user's), and one for the files of
 * the program (all but data/) whose bytes differ from the new ones (the user's edits), as unpack --force says them
 * (src/format/force-losses.ts; adversary 35: export -f dropped an edited src/ and a notes file
 * without a word). --json gives them as `warnings`.
 */
function sayWhatForceLoses(out: string, fresh: string): void {
  const gone = filesNotIn(out, new Set(filesNotIn(fresh, new Set())));
  if (gone.length) log.warn(`--force: replacing ${out} removes ${someFiles(gone).replace(/^(\d+ files?):/, "$1 the new export does not hold:")}`);
  // every file of the program (src/, Makefile, repro.c, capture.h, README.md …) whose bytes differ: the user's edits;
  // data/ is the capture's copy, compared by its checksums elsewhere (adversary 36: edits of Makefile and repro.c went unsaid)
  const edited = filesNotIn(fresh, new Set())
    .filter((f) => !f.startsWith("data/"))
    .filter((f) => {
      const mine = digestOf(out, f);
      return mine !== undefined && mine !== digestOf(fresh, f);
    });
  if (edited.length) log.warn(`--force: replacing ${out} discards the edits of ${someFiles(edited)} (the export's own files replace them)`);
}

function checkOutputAgain(out: string, force: boolean): void {
  const empty = lstatSync(out).isDirectory() && readdirSync(out).length === 0;
  if (!empty && (!force || !isPreviousExport(out)))
    throw new KerncapError("E_EXISTS", `${out} appeared while the export was written`, {
      hint: "Export again (it then says whether --force may replace what is there), or choose another output folder (-o).",
    });
}

/**
 * Share one capture file into the export: a reflink (FICLONE: the same blocks, copy-on-write)
 * where the file system can, else a copy, sparse where the source is (its data extents only). The
 * source is opened once by the capture path rule (src/format/paths.ts openInCapture: no link
 * followed, O_NONBLOCK, the file its check saw) and every copy made from that descriptor (through
 * /proc/self/fd/N, which names the file opened whatever is at its name now): a link or FIFO renamed
 * over it during the export is never opened (adversary 67: another user's link put the exporter's
 * private file into the export; a FIFO hung it).
 * @throws KerncapError E_UNSAFE_PATH (a link, a FIFO, a swap), E_CHECKSUM (the file gone)
 */
function shareFile(capDir: string, rel: string, dest: string): "reflink" | "copy" {
  const opened = openInCapture(capDir, rel, Number.MAX_SAFE_INTEGER);
  if (!opened)
    throw new KerncapError("E_CHECKSUM", `${rel} is missing from ${capDir} (it was there when the export began)`, {
      hint: "Capture again; the folder changed.",
    });
  const src = `/proc/self/fd/${opened.fd}`;
  mkdirSync(dirname(dest), { recursive: true });
  try {
    try {
      copyFileSync(src, dest, constants.COPYFILE_EXCL | constants.COPYFILE_FICLONE_FORCE);
      return "reflink";
    } catch {
      rmSync(dest, { force: true });
    }
    const { size, extents, sparse } = dataExtentsOfFd(opened.fd);
    if (!sparse) {
      copyFileSync(src, dest, constants.COPYFILE_EXCL);
      return "copy";
    }
    // a sparse memory image stays sparse: only its data extents are copied, the holes left unwritten
    const to = openSync(dest, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o644);
    try {
      const buf = new Uint8Array(Math.min(PIECE_BYTES, size));
      for (const [off, len] of extents) {
        for (let done = 0; done < len; ) {
          const n = readSync(opened.fd, buf, 0, Math.min(buf.length, len - done), off + done);
          if (n <= 0) break; // shrunk while read: the export's data checks would say so
          writeSparse(to, buf.subarray(0, n), off + done);
          done += n;
        }
      }
      ftruncateSync(to, size);
    } finally {
      closeSync(to);
    }
    return "copy";
  } finally {
    closeSync(opened.fd);
  }
}

/** data/: the manifest, every file it lists (files[]) and both memory images, as the capture has them. */
function copyData(capDir: string, m: Manifest, to: string): ExportResult["data"] {
  const rels = [MANIFEST_FILE, ...m.files.map((f) => f.path), m.memory.before, m.memory.after];
  const out: ExportResult["data"] = [];
  for (const rel of [...new Set(rels)]) {
    const st = resolveInCapture(capDir, rel).stats;
    if (!st) continue; // an empty memory image may be absent (verifyFiles allows it)
    if (rel === MANIFEST_FILE) {
      // as `pack --redact` ships it: host.machineId null (its id sent back in a folder would make that folder
      // count as made here: src/format/pack.ts), and no host name, user, command line, job environment, GPU
      // identity or absolute project path (src/format/redact.ts): none of it replays the kernel
      const { bytes } = shippedManifestOf(capDir, true);
      mkdirSync(to, { recursive: true });
      writeFileSync(join(to, rel), bytes, { flag: "wx", mode: 0o644 });
      out.push({ path: `data/${rel}`, bytes: bytes.length, shared: "copy" });
      continue;
    }
    const shared = shareFile(capDir, rel, join(to, rel));
    // data, never a program: an x bit kept from the capture made data/gcc a host compiler nvcc found (adversary 61)
    chmodSync(join(to, rel), 0o644);
    out.push({ path: `data/${rel}`, bytes: st.size, shared });
  }
  return out;
}

/**
 * An AMD capture's code object and dispatch facts: the ELF code object for the captured
 * architecture (unbundled when the module is a clang offload bundle: `unbundled`, written as
 * kernel.hsaco), the kernel's descriptor symbol and segment sizes (HsaDispatch).
 * @throws KerncapError E_ARCH (a bundle without the captured architecture), E_CODEOBJ (the kernel
 *   is not in the code object, or it is not an AMDGPU code object)
 */
function hsaCodeObject(m: Manifest, image: Uint8Array): { dispatch: HsaDispatch; unbundled: Uint8Array | null } {
  let co = image;
  let unbundled: Uint8Array | null = null;
  if (isOffloadBundle(image)) {
    const e = amdgpuCodeObjects(image, m.device.arch)[0];
    if (!e)
      throw new KerncapError("E_ARCH", `${m.module.file} holds no code object for ${m.device.arch}, the captured architecture`, {
        hint: "The capture is damaged or was edited; capture the kernel again.",
      });
    co = unbundled = new Uint8Array(e.bytes);
  }
  const k = findKernel(parseAmdgpuCodeObject(co), m.kernel.name);
  // the app's packet (manifest hsa, what the capture library read from it), else the metadata's fixed sizes
  const info = (m.hsa ?? {}) as Record<string, unknown>;
  const num = (v: unknown, dflt: number) => (typeof v === "number" && Number.isFinite(v) && v >= 0 ? v : dflt);
  return {
    dispatch: {
      symbol: k.symbol || `${k.name}.kd`,
      kernargBytes: k.kernargSegmentSize,
      groupBytes: num(info.group_segment_size, Math.max(m.launch.sharedMemBytes, k.groupSegmentFixedSize)),
      privateBytes: num(info.private_segment_size, k.privateSegmentFixedSize),
      ordinal: m.device.ordinal,
    },
    unbundled,
  };
}

/** kernel.ptx: the newest PTX of a fatbin module (the fallback of a GPU without machine code in it), or the module itself when it is PTX. */
function writePtx(m: Manifest, image: Uint8Array, plan: ExportPlan, tmp: string): string | null {
  if (m.module.kind === "ptx") return `data/${m.module.file}`;
  if (!plan.ptx || !isFatbin(image)) return null;
  const e = fatbinEntries(image).find((x) => x.kind === "ptx" && x.arch === plan.ptx);
  if (!e) return null;
  writeFileSync(join(tmp, "kernel.ptx"), e.bytes());
  return "kernel.ptx";
}

/**
 * The capture's reproducer project (build.sh, src/) as planProject planned it, copied file by
 * file through capturePath (no link followed, no file with a second name). The data stays shared;
 * the source is a copy of its own, so an edit in the export leaves the capture as it was.
 * @returns the file to edit (relative to the export), or null without a project.
 */
function copyProject(capDir: string, m: Manifest, tmp: string, plan: readonly ProjectEntry[]): string | null {
  const copied: string[] = [];
  for (const e of plan) {
    if (e.dir) {
      mkdirSync(join(tmp, e.rel), { recursive: true });
      continue;
    }
    // from one descriptor opened by the capture path rule, as shareFile copies (adversary 67)
    const opened = openInCapture(capDir, e.rel, Number.MAX_SAFE_INTEGER);
    if (!opened)
      throw new KerncapError("E_UNSAFE_PATH", `${e.rel} left ${capDir} while the export copied it`, {
        hint: "Another process is changing the folder: export a copy only you can write.",
      });
    try {
      copyFileSync(`/proc/self/fd/${opened.fd}`, join(tmp, e.rel), constants.COPYFILE_EXCL);
    } finally {
      closeSync(opened.fd);
    }
    chmodSync(join(tmp, e.rel), e.mode);
    copied.push(e.rel);
  }
  // the kernel's definition: src/ mirrors the project root (manifest source.cuda, src/frontends/cuda/locate.ts)
  // a received manifest's source.cuda is the sender's to write (the schema keeps it unknown): names taken only when they are strings
  const cuda = (m.source as { cuda?: { definition?: unknown; projectRoot?: unknown } } | undefined)?.cuda;
  const def = typeof cuda?.definition === "string" ? cuda.definition : undefined;
  const root = typeof cuda?.projectRoot === "string" ? cuda.projectRoot : undefined;
  const fn = tritonSourceOf(m)?.fnName;
  const named = def ? `src/${root && def.startsWith(root + "/") ? def.slice(root.length + 1) : def.split("/").pop()}` : fn ? `src/${fn}.py` : undefined;
  if (named && copied.includes(named)) return named;
  return copied.find((c) => c.startsWith("src/") && !c.includes(".kerncap-slice.") && !c.startsWith("src/original/")) ?? null;
}

export interface TritonPart {
  args: TritonArg[];
  storedPointer: { region: string; offset: number; va: string } | null;
}

/** The Triton script's arguments and whether the kernel may follow pointers stored in memory. */
function tritonPart(capDir: string, m: Manifest, params: Uint8Array, plan: ExportPlan): TritonPart {
  const args = tritonArgs(m, params, plan.regions);
  const before = openImageInCapture(capDir, m.memory.before); // one descriptor, never the name again
  const byVa = new Map(m.regions.map((r) => [BigInt(r.va), r]));
  let hit: ReturnType<typeof storedPointer>;
  try {
    hit = storedPointer(plan.regions, function* (ri) {
      const r = byVa.get(plan.regions[ri]!.va)!;
      for (const run of runs(r, r.before, m.memory.chunkBytes)) yield { offset: run.vaOffset, bytes: before.view(run.fileOffset, run.bytes) };
    });
  } finally {
    before.close();
  }
  return { args, storedPointer: hit ? { region: `0x${plan.regions[hit.region]!.va.toString(16)}`, offset: hit.offset, va: hit.va } : null };
}

/** Bytes of every regular file under `dir`. */
function folderBytes(dir: string): number {
  let n = 0;
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) n += statSync(join(e.parentPath, e.name)).size;
  }
  return n;
}
