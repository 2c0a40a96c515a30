/**
 * The launch grid of an autotuned Triton kernel, inferred from what the capture holds: the
 * captured grid (manifest launch.grid), the kernel's integer arguments (from the parameter bytes,
 * src/frontends/triton/tune.ts tritonScalarArgs) and the app's tile constexprs (pinned.json). Triton's grid
 * lambdas are nearly always, per axis, `cdiv(ARG, TILE)`, a product of two such terms (a matmul's
 * flattened `cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N)`), such a term times an argument (a batch), an
 * argument alone, or 1. Each form that gives the captured value with the app's config is a
 * candidate; names decide between candidates (BLOCK_M goes with M, XBLOCK with xnumel; strides are
 * no grid inputs); candidates that still differ on some config of the space make the answer
 * ambiguous, and `tune` asks for --grid, listing what it tried. Pure functions.
 */
import { oneLine } from "../../escape.ts";
import { evalGrid } from "../tune.ts";

export type GridInference = { grid: string; axes: string[] } | { grid: null; why: string; tried: string[] };

const tokens = (s: string) => s.toLowerCase().split("_").filter(Boolean);

/**
 * How well TILE's name goes with ARG's: 2 for BLOCK_M with M (the tile's last word, an axis of
 * one or two letters, is one of the argument's words: BLOCK_SIZE_N with N or n_cols) or XBLOCK
 * with xnumel, less 0.5 for K, by convention a matmul's reduction dimension (looped over inside
 * the kernel, not launched); 1 for a tile without an axis in its name (BLOCK, BLOCK_SIZE) with
 * any argument; 0 otherwise.
 */
export function nameScore(arg: string, tile: string): number {
  const a = tokens(arg);
  const t = tokens(tile);
  const last = t[t.length - 1]!;
  if (t.length > 1 && last.length <= 2 && a.includes(last)) return last === "k" ? 1.5 : 2;
  const m = /^([a-z])block$/.exec(tile.toLowerCase());
  if (m && arg.toLowerCase() === `${m[1]}numel`) return 2;
  if (t.every((w) => ["block", "size", "tile"].includes(w))) return 1;
  return 0;
}

interface Candidate {
  expr: string;
  score: number;
  /** Its value under a set of variables. */
  at: (vars: Record<string, number>) => number;
  /** It uses a tile constexpr. */
  tiled: boolean;
}

const cdiv = (a: number, b: number) => Math.ceil(a / b);

/**
 * Infer the grid expression (evalGrid's language, what --grid takes).
 * @param captured the captured grid (x, y, z)
 * @param args the kernel's integer arguments by name (strides and values ≤ 0 are not considered)
 * @param tiles the app's config: its whole-number constexprs by name
 * @param space the configs tune will launch (their constexprs), to tell candidates apart
 * @returns the expression and each axis's, or why none was found with every form tried
 */
export function inferGrid(
  captured: [number, number, number],
  args: Record<string, number>,
  tiles: Record<string, number>,
  space: Record<string, number>[],
): GridInference {
  const argNames = Object.keys(args).filter((a) => args[a]! > 0 && !/^stride/i.test(a));
  const tileNames = Object.keys(tiles).filter((t) => tiles[t]! > 0);
  const vars = (c: Record<string, number>) => ({ ...args, ...tiles, ...c });
  const terms: Candidate[] = [];
  for (const a of argNames)
    for (const t of tileNames) terms.push({ expr: `cdiv(${a}, ${t})`, score: nameScore(a, t), at: (v) => cdiv(v[a]!, v[t]!), tiled: true });
  const tried: string[] = [];
  const axes: string[] = [];
  const base = vars({});
  for (const [d, g] of captured.entries()) {
    const axis = "xyz"[d]!;
    if (g === 1) {
      axes.push("1");
      continue;
    }
    const fits: Candidate[] = [];
    for (const x of terms) if (x.at(base) === g) fits.push(x);
    for (const [i, x] of terms.entries()) {
      for (const y of terms.slice(i + 1)) {
        if (x.expr.split(",")[0] === y.expr.split(",")[0] || x.expr.split(", ")[1] === y.expr.split(", ")[1]) continue; // two axes of the problem, two tiles
        // a factor of 1 adds nothing the single term does not say (an inductor kernel's cdiv(rnumel, RBLOCK))
        if (x.at(base) > 1 && y.at(base) > 1 && x.at(base) * y.at(base) === g)
          fits.push({ expr: `${x.expr} * ${y.expr}`, score: x.score + y.score, at: (v) => x.at(v) * y.at(v), tiled: true });
      }
      for (const b of argNames) {
        if (x.expr.startsWith(`cdiv(${b},`)) continue;
        if (x.at(base) > 1 && args[b]! > 1 && x.at(base) * args[b]! === g)
          fits.push({ expr: `${x.expr} * ${b}`, score: x.score, at: (v) => x.at(v) * v[b]!, tiled: true });
      }
    }
    tried.push(
      `axis ${axis} = ${g}: cdiv(ARG, TILE), cdiv(ARG, TILE) * cdiv(ARG, TILE), cdiv(ARG, TILE) * ARG${argNames.length ? "" : " (no integer argument)"}`,
    );
    if (fits.length) {
      const best = Math.max(...fits.map((f) => f.score));
      const top = fits.filter((f) => f.score === best);
      // those that agree with the first on every config of the space are the same answer
      const differ = top.filter((f) => space.some((c) => f.at(vars(c)) !== top[0]!.at(vars(c))));
      if (differ.length) {
        return {
          grid: null,
          why: `axis ${axis}: ${top.length} formulas give ${g} for the app's config and differ on others: ${top
            .slice(0, 6)
            .map((f) => f.expr)
            .join("; ")}${top.length > 6 ? "; …" : ""}`,
          tried,
        };
      }
      axes.push(top[0]!.expr);
      continue;
    }
    const arg = argNames.find((a) => args[a] === g);
    if (arg) axes.push(arg);
    else axes.push(String(g)); // a launch dimension the config does not change (checked below)
  }
  const grid = axes.join(", ").replace(/(, 1)+$/, "");
  // a space that changes tiles with a grid that changes with none of them: no formula was found
  const changes = space.some((c) => Object.keys(c).some((k) => c[k] !== tiles[k]));
  if (changes && !axes.some((x) => x.includes("cdiv("))) {
    return {
      grid: null,
      why: `no axis of the captured grid ${captured.join("x")} is cdiv(ARG, TILE) or a product of such terms for the integer arguments (${oneLine(argNames.map((a) => `${a}=${args[a]}`).join(", ")) || "none"}) and the tiles (${oneLine(tileNames.map((t) => `${t}=${tiles[t]}`).join(", ")) || "none"})`,
      tried,
    };
  }
  // the formula gives the captured grid with the app's own config (by construction; evalGrid checks the text)
  const check = evalGrid(grid, base);
  if (check.join() !== captured.join())
    return { grid: null, why: `the inferred ${grid} gives ${check.join("x")}, the app launched ${captured.join("x")}`, tried };
  return { grid, axes };
}
