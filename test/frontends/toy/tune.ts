/**
 * The toy frontend's tune (Frontend.tune), a space of its own: `--config 'LEVEL=1,2,3'`. Each
 * config's "module" is src/kernel.txt written LEVEL times; its "time" is that module's length
 * (µs), and it matches when the text is the captured kernel's name. No GPU: it stands for a
 * frontend's sweep, reached through `kerncap tune` (src/ops/tune.ts) by the registry alone.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { KerncapError } from "../../../src/errors.ts";
import { readManifest } from "../../../src/format/capture-dir.ts";
import { pickWinner, type TuneDriver, type TuneRow } from "../../../src/frontends/tune.ts";

/** One config of the toy's space. */
export interface ToyConfig {
  level: number;
}

/** The space of `--config` specs: LEVEL=V1,V2 … (whole numbers from 1). @throws KerncapError E_USAGE */
export function toySpace(specs: string[]): ToyConfig[] {
  const levels = specs.flatMap((s) => {
    const m = /^LEVEL=(\d+(?:,\d+)*)$/.exec(s.trim());
    if (!m) throw new KerncapError("E_USAGE", `--config ${JSON.stringify(s)} is not a toy space`, { hint: "For example --config 'LEVEL=1,2,3'." });
    return m[1]!.split(",").map(Number);
  });
  if (levels.some((l) => l < 1)) throw new KerncapError("E_USAGE", "a toy LEVEL is 1 or more", { hint: "For example --config 'LEVEL=1,2,3'." });
  return [...new Set(levels)].map((level) => ({ level }));
}

export const toyTune: TuneDriver = {
  async run(dir, o) {
    const foreign = [
      o.defines.length ? "--define" : "",
      o.maxrregcount !== undefined ? "--maxrregcount" : "",
      o.nvccFlags.length ? "--nvcc-flag" : "",
      o.grid !== undefined ? "--grid" : "",
    ].filter(Boolean);
    if (foreign.length)
      throw new KerncapError("E_USAGE", `${foreign.join(", ")}: not options of a toy capture's tune`, { hint: "Sweep its levels: --config 'LEVEL=1,2,3'." });
    const m = readManifest(dir);
    const space = toySpace(o.configs); // its usage errors, then the trust gate, before any "build"
    o.gate();
    const text = readFileSync(join(dir, "src", "kernel.txt"), "utf8");
    const row = (config: ToyConfig, captured: boolean): TuneRow<ToyConfig> => {
      const us = text.length * config.level;
      return {
        config,
        captured,
        label: `LEVEL=${config.level}`,
        verdict: text.trim() === m.kernel.name ? "match" : "mismatch",
        medianUs: us,
        speedup: text.length / us,
      };
    };
    const rows = [row({ level: 1 }, true), ...space.filter((c) => c.level !== 1).map((c) => row(c, false))];
    const winner = pickWinner(rows) ?? null;
    return {
      dir,
      frontend: "toy",
      kernel: m.kernel.name,
      symbol: m.kernel.name,
      grid: null,
      rows,
      winner,
      paste: winner ? `LEVEL=${winner.config.level}` : null,
      seconds: { compile: 0, replay: 0 },
    };
  },
  params: (c) => (c && typeof c === "object" && "level" in c ? { LEVEL: String((c as ToyConfig).level) } : undefined),
};
