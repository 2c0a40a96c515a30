/** Argument fragments shared by several verbs (typed through `as const satisfies`). */
import { readFileSync, writeSync } from "node:fs";
import { dataChannelFd, setStdoutAside } from "../native/stdout-aside.ts";
import type { ArgsDef } from "citty";
import { KerncapError } from "../errors.ts";
import { escapeForTerminal, jsonText } from "../escape.ts";
import { jsonDocument, type DocumentName } from "../format/documents.ts";
import { elementType, unknownElementType } from "../replay/tolerance.ts";
import { floatArg } from "../replay/tolerance-plan.ts";
import { nvtxSelection, type NvtxSelection } from "../capture/nvtx.ts";

/**
 * Options of a verb's internal protocol, not for people (check --worker: the worker process that
 * `check` starts, src/check/worker.ts): left out of --help, completion and the option lists of
 * usage errors; still accepted.
 */
export const HIDDEN_OPTIONS: ReadonlySet<string> = new Set(["worker"]);

export const jsonArg = {
  json: { type: "boolean", description: "Print machine-readable JSON on stdout (logs stay on stderr)", default: false },
} as const satisfies ArgsDef;

/** `--runtime cuda|hsa` of run and list: whose tool interface injects the capture library (src/capture/injector.ts). */
export const runtimeArg = {
  runtime: {
    type: "string",
    description:
      "cuda or hsa: the runtime that injects the capture library (CUDA_INJECTION64_PATH, HSA_TOOLS_LIB); default: the one this machine has (libcuda first, then libhsa-runtime64)",
  },
} as const satisfies ArgsDef;

/** `run` and `list`: NVTX range selection in Nsight Compute's spelling (src/capture/nvtx.ts; the grammar: c/cuda/kc_nvtx.h). */
export const nvtxArgs = {
  nvtx: { type: "boolean", default: false, description: "Follow the application's NVTX ranges (set by --nvtx-include/--nvtx-exclude too)" },
  "nvtx-include": {
    type: "string",
    description:
      'Only launches inside these NVTX ranges count, as ncu writes them: "A/" inside push/pop range A, "A/B/" B directly in A, "A/*/B/", "[A/" A outermost, "A]" A innermost, "A,B" start/end ranges, "DOMAIN@A/", "regex:RE/"; repeatable (any one)',
    valueHint: "EXPR",
  },
  "nvtx-exclude": { type: "string", description: "Launches inside these NVTX ranges do not count (same syntax; repeatable)", valueHint: "EXPR" },
} as const satisfies ArgsDef;

/** The NVTX selection of a `run`/`list` command line (undefined: none asked). @throws KerncapError E_USAGE for an expression that does not parse. */
export function nvtxOption(args: { nvtx?: unknown }, rawArgs: string[]): NvtxSelection | undefined {
  return nvtxSelection(Boolean(args.nvtx), repeatedOption(rawArgs, ["nvtx-include"]), repeatedOption(rawArgs, ["nvtx-exclude"]));
}

/**
 * `--print-summary MODE` (ncu's option, for `list` and `check`): one of `modes`, `fallback` when
 * not given.
 * @throws KerncapError E_USAGE for another value, naming the ones there are.
 */
export function printSummaryArg<T extends string>(value: unknown, modes: readonly T[], fallback: T): T {
  if (value === undefined) return fallback;
  const v = String(value);
  if ((modes as readonly string[]).includes(v)) return v as T;
  throw new KerncapError("E_USAGE", `--print-summary ${v}: not one of ${modes.join(", ")}`, {
    hint: `For example --print-summary ${modes.find((m) => m !== fallback) ?? fallback}.`,
  });
}

export const verboseArg = {
  verbose: { type: "boolean", description: "Debug logs and stack traces", default: false },
} as const satisfies ArgsDef;

export const dirArg = {
  dir: { type: "positional", description: "Capture folder (written by `kerncap run`)", required: true },
} as const satisfies ArgsDef;

/** The application command line: everything after `--`. */
export function appArgv(rawArgs: string[]): string[] {
  const i = rawArgs.indexOf("--");
  return i < 0 ? [] : rawArgs.slice(i + 1);
}

/** Parse a decimal integer option from `min` (default 0) to `max`. @throws KerncapError E_USAGE */
export function intArg(name: string, v: unknown, def: number, max = 1_000_000, min = 0, typed?: string): number {
  if (v === undefined) return def;
  const t = String(v);
  if (!/^[0-9]+$/.test(t) || Number(t) > max || Number(t) < min) {
    // the option as the user typed it (-s), with its name where that is another (--dispatch)
    const shown = typed && typed !== `--${name}` ? `${typed} (--${name})` : `--${name}`;
    throw new KerncapError("E_USAGE", `${shown} must be a whole number from ${min} to ${max}, got ${JSON.stringify(v)}`, {
      hint: `For example ${typed ?? `--${name}`} ${def}.`,
    });
  }
  return Number(t);
}

