/**
 * The index of a folder holding several captures of one run (`run --kernel A --kernel B`,
 * `--capture-all`): DIR/kerncap-captures.json, written by src/capture/session.ts
 * (finalizeCaptureSet), one entry per capture folder DIR/<n>-<name>. Shape:
 * `{format: "kerncap-capture-set", version: 1, command: [argv], captures: [{dir, kernel, launchIndex}]}`
 * (dir: one folder name inside DIR; kernel: demangled name; launchIndex: 0-based launch captured).
 */
import { oneLine } from "../escape.ts";
import { join } from "node:path";
import * as v from "valibot";
import { KerncapError } from "../errors.ts";
import { describeJsonError, JSON_MAX_DEPTH, jsonDepth } from "./json-position.ts";
import { MANIFEST_MAX_BYTES, readInCapture } from "./paths.ts";

export const CAPTURE_SET_FILE = "kerncap-captures.json";
export const CAPTURE_SET_FORMAT = "kerncap-capture-set";

export const CaptureSet = v.object({
  format: v.literal(CAPTURE_SET_FORMAT),
  version: v.literal(1),
  command: v.array(v.string()),
  captures: v.array(
    v.object({
      /** One folder name inside the set's folder (no separator, not . or ..). */
      dir: v.pipe(v.string(), v.regex(/^(?!\.\.?$)[^/\\\0]+$/, "expected one folder name inside the capture set's folder")),
      kernel: v.string(),
      launchIndex: v.pipe(v.number(), v.integer(), v.minValue(0)),
    }),
  ),
});
export type CaptureSet = v.InferOutput<typeof CaptureSet>;

/**
 * DIR's capture-set index, checked against CaptureSet, or undefined when DIR has none.
 * @throws KerncapError E_MANIFEST when the file is not valid JSON or breaks the schema (naming the field), lists more
 *   than CAPTURE_SET_MAX captures or one folder twice, E_UNSAFE_PATH (a link, a FIFO, past 64 MiB: src/format/paths.ts).
 */
export function readCaptureSet(dir: string): CaptureSet | undefined {
  const path = join(dir, CAPTURE_SET_FILE);
  const bytes = readInCapture(dir, CAPTURE_SET_FILE, MANIFEST_MAX_BYTES);
  if (!bytes) return undefined;
  let json: unknown;
  const text = bytes.toString("utf8");
  if (jsonDepth(text) > JSON_MAX_DEPTH)
    throw new KerncapError("E_MANIFEST", `${path} nests ${jsonDepth(text)} levels deep (an index kerncap writes nests fewer than ${JSON_MAX_DEPTH})`, {
      hint: "The capture set's index is damaged or crafted; give one capture folder inside it, or capture again.",
    });
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new KerncapError("E_MANIFEST", `${path} is not valid JSON (${describeJsonError(text) || (e as Error).message}): ${(e as Error).message}`, {
      hint: "The capture set's index was damaged; give one capture folder inside it, or capture again.",
    });
  }
  const r = v.safeParse(CaptureSet, json, { abortEarly: true });
  if (!r.success) {
    const i = r.issues[0]!;
    const at = v.getDotPath(i) ?? "(top level)";
    throw new KerncapError("E_MANIFEST", `${path} is malformed at ${oneLine(at)}: ${oneLine(i.message)}`, {
      hint: "The capture set's index was damaged; give one capture folder inside it, or capture again.",
    });
  }
  // one folder per capture, as many as one run makes (--max-captures, at most 10 000): an index listing one member 1.3
  // million times (53 MB of JSON in a 169 KB tarball) had eval and kerncap mcp open it each time, 12 GB (adversary 64)
  const n = r.output.captures.length;
  // a run that completed none writes no index (src/capture/session.ts): an empty one is crafted, and eval took its first member (adversary 78)
  if (n === 0)
    throw new KerncapError("E_MANIFEST", `${path} lists no capture: a run's set holds at least one`, {
      hint: "The capture set's index is damaged or crafted; give one capture folder inside it, or capture again.",
    });
  if (n > CAPTURE_SET_MAX)
    throw new KerncapError("E_MANIFEST", `${path} lists ${n} captures: a run makes at most ${CAPTURE_SET_MAX} (--max-captures)`, {
      hint: "The capture set's index is damaged or crafted; give one capture folder inside it, or capture again.",
    });
  const seen = new Set<string>();
  for (const c of r.output.captures) {
    if (seen.has(c.dir))
      throw new KerncapError("E_MANIFEST", `${path} lists ${JSON.stringify(c.dir)} twice: each capture of a set has its own folder`, {
        hint: "The capture set's index is damaged or crafted; give one capture folder inside it, or capture again.",
      });
    seen.add(c.dir);
  }
  return r.output;
}

/** The most captures a set's index lists: the most one run makes (kerncap run --max-captures). */
export const CAPTURE_SET_MAX = 10_000;
