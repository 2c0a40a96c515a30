/**
 * `kerncap check`'s per-capture workflow, what each worker process runs (`kerncap check
 * --worker`: src/check/worker.ts serveTasks): unpack an archive into a temp folder (the unpack
 * API: every file's SHA-256 and every stored chunk's kc64 checked), with --rebuild rebuild its
 * reproducer beside the replay as `kerncap validate` does (./rebuild-beside.ts, the one rebuild
 * policy; the capture's files checked first, as the replay checks them: a damaged capture is
 * E_CHECKSUM, never built; a received capture's build.sh only with --trust, the gate of ./gates.ts: an archive
 * unpacked here is one; --multiset's regions checked against each capture), replay it with the replay engine (verdict
 * against the captured after state, run-to-run envelope, timed launches) on device 0 of those the
 * worker sees (its CUDA_VISIBLE_DEVICES), and say what happened as an Outcome (src/format/check-record.ts).
 *
 * Portability: a capture replays on any GPU its module has code for. On a GPU of another
 * architecture, --rebuild rebuilds a CUDA reproducer for this one (build.sh with
 * `-arch=<this GPU>` appended: src/env.ts reproducerBuildEnv) and says so in the note; a capture
 * whose module the GPU cannot run and that has no reproducer (or a Triton one, which compiles for
 * its pinned target) is `skipped`, its reason naming the architectures.
 *
 * The worker keeps one CUDA context for all its captures: the engine's session close frees every
 * device allocation and VA reservation (src/replay/backends/interface.ts close). Only after a kernel fault
 * (a sticky error: every later call in the context fails) is the context reset, by the engine's
 * replay (src/replay/engine.ts).
 */
import { shellPath } from "../util/shell-quote.ts";
import { existsSync, rmSync, type Stats } from "node:fs";
import { join, resolve } from "node:path";
import { isKerncapError, KerncapError } from "../errors.ts";
import { privateTempFolder } from "../cache.ts";
import { unpackArchive } from "../format/archive.ts";
import { shownPath } from "../format/paths.ts";
import { checksumsChecked, notOwnEntry } from "../format/received.ts";
import { openCapture, verifyFiles, verifyRegions } from "../format/capture-dir.ts";
import type { Manifest } from "../format/manifest.ts";
import { frontendOf, regionTypesOf } from "../frontends/index.ts";
import { rebuiltRun, type Rebuilt } from "../rebuild/rebuilder.ts";
import { moduleFigures } from "../rebuild/resources.ts";
import type { Diagnostic } from "../frontends/confine.ts";
import { replay, type ReplayOptions, type ReplayResult } from "../replay/engine.ts";
import { checkMultiset } from "../replay/tolerance-plan.ts";
import type { CaptureRef } from "../check/discover.ts";
import { mismatchReason, type CheckSettings } from "../check/runner.ts";
import { builderWords, NOT_REPLAYED } from "../check/report.ts";
import { lines, serveTasks } from "../check/worker.ts";
import { deviceArch, deviceResets } from "../replay/backends/factory.ts";
import type { Outcome } from "../format/check-record.ts";
import { gpuTimingWindow } from "../util/timing-window.ts";
import { requireTrustedBuild } from "./gates.ts";
import { replayBeside, startRebuild, type StartedRebuild } from "./rebuild-beside.ts";

/**
 * Check one capture. Never throws: a failure is the Outcome's error (code, one-line reason).
 * @returns its outcome; seconds: the whole check's wall time, replaySeconds: the replay call's
 */
