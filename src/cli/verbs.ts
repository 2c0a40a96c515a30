/** The verb table: one lazily imported file per verb in ./commands (main.ts dispatches; completion reads it). */
import type { CommandDef } from "citty";

export const commands = {
  list: () => import("./commands/list.ts").then((m) => m.default),
  run: () => import("./commands/run.ts").then((m) => m.default),
  inspect: () => import("./commands/inspect.ts").then((m) => m.default),
  replay: () => import("./commands/replay.ts").then((m) => m.default),
  validate: () => import("./commands/validate.ts").then((m) => m.default),
  profile: () => import("./commands/profile.ts").then((m) => m.default),
  tune: () => import("./commands/tune.ts").then((m) => m.default),
  check: () => import("./commands/check.ts").then((m) => m.default),
  judge: () => import("./commands/judge.ts").then((m) => m.default),
  clean: () => import("./commands/clean.ts").then((m) => m.default),
  eval: () => import("./commands/eval.ts").then((m) => m.default),
  pack: () => import("./commands/pack.ts").then((m) => m.default),
  unpack: () => import("./commands/unpack.ts").then((m) => m.default),
  export: () => import("./commands/export.ts").then((m) => m.default),
  schema: () => import("./commands/schema.ts").then((m) => m.default),
  doctor: () => import("./commands/doctor.ts").then((m) => m.default),
  demo: () => import("./commands/demo.ts").then((m) => m.default),
  mcp: () => import("./commands/mcp.ts").then((m) => m.default),
  completion: () => import("./commands/completion.ts").then((m) => m.default),
} satisfies Record<string, () => Promise<CommandDef<any>>>;
