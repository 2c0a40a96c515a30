/**
 * The private facts a capture's manifest records about the machine, the user and the job, and the
 * manifest without them (what `kerncap export` writes into its data/, and `kerncap pack --redact`
 * into its archive). A vendor or a colleague replays the kernel without any of them:
 *
 *   command                       the application's command line (argv)
 *   host.name, host.machineId     the host name; the machine id (removed by every pack and export); host.uid, the user's id
 *   process.hostname, cmdline     the capturing process's host name and command line
 *   process.jobEnv                the launcher's variables (SLURM_*, OMPI_*, PMI_*: SLURM_JOB_USER,
 *                                 SLURM_SUBMIT_DIR, the account …), all but the rank and size ones
 *   process.visibleDevices        CUDA_VISIBLE_DEVICES and the like (they may hold GPU UUIDs)
 *   process.deviceUuid, pciBusId  the GPU's identity
 *   source.* absolute paths       the project's folder (/home/USER/…), the TU, compile_commands.json,
 *                                 headers outside the project: the project's root becomes
 *                                 REDACTED_ROOT (what lies under it keeps its relative path, in a
 *                                 flag's -I path too), any other absolute path /redacted/ and its
 *                                 file name
 *
 * Kept: the kernel, launch, regions, checksums, the GPU's model and architecture, the driver
 * version, the compile flags (source.cuda.flags: they may carry -D values and -I paths outside the
 * project, which the docs say), the tool's version. The manifest has no checksum of its own (files[] lists the other
 * files), so the redacted manifest verifies as the original did.
 */
import { escapeForTerminal, jsonText } from "../escape.ts";
import { MANIFEST_FILE } from "./manifest.ts";
import { MANIFEST_MAX_BYTES, readInCapture } from "./paths.ts";

/** What the project's root folder becomes in a redacted manifest. */
export const REDACTED_ROOT = "/redacted/project";
/** What a private text field becomes. */
export const REDACTED = "(redacted)";

/** Launcher variables a redacted manifest keeps (a rank or a job size: a number, nothing about the user or the machine). */
const RANK_VARIABLE =
  /^(RANK|LOCAL_RANK|WORLD_SIZE|LOCAL_WORLD_SIZE|GROUP_RANK|OMPI_COMM_WORLD_(RANK|SIZE|LOCAL_RANK|LOCAL_SIZE)|PMI_(RANK|SIZE)|PMIX_RANK|SLURM_(PROCID|NTASKS|LOCALID|NODEID))$/;

type Json = Record<string, unknown>;
const obj = (x: unknown): Json | undefined => (x && typeof x === "object" && !Array.isArray(x) ? (x as Json) : undefined);

/**
 * The private fields manifest `json` (parsed kerncap.json, any shape: a received one is the
 * sender's) holds with a value: the names pack's notice lists, e.g. ["host name", "command line"].
 */
export function privateFields(json: unknown): string[] {
  const m = obj(json) ?? {};
  const out: string[] = [];
  const host = obj(m.host);
  const p = obj(m.process);
  const nonEmpty = (x: unknown) =>
    Array.isArray(x) ? x.length > 0 : typeof x === "string" ? x !== "" && x !== REDACTED : obj(x) ? Object.keys(obj(x)!).length > 0 : false;
  if (nonEmpty(host?.name) || nonEmpty(p?.hostname)) out.push("host name");
  if (nonEmpty(m.command) || nonEmpty(p?.cmdline)) out.push("command line");
  const env = obj(p?.jobEnv);
  if (env && Object.keys(env).some((k) => !RANK_VARIABLE.test(k))) out.push("job environment (SLURM_*, OMPI_*, PMI_*: user, account, submit folder)");
  if (nonEmpty(p?.deviceUuid) || nonEmpty(p?.pciBusId) || nonEmpty(p?.visibleDevices)) out.push("GPU UUID and PCI bus id");
  if (absolutePaths(m.source).some((s) => !s.startsWith("/redacted/"))) out.push("the project's absolute paths (user and folder names)");
  return out;
}

/** Every string of `x` (nested) that is an absolute path. */
function absolutePaths(x: unknown): string[] {
  if (typeof x === "string") return x.startsWith("/") ? [x] : [];
  if (Array.isArray(x)) return x.flatMap(absolutePaths);
  const o = obj(x);
  return o ? Object.values(o).flatMap(absolutePaths) : [];
}

/** A private string and what replaces it in text (redactText): a path its redacted path, anything else REDACTED. */
export type Replacement = [from: string, to: string];

/**
 * Manifest `json` without its private fields (see the module's comment), as a new object, and
 * the private strings it held (host names, paths, command-line words, variables' values: longest
 * first) with what replaces each, which redactText applies to the capture's README.md and pack's warnings.
 */
