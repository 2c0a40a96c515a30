/**
 * The lexing a CUDA slice's checks and the kernel finder share (./slice.ts): a C++ text's mask,
 * code kept in place and everything else (comments, literals, directives) blanked.
 */
/**
 * Mask of a C++ text: the same length, with comments (a `//` one with its continuations),
 * string/char literals (raw strings too) and preprocessor directive lines (`#` or `%:`, with their
 * continuations) replaced by spaces; newlines kept; the digraphs `<%` and `%>` written as braces.
 * Braces, parentheses and identifiers in code are where they were.
 */
export function codeMask(text: string): string {
  const out = text.split("");
  const n = text.length;
  const blank = (a: number, b: number) => {
    for (let k = a; k < b && k < n; k++) if (out[k] !== "\n") out[k] = " ";
  };
  let i = 0;
  let lineStart = true;
  while (i < n) {
    const c = text[i]!;
    if (c === "\n") {
      lineStart = true;
      i++;
      continue;
    }
    if (lineStart && (c === " " || c === "\t")) {
      i++;
      continue;
    }
    if (lineStart && (c === "#" || (c === "%" && text[i + 1] === ":"))) {
      let j = i;
      while (j < n && text[j] !== "\n") {
        if (text[j] === "\\" && text[j + 1] === "\n") j++;
        j++;
      }
      blank(i, j);
      i = j;
      continue;
    }
    lineStart = false;
    if (c === "/" && text[i + 1] === "/") {
      let j = i;
      // a backslash at a line's end continues the comment on the next line (adversary 44)
      while (j < n && text[j] !== "\n") j += text[j] === "\\" && text[j + 1] === "\n" ? 2 : 1;
      blank(i, j);
      i = j;
      continue;
    }
    if (c === "/" && text[i + 1] === "*") {
      const e = text.indexOf("*/", i + 2);
      const j = e < 0 ? n : e + 2;
      blank(i, j);
      i = j;
      continue;
    }
    const raw = /^(?:u8|u|U|L)?R"([^()\\\s]{0,16})\(/.exec(text.slice(i, i + 24));
    if (raw && (i === 0 || !/[A-Za-z0-9_]/.test(text[i - 1]!))) {
      const close = `)${raw[1]}"`;
      const e = text.indexOf(close, i + raw[0].length);
      const j = e < 0 ? n : e + close.length;
      blank(i, j);
      i = j;
      continue;
    }
    if (c === '"' || (c === "'" && !/[0-9A-Fa-f]/.test(text[i - 1] ?? ""))) {
      // a ' after a hex digit is a digit separator (1'000), not a char literal
      let j = i + 1;
      while (j < n && text[j] !== c && text[j] !== "\n") j += text[j] === "\\" ? 2 : 1;
      blank(i, j + 1);
      i = j + 1;
      continue;
    }
    // the digraphs of braces are braces (adversary 44: `%>` closing a body the slice left out early)
    if (c === "<" && text[i + 1] === "%") (out[i] = " "), (out[i + 1] = "{");
    else if (c === "%" && text[i + 1] === ">") (out[i] = "}"), (out[i + 1] = " ");
    i++;
  }
  return out.join("");
}
