/**
 * A child process's output read with bounds: what kerncap holds of a build's messages
 * (src/frontends/build.ts) and of a tool child's output (src/mcp/children.ts) never grows with
 * what the child writes (adversary 63: a 200 KB source made the compiler print 20 GB of warnings,
 * read whole into kerncap's memory until it ran out).
 */

/** A stream's text, cut at a bound. */
export interface Capped {
  text: string;
  /** More bytes came than the bound: the rest was read and dropped. */
  cut: boolean;
}

/**
 * A stream's first `max` bytes as UTF-8 text; `over` is called once when more come, and the rest
 * is drained, not kept (the writer is not left blocked on a full pipe).
 */
export async function readCapped(stream: ReadableStream<Uint8Array>, max: number, over: () => void = () => {}): Promise<Capped> {
  const parts: Uint8Array[] = [];
  let n = 0;
  let cut = false;
  for await (const chunk of stream) {
    if (cut) continue;
    if (n + chunk.length > max) {
      parts.push(chunk.subarray(0, max - n));
      cut = true;
      over();
      continue;
    }
    parts.push(chunk);
    n += chunk.length;
  }
  return { text: Buffer.concat(parts).toString("utf8"), cut };
}

/**
 * The lines of a byte stream (UTF-8), without their newlines, a last line without one too; a line
 * longer than `maxLine` characters comes as several of at most `maxLine` (a writer that never ends
 * a line holds no more than that). Each chunk is searched once: linear in what the stream carries.
 */
export async function* boundedLines(stream: ReadableStream<Uint8Array>, maxLine: number): AsyncGenerator<string> {
  const dec = new TextDecoder();
  let buf = "";
  for await (const chunk of stream) {
    const text = dec.decode(chunk, { stream: true });
    let start = 0;
    for (let nl = text.indexOf("\n"); nl >= 0; nl = text.indexOf("\n", start)) {
      yield* split(buf + text.slice(start, nl), maxLine);
      buf = "";
      start = nl + 1;
    }
    buf += text.slice(start);
    while (buf.length > maxLine) {
      yield buf.slice(0, maxLine);
      buf = buf.slice(maxLine);
    }
  }
  buf += dec.decode();
  if (buf) yield* split(buf, maxLine);
}

function* split(line: string, maxLine: number): Generator<string> {
  if (line.length <= maxLine) return yield line;
  for (let i = 0; i < line.length; i += maxLine) yield line.slice(i, i + maxLine);
}

/** The last lines of a stream's text, at most `maxBytes` (UTF-16 units) of them kept, each handed to `onLine` as it comes. */
export async function tailLines(stream: ReadableStream<Uint8Array>, maxBytes: number, onLine?: (l: string) => void): Promise<string> {
  let kept: string[] = [];
  let first = 0; // kept[first..] are the lines held (dropped ones are left behind until the array is compacted)
  let size = 0;
  for await (const l of boundedLines(stream, maxBytes)) {
    onLine?.(l);
    kept.push(l);
    size += l.length + 1;
    while (size > maxBytes && kept.length - first > 1) size -= kept[first++]!.length + 1;
    if (first > 1024 && first * 2 > kept.length) {
      kept = kept.slice(first);
      first = 0;
    }
  }
  kept = kept.slice(first);
  return kept.length ? `${kept.join("\n")}\n` : "";
}