export async function checkCapture(task: CaptureRef, s: CheckSettings): Promise<Outcome> {
  const t0 = performance.now();
  let replaySeconds = 0;
  const base = emptyOutcome(task);
  const out = (o: Partial<Outcome> & Pick<Outcome, "outcome">): Outcome => ({
    ...base,
    // the kernel's symbol (its mangled name) once the manifest read, as every document gives it beside `kernel`
    ...(p.m ? { symbol: p.m.kernel.name } : {}),
    ...o,
    seconds: (performance.now() - t0) / 1000,
    replaySeconds,
    at: new Date().toISOString(),
  });
  const p: Checked = { rebuild: null, note: null };
  try {
    let dir = task.path;
    let theirs: string | undefined;
    if (task.kind === "archive") {
      p.tmp = privateTempFolder("kerncap-check-");
      // the archive read, another user's or one others may write: its capture is theirs as a folder of theirs would be (trial 20)
      const onOpened = (st: Stats) => void (theirs = notOwnEntry(`the archive ${shownPath(task.path)}`, st));
      dir = (await unpackArchive(task.path, join(p.tmp, "capture"), { onOpened })).dir;
    }
    p.dir = dir;
    const capture = openCapture(dir);
    const m = (p.m = capture.manifest);
    // --no-verify is not honoured for a received capture (an archive's is): its after state is another's to change
    const verify = checksumsChecked(dir, m, s.verify, task.kind === "archive" ? task.path : dir);
    // the memory images' chunks, checked on the CPU where no GPU checks them (an archive's were, as it was unpacked)
    if (verify && task.kind !== "archive") p.chunks = { dir, m };
    const captured = { name: m.device.name, arch: m.device.arch };
    const kernel = m.kernel.demangled || m.kernel.name;
    const fe = frontendOf(m);
    const reproducer = fe.validates && existsSync(join(dir, "build.sh"));
    // a damaged capture is said as such before its build runs and before the GPU is looked for (the
    // replay checks the same files, but --rebuild reaches E_NO_GPU first: archOrBuildOnly)
    if (s.rebuild) verifyFiles(dir, verify ? m : { ...m, files: [] });
    if (s.rebuild && reproducer) gateRebuild(task, dir, m, s, theirs);
    if (s.buildOnly) return out(await buildOnly(dir, m, reproducer, s, p, { kernel, captured }));
    checkMultiset(dir, m, s.tolerance.multiset); // a region this capture lacks: said before the GPU, as replay says it
    // the worker's GPU (device 0 of its own CUDA_VISIBLE_DEVICES); undefined for AMD captures (not retargeted)
    const here = s.rebuild ? await archOrBuildOnly(dir, m, reproducer, s, p) : undefined;
    const otherArch = here !== undefined && here !== m.device.arch;
    if (s.rebuild && reproducer && otherArch && !fe.retargets) {
      return out({
        outcome: "skipped",
        kernel,
        captured,
        code: "E_ARCH",
        reason: `captured on ${m.device.arch}, this GPU is ${here}: a ${fe.name} reproducer compiles for its pinned target (${m.device.arch}); check it on a ${m.device.arch} GPU`,
      });
    }
    if (s.rebuild && reproducer) {
      // the capture's build lock held until the replay loaded the module (replayBeside releases it; the finally below too)
      p.rebuilt = startRebuild(
        dir,
        m,
        { quiet: true, quietStrategy: true, force: s.force, fullBuild: false, ...(otherArch ? { targetArch: here } : {}) },
        true,
      );
      if (otherArch) p.note = `rebuilt from its reproducer for ${here} (captured on ${m.device.arch})`;
    } else if (s.rebuild) p.note = "no reproducer to rebuild (the module has no source): the captured module replayed";
    const tr = performance.now();
    let r: ReplayResult;
    try {
      r = await replayChecked(capture, fe, { ...s, verify }, p.rebuilt);
    } finally {
      p.rebuilt?.release();
      replaySeconds = (performance.now() - Math.max(tr, p.rebuilt?.builtAt() ?? 0)) / 1000;
    }
    if (p.rebuilt) {
      const b = await p.rebuilt.built;
      p.rebuild = rebuildRecord(b, m, otherArch ? here! : null, capture.dir);
    }
    if (!p.rebuilt && r.device.arch !== m.device.arch) p.note ??= `replayed on ${r.device.arch} (captured on ${m.device.arch}): the module's code runs here`;
    const samples = r.timing.samplesUs ?? [];
    return out({
      outcome: "done",
      kernel,
      captured,
      verdict: r.verdict,
      numerics: r.numerics.verdict,
      reason: r.verdict === "mismatch" ? mismatchReason(r) : null,
      note: p.note,
      device: r.device,
      rebuild: p.rebuild,
      timing: samples.length ? { medianUs: r.timing.medianUs, samplesUs: samples, ...(r.timing.l2 === "flushed" ? { l2: "flushed" as const } : {}) } : null,
    });
  } catch (e) {
    return out(failedOutcome(damagedFirst(e, p), p, s));
  } finally {
    if (p.tmp) rmSync(p.tmp, { recursive: true, force: true });
    // the memory images' mmap windows are unmapped when collected (src/format/file-image.ts):
    // collected now, so that the next capture's fixed VAs do not meet this one's host mappings
    Bun.gc(true);
  }
}

