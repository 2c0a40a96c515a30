/**
 * The tokenizer of the device-side pruning (./policy.ts has the whole design): a gcc-preprocessed
 * CUDA TU as parallel arrays of token kinds, offsets and texts, in one pass; line markers and
 * pragmas are one directive token each. tokenize can resume after a prefix that did not change
 * (./cache.ts).
 */

export const enum K {
  Id,
  Num,
  Str,
  Chr,
  Punct,
  Dir,
}

/** Tokens of the preprocessed text, as parallel arrays (kind, start, end offsets, text). */
export interface Tokens {
  kind: Uint8Array;
  start: Int32Array;
  end: Int32Array;
  text: string[];
  n: number;
}

const STR_PREFIX = new Set(["u8", "u", "U", "L"]);
const RAW_PREFIX = new Set(["R", "u8R", "uR", "UR", "LR"]);

export function isIdStart(c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 95 || c === 36;
}
function isIdChar(c: number): boolean {
  return isIdStart(c) || (c >= 48 && c <= 57);
}
function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

/**
 * Tokens whose arrays a later tokenize took over (its `prior`): only their first priorN entries
 * are still theirs, so they are never read again as a whole (a pruner given such a state prunes
 * cold; ./persist.ts refuses to save one).
 */
export const spentTokens = new WeakSet<Tokens>();

/**
 * Tokenize preprocessed C++ (gcc -E output: line markers and #pragma lines are the only
 * directives). `>>` is two `>` tokens (it closes two template argument lists); `>=` and `>>=` are one.
 * With `prior` (tokens of a text whose first `from` characters are src's, priorN of them ending
 * by `from`), its first priorN tokens are kept and its arrays are taken over: written in place
 * past priorN, not copied (an edit near the end of a 838 000-token TU copied them all: 10-25 ms
 * with the garbage), and prior is marked spent (spentTokens).
 * @throws Error when prior is already spent (a bug of the caller)
 */
export function tokenize(src: string, from = 0, prior?: Tokens, priorN = 0): Tokens {
  let kind: Uint8Array, start: Int32Array, end: Int32Array, text: string[];
  let n = 0;
  if (prior) {
    if (spentTokens.has(prior)) throw new Error("tokenize: the prior tokens were already taken over");
    spentTokens.add(prior);
    ({ kind, start, end, text } = prior);
    text.length = priorN;
    n = priorN;
  } else {
    const cap = Math.max(1024, (src.length - from) >> 2);
    kind = new Uint8Array(cap);
    start = new Int32Array(cap);
    end = new Int32Array(cap);
    text = [];
  }
  const push = (k: K, a: number, b: number) => {
    if (n === kind.length) (kind = doubled(kind)), (start = doubled(start)), (end = doubled(end));
    kind[n] = k;
    start[n] = a;
    end[n] = b;
    text.push(src.slice(a, b));
    n++;
  };
  const len = src.length;
  let i = from;
  let lineStart = from === 0 || /^[ \t]*$/.test(src.slice(src.lastIndexOf("\n", from - 1) + 1, from));
  while (i < len) {
    const c = src.charCodeAt(i);
    if (c === 10) {
      i++;
      lineStart = true;
      continue;
    }
    if (c === 32 || c === 9 || c === 13 || c === 12 || c === 11) {
      i++;
      continue;
    }
    if (c === 35 /* # */ && lineStart) {
      let j = src.indexOf("\n", i);
      if (j < 0) j = len;
      push(K.Dir, i, j);
      i = j;
      continue;
    }
    lineStart = false;
    if (c === 47 /* / */ && src.charCodeAt(i + 1) === 47) {
      const j = src.indexOf("\n", i);
      i = j < 0 ? len : j;
      continue;
    }
    if (c === 47 && src.charCodeAt(i + 1) === 42) {
      const j = src.indexOf("*/", i + 2);
      i = j < 0 ? len : j + 2;
      continue;
    }
    if (isIdStart(c)) {
      let j = i + 1;
      while (j < len && isIdChar(src.charCodeAt(j))) j++;
      const id = src.slice(i, j);
      const q = src.charCodeAt(j);
      if (q === 34 && RAW_PREFIX.has(id)) {
        const e = rawStringEnd(src, j);
        push(K.Str, i, e);
        i = e;
        continue;
      }
      if ((q === 34 || q === 39) && STR_PREFIX.has(id)) {
        i = quoted(src, j, q, (e) => push(q === 34 ? K.Str : K.Chr, i, e));
        continue;
      }
      push(K.Id, i, j);
      i = j;
      continue;
    }
    if (isDigit(c) || (c === 46 && isDigit(src.charCodeAt(i + 1)))) {
      const j = numberEnd(src, i);
      push(K.Num, i, j);
      i = j;
      continue;
    }
    if (c === 34 || c === 39) {
      const a = i;
      i = quoted(src, i, c, (e) => push(c === 34 ? K.Str : K.Chr, a, e));
      continue;
    }
    const w = punctLength(src, i, c);
    push(K.Punct, i, i + w);
    i += w;
    continue;
  }
  return { kind, start, end, text, n };
}

/** The array twice as long, holding a's elements first (the token arrays grow by doubling). */
function doubled<A extends Uint8Array | Int32Array>(a: A): A {
  const b = (a instanceof Int32Array ? new Int32Array(Math.max(1024, a.length * 2)) : new Uint8Array(Math.max(1024, a.length * 2))) as A;
  b.set(a);
  return b;
}

