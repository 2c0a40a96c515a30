/**
 * Triton's pinned.json: what src/frontends/triton/repro.ts writes beside a Triton reproducer and
 * what `kerncap tune` (src/frontends/triton/tune.ts) and the trust decision (src/format/trust.ts: it names
 * the interpreter and the kernel file that run) read back. A received capture's pinned.json is
 * anyone's bytes: one valibot schema checks it wherever it is read, so a crafted one is E_MANIFEST
 * naming the file and the field, never a failure deep inside a verb. Shape (fields kerncap reads;
 * others are kept as written): `{fnName, python, kernelFile?, signature: {arg: type}, constexprs:
 * [{name, expr?, error?}], options: {num_warps…}, autotune?: {configList?: [{kwargs, num_warps,
 * num_stages, num_ctas, maxnreg}]} | null}`.
 */
import { join } from "node:path";
import * as v from "valibot";
import { KerncapError } from "../../errors.ts";
import { escapeForTerminal } from "../../escape.ts";
import { describeJsonError } from "../../format/json-position.ts";

export const PINNED_FILE = "pinned.json";

const Count = v.nullable(v.number());

export const Pinned = v.looseObject({
  /** The @triton.jit function's name (the kernel file is src/<fnName>.py). */
  fnName: v.string(),
  /** The interpreter the app ran (a path or a command name); KERNCAP_PYTHON overrides it. */
  python: v.string(),
  /** The kernel's module, relative to src/ (trust.ts refuses one outside src/); absent in older captures. */
  kernelFile: v.optional(v.string()),
  /** Each parameter's Triton type (`*fp32`, `i32`, `constexpr`…), in the kernel's order. */
  signature: v.record(v.string(), v.string()),
  /** The constexprs the launch pinned: a Python expression each, or why none was recorded. */
  constexprs: v.array(v.looseObject({ name: v.string(), expr: v.optional(v.string()), error: v.optional(v.string()) })),
  /** The launch's compile options (num_warps, num_stages, num_ctas, maxnreg…). */
  options: v.record(v.string(), v.unknown()),
  /** @triton.autotune's configs, as recorded at capture; null or absent when the kernel had none. */
  autotune: v.optional(
    v.nullable(
      v.looseObject({
        configList: v.optional(
          v.array(v.looseObject({ kwargs: v.record(v.string(), v.unknown()), num_warps: Count, num_stages: Count, num_ctas: Count, maxnreg: Count })),
        ),
      }),
    ),
  ),
});
export type Pinned = v.InferOutput<typeof Pinned>;

/**
 * The part of pinned.json that decides what a rebuild runs (src/format/trust.ts): an object (not a
 * list) naming the kernel file (every pinned.json kerncap writes does: repro.py and an export run
 * that file and no other, so one without it is refused before anything is shown or trusted:
 * adversary 79 #21) and the interpreter, a string when present. What tune reads besides is
 * checked by Pinned.
 */
export const PinnedRuns = v.pipe(
  v.looseObject({ python: v.optional(v.string()), kernelFile: v.string() }),
  v.check((x) => !Array.isArray(x), "Invalid type: Expected Object but received Array"),
);

/**
 * The pinned.json of folder `dir` (its bytes, as read by the caller: src/format/paths.ts
 * readInCapture), checked against Pinned (or `schema`: PinnedRuns, the fields trust.ts reads).
 * @throws KerncapError E_MANIFEST naming DIR/pinned.json and the field (or the JSON error's position)
 */
export function parsePinned(dir: string, bytes: Uint8Array): Pinned;
export function parsePinned(dir: string, bytes: Uint8Array, schema: typeof PinnedRuns): v.InferOutput<typeof PinnedRuns>;
export function parsePinned(dir: string, bytes: Uint8Array, schema: typeof Pinned | typeof PinnedRuns = Pinned): Pinned | v.InferOutput<typeof PinnedRuns> {
  const path = join(dir, PINNED_FILE);
  const hint =
    "pinned.json is kerncap's record of the Triton launch (src/<kernel>.py, the interpreter, the constexprs); nothing was run. Capture again, or ask the sender for a clean copy.";
  const text = Buffer.from(bytes).toString("utf8");
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new KerncapError("E_MANIFEST", `${path} is not valid JSON (${describeJsonError(text) || (e as Error).message})`, { hint });
  }
  const r = v.safeParse(schema, json, { abortEarly: true });
  if (!r.success) {
    const i = r.issues[0]!;
    const at = v.getDotPath(i) ?? "(top level)";
    throw new KerncapError(
      "E_MANIFEST",
      `${path} is malformed at ${escapeForTerminal(at, { oneLine: true })}: ${escapeForTerminal(i.message, { oneLine: true })}`,
      { hint },
    );
  }
  return r.output;
}
