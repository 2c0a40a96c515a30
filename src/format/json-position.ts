/**
 * Where a JSON text stops being JSON (RFC 8259 grammar), for the messages about a damaged manifest
 * or index: JSON.parse in Bun says what it expected but not where ("JSON Parse error: Unexpected
 * EOF"), and a truncated kerncap.json is the common case.
 */

/** Position of the first byte that breaks the grammar; `truncated`: the text ended inside a value. */
export interface JsonErrorPosition {
  /** 0-based index into the text (UTF-16 code units, as JavaScript strings count). */
  offset: number;
  /** 1-based line and column of `offset`. */
  line: number;
  column: number;
  truncated: boolean;
}

/**
 * The first position at which `text` is not valid JSON, or undefined when it is.
 * Checks the grammar only (no duplicate keys, no number range).
 */
export function jsonErrorPosition(text: string): JsonErrorPosition | undefined {
  let i = 0;
  const fail = (): never => {
    throw i;
  };
  const ws = () => {
    while (i < text.length && " \t\n\r".includes(text[i]!)) i++;
  };
  const lit = (w: string) => {
    for (const c of w) if (text[i++] !== c) i--, fail();
  };
  const digits = () => {
    const s = i;
    while (i < text.length && text[i]! >= "0" && text[i]! <= "9") i++;
    if (i === s) fail();
  };
  const string = () => {
    i++; // the opening quote
    for (;;) {
      if (i >= text.length) fail();
      const c = text[i]!;
      if (c === '"') return void i++;
      if (c < " ") fail();
      if (c === "\\") {
        i++;
        if (text[i] === "u") {
          for (let k = 1; k <= 4; k++) if (!/[0-9a-fA-F]/.test(text[i + k] ?? "")) (i += k), fail();
          i += 5;
        } else if (text[i] !== undefined && '"\\/bfnrt'.includes(text[i]!)) i++;
        else fail();
      } else i++;
    }
  };
  const value = (): void => {
    ws();
    const c = text[i];
    if (c === "{" || c === "[") {
      const close = c === "{" ? "}" : "]";
      i++;
      ws();
      if (text[i] === close) return void i++;
      for (;;) {
        if (c === "{") {
          ws();
          if (text[i] !== '"') fail();
          string();
          ws();
          if (text[i] !== ":") fail();
          i++;
        }
        value();
        ws();
        if (text[i] === ",") i++;
        else if (text[i] === close) return void i++;
        else fail();
      }
    }
    if (c === '"') return string();
    if (c === "t") return lit("true");
    if (c === "f") return lit("false");
    if (c === "n") return lit("null");
    if (c === "-" || (c !== undefined && c >= "0" && c <= "9")) {
      if (text[i] === "-") i++;
      if (text[i] === "0") i++;
      else digits();
      if (text[i] === ".") i++, digits();
      if (text[i] === "e" || text[i] === "E") {
        i++;
        if (text[i] === "+" || text[i] === "-") i++;
        digits();
      }
      return;
    }
    fail();
  };
  try {
    value();
    ws();
    if (i < text.length) fail();
    return undefined;
  } catch (e) {
    if (typeof e !== "number") throw e;
    const before = text.slice(0, e);
    const line = before.split("\n").length;
    return { offset: e, line, column: e - (before.lastIndexOf("\n") + 1) + 1, truncated: e >= text.length };
  }
}

/** "at line L, column C", or "truncated: it ends inside a value, at line L, column C (N bytes)"; "" for valid JSON. */
export function describeJsonError(text: string): string {
  const p = jsonErrorPosition(text);
  if (!p) return "";
  return p.truncated
    ? `truncated: it ends inside a value, at line ${p.line}, column ${p.column} (${Buffer.byteLength(text)} bytes)`
    : `at line ${p.line}, column ${p.column}`;
}

/**
 * The deepest nesting of objects and arrays in a JSON text (0 for a scalar), counted on the text
 * (brackets outside strings), so that a document too deep for a recursive reader (a received
 * manifest with 100 000 nested objects overflowed the stack of pack's walk) is refused before
 * anything walks it. Linear in the text; any text (valid JSON or not) gets a number.
 */
export function jsonDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // a backslash: the next character is escaped
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) deepest = Math.max(deepest, ++depth);
    else if (c === 0x7d || c === 0x5d) depth--;
  }
  return deepest;
}

/** The deepest nesting any JSON file kerncap reads from a capture, an archive or a results file may have (kerncap's own documents reach about 8). */
export const JSON_MAX_DEPTH = 64;

/**
 * The first number in `x` (a parsed document: a manifest, a record, judging settings; any depth) that is not finite, said with its dotted
 * path ("time.low is -Infinity …"), or undefined. JSON has no Infinity, but JSON.parse reads 1e999
 * as one, and valibot's number() takes it: a document carrying one was not written by kerncap (adversary round 70: a manifest's `1e999` exported as `Infinity` into C).
 */
export function nonFinite(x: unknown, at = ""): string | undefined {
  // a stack, not recursion: judging settings nested 100 000 levels deep overflowed the call stack (adversary 73)
  const stack: [unknown, string][] = [[x, at]];
  for (let top = stack.pop(); top; top = stack.pop()) {
    const [y, path] = top;
    if (typeof y === "number") {
      if (!Number.isFinite(y)) return `${path || "(top level)"} is ${y}: a number kerncap never writes (JSON 1e999 reads as Infinity)`;
    } else if (Array.isArray(y)) {
      for (let i = y.length - 1; i >= 0; i--) stack.push([y[i], `${path}[${i}]`]);
    } else if (y && typeof y === "object") {
      const entries = Object.entries(y);
      for (let i = entries.length - 1; i >= 0; i--) stack.push([entries[i]![1], path ? `${path}.${entries[i]![0]}` : entries[i]![0]]);
    }
  }
  return undefined;
}