/**
 * How the user typed an option that has aliases: the last of `names` (name and aliases, without
 * dashes) on the command line before `--`, with its dashes as typed (`-s`, `--launch-skip`);
 * undefined when none was typed.
 */
export function optionAsTyped(rawArgs: string[], names: string[]): string | undefined {
  let found: string | undefined;
  for (const a of rawArgs) {
    if (a === "--") break;
    const m = /^(--?)([^=]+)/.exec(a);
    if (m && names.includes(m[2]!)) found = `${m[1]}${m[2]}`;
  }
  return found;
}

/**
 * Write a verb's JSON document on stdout, with its schema id first (`"schema": "kerncap.<verb>/N"`,
 * src/format/documents.ts; `kerncap schema VERB` prints its JSON Schema). The one writer of documents.
 */
export function printJson(name: DocumentName, doc: object): void {
  writeData(jsonText(jsonDocument(name, doc), 2) + "\n");
}

/** One document on one line (JSON Lines: a stream of documents, e.g. `validate --watch --json`), with its schema id first. */
export function printJsonLine(name: DocumentName, doc: object): void {
  writeData(jsonText(jsonDocument(name, doc)) + "\n");
}

/** One JSON line on the data channel that is no document (a protocol's message: `check --worker`, src/check/worker.ts). */
export function writeDataLine(message: object): void {
  writeData(jsonText(message) + "\n");
}

/**
 * --verify, said once: replay, validate and check read every stored chunk anyway (the restore), so checking
 * each chunk's kc64 checksum there costs little and is on (`--no-verify` skips it, for a capture of the user's own only: src/format/received.ts checksumsChecked); inspect
 * otherwise reads only the manifest and the small files, so reading the memory images is asked for
 * (`--verify`). Same checksums, same errors (E_CHECKSUM) in all three.
 */
export function verifyArg(on: boolean) {
  return {
    verify: {
      type: "boolean",
      description: on
        ? "Check the capture's checksums, every restored memory chunk's on the GPU (on by default; --no-verify skips it for a capture of your own, never a received one: faster on large captures, a damaged file goes unnoticed)"
        : "Also check every stored memory chunk's checksum (reads the memory images; replay and check do it by default)",
      negativeDescription: on ? "Skip the memory chunks' checksums" : "Check only the files' sizes and small files' SHA-256 (the default)",
      default: on,
    },
  } as const satisfies ArgsDef;
}

/**
 * --flush-l2 of every verb that times a kernel (replay, validate, tune, check, eval): the L2 state
 * of the timed launches (src/replay/session.ts l2Step), as ncu's --cache-control all.
 */
export const flushL2Arg = {
  "flush-l2": {
    type: "boolean",
    description: "Flush L2 before each timed launch (a read of 256 MiB, or of twice the L2 where that is more: clean lines, as ncu's --cache-control all)",
    default: false,
  },
} as const satisfies ArgsDef;

/**
 * --allow-version-mismatch of validate, profile --build, check --rebuild, eval and tune: build a reproducer
 * with another toolchain than the capture's (a Triton reproducer refuses another Triton version:
 * KERNCAP_FORCE=1 for its build.sh, templates/triton/repro.py). Not -f, which replaces an output.
 */
export function allowVersionMismatchArg(when = "") {
  return {
    "allow-version-mismatch": {
      type: "boolean",
      description: `${when}Build even when the toolchain differs from the capture's (another Triton version can compile different code)`,
      default: false,
    },
  } as const satisfies ArgsDef;
}

/** --atol/--rtol/--dtype/--multiset: how a replay is judged, shared by replay, validate, tune, check and eval. */
export const toleranceArgs = {
  // no "(Default: 0)": where the option is left out the capture's judging settings apply, and only without them 0 (nu10 #18b)
  atol: {
    type: "string",
    description:
      "Absolute tolerance per element (|got − expected| ≤ atol + rtol·|expected|) (default: the capture's judging settings from kerncap judge, else 0)",
  },
  rtol: { type: "string", description: "Relative tolerance per element (default: the capture's judging settings from kerncap judge, else 0)" },
  dtype: {
    type: "string",
    description:
      "Element type for regions whose type the kernel signature does not give, or REGION=T for one region (N, 0x…, param:N; repeatable) (default: the capture's judging settings from kerncap judge, else fp32)",
    valueHint: "T|REGION=T",
  },
  multiset: {
    type: "string",
    description:
      "Compare this region as a multiset of elements (an atomic append or compaction; element size from the type, 4 bytes by default): N (inspect's order), a VA 0x… inside it, param:N, changed or all; repeat or comma-separate",
    valueHint: "REGION",
  },
} as const satisfies ArgsDef;

