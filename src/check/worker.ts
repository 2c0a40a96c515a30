/**
 * The worker side of `kerncap check --gpus …` (`kerncap check --worker`, started by
 * src/check/pool.ts with its own CUDA_VISIBLE_DEVICES): one process, one CUDA context, the
 * captures it is handed checked one after another in it.
 *
 * Protocol, JSON Lines: stdin's first line is `{"settings": CheckSettings}`, each later line
 * `{"task": CaptureRef}`; for each task, stdout gets one line `{"outcome": Outcome}` once the
 * capture is checked (src/format/check-record.ts). The worker ends at the end of stdin (its parent gone
 * too), and after a capture that cost it its device context (a kernel fault: the line then says
 * `"retire": true`, and the parent starts another worker for the next capture). Logs go to stderr.
 */
import * as v from "valibot";
import { KerncapError } from "../errors.ts";
import { boundedLines } from "../util/stream-text.ts";
import type { CaptureRef } from "./discover.ts";
import type { Outcome } from "../format/check-record.ts";
import type { CheckSettings } from "./runner.ts";

/**
 * The lines of a byte stream (UTF-8), without their newlines; a last line without one too: the
 * task and outcome lines of the worker protocol, whole (src/util/stream-text.ts boundedLines).
 */
export function lines(stream: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  return boundedLines(stream, Number.POSITIVE_INFINITY);
}

const Task = v.object({ task: v.object({ id: v.string(), path: v.string(), kind: v.picklist(["folder", "archive"]) }) });
const Settings = v.object({
  settings: v.object({
    iters: v.number(),
    runs: v.optional(v.number()),
    verify: v.boolean(),
    flushL2: v.optional(v.boolean()),
    rebuild: v.boolean(),
    buildOnly: v.optional(v.boolean()),
    timingWindows: v.optional(v.string()),
    force: v.boolean(),
    trust: v.boolean(),
    tolerance: v.object({
      atol: v.optional(v.number()),
      rtol: v.optional(v.number()),
      dtype: v.optional(v.string()),
      dtypes: v.optional(v.record(v.string(), v.string())),
      multiset: v.optional(v.array(v.string())),
    }),
  }),
});

export function parse<T extends v.GenericSchema>(schema: T, line: string, what: string): v.InferOutput<T> {
  let json: unknown;
  try {
    json = JSON.parse(line);
  } catch {
    json = undefined;
  }
  const r = v.safeParse(schema, json);
  if (!r.success)
    throw new KerncapError("E_USAGE", `kerncap --worker: stdin's line is not ${what}: ${line.slice(0, 200)}`, {
      hint: "--worker is kerncap check's and eval's own: its parent process writes its stdin.",
    });
  return r.output;
}

/**
 * Serve tasks from `input` until it ends, checking each with `check` and giving its outcome to
 * `emit`; after a task for which `lost()` (the device context is gone) holds, emit it with
 * retire = true and stop.
 * @throws KerncapError E_USAGE for a line that is not the protocol's
 */
export async function serveTasks(
  input: AsyncIterable<string>,
  emit: (o: Outcome, retire: boolean) => void,
  check: (t: CaptureRef, s: CheckSettings) => Promise<Outcome>,
  lost: () => boolean = () => false,
): Promise<void> {
  await serveProtocol(input, { settings: Settings, task: Task }, (t, s) => check(t, s), emit, lost);
}

/**
 * The worker side of the protocol for any settings and task (check's, eval's: src/eval/worker.ts):
 * the first line `{"settings": …}` checked by `schemas.settings`, each later `{"task": …}` by
 * `schemas.task`; `handle`'s outcome goes to `emit`, with retire when `lost()` holds after it (then
 * the worker stops). `prepare(settings)`, awaited before the first task is read, makes ready what
 * every task needs (eval's resident input) before one comes; it must not throw.
 * @throws KerncapError E_USAGE for a line that is not the protocol's
 */
export async function serveProtocol<S, T, O>(
  input: AsyncIterable<string>,
  schemas: { settings: v.GenericSchema<unknown, { settings: S }>; task: v.GenericSchema<unknown, { task: T }> },
  handle: (t: T, s: S) => Promise<O>,
  emit: (o: O, retire: boolean) => void,
  lost: () => boolean = () => false,
  prepare?: (s: S) => Promise<void>,
): Promise<void> {
  let settings: S | undefined;
  for await (const line of input) {
    if (!line.trim()) continue;
    if (settings === undefined) {
      settings = parse(schemas.settings, line, "the settings").settings;
      await prepare?.(settings);
      continue;
    }
    const o = await handle(parse(schemas.task, line, "a task").task, settings);
    const retire = lost();
    emit(o, retire);
    if (retire) return;
  }
}