/** End of a raw string literal whose opening quote is at q (`R"delim( … )delim"`); the text's end when unclosed. */
function rawStringEnd(src: string, q: number): number {
  const open = src.indexOf("(", q);
  const delim = src.slice(q + 1, open);
  const close = src.indexOf(`)${delim}"`, open);
  return close < 0 ? src.length : close + delim.length + 2;
}

/** End of the preprocessing number at i: digits, letters, `.`, `'` separators, and a sign after an exponent letter (e E p P). */
function numberEnd(src: string, i: number): number {
  let j = i + 1;
  while (j < src.length) {
    const d = src.charCodeAt(j);
    if ((d === 43 || d === 45) && /[eEpP]/.test(src[j - 1]!)) {
      j++;
      continue;
    }
    if (isIdChar(d) || d === 46 || d === 39) {
      j++;
      continue;
    }
    break;
  }
  return j;
}

/** Length of the punctuator at i (first char code c): 3 for ->* ... <<= >>= <=>, 2 for the PUNCT2 pairs, else 1. */
function punctLength(src: string, i: number, c: number): number {
  const c2 = src.charCodeAt(i + 1);
  if (c2 !== c2) return 1; // NaN: end of text
  const c3 = src.charCodeAt(i + 2);
  switch (c) {
    case 45:
      /* - */ if (c2 === 62) return c3 === 42 ? 3 : 2;
      return c2 === 45 || c2 === 61 ? 2 : 1;
    case 46:
      /* . */ if (c2 === 46 && c3 === 46) return 3;
      return c2 === 42 ? 2 : 1;
    case 60:
      /* < */ if (c2 === 60) return c3 === 61 ? 3 : 2;
      if (c2 === 61) return c3 === 62 ? 3 : 2;
      return 1;
    case 62:
      /* > */ if (c2 === 62 && c3 === 61) return 3;
      return c2 === 61 ? 2 : 1;
    case 58:
      /* : */ return c2 === 58 ? 2 : 1;
    case 38:
      /* & */ return c2 === 38 || c2 === 61 ? 2 : 1;
    case 124:
      /* | */ return c2 === 124 || c2 === 61 ? 2 : 1;
    case 43:
      /* + */ return c2 === 43 || c2 === 61 ? 2 : 1;
    case 35:
      /* # */ return c2 === 35 ? 2 : 1;
    case 61:
    case 33:
    case 42:
    case 47:
    case 37:
    case 94:
      /* = ! * / % ^ */ return c2 === 61 ? 2 : 1;
    default:
      return 1;
  }
}

/** Skip a quoted literal starting at the quote at `q0`; calls done(end) and returns end. */
function quoted(src: string, q0: number, quote: number, done: (e: number) => void): number {
  let j = q0 + 1;
  while (j < src.length) {
    const d = src.charCodeAt(j);
    if (d === 92) {
      j += 2;
      continue;
    }
    if (d === quote) {
      j++;
      break;
    }
    if (d === 10) break;
    j++;
  }
  done(j);
  return j;
}

export const KEYWORDS = new Set(
  (
    "alignas alignof asm auto bool break case catch char char8_t char16_t char32_t class const consteval constexpr constinit const_cast continue " +
    "decltype default delete do double dynamic_cast else enum explicit export extern false float for friend goto if inline int long mutable " +
    "namespace new noexcept nullptr operator private protected public register reinterpret_cast requires return short signed sizeof static " +
    "static_assert static_cast struct switch template this thread_local throw true try typedef typeid typename union unsigned using virtual void " +
    "volatile wchar_t while __attribute__ __attribute __inline __inline__ __restrict __restrict__ __extension__ __typeof__ __typeof __asm__ __asm " +
    "__volatile__ __volatile __thread __int128 __builtin_va_list __decltype __alignof__ __alignof __const __signed __signed__ __complex__ " +
    "__real__ __imag__ __label__"
  ).split(" "),
);
export const TYPE_KEYWORDS = new Set(
  "auto bool char double float int long short signed unsigned void wchar_t char16_t char32_t char8_t const volatile".split(" "),
);
export const DEVICE_MARKS = new Set(["device", "global", "__device__", "__global__"]);
export const ATTRIBUTE_WORDS = new Set([
  "__attribute__",
  "__attribute",
  "alignas",
  "__declspec",
  "decltype",
  "__typeof__",
  "__typeof",
  "__asm__",
  "__asm",
  "asm",
  "noexcept",
  "throw",
]);
/**
 * Names the front end needs without the program naming them (a `<<<…>>>` launch in kept host
 * code is a call of __cudaPushCallConfiguration: cicc stops with "unable to find
 * __cudaPushCallConfiguration declaration" without it).
 */
export const ALWAYS = new Set([
  "initializer_list",
  "nullptr_t",
  "size_t",
  "ptrdiff_t",
  "type_info",
  "align_val_t",
  "max_align_t",
  "byte",
  "destroying_delete_t",
  "nothrow_t",
  "__cudaPushCallConfiguration",
]);

export const isName = (s: string) => isIdStart(s.charCodeAt(0)) && !KEYWORDS.has(s);
