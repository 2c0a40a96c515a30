/** Near names for "did you mean" messages: the closest verb to a typo, the kernels closest to a --kernel pattern. */

/** Edit distance of a to its best-matching window of b (a typo inside a long name still scores well). */
export function partialDistance(a: string, b: string): number {
  if (b.length <= a.length) return editDistance(a, b);
  let best = Infinity;
  for (let i = 0; i + a.length <= b.length; i++) best = Math.min(best, editDistance(a, b.slice(i, i + a.length + 1)));
  return best;
}

/** Levenshtein distance (insertions, deletions, substitutions, each 1) between a and b. */
export function editDistance(a: string, b: string): number {
  const m = a.length;
  const n = b.length;
  let prev = Array.from({ length: n + 1 }, (_, j) => j);
  for (let i = 1; i <= m; i++) {
    const cur = [i];
    for (let j = 1; j <= n; j++) cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[n]!;
}
