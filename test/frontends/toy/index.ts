/**
 * A frontend of the tests, made the way a new frontend is: this folder and one registration
 * (test/cpu/frontends.test.ts calls registerFrontend, where a real one is a line of
 * src/frontends/index.ts). Its kernel is text: the reproducer's build.sh copies src/kernel.txt to
 * build/kernel.bin, and its fast build copies it into the work folder, with one byte more when the
 * text holds TOY_FAST_DIFFERS, so that the rebuild policy's check has something to refuse. A
 * module holding BAD_LAYOUT is refused by its module check, as a changed parameter layout is.
 * What it owns, as a real frontend does: its variable (./env.ts, KERNCAP_TOY_LEVEL), the file its
 * build reads commands from beside build.sh (recipe.txt: trust covers it), its tune space
 * (./tune.ts), its doctor check and its templates (./templates.ts).
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { KerncapError } from "../../../src/errors.ts";
import type { FastBuilder, Frontend } from "../../../src/frontends/frontend.ts";
import { renderTemplateDir, templatesFolder } from "../../../src/frontends/templates.ts";
import { TOY_ENV_VARS, toyLevelDefault } from "./env.ts";
import { TOY_TEMPLATES } from "./templates.ts";
import { toyTune } from "./tune.ts";

export interface ToyOptions {
  level: number;
}

/** The hooks the toy frontend was called through, in order (the test reads them). */
export const toyCalls: string[] = [];

const copyBuild: FastBuilder = {
  series: () => ({ save: () => toyCalls.push("save") }),
  async build(dir, work) {
    const text = readFileSync(join(dir, "src", "kernel.txt"), "utf8");
    mkdirSync(work, { recursive: true });
    const module = join(work, "fast.bin");
    writeFileSync(module, text.includes("TOY_FAST_DIFFERS") ? text + "!" : text);
    return { module, plan: "toy-copy", seconds: 0.001, steps: { copyMs: 0.4 }, prune: { lines: () => ({ before: 2, after: 1 }) } };
  },
  differs: (full, fast) => (Buffer.compare(Buffer.from(full), Buffer.from(fast)) === 0 ? null : "the bytes differ"),
  buildShModule: "build/kernel.bin", // ./build.sh.hbs's output
};

export const toyFrontend: Frontend<ToyOptions> = {
  name: "toy",
  validates: true,
  captureArgs: { "toy-level": { type: "string", description: "Toy: how much the reproducer says (default $KERNCAP_TOY_LEVEL, else 1)" } },
  captureOptions(args) {
    const level = Number(args["toy-level"] ?? toyLevelDefault());
    if (!Number.isInteger(level) || level < 0)
      throw new KerncapError("E_USAGE", `--toy-level ${String(args["toy-level"] ?? toyLevelDefault())} is not a whole number`, {
        hint: "For example --toy-level 2.",
      });
    return { level };
  },
  templates: TOY_TEMPLATES,
  env: TOY_ENV_VARS,
  runFiles: { files: ["recipe.txt"] },
  tune: toyTune,
  doctor: () => [{ id: "toy", status: "ok", detail: "the toy needs nothing of this machine" }],
  enrich: (ctx, o) =>
    ctx.raw.frontend !== "toy"
      ? {}
      : {
          source: { toy: { level: o.level } },
          beforeRename: (dir, m) => {
            renderTemplateDir(templatesFolder("toy", TOY_TEMPLATES), dir, { kernel: m.kernel.demangled, level: o.level });
            mkdirSync(join(dir, "src"), { recursive: true });
            writeFileSync(join(dir, "src", "kernel.txt"), `${m.kernel.name}\n`);
          },
        },
  beforeBuild: () => void toyCalls.push("beforeBuild"),
  checkRebuiltModule(module) {
    toyCalls.push("checkRebuiltModule");
    if (readFileSync(module, "utf8").includes("BAD_LAYOUT"))
      throw new KerncapError("E_PARAM_LAYOUT", "the toy kernel's layout changed", { hint: "Take BAD_LAYOUT out of src/kernel.txt." });
  },
  fastBuild: copyBuild,
  generatedSources: () => ["generated.txt"],
};
