/** `kerncap inspect DIR`: the manifest in human form, or as JSON. */
import { defineCommand } from "citty";
import { escapeForTerminal, listForTerminal } from "../../escape.ts";
import { readManifest, verifyFiles, verifyRegions } from "../../format/capture-dir.ts";
import { receivedReasons } from "../../format/received.ts";
import { trustRecorded } from "../../format/trust.ts";
import { readWhatRuns } from "../../format/what-runs.ts";
import "../../frontends/index.ts"; // the frontend registry: trustRecorded reads every frontend's run files (src/format/run-files.ts)
import type { Manifest, ProcessIdentity } from "../../format/manifest.ts";
import { basename, resolve } from "node:path";
import { stderrProgress } from "../../util/progress.ts";
import { type ErrorCode, isKerncapError, KerncapError } from "../../errors.ts";
import { log } from "../../log.ts";
import { dirArg, jsonArg, printJson, verboseArg, printText, verifyArg } from "../args.ts";
import { JUDGE_FILE } from "../../format/file-names.ts";
import { readInCapture } from "../../format/paths.ts";
import {
  acceptCommand,
  describeJudging,
  judgingAccepted,
  judgingNotOwn,
  notUsedNote,
  readJudgingFile,
  type JudgeSettings,
} from "../../replay/judge-settings.ts";
import { oneLine } from "../format.ts";
import { formatBytes, plural } from "../../util/format.ts";
import { inspectRegion, regionArgs } from "./inspect-region.ts";
import { differingFiles, type DifferingFiles } from "../../format/source-digests.ts";
import { frontendOf } from "../../frontends/index.ts";
import { flagWords, readBuildScripts } from "../../frontends/stock-build.ts";
import { folderInCapture, resolveInCapture } from "../../format/paths.ts";
import { shellPath } from "../../util/shell-quote.ts";

/**
 * A parameter's value as inspect shows it: its bytes as a little-endian hex number (up to 8 bytes),
 * and for an 8-byte value inside a captured region, that region (inspect's index) and the offset
 * into it, e.g. `= 0x7f31e7e80010 → region [2] + 16 B`. Empty when the bytes are not at hand.
 */
export function paramValue(m: Pick<Manifest, "regions">, p: { offset: number; size: number }, params?: Uint8Array): string {
  if (!params || p.size < 1 || p.size > 8 || p.offset + p.size > params.length) return "";
  let v = 0n;
  for (let i = p.size - 1; i >= 0; i--) v = (v << 8n) | BigInt(params[p.offset + i]!);
  const at = p.size === 8 ? m.regions.findIndex((r) => v >= BigInt(r.va) && v < BigInt(r.va) + BigInt(r.size)) : -1;
  return ` = 0x${v.toString(16)}${at >= 0 ? ` → region [${at}] + ${formatBytes(Number(v - BigInt(m.regions[at]!.va)))}` : ""}`;
}