export function redactManifest(json: unknown): { json: Json; removed: Replacement[] } {
  const m = structuredClone(obj(json) ?? {}) as Json;
  const removed = new Map<string, string>();
  const take = (x: unknown) => {
    // a word of 3 or more characters, not a number alone (a README quotes both the kernel's sizes and these)
    if (typeof x === "string" && x.length >= 3 && x !== REDACTED && !/^\d+$/.test(x) && !removed.has(x)) removed.set(x, REDACTED);
    else if (Array.isArray(x)) x.forEach(take);
    else if (obj(x)) Object.values(obj(x)!).forEach(take);
  };
  if (Array.isArray(m.command)) {
    if (m.command.length) removed.set(m.command.join(" "), REDACTED);
    take(m.command.filter((w) => typeof w === "string" && w.includes("/"))); // a path; a bare word (python) may be any text
    m.command = [];
  }
  const host = obj(m.host);
  if (host) {
    take(host.name);
    const { uid: _uid, ...kept } = host;
    m.host = { ...kept, name: REDACTED, machineId: null };
  }
  const p = obj(m.process);
  if (p) {
    take(p.hostname);
    if (Array.isArray(p.cmdline) && p.cmdline.length) removed.set(p.cmdline.join(" "), REDACTED);
    take(Array.isArray(p.cmdline) ? p.cmdline.filter((w) => typeof w === "string" && w.includes("/")) : []);
    const env = obj(p.jobEnv) ?? {};
    const kept: Json = {};
    for (const [k, v] of Object.entries(env)) {
      if (RANK_VARIABLE.test(k) && typeof v === "string" && /^\d+$/.test(v)) kept[k] = v;
      else take(v);
    }
    take(p.visibleDevices);
    take(p.deviceUuid);
    take(p.pciBusId);
    const { deviceUuid: _u, pciBusId: _b, ...rest } = p;
    m.process = { ...rest, hostname: REDACTED, cmdline: [], jobEnv: kept, visibleDevices: {} };
  }
  if (m.source !== undefined) {
    const root = projectRootOf(m.source);
    const paths = absolutePaths(m.source).filter((s) => !s.startsWith("/redacted/"));
    // a path under the project's root keeps its place under REDACTED_ROOT; any other one its file name
    const mapped = (s: string): string => {
      if (!s.startsWith("/") || s.startsWith("/redacted/")) return s;
      if (root && (s === root || s.startsWith(`${root}/`))) return REDACTED_ROOT + s.slice(root.length);
      return `/redacted/${s.split("/").filter(Boolean).pop() ?? ""}`;
    };
    // a path inside another string (a flag's -I/home/USER/project/include) loses the project's root the same way
    const inText = (s: string): string => (s.startsWith("/") ? mapped(s) : root ? s.split(root).join(REDACTED_ROOT) : s);
    const walk = (x: unknown): unknown =>
      typeof x === "string"
        ? inText(x)
        : Array.isArray(x)
          ? x.map(walk)
          : obj(x)
            ? Object.fromEntries(Object.entries(obj(x)!).map(([k, v]) => [k, walk(v)]))
            : x;
    m.source = walk(m.source);
    if (root) removed.set(root, REDACTED_ROOT);
    for (const s of paths) removed.set(s, mapped(s));
  }
  return { json: m, removed: [...removed].sort((a, b) => b[0].length - a[0].length) };
}

/** source.cuda.projectRoot when it is an absolute path. */
function projectRootOf(source: unknown): string | undefined {
  const r = obj(obj(source)?.cuda)?.projectRoot;
  return typeof r === "string" && r.startsWith("/") && r !== "/" ? r.replace(/\/+$/, "") : undefined;
}

/** `text` with every private string of `removed` (redactManifest's, longest first) replaced by its redacted form. */
export function redactText(text: string, removed: readonly Replacement[]): string {
  let out = text;
  for (const [from, to] of removed) for (const form of writtenForms(from)) out = out.split(form).join(to);
  return out;
}

/**
 * The ways a README or a warning may have written `s`: as it is, and as the templates' escapes
 * write it (src/frontends/templates.ts TEMPLATE_ESCAPES: a one-line escape, \n and \t for a newline
 * and a tab; Markdown text's backslashes; a JSON or Python string's inside): a command line with a
 * newline (python -c "…") is quoted escaped, and the joined string alone no longer matches.
 */
function writtenForms(s: string): string[] {
  const oneLine = escapeForTerminal(s, { oneLine: true });
  const md = oneLine.replace(/([\\`*_{}\[\]#|<>~])/g, "\\$1");
  const json = JSON.stringify(s).slice(1, -1);
  return [...new Set([s, oneLine, md, json])].filter((f) => f.length > 0);
}

/**
 * The manifest of capture `dir` as every export and archive ships it: host.machineId null (the
 * machine's id makes a capture "made here": src/format/received.ts, src/format/pack.ts), and with
 * `redact` without its private fields (redactManifest). @returns its bytes (re-serialised) and the
 * private strings removed with their replacements (for redactText; [] without `redact`).
 * @throws KerncapError as readInCapture (E_UNSAFE_PATH, E_IO)
 */
export function shippedManifestOf(dir: string, redact: boolean): { bytes: Uint8Array; removed: Replacement[] } {
  const json = JSON.parse(readInCapture(dir, MANIFEST_FILE, MANIFEST_MAX_BYTES)!.toString("utf8")) as Json;
  const host = obj(json.host);
  if (host) host.machineId = null;
  const r = redact ? redactManifest(json) : { json, removed: [] };
  return { bytes: new TextEncoder().encode(`${jsonText(r.json, 2)}\n`), removed: r.removed };
}