/**
 * `check --rebuild --build-only`: the capture's reproducer built for its captured target, no GPU
 * looked for, nothing replayed: verdict "built" with its `rebuild`; a capture without a reproducer
 * (no build.sh, or a frontend that is not rebuilt: HIP) is skipped (E_NO_REPRODUCER).
 * @throws the build's error (E_BUILD, E_NO_NVCC …: the capture's error)
 */
async function buildOnly(
  dir: string,
  m: Manifest,
  reproducer: boolean,
  s: CheckSettings,
  p: Checked,
  known: Pick<Outcome, "kernel" | "captured">,
): Promise<Partial<Outcome> & Pick<Outcome, "outcome">> {
  if (!reproducer)
    return {
      outcome: "skipped",
      ...known,
      code: "E_NO_REPRODUCER",
      reason: `no reproducer to rebuild (${frontendOf(m).validates ? "no build.sh" : `a ${frontendOf(m).name} capture is not rebuilt`}): nothing built (--build-only)`,
    };
  const b = await startRebuild(dir, m, { quiet: true, quietStrategy: true, force: s.force, fullBuild: false }).built;
  p.rebuild = rebuildRecord(b, m, null, dir);
  return {
    outcome: "done",
    ...known,
    verdict: "built",
    rebuild: p.rebuild,
    note: `built by ${builderWords(b.builder)} in ${b.seconds.toFixed(2)} s; not replayed (--build-only)`,
  };
}

/**
 * The architecture of this machine's GPU for a --rebuild (deviceArch). Without a GPU (E_NO_GPU) a
 * reproducer is still built, for its captured target as validate builds it, so that a corpus
 * checked where no GPU is says which reproducers still compile: the build's record goes into
 * `p.rebuild` (a failed build's error is thrown in place of the missing GPU's), then the E_NO_GPU
 * error is thrown with "rebuilt …; not replayed" in front of it.
 * @throws KerncapError E_NO_GPU (after the build), the build's error, what deviceArch throws
 */
async function archOrBuildOnly(dir: string, m: Manifest, reproducer: boolean, s: CheckSettings, p: Checked): Promise<string | undefined> {
  try {
    return deviceArch(m.device.vendor);
  } catch (e) {
    if (!reproducer || !isKerncapError(e) || e.code !== "E_NO_GPU") throw e;
    checkChunksOnCpu(p); // a damaged memory image is said before the build, as the other files are
    const b = await startRebuild(dir, m, { quiet: true, quietStrategy: true, force: s.force, fullBuild: false }).built;
    p.rebuild = rebuildRecord(b, m, null, dir);
    throw new KerncapError("E_NO_GPU", `rebuilt by ${builderWords(b.builder)} in ${b.seconds.toFixed(2)} s (it compiles)${NOT_REPLAYED}${e.message}`, {
      ...(e.hint ? { hint: e.hint } : {}),
    });
  }
}

/**
 * The error a check ends with when no GPU is here (E_NO_GPU): a damaged memory image first. The
 * replay checks every restored chunk's kc64 on the GPU; without one, each stored chunk is checked
 * on the CPU (verifyRegions, as `inspect --verify` does: one read of the images) once the GPU was
 * found missing, not before every replay (the GPU's check costs a replay nothing, the CPU's a read
 * of every stored byte). Skipped with --no-verify (for the user's own captures) and for an archive,
 * whose chunks its unpack checked.
 * @returns the E_CHECKSUM of a damaged chunk, else `e`
 */
function damagedFirst(e: unknown, p: Checked): unknown {
  if (!isKerncapError(e) || e.code !== "E_NO_GPU") return e;
  try {
    checkChunksOnCpu(p);
  } catch (damaged) {
    return damaged;
  }
  return e;
}