/** Human summary of a manifest (one string, lines); `params`: the kernel parameters' bytes (kernel/params.bin), for their values. */
export function describeManifest(m: Manifest, params?: Uint8Array): string {
  const L: string[] = [];
  L.push(`kernel     ${oneLine(m.kernel.demangled)}`);
  if (m.kernel.demangled !== m.kernel.name) L.push(`mangled    ${oneLine(m.kernel.name)}`);
  L.push(`frontend   ${m.kernel.frontend}; match "${oneLine(m.kernel.match)}" #${m.kernel.matchIndex} (launch ${m.kernel.launchIndex} of the process)`);
  L.push(
    m.device.driverVersion === 0 // made with no driver (kerncap demo): no driver version to show
      ? `device     ${oneLine(m.device.name)}; for ${m.device.arch}`
      : `device     ${oneLine(m.device.name)} ${m.device.arch}, driver ${m.device.driverVersion}${m.process?.deviceUuid ? `, ${m.process.deviceUuid}` : ""}${m.process?.pciBusId ? ` at PCI ${m.process.pciBusId}` : ""}`,
  );
  if (m.process) L.push(...describeProcess(m.process));
  L.push(
    `launch     ${m.launch.api} grid ${m.launch.grid.join("x")} block ${m.launch.block.join("x")} shared ${m.launch.sharedMemBytes} B cluster ${m.launch.cluster.join("x")}`,
  );
  for (const a of m.launch.attributes) L.push(`  attr     ${a.name} (${a.id}) = ${a.valueHex.replace(/(00)+$/, "") || "0"}`);
  if (m.fault)
    L.push(
      `fault      the launch faulted in the app: ${m.fault.name} (${m.fault.code}) ${m.fault.message}; no after state (kerncap replay reproduces the fault)`,
    );
  if (m.graph) L.push(`graph      kernel node ${m.graph.kernelNode} of CUDA graph ${m.graph.id} (captured at that graph launch)`);
  const fa = m.functionAttributes.filter((a) => a.value !== 0);
  if (fa.length) L.push(`func attrs ${fa.map((a) => `${a.name}=${a.value}`).join(", ")}`);
  L.push(`module     ${m.module.file} (${m.module.kind}, ${formatBytes(m.module.size)}) from ${m.module.source}`);
  L.push(`params     ${m.params.size} B in ${plural(m.params.layout.length, "parameter")} (layout from ${m.params.layoutSource})`);
  for (const p of m.params.layout) L.push(`  [${p.index}] offset ${p.offset} size ${p.size}${paramValue(m, p, params)}`);
  const changed = m.regions.filter((r) => r.changed);
  const M = m.memory;
  L.push(
    `memory     ${plural(m.regions.length, "region")}, ${formatBytes(M.beforeBytes)} live; ${changed.length} changed (${formatBytes(M.afterBytes)} in changed chunks)`,
  );
  L.push(
    `           stored ${formatBytes(M.storedBeforeBytes)} before, ${formatBytes(M.storedAfterBytes)} after, in ${formatBytes(M.chunkBytes)} chunks (${M.hash}${M.gpuScanUnavailable ? `; hashed on the CPU: ${M.gpuScanUnavailable}` : ", hashed on the GPU"})`,
  );
  const chunks = (r: Manifest["regions"][number]) => {
    const n = Math.ceil(r.size / M.chunkBytes);
    const stored = r.before.extents.reduce((s, x) => s + x[1], 0);
    return `${stored}/${plural(n, "chunk")} stored${r.changed ? `, ${r.changedChunks} changed (${formatBytes(r.changedBytes)})` : ""}`;
  };
  // [i]: the index judge --multiset/--dtype and replay --multiset take (multisetRegions: the manifest's order)
  // the index padded to the widest, so that the columns stay aligned past [9]
  const w = `[${Math.max(0, m.regions.length - 1)}]`.length;
  m.regions.forEach((r, i) =>
    L.push(`  ${`[${i}]`.padEnd(w)} ${r.changed ? "*" : " "} ${r.va} ${formatBytes(r.size).padStart(10)} ${r.kind.padEnd(11)} ${chunks(r)}`),
  );
  for (const g of m.globals)
    L.push(`  ${g.changed ? "*" : " "} global ${g.name} ${g.va} ${formatBytes(g.size)} ${chunks(g as unknown as Manifest["regions"][number])}`);
  L.push(`files      ${m.files.map((f) => `${f.path} sha256 ${f.sha256.slice(0, 12)}`).join(", ")}`);
  L.push(`capture    ${describeTimings(m)}`);
  L.push(`tool       kerncap ${m.tool.version} (${m.tool.library}), ${m.createdAt}`);
  return L.map(oneLine).join("\n"); // each line one line: a manifest's text cannot add one
}

/**
 * The capture's own timings (the capture library's: the sync before the launch, the before and after
 * snapshots, the kernel's GPU time in the app, the time from the app's start to the capture), those
 * the manifest records; a capture made without a GPU (`kerncap demo`'s, driver 0) has none.
 */
