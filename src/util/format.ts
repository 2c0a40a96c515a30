/** Sizes and counts for people, used by every layer (progress lines, messages, the verbs' output). */
import { escapeForTerminal } from "../escape.ts";

/** Bytes in binary units: 1536 → "1.5 KiB". */
export function formatBytes(n: number): string {
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  let x = n;
  while (x >= 1024 && i < u.length - 1) {
    x /= 1024;
    i++;
  }
  return i ? `${x.toFixed(1)} ${u[i]}` : `${n} B`;
}

/** "1 region", "2 regions", "2 launches": the count and the noun, plural unless n is 1 (English's -es after s, x, z, ch, sh; `many`: an irregular plural). */
export function plural(n: number, one: string, many = /(s|x|z|ch|sh)$/.test(one) ? `${one}es` : `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}

/** The one warning line naming the files pack or export left out (editor temporaries, backups, hidden files under src/), escaped. */
export function leftOutLine(files: readonly string[]): string {
  const shown = files.slice(0, 6).map((f) => escapeForTerminal(f, { oneLine: true }));
  return `left out ${plural(files.length, "editor temporary, backup or hidden file", "editor temporaries, backups or hidden files")}: ${shown.join(", ")}${files.length > 6 ? ", …" : ""}`;
}