/** verifyRegions of the capture's memory images, once per check (p.chunks: set where its checksums are checked, cleared once done). @throws KerncapError E_CHECKSUM naming the file, range and chunk */
function checkChunksOnCpu(p: Checked): void {
  const c = p.chunks;
  p.chunks = undefined;
  if (c) verifyRegions(c.dir, c.m);
}

/** What one capture's check has come to so far, for the outcome of a failure and the clean-up: an archive's temp folder, the manifest, the rebuild started and its record, the note. */
interface Checked {
  tmp?: string;
  m?: Manifest;
  /** The capture whose memory images' chunks are still to be checked on the CPU where no GPU checks them (damagedFirst). */
  chunks?: { dir: string; m: Manifest };
  rebuilt?: StartedRebuild;
  rebuild: Outcome["rebuild"];
  note: string | null;
  /** The capture folder checked (an archive's unpacked one), once known: a build error's paths are said relative to it. */
  dir?: string;
}

/** An outcome with nothing known yet but the capture's identity and path. */
function emptyOutcome(task: CaptureRef) {
  return {
    id: task.id,
    path: task.path,
    kernel: null,
    verdict: null,
    numerics: null,
    reason: null,
    code: null,
    note: null,
    captured: null,
    device: null,
    rebuild: null,
    timing: null,
  };
}

/**
 * The trust gate before --rebuild runs a capture's build.sh, before any GPU work; an archive's temp
 * folder is gone after this check: nothing to remember its trust by. `theirs`: why the archive is
 * not the user's alone (another user owns it or others may write it): plain --trust is then
 * refused for it, as for such a folder (--trust=DIGEST runs the bytes unpacked, read once).
 * @throws KerncapError E_UNTRUSTED, E_TRUST_CHANGED (src/format/trust.ts requireTrustedBuild)
 */
function gateRebuild(task: CaptureRef, dir: string, m: Manifest, s: CheckSettings, theirs: string | undefined): void {
  requireTrustedBuild(dir, m, s.trust, {
    adopt: false, // a corpus no refusal showed: --trust runs builds, it makes no capture the user's own
    ...(theirs ? { theirs } : {}),
    // check takes plain --trust only (one digest names one capture's files): the way out is validate's, or a copy of the user's own
    theirsHint: (digest) =>
      task.kind === "archive"
        ? `Copy the archive to a folder of your own (cp ${task.path} DIR/), read what its build runs (printed on stderr as it was checked, sha256 ${digest}), then check that copy with --trust: only you can change it.`
        : `Read what its build runs (printed on stderr as it was checked); if you trust it, run kerncap validate ${shellPath(dir)} --trust=${digest} (remembered for this folder and these bytes: check then builds it).`,
    remember: task.kind !== "archive",
    command: "kerncap check --rebuild …",
    shown: "printed on stderr as it was checked",
    ...(task.kind === "archive" ? { name: `${task.path} (the capture inside it, unpacked for this check)` } : {}),
  });
}

/** The replay of a check (timed launches kept), of the rebuilt module when a rebuild was started beside it. */
function replayChecked(capture: ReturnType<typeof openCapture>, fe: ReturnType<typeof frontendOf>, s: CheckSettings, beside: StartedRebuild | undefined) {
  return replayBeside(beside, () => replay(capture, checkReplayOptions(capture.manifest, s, beside ? rebuiltRun(fe, capture.manifest, beside.module) : {})));
}

/**
 * What a check replays one capture with (its settings: timed launches with their samples kept,
 * checked runs, verify, --flush-l2, tolerances; on device 0 of the worker's), and `rebuilt`, the
 * rebuilt module's run (src/rebuild/rebuilder.ts rebuiltRun) where --rebuild started one.
 */
export function checkReplayOptions(m: Manifest, s: CheckSettings, rebuilt: Partial<ReplayOptions>): ReplayOptions {
  // several workers: this worker's GPU's timing window
  const window = gpuTimingWindow(s.timingWindows);
  return {
    ...(window ? { timingWindow: window } : {}),
    iters: s.iters,
    verify: s.verify,
    ordinal: 0,
    keepSamples: true,
    regionTypes: regionTypesOf(m),
    ...(s.runs !== undefined ? { runs: s.runs } : {}),
    ...(s.flushL2 ? { flushL2: true } : {}),
    ...s.tolerance,
    ...rebuilt,
  };
}