export function describeTimings(m: Manifest): string {
  const t = m.timing;
  const num = (k: string) => (typeof t[k] === "number" && Number.isFinite(t[k]) ? t[k] : undefined);
  const ms = (k: string) => (num(k) === undefined ? undefined : `${(num(k)! / 1000).toFixed(1)} ms`);
  const app = num("app_launch_us");
  const parts: [string, string | undefined][] = [
    ["sync", ms("sync_us")],
    ["before", ms("before_us")],
    ["after", ms("after_us")],
    // -1: the library could not time the kernel in the app
    ["kernel in app", app === undefined ? undefined : app >= 0 ? `${app.toFixed(1)} µs` : "not measured"],
    ["app to capture", num("app_to_capture_s") === undefined ? undefined : `${num("app_to_capture_s")} s`],
  ];
  const shown = parts.filter(([, x]) => x !== undefined).map(([k, x]) => `${k} ${x}`);
  if (shown.length) return shown.join(", ");
  return m.device.driverVersion === 0 ? "timings not measured (made without a GPU: kerncap demo)" : "timings not recorded in the manifest";
}

/**
 * The integrity verdict: verifyFiles (sizes and SHA-256 of the small files, memory image sizes
 * against memory.beforeFileBytes/afterFileBytes) and, with regions, verifyRegions (every stored
 * chunk's kc64 checksum). A checksum error becomes the verdict.
 */
export function checkIntegrity(
  dir: string,
  m: Manifest,
  regions: boolean,
  onBytes?: (done: number, total: number) => void,
): { verdict: "ok" | "damaged"; code?: ErrorCode; message?: string; hint?: string | null } {
  try {
    verifyFiles(dir, m);
    if (regions) verifyRegions(dir, m, onBytes);
    return { verdict: "ok" };
  } catch (e) {
    if (!isKerncapError(e) || e.code !== "E_CHECKSUM") throw e;
    return { verdict: "damaged", code: e.code, message: e.message, hint: e.hint ?? null };
  }
}

/** The capturing process's lines of `inspect`: pid, host, rank, selection, visible devices, command. */
export function describeProcess(p: ProcessIdentity): string[] {
  const sel = p.selection.by === "any" ? "the first process to reach the launch" : `--${p.selection.by} ${p.selection.value}`;
  const rank = p.rank === null ? "no rank variable" : `rank ${p.rank} (${p.rankVariable})`;
  const vis = Object.entries(p.visibleDevices).map(([k, v]) => `${k}=${v}`);
  const job = Object.entries(p.jobEnv).map(([k, v]) => `${k}=${v}`);
  return [
    `process    pid ${p.pid} (parent ${p.ppid}) on ${p.hostname || "?"}, ${rank}, process ${p.number >= 0 ? p.number : "?"} of the job; chosen as ${sel}`,
    ...(vis.length || job.length ? [`  env      ${[...vis, ...job].join(" ")}`] : []),
    // an archive packed with --redact and an export record none (src/format/redact.ts)
    `  command  ${p.cmdline.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : JSON.stringify(a))).join(" ") || "not recorded (removed by kerncap pack --redact or export)"}`,
  ];
}

/**
 * The trust line of inspect: one made here by this user, or a received capture with every reason
 * (receivedReasons) and one statement of whether a rebuild runs its build.sh now: only after
 * --trust, or without it because its build as it is now is trusted (trustRecorded: by --trust, or
 * by kerncap itself for the demo it wrote). `covered`: the files that trust covers (readWhatRuns:
 * build.sh, and a Triton capture's run files), named so the user knows which edit ends it.
 */
export function describeTrust(reasons: string[], trusted = false, covered: string[] = ["build.sh"]): string {
  if (!reasons.length)
    return "trust      made here: your seal for this folder (kerncap-made-here.json), this machine's id, your own files; a rebuild runs its build.sh without --trust";
  const files = covered.length > 1 ? `${covered.slice(0, -1).join(", ")} or ${covered[covered.length - 1]}` : (covered[0] ?? "build.sh");
  const head = trusted
    ? `trust      received (not shown to be made here by you), its build trusted as it is now: a rebuild runs its build.sh without --trust until ${files} changes. Received because`
    : "trust      received: a rebuild runs its build.sh only after --trust, because";
  return [head, ...reasons.map((r) => `  - ${r}`)].join("\n");
}

