/**
 * The device-side pruning's entry points (./policy.ts has the whole design): pruneDeviceTU, and
 * DevicePruner, which keeps the tokens and the analysis of every declaration from one call to the
 * next and reads again only what follows the first changed character (the watch loop's saves).
 * What a call reuses it takes over from the last one rather than copies: the token arrays
 * (tokenize's prior: the last state's tokens are spent then, see spentTokens), the name index of
 * keptDeclarations (policy.ts's FinishMemo), and the last pruned text's prefix. Measured on
 * ggml's mul_mat_q TU (4.4 MB, 838 000 tokens, 19 000 declarations), warm prunes with an edit at
 * 0.999 / 0.9 / 0.5 of the text: 13 / 29 / 88 ms (52 / 69 / 104 ms when each call copied the
 * tokens and computed the rest again); cold 550 ms. Medians on a 2-core machine:
 * `node_modules/.bin/bun scripts/bench-prune.ts 10`.
 */
import { isName, spentTokens, tokenize, type Tokens } from "./tokens.ts";
import { type Item, splitItems, words } from "./declarations.ts";
import { analyse, type DeclInfo } from "./names.ts";
import { finish, type FinishMemo, type PruneResult } from "./policy.ts";

/** What a pruner keeps between calls: the last text, its tokens, items and declarations' analyses (./persist.ts saves it for the next process). */
export interface PruneState {
  text: string;
  t: Tokens;
  items: Item[];
  info: (DeclInfo | undefined)[];
  namespaces: string;
  /** What finish computed per item, for the next prune (memory only: a state read from a file has none). */
  memo?: FinishMemo;
  /** The items that name namespaces (`namespace N {`, `namespace a = b;`), ascending (memory only). */
  nsItems?: number[];
}

/** Length of the common prefix of a and b (UTF-16 units). */
function commonPrefix(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  // 64 KiB, then 1 KiB chunks compared as strings (a native compare), then characters
  for (const step of [65536, 1024]) while (i + step <= n && a.slice(i, i + step) === b.slice(i, i + step)) i += step;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}

/**
 * A pruner that reuses, from one call to the next, the tokens and the analysis of every
 * namespace-scope declaration that ends before the first character that changed (the watch
 * loop's saves change one file of the TU: what comes before it is the same text). Same result
 * as pruneDeviceTU.
 */
export class DevicePruner {
  /** The last call's text and analysis, reused by the next call (./persist.ts: saved and restored between processes). */
  state: PruneState | undefined;
  /** Declarations whose analysis the last call reused. */
  reused = 0;

  prune(text: string): PruneResult {
    const t0 = performance.now();
    let t: Tokens,
      items: Item[],
      info: (DeclInfo | undefined)[] = [];
    // a state whose tokens a later prune took over (one set back on the pruner) is no starting point
    const st = this.state && !spentTokens.has(this.state.t) ? this.state : undefined;
    let k = -1;
    if (st) {
      const L = commonPrefix(st.text, text);
      for (let i = st.items.length - 1; i >= 0; i--) {
        const it = st.items[i]!;
        if (it.nest === 0 && it.kind !== "open" && it.b > it.a && st.t.end[it.b - 1]! <= L) {
          k = i;
          break;
        }
      }
    }
    if (st && k >= 0) {
      const tb = st.items[k]!.b;
      t = tokenize(text, st.t.end[tb - 1]!, st.t, tb);
      items = splitItems(t, tb, st.items.slice(0, k + 1));
      info = st.info.slice(0, k + 1);
    } else {
      t = tokenize(text);
      items = splitItems(t);
    }
    const namespaces = new Set(["std", "__gnu_cxx", "__cxxabiv1"]);
    const nsItems: number[] = [];
    const nsOf = (idx: number) => {
      const it = items[idx]!;
      if (it.kind === "open") {
        for (const w of words(t, it.a, it.b)) if (isName(w)) namespaces.add(w);
        nsItems.push(idx);
      }
      // a namespace alias (`namespace cg = cooperative_groups;`): `cg::thread_block` names thread_block
      else if (it.kind === "decl" && t.text[it.a] === "namespace" && t.text[it.a + 2] === "=" && isName(t.text[it.a + 1]!)) {
        namespaces.add(t.text[it.a + 1]!);
        nsItems.push(idx);
      }
    };
    // the reused items': those the last prune found among them (the same items, the same tokens)
    let from = 0;
    if (st?.nsItems && k >= 0) {
      for (const idx of st.nsItems) if (idx <= k) nsOf(idx);
      from = k + 1;
    }
    for (let idx = from; idx < items.length; idx++) nsOf(idx);
    const nsKey = [...namespaces].sort().join(" ");
    const sameInfo = !(st && nsKey !== st.namespaces);
    if (!sameInfo) info = []; // a namespace appeared or went: every declaration is read again
    this.reused = 0;
    for (let idx = 0; idx < items.length; idx++) {
      if (items[idx]!.kind !== "decl") continue;
      if (info[idx]) this.reused++;
      else info[idx] = analyse(t, items[idx]!, namespaces);
    }
    const { result, memo } = finish(text, t, items, info, namespaces, t0, st?.memo && k >= 0 ? { memo: st.memo, items: k + 1, sameInfo } : undefined);
    this.state = { text, t, items, info, namespaces: nsKey, memo, nsItems };
    return result;
  }
}

/**
 * Prune a gcc-preprocessed CUDA TU (the input of cicc: `gcc -E` with nvcc's device-side
 * defines, line markers included) to the declarations the primary file's code needs (see the
 * module comment). Pure text in, text out; no compiler is run.
 * @param text the preprocessed TU (gcc -E output, read as latin1 so that bytes round-trip)
 * @returns the pruned text (same number of lines), counts and the time taken (ms)
 */
export function pruneDeviceTU(text: string): PruneResult {
  return new DevicePruner().prune(text);
}