/**
 * --atol/--rtol/--dtype/--multiset, checked before any GPU work (--multiset: its syntax here, the
 * regions it names once the manifest is read: src/replay/tolerance-plan.ts multisetRegions).
 * `rawArgs`: the verb's raw arguments, for every value of a repeated --multiset.
 * @throws KerncapError E_USAGE
 */
export function toleranceOptions(
  args: { atol?: unknown; rtol?: unknown; dtype?: unknown; multiset?: unknown },
  rawArgs: string[] = [],
): { atol?: number; rtol?: number; dtype?: string; dtypes?: Record<string, string>; multiset?: string[] } {
  // --dtype T (every region without a signature type) and --dtype REGION=T (that region), repeatable
  const typed = repeatedOption(rawArgs, ["dtype"]);
  const dtypeValues = typed.length ? typed : args.dtype ? [String(args.dtype)] : [];
  let dtype: string | undefined;
  const dtypes: Record<string, string> = {};
  for (const d of dtypeValues
    .flatMap((x) => x.split(","))
    .map((x) => x.trim())
    .filter(Boolean)) {
    const eq = d.indexOf("=");
    const [region, t] = eq < 0 ? [undefined, d] : [d.slice(0, eq).trim(), d.slice(eq + 1).trim()];
    if (!elementType(t)) throw unknownElementType(`--dtype ${d}`, t, true);
    if (region === undefined) dtype = t;
    else if (!/^(all|changed|\d+|0x[0-9a-fA-F]+|param:\d+)$/.test(region))
      throw new KerncapError("E_USAGE", `--dtype ${d}: ${JSON.stringify(region)} does not name a region`, {
        hint: "Name it as --multiset does: its index in `kerncap inspect`'s list (0-based), a VA inside it (0x…), param:N, changed or all; e.g. --dtype 2=bf16.",
      });
    else dtypes[region] = t;
  }
  const given = repeatedOption(rawArgs, ["multiset"]);
  const values = (given.length ? given : args.multiset !== undefined && args.multiset !== "" ? [String(args.multiset)] : [])
    .flatMap((v) => v.split(","))
    .map((v) => v.trim());
  for (const v of values) {
    if (!/^(all|changed|\d+|0x[0-9a-fA-F]+|param:\d+)$/.test(v)) {
      throw new KerncapError("E_USAGE", `--multiset ${JSON.stringify(v)} does not name a region`, {
        hint: "Name it by its index in `kerncap inspect`'s list (0-based), a VA inside it (0x…), param:N (the region kernel parameter N points into), changed or all.",
      });
    }
  }
  return {
    atol: floatArg("atol", args.atol),
    rtol: floatArg("rtol", args.rtol),
    dtype,
    ...(Object.keys(dtypes).length ? { dtypes } : {}),
    ...(values.length ? { multiset: values } : {}),
  };
}

/**
 * --kernel/-k/--kernel-name as the capture library takes it: a POSIX ERE searched in the mangled
 * and the demangled name. ncu's `regex:RE` spelling is accepted and means RE. Where ncu compares
 * a name given without `regex:` exactly, kerncap still searches (`foo` == `regex:foo`); anchor it
 * for one kernel only, e.g. `^softmax\(` (demangled) or `^_Z7softmax` (mangled).
 */
export function kernelPattern(v: unknown): string {
  if (v === undefined || v === null) return "";
  const s = String(v);
  return s.startsWith("regex:") ? s.slice("regex:".length) : s;
}

/**
 * `--trust` or `--trust=DIGEST` (the digest a refusal showed: src/format/trust.ts requireTrustedBuild).
 * citty reads a boolean flag's `=VALUE` as true and drops the value, so the digest is taken from
 * the raw arguments before `--`.
 * @returns false, true (plain --trust) or the digest (64 hex digits, `sha256:` allowed before them)
 * @throws KerncapError E_USAGE for a value that is not a SHA-256 digest
 */
export function trustArg(flag: unknown, rawArgs: string[], name = "trust"): boolean | string {
  const end = rawArgs.indexOf("--");
  let digest: string | undefined;
  for (const a of end < 0 ? rawArgs : rawArgs.slice(0, end)) if (a.startsWith(`--${name}=`)) digest = a.slice(`--${name}=`.length);
  if (digest === undefined) return Boolean(flag);
  if (!/^(sha256:)?[0-9a-fA-F]{64}$/.test(digest))
    throw new KerncapError("E_USAGE", `--${name}=${JSON.stringify(digest).slice(1, -1)} is not a digest`, {
      hint: `Give the sha256 that kerncap printed (64 hex digits): --${name}=DIGEST; or plain --${name} in a folder of your own.`,
    });
  return digest;
}