/** What inspect says of the reproducer project (build.sh, src/): the `reproducer` lines and field. */
export interface ReproducerFacts {
  /** The capture has a reproducer project (build.sh or src/). */
  present: boolean;
  /** The files to edit, relative to the capture (the frontend's built sources: CUDA's TU and kernel definition, Triton's kernel file), kerncap's generated ones left out. */
  edit: string[];
  /** Files under src/ kerncap generates from those (CUDA: the slice build.sh compiles), relative to the capture. */
  generated: string[];
  /** CUDA: the compile flags the capture recorded, and whether they were assumed (a default set: no compile command found) or recovered; `buildSh`: the words build.sh passes (include folders rewritten into ./src), read from a build.sh that is kerncap's own, absent otherwise; null for other frontends. */
  flags: { words: string[]; assumed: boolean; from: string; buildSh?: string[] } | null;
  /** src/ against what the capture wrote (manifest.sources), generated files left out (but one edited by hand); null when the manifest records nothing of it (made before it was recorded). */
  sources: DifferingFiles | null;
  /** Why the generated files are not made (Frontend.generatedState "not-made": CUDA's slice after an agent's build, build.sh then compiles the whole TU); absent when they are. */
  generatedNotMade?: string;
}

/**
 * The reproducer facts of capture `dir`: what to edit, with which flags, and whether src/ is still
 * what the capture wrote (and so what produced kernel/module.*). Text from the manifest is the
 * caller's to escape (a received capture's).
 */
export function reproducerFacts(dir: string, m: Manifest): ReproducerFacts {
  // build.sh a file, src/ a folder of the capture (resolveInCapture takes files only: a fixture without build.sh made it refuse src/)
  const present = buildShThere(dir) || folderOrNone(dir, "src") !== undefined;
  let built: string[] = [];
  let generated: string[] = [];
  let handEdited = false;
  let notMade: string | undefined;
  try {
    const f = frontendOf(m);
    generated = (f.generatedSources?.(m) ?? []).map((g) => `src/${g}`);
    built = (f.builtSources?.(dir, m) ?? []).map((b) => `src/${b}`);
    // a generated file kerncap did not make from the sources (CUDA's slice edited by hand, which validate compiles as it
    // is): compared as any source, so that an edit of it is said (a new user's finding: "as the capture wrote it")
    const g = f.generatedState?.(dir, m);
    handEdited = g?.state === "edited";
    if (g?.state === "not-made") notMade = g.reason ?? "";
  } catch {
    // a frontend this kerncap does not know: nothing to say of its files
  }
  const edit = [...new Set(built)].filter((b) => !generated.includes(b));
  const c = (m.source as { cuda?: { flags?: unknown; assumedFlags?: unknown; flagsFrom?: unknown; compileCommands?: unknown } } | undefined)?.cuda;
  const words = Array.isArray(c?.flags) ? c.flags.filter((w): w is string => typeof w === "string") : null;
  const assumed = Array.isArray(c?.assumedFlags) && c.assumedFlags.length > 0;
  const buildSh = words ? stockBuildShFlags(dir, m) : undefined;
  const flags = words
    ? {
        words,
        assumed,
        from: assumed ? "assumed: no compile command was found" : typeof c?.compileCommands === "string" ? `from ${c.compileCommands}` : "recovered",
        ...(buildSh ? { buildSh } : {}),
      }
    : null;
  const ignore = (p: string) => !handEdited && generated.includes(p);
  const sources = m.sources ? differingFiles(dir, m.sources, { ignore }) : null;
  return { present, edit, generated, flags, sources, ...(notMade !== undefined ? { generatedNotMade: notMade } : {}) };
}

/** Whether the capture holds something named build.sh (a link or a folder there too: inspect's trust line says what is wrong with it). */
function buildShThere(dir: string): boolean {
  try {
    return resolveInCapture(dir, "build.sh").stats !== undefined;
  } catch {
    return true;
  }
}

/** folderInCapture, or undefined where `rel` is no folder of the capture (missing, a file, a link). */
function folderOrNone(dir: string, rel: string): string | undefined {
  try {
    return folderInCapture(dir, rel);
  } catch {
    return undefined;
  }
}