/**
 * A record's rebuild: how, how long, for which architecture (null: the captured one), the rebuilt
 * kernel's figures for it (moduleFigures), the toolkit its module names and the compiler the build
 * ran (a CUDA build.sh's nvcc), as validate's `rebuild` says them (a new user's finding: check's had neither).
 */
function rebuildRecord(b: Rebuilt, m: Manifest, targetArch: string | null, dir: string): NonNullable<Outcome["rebuild"]> {
  const { registers, stackFrameBytes, spillStoreBytes, spillLoadBytes, toolkit } = moduleFigures(
    b.module,
    targetArch ? { ...m, device: { ...m.device, arch: targetArch } } : m,
  );
  const nvcc = frontendOf(m).buildCompiler?.(dir);
  return {
    builder: b.builder,
    seconds: b.seconds,
    targetArch,
    registers,
    stackFrameBytes,
    spillStoreBytes,
    spillLoadBytes,
    toolkit,
    ...(nvcc ? { nvcc } : {}),
  };
}

/**
 * A build error's reason and diagnostics, the capture's own paths (src/…, as validate and eval say
 * them: nu14 #7): the first error diagnostic's line where the compiler gave one.
 */
function buildErrorParts(e: KerncapError, dir: string | undefined): { reason: string; diagnostics?: Diagnostic[] } {
  const inCapture = (s: string) => (dir ? s.split(`${resolve(dir)}/`).join("") : s);
  const raw = Array.isArray(e.details?.diagnostics) ? (e.details.diagnostics as Diagnostic[]) : [];
  const diagnostics = raw.map((d) => ({ ...d, file: inCapture(d.file) }));
  const first = diagnostics.find((d) => d.severity !== "warning");
  const head = inCapture(e.message.split("\n")[0]!);
  return {
    reason: first
      ? `${head.split(":")[0]}: ${first.file}:${first.line}: ${first.severity}: ${first.text}`
      : inCapture(e.message.split("\n").slice(0, 3).join(" / ")),
    ...(diagnostics.length ? { diagnostics } : {}),
  };
}

/** The outcome of a check that threw: `skipped` for a module this GPU cannot run (E_ARCH), else `error` with its code and the message's first lines. */
function failedOutcome(e: unknown, p: Checked, s: CheckSettings): Partial<Outcome> & Pick<Outcome, "outcome"> {
  const { m, rebuilt, note, rebuild } = p;
  const kernel = m ? m.kernel.demangled || m.kernel.name : null;
  const captured = m ? { name: m.device.name, arch: m.device.arch } : null;
  const message = (e as Error).message ?? String(e);
  if (isKerncapError(e) && e.code === "E_ARCH" && m) {
    const why = rebuilt
      ? "(rebuilt from its reproducer)"
      : s.rebuild
        ? "(no reproducer to rebuild it from: the module has no source)"
        : "(--rebuild rebuilds it from its reproducer, where it has one)";
    return { outcome: "skipped", kernel, captured, code: e.code, note, rebuild, reason: `${message.split("\n")[0]} ${why}` };
  }
  return {
    outcome: "error",
    kernel,
    captured,
    note,
    rebuild,
    code: isKerncapError(e) ? e.code : "E_INTERNAL",
    ...(isKerncapError(e) && e.code === "E_BUILD" ? buildErrorParts(e, p.dir) : { reason: message.split("\n").slice(0, 3).join(" / ") }),
  };
}

/**
 * The worker process of a check (`kerncap check --worker`, started by src/check/pool.ts through
 * src/util/self-exec.ts workerArgv): the settings and then one capture a line from `input`
 * (src/check/worker.ts, its protocol), each checked with checkCapture and its outcome handed to
 * `emit`; after a kernel fault cost the device context (the backend's device resets), the
 * outcome says retire and the worker ends.
 * @throws KerncapError E_USAGE for a line that is not the protocol's
 */
export async function checkWorker(input: ReadableStream<Uint8Array>, emit: (o: Outcome, retire: boolean) => void): Promise<void> {
  await serveTasks(lines(input), emit, checkCapture, () => deviceResets() > 0);
}
