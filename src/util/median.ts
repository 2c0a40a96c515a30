/** The median of numbers, one rule for every layer (a replay's timing, a results file's check of it). */

/** Median of a non-empty list (the mean of the two middle values of an even count). */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2]! : (s[n / 2 - 1]! + s[n / 2]!) / 2;
}