/** The compile flags of `dir`'s build.sh as words (`"$here/src"` read as ./src), where it is kerncap's own (its frontend's template, compile settings only); undefined otherwise. */
function stockBuildShFlags(dir: string, m: Manifest): string[] | undefined {
  try {
    const bytes = readInCapture(dir, "build.sh", 1 << 20);
    if (!bytes) return undefined;
    const reading = readBuildScripts(frontendOf(m).templates, [{ name: "build.sh", bytes }]);
    return reading.stock && reading.flags !== undefined ? flagWords(reading.flags) : undefined;
  } catch {
    return undefined;
  }
}

/** The reproducer lines of inspect's text: the file to edit and the flags, then src/ against what the capture wrote. */
export function describeReproducer(r: ReproducerFacts, module: string): string {
  if (!r.present) return "reproducer none: the capture has no build.sh or src/ (validate and export's make run-src need one)";
  const edit = r.edit.length ? `edit ${r.edit.join(", ")}` : "edit the sources under src/";
  // the "not made" slice (an agent's build, a TU that cannot be sliced) is said as what build.sh then does (a new user's finding)
  const gen = !r.generated.length
    ? ""
    : r.generatedNotMade !== undefined
      ? ` (build.sh compiles it whole: ${r.generated.join(", ")} is not made${r.generatedNotMade ? `, ${r.generatedNotMade}` : ""})`
      : ` (build.sh compiles ${r.generated.join(", ")}, made from it)`;
  // the words build.sh passes where they differ (include folders rewritten into ./src: a new user's finding, -Idemo/app read as broken)
  const bs = r.flags?.buildSh;
  const flags = !r.flags
    ? ""
    : bs && bs.join(" ") !== r.flags.words.join(" ")
      ? `; nvcc flags ${bs.join(" ") || "none"} in build.sh (captured ${r.flags.words.join(" ") || "none"}, ${r.flags.from}; include folders copied into src/)`
      : `; nvcc flags ${r.flags.words.join(" ") || "none"} (${r.flags.from})`;
  const s = r.sources;
  const changed = s ? [...s.edited.map((p) => `${p} (edited)`), ...s.added.map((p) => `${p} (added)`), ...s.gone.map((p) => `${p} (gone)`)] : [];
  const second = !s
    ? "src/ not comparable: kerncap.json records no digests of it (made before kerncap recorded them)"
    : changed.length
      ? `src/ differs from what the capture wrote, which built ${module}: ${listForTerminal(changed.slice(0, 8), 8)}${changed.length > 8 ? `, … (${changed.length} files)` : ""}`
      : `src/ as the capture wrote it (what built ${module})`;
  return [`reproducer ${edit}${gen}${flags}`, `           ${second}`].map(oneLine).join("\n");
}