/**
 * Every value of an option given several times (citty keeps only the last): `--name V`,
 * `--name=V`, `-a V` for each spelling in `names`, before the `--` that starts the application.
 */
export function repeatedOption(rawArgs: string[], names: string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < rawArgs.length; i++) {
    const a = rawArgs[i]!;
    if (a === "--") break;
    const m = /^--?([^=]+)(?:=(.*))?$/.exec(a);
    if (!m || !names.includes(m[1]!)) continue;
    if (m[2] !== undefined) out.push(m[2]);
    else if (i + 1 < rawArgs.length) out.push(rawArgs[++i]!);
  }
  return out;
}

/**
 * Write human-readable text (not a --json document) on the data channel, every control character,
 * bidi control and line separator escaped (src/escape.ts; newlines and tabs kept): a verb's report
 * carries names from a manifest, an archive or a results file. The one printer of verbs' text.
 */
export function printText(text: string): void {
  writeData(escapeForTerminal(text));
}

/** Write to the data channel: stdout, or the copy of it that keepStdoutForData() set aside. */
function writeData(text: string): void {
  const dataFd = dataChannelFd();
  if (dataFd === undefined) return void process.stdout.write(text);
  // every byte, however the pipe takes them: a write may take part of the text, or none when the
  // reader's pipe is full and the fd non-blocking (EAGAIN) — seen on the H200, where a `check
  // --json` document of 150 KB reached its reader cut at 64 KiB, with exit 0
  const bytes = Buffer.from(text);
  for (let done = 0; done < bytes.length; ) {
    try {
      done += writeSync(dataFd, bytes, done, bytes.length - done);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      // the reader went away (`kerncap replay DIR --json | true`): exit as a piped tool does, as process.stdout's EPIPE does (src/cli/main.ts)
      if (code === "EPIPE") process.exit(141);
      if (code !== "EAGAIN") throw e;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1); // 1 ms for the reader
    }
  }
}

/**
 * The stdout a child kerncap should get so that its own document reaches our data channel: the
 * fd that keepStdoutForData() set aside, or our stdout. (The no-ASLR replay retry, src/replay/aslr.ts,
 * once inherited fd 1 after the redirect and its --json document landed on stderr: seen on the H200.)
 */
export function dataStdio(): number | "inherit" {
  return dataChannelFd() ?? "inherit";
}

/**
 * Set fd 1 aside for the data channel and point fd 1 at a private file copied to stderr escaped
 * (src/native/stdout-aside.ts setStdoutAside): under --json and in a worker, before anything runs.
 */
export const keepStdoutForData = setStdoutAside;

/**
 * Refuse a command line with an argument that is not UTF-8. Bun gives process.argv decoded as
 * UTF-8, each byte that is not put as U+FFFD: a path so given names another file, or none
 * (adversary 68: `validate c$'\377'odd --trust` trusted and built the folder `c\uFFFDodd`), and an
 * application's argument would reach it changed. The bytes come from `cmdline` (/proc/self/cmdline:
 * NUL-separated, the executable first), its last `count` words (kerncap's arguments, numbered from 1
 * after the verb's `kerncap`); elsewhere, nothing is checked.
 * @throws KerncapError E_USAGE naming the argument (its bytes shown as \xHH)
 */
export function refuseNotUtf8Arguments(count = process.argv.length - 2, cmdline = "/proc/self/cmdline"): void {
  let raw: Buffer;
  try {
    raw = readFileSync(cmdline);
  } catch {
    return;
  }
  const utf8 = new TextDecoder("utf-8", { fatal: true });
  const args = raw
    .subarray(0, raw.at(-1) === 0 ? -1 : undefined)
    .toString("latin1")
    .split("\0")
    .slice(1)
    .slice(-count || Infinity); // kerncap's own arguments are the last `count` (before them: under `bun run`, the script)
  for (const [i, a] of args.entries()) {
    const bytes = Buffer.from(a, "latin1");
    try {
      utf8.decode(bytes);
    } catch {
      const shown = [...bytes].map((b) => (b >= 0x20 && b < 0x7f && b !== 0x5c ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, "0")}`)).join("");
      throw new KerncapError("E_USAGE", `argument ${i + 1} (${shown}) is not UTF-8: kerncap reads its arguments as UTF-8, and would name another file`, {
        hint: "Rename the file or folder to a UTF-8 name (mv, or convmv), then give that name; an application's argument that is not UTF-8: pass it through a wrapper script.",
      });
    }
  }
}
