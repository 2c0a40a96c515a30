/**
 * The pruned text of a TU (./policy.ts finish): every declaration not kept blanked, every
 * host-only body made ";", the line count unchanged; made again only from the first declaration
 * treated otherwise than by the last call (resumeFrom).
 */
import { K, type Tokens } from "./tokens.ts";
import type { Item } from "./declarations.ts";
import type { DeclInfo } from "./names.ts";

/** What prunedText made, kept for the next call (./policy.ts PrunedTextMemo extends it). */
export interface PrunedTextMemo {
  /** The pruned text. */
  out: string;
  /** Per declaration item: what prunedText did (-1 kept as it is, -2 dropped, else the token index of the body made ";"); other items 0. */
  code: Int32Array;
  /** Per declaration item: the input offset and the output's length before prunedText reached it. */
  posAt: Int32Array;
  lenAt: Int32Array;
}

/**
 * Where prunedText starts again from the last call's output (`prev`, whose first `reuse` items are
 * these): the first declaration (its index in `decl`, d0) not treated as last time, and the text
 * position and output length there; prev's output before it is pushed onto `w.out` and its
 * positions copied into `w.posAt`/`w.lenAt`. From the start (0, 0, 0) without a prev.
 */
function resumeFrom(
  prev: PrunedTextMemo | undefined,
  reuse: number,
  decl: number[],
  code: Int32Array,
  w: { out: string[]; posAt: Int32Array; lenAt: Int32Array },
): { pos: number; len: number; d0: number } {
  let d0 = 0;
  if (!prev || reuse <= 0) return { pos: 0, len: 0, d0 };
  while (d0 < decl.length && decl[d0]! < reuse && code[decl[d0]!] === prev.code[decl[d0]!]) d0++;
  if (d0 === 0) return { pos: 0, len: 0, d0 };
  // the output before decl[d0] is prev's: what its declarations gave is the same, and so is
  // the text up to the end of the reused items (posAt of a reused declaration is at most that);
  // with every declaration of the reused items as last time: resume at the last of them, made
  // again from its own start (its memo says where that is)
  const at = d0 < decl.length && decl[d0]! < reuse ? decl[d0]! : decl[--d0]!;
  const pos = prev.posAt[at]!,
    len = prev.lenAt[at]!;
  w.posAt.set(prev.posAt.subarray(0, reuse));
  w.lenAt.set(prev.lenAt.subarray(0, reuse));
  w.out.push(prev.out.slice(0, len));
  return { pos, len, d0 };
}

/**
 * The text with every declaration not kept blanked (as many newlines as it spanned) and every
 * host-only body made ";" (same line count). With `prev` (the last call's memo, whose first
 * `reuse` items are these), the output up to the first declaration among them that is not
 * treated as last time is prev's, and the text is made from there on.
 */
export function prunedText(
  text: string,
  t: Tokens,
  items: Item[],
  decl: number[],
  info: (DeclInfo | undefined)[],
  keep: Set<number>,
  prev: PrunedTextMemo | undefined,
  reuse: number,
): { out: string; code: Int32Array; posAt: Int32Array; lenAt: Int32Array } {
  const stub = { get: (idx: number) => info[idx]!.stub };
  const code = new Int32Array(items.length);
  for (const idx of decl) {
    const st = stub.get(idx);
    code[idx] = !keep.has(idx) || st === "drop" ? -2 : typeof st === "number" ? st : -1;
  }
  const posAt = new Int32Array(items.length),
    lenAt = new Int32Array(items.length);
  // output: a dropped declaration becomes as many newlines as it spanned, a host-only body ";" and
  // newlines; directive lines inside either (line markers) stay
  const out: string[] = [];
  let { pos, len, d0 } = resumeFrom(prev, reuse, decl, code, { out, posAt, lenAt });
  const push = (s: string) => {
    out.push(s);
    len += s.length;
  };
  // the newlines of text[a, b), as a string of newlines (no copy of the span is made)
  const NL = Array.from({ length: 64 }, (_, n) => "\n".repeat(n));
  const blank = (a: number, b: number) => {
    let n = 0;
    for (let i = text.indexOf("\n", a); i >= 0 && i < b; i = text.indexOf("\n", i + 1)) n++;
    return n < NL.length ? NL[n]! : "\n".repeat(n);
  };
  // a pragma that applies to the declaration after it (CCCL's _CCCL_EXEC_CHECK_DISABLE is
  // `#pragma nv_exec_check_disable`) goes with that declaration: left before whatever follows,
  // cicc stops with "this pragma must immediately precede a declaration"
  const attached = (i: number) => /^#\s*pragma\s+(?:nv_exec_check_disable|hd_warning_disable|nv_abi)\b/.test(t.text[i]!);
  for (let di = d0; di < decl.length; di++) {
    const idx = decl[di]!;
    posAt[idx] = pos;
    lenAt[idx] = len;
    const it = items[idx]!;
    const st = stub.get(idx);
    const drop = code[idx] === -2;
    if (!drop && typeof st !== "number") continue;
    let from = drop ? it.a : (st as number);
    while (from < it.b && t.kind[from] === K.Dir) from++;
    if (from >= it.b) continue;
    if (drop) {
      const before: number[] = []; // the pragmas (their token indices) just before it, line markers between them
      for (let j = idx - 1; j >= 0 && items[j]!.kind === "dir"; j--) {
        const ti = items[j]!.a;
        if (attached(ti)) before.push(ti);
        else if (!/^#\s*\d/.test(t.text[ti]!)) break;
      }
      for (const ti of before.reverse()) {
        if (t.start[ti]! < pos) continue;
        push(text.slice(pos, t.start[ti]!));
        pos = t.end[ti]!;
      }
    }
    push(text.slice(pos, t.start[from]!));
    if (!drop) push(";");
    pos = t.start[from]!;
    for (let i = from; i < it.b; i++) {
      if (t.kind[i] !== K.Dir) continue;
      // line markers stay; a pragma inside what is taken out goes with it (`#pragma unroll` of a
      // dropped body would be left at namespace scope: "expected a declaration")
      push(blank(pos, t.start[i]!));
      if (/^#\s*\d/.test(t.text[i]!)) push(t.text[i]!);
      pos = t.end[i]!;
    }
    const e = t.end[it.b - 1]!;
    if (e > pos) {
      push(blank(pos, e));
      pos = e;
    }
  }
  out.push(text.slice(pos));
  return { out: out.join(""), code, posAt, lenAt };
}