export default defineCommand({
  meta: { name: "inspect", description: "Show a capture: kernel, launch, parameters, regions, device, checksums" },
  args: {
    ...dirArg,
    ...verifyArg(false),
    ...regionArgs,
    ...jsonArg,
    ...verboseArg,
  },
  run({ args }) {
    const dir = String(args.dir);
    const m = readManifest(dir);
    if (args.region !== undefined) return inspectRegion(dir, m, args, Boolean(args.json));
    for (const o of ["dtype", "offset", "count"] as const)
      if (args[o] !== undefined)
        throw new KerncapError("E_USAGE", `--${o} goes with --region`, { hint: "kerncap inspect DIR --region N --dtype fp32 --count 64" });
    // whether a rebuild runs its build.sh without --trust, and why not (src/format/trust.ts)
    const reasons = receivedReasons(dir, m);
    const trusted = reasons.length > 0 && trustRecorded(dir, m);
    const covered = trusted ? coveredFiles(dir, m) : undefined;
    // the capture's judging settings (kerncap judge): a damaged file is said here, as the replay would
    let judging: JudgeSettings | null = null;
    let judgingDigest: string | undefined;
    let judgingError: string | null = null;
    try {
      const read = readJudgingFile(dir);
      judging = read?.settings ?? null;
      judgingDigest = read?.file;
    } catch (e) {
      if (!isKerncapError(e)) throw e;
      judgingError = e.message;
    }
    // a received capture's settings are the sender's, a file another user owns or may write perhaps theirs: unused until accepted (src/replay/judge-settings.ts judgingInEffect)
    const not = judging ? judgingNotOwn(dir, m) : undefined;
    const unused = !not || judgingAccepted(dir, judgingDigest) ? "" : `; ${notUsedNote(dir, not, judgingDigest)}`;
    const judgingLine = `judging    ${judgingError ?? (judging ? `${describeJudging(judging)} (kerncap judge, ${JUDGE_FILE})${unused}` : "as captured: bit-exact, element types from the signature or fp32 (kerncap judge sets more)")}`;
    // the summary first (it is what the user asked for), then the integrity verdict
    // a params.bin of another size than the manifest's is damage, said by the integrity check below
    // (E_CHECKSUM), not a refusal here; past 64 KiB more than the manifest's it is no file kerncap wrote
    const read = readInCapture(dir, m.params.file, m.params.size + 65536);
    const params = read && read.byteLength === m.params.size ? read : undefined;
    const reproducer = reproducerFacts(dir, m);
    if (!args.json)
      printText(
        `${describeManifest(m, params ? new Uint8Array(params) : undefined)}\n${describeReproducer(reproducer, m.module.file)}\n${describeTrust(reasons, trusted, covered)}\n${judgingLine}\n`,
      );
    const checked = args.verify ? "files+regions" : "files";
    // --verify reads every memory image (minutes for tens of GiB): a progress line on stderr
    const progress = args.verify
      ? stderrProgress(
          `checking ${basename(resolve(dir))}'s memory chunks`,
          m.memory.storedBeforeBytes + m.memory.storedAfterBytes,
          "bytes",
          Boolean(args.json),
        )
      : undefined;
    let integrity: ReturnType<typeof checkIntegrity>;
    try {
      integrity = checkIntegrity(dir, m, Boolean(args.verify), progress && ((done) => progress.update(done)));
    } finally {
      progress?.end();
    }
    if (args.json) {
      printJson("inspect", {
        dir: resolve(dir),
        // the manifest but for host.machineId, null as an archive ships it (src/format/pack.ts): the id that
        // makes a capture count as made here is not printed (an inspect --json pasted into a report); `received` says it
        manifest: m.host ? { ...m, host: { ...m.host, machineId: null } } : m,
        // a capture made here by this user runs its build without --trust: trusted, as a received one the user trusted
        received: { received: reasons.length > 0, reasons, trusted: reasons.length === 0 || trusted },
        integrity: { checked, ...integrity },
        judging: judgingError ? { error: judgingError } : judging,
        // false with no settings (nothing to use) too, as judge's `used`; judgingAccept: settings awaiting acceptance (nu10 #11, #28)
        judgingUsed: judging !== null && !unused,
        judgingAccept: unused && judgingDigest ? { digest: judgingDigest, command: acceptCommand(shellPath(dir), judgingDigest) } : null,
        reproducer,
      });
      // the document above is the answer (exit 2, kerncap.inspect/1: docs/verbs.md); stderr says it as every error is said, its code first
      if (integrity.verdict !== "ok") {
        log.error(`${integrity.code}: ${integrity.message}`);
        if (integrity.hint) log.info(integrity.hint);
      }
      return integrity.verdict === "ok" ? 0 : 2;
    }
    // the report's own integrity line says it too, before the error (nu16 #10: the report ended at judging)
    if (integrity.verdict !== "ok") {
      printText(`integrity  DAMAGED: ${escapeForTerminal(integrity.message ?? "", { oneLine: true })}\n`);
      throw new KerncapError(integrity.code!, integrity.message!, { hint: integrity.hint ?? undefined });
    }
    printText(
      `integrity  ${args.verify ? "every checksum matches" : "files present, sizes and small files' SHA-256 match; memory chunks not checked (--verify checks them)"}\n`,
    );
    return 0;
  },
});

/** The names of the files a trusted build's trust covers (readWhatRuns), undefined when they cannot be read (the rebuild's gate says why). */
function coveredFiles(dir: string, m: Manifest): string[] | undefined {
  try {
    return readWhatRuns(dir, m.kernel.frontend ?? "", true)
      ?.files.filter((f) => !f.listedOnly)
      .map((f) => f.name);
  } catch {
    return undefined;
  }
}
