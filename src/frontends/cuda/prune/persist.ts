/**
 * The pruner's analysis kept on disk between processes (`kerncap validate` runs one per edit): a
 * DevicePruner (./cache.ts) keeps the tokens and the analysis of every namespace-scope
 * declaration of the last text it pruned, and reads again only what follows the first changed
 * character. A watch keeps that in memory; a fresh validate used to tokenize and analyse the whole
 * preprocessed TU again (ggml's mul_mat_q: 850 000 tokens, 19 000 declarations; on the H200 the
 * pruning took 506 ms in validate against 108 ms in a watch's save).
 *
 * What is saved is a pure function of two things, both in the file and both checked on load: the
 * text that was pruned (its bytes, with their sha256) and the kerncap version that analysed it
 * (another version may analyse differently). A loaded state is only the starting point of the
 * next prune, which reuses the declarations that end before the first character where the new
 * text differs from the saved one: an edit anywhere (before the kernel, after it, in a header)
 * changes the text and so what is reused, and the pruned TU is the one a cold prune gives.
 *
 * A capture's build folder is its owner's scratch: a state file is used only when it is a regular
 * file of the user running kerncap that nobody else may write (opened with no link followed), of
 * this schema and version, whole (its length and checksums), and naming a text whose sha256
 * matches; else it is ignored (a cold prune). The pruned build runs only for a capture of one's
 * own (a received capture builds with build.sh alone: docs/security.md), and `kerncap pack`
 * leaves build/ out, so a received capture's state is never read.
 *
 * Format (`kerncap.prune-state/1`): one JSON line (schema, kerncap version, section offsets and
 * lengths, the text's sha256, a checksum of the sections), then the sections, each at a multiple
 * of 8 bytes: the text (latin1), the tokens' kinds (u8), starts and ends (i32), their texts as
 * indices into the string table (i32), the items (4 × i32: kind, a, b, nest), the string table
 * (i32 lengths, then its latin1 bytes), each declaration's analysis as i32 words (declare below),
 * and the gate keys (f64).
 */
import { closeSync, constants, fstatSync, openSync, readSync, rmSync } from "node:fs";
import { dirname } from "node:path";
import { stateSeal, userResultsKey } from "../../../format/state-seal.ts";
import { writeFileAtomic } from "../../../util/write-file.ts";
import { TOOL_VERSION } from "../../../version.ts";
import { type PruneState } from "./cache.ts";
import { type Item, words } from "./declarations.ts";
import { type DeclInfo } from "./names.ts";
import { spentTokens, type Tokens } from "./tokens.ts";

export const PRUNE_STATE_SCHEMA = "kerncap.prune-state/1";
/** The file's name in a fast build's work folder. */
export const PRUNE_STATE_FILE = "prune-state.bin";
/** A state file past this size is not read (the largest TU seen, 13 MB of text, makes about 60 MB). */
const MAX_BYTES = 512 << 20;

const ITEM_KINDS: Item["kind"][] = ["decl", "dir", "open", "close"];

/** Flags of a declaration's record. */
const F = { classlike: 1, deviceVar: 2, kernel: 4, using: 8, gate: 16, op: 32, opAll: 64, gateKey: 128 } as const;

interface Header {
  schema: string;
  kerncap: string;
  textSha256: string;
  namespaces: string;
  tokens: number;
  items: number;
  /** [offset, byte length] of each section, from the start of the file. */
  sections: Record<"text" | "kind" | "start" | "end" | "ids" | "items" | "strLens" | "strBytes" | "decls" | "gateKeys", [number, number]>;
  /** Bun.hash (wyhash) of the bytes after the header line, as a decimal string: damage, not an adversary (ownership is the guard). */
  check: string;
}

const sha256 = (b: Uint8Array) => new Bun.CryptoHasher("sha256").update(b).digest("hex");

/** A string table: each distinct string once, by first use. */
class Strings {
  readonly list: string[] = [];
  private readonly index = new Map<string, number>();
  /** A loaded table: its index is made at the first id asked (the next save's, while cicc runs), not at the load. */
  private pending: string[] | undefined;
  static of(list: string[]): Strings {
    const s = new Strings();
    s.pending = list;
    return s;
  }
  /** The string whose id is i (undefined when none). */
  at(i: number): string | undefined {
    return (this.pending ?? this.list)[i];
  }
  id(s: string): number {
    if (this.pending) {
      const list = this.pending;
      this.pending = undefined;
      for (const x of list) this.id(x);
    }
    let i = this.index.get(s);
    if (i === undefined) {
      i = this.list.length;
      this.list.push(s);
      this.index.set(s, i);
    }
    return i;
  }
}

/** A growable i32 buffer. */
class Ints {
  a = new Int32Array(1 << 16);
  n = 0;
  push(v: number): void {
    if (this.n === this.a.length) {
      const b = new Int32Array(this.a.length * 2);
      b.set(this.a);
      this.a = b;
    }
    this.a[this.n++] = v;
  }
  set(xs: Iterable<string>, strings: Strings): void {
    const at = this.n;
    this.push(0);
    let k = 0;
    for (const x of xs) {
      this.push(strings.id(x));
      k++;
    }
    this.a[at] = k;
  }
}

/**
 * The token texts' string ids and table of each state this process loaded or saved: the next
 * state's tokens before the edit are the same texts at the same indices, and keep their ids (an
 * edit near the TU's end then interns a few tokens, not 850 000).
 */
const known = new WeakMap<PruneState, { ids: Int32Array; strings: Strings }>();

/**
 * The bytes of a state file for `st` (the DevicePruner's state after a prune).
 * @param prev the state loaded or saved before (its string ids are reused where the tokens are the same)
 * @returns the file's bytes (header line, then the sections)
 */
export function encodePruneState(st: PruneState, prev?: PruneState): Uint8Array {
  const { t, items, info } = st;
  if (spentTokens.has(t)) throw new Error("encodePruneState: the state's tokens were taken over by a later prune");
  const before = prev && known.get(prev);
  const strings = before?.strings ?? new Strings();
  const ids = new Int32Array(t.n);
  // prev's token texts are read from its ids and table, not from prev.t: the pruner that made st
  // took prev.t's arrays over (tokenize's prior), so they may hold st's tokens now
  const shared = before ? Math.min(before.ids.length, t.n) : 0;
  for (let i = 0; i < t.n; i++) {
    const s = t.text[i]!;
    ids[i] = i < shared && strings.at(before!.ids[i]!) === s ? before!.ids[i]! : strings.id(s);
  }
  known.set(st, { ids, strings });
  const itemWords = new Int32Array(items.length * 4);
  items.forEach((it, i) => {
    itemWords[i * 4] = ITEM_KINDS.indexOf(it.kind);
    itemWords[i * 4 + 1] = it.a;
    itemWords[i * 4 + 2] = it.b;
    itemWords[i * 4 + 3] = it.nest;
  });
  const decls = new Ints();
  const gateKeys: number[] = [];
  for (let idx = 0; idx < items.length; idx++) {
    const d = info[idx];
    if (!d) continue;
    const flags =
      (d.classlike ? F.classlike : 0) |
      (d.deviceVar ? F.deviceVar : 0) |
      (d.kernel ? F.kernel : 0) |
      (d.using ? F.using : 0) |
      (d.gate ? F.gate : 0) |
      (d.op ? F.op : 0) |
      (d.op?.all ? F.opAll : 0) |
      (d.gateKey !== undefined ? F.gateKey : 0);
    decls.push(idx);
    decls.push(flags);
    decls.push(d.stub === undefined ? -1 : d.stub === "drop" ? -2 : d.stub);
    if (d.using) {
      decls.push(strings.id(d.using.ns));
      decls.push(strings.id(d.using.name));
    }
    decls.set(d.defs, strings);
    decls.set(d.refs, strings);
    if (d.gate) decls.set(d.gate, strings);
    if (d.op) decls.set(d.op.names, strings);
    if (d.gateKey !== undefined) gateKeys.push(d.gateKey);
  }
  const strBytes = Buffer.from(strings.list.join(""), "latin1");
  const strLens = Int32Array.from(strings.list, (s) => s.length);
  const text = Buffer.from(st.text, "latin1");
  const parts: [keyof Header["sections"], Uint8Array][] = [
    ["text", text],
    ["kind", t.kind.subarray(0, t.n)],
    ["start", bytesOf(t.start.subarray(0, t.n))],
    ["end", bytesOf(t.end.subarray(0, t.n))],
    ["ids", bytesOf(ids)],
    ["items", bytesOf(itemWords)],
    ["strLens", bytesOf(strLens)],
    ["strBytes", strBytes],
    ["decls", bytesOf(decls.a.subarray(0, decls.n))],
    ["gateKeys", bytesOf(Float64Array.from(gateKeys))],
  ];
  // the sections' offsets are relative to the end of the header line, whose length depends on them
  const sections = {} as Header["sections"];
  let off = 0;
  for (const [name, b] of parts) {
    sections[name] = [off, b.length];
    off = align8(off + b.length);
  }
  const body = new Uint8Array(off);
  for (const [name, b] of parts) body.set(b, sections[name][0]);
  const header: Header = {
    schema: PRUNE_STATE_SCHEMA,
    kerncap: TOOL_VERSION,
    textSha256: sha256(text),
    namespaces: st.namespaces,
    tokens: t.n,
    items: items.length,
    sections,
    check: String(Bun.hash(body)),
  };
  // the header line padded with spaces to a multiple of 8, so that the sections stay aligned in the file
  let line = JSON.stringify(header);
  line += " ".repeat(align8(line.length + 1) - line.length - 1) + "\n";
  const out = new Uint8Array(line.length + body.length);
  out.set(Buffer.from(line, "latin1"), 0);
  out.set(body, line.length);
  return out;
}

const align8 = (n: number) => (n + 7) & ~7;
const bytesOf = (a: Int32Array | Float64Array) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

/**
 * The state a file's bytes describe, or why they are not used (a sentence).
 */
export function decodePruneState(buf: Uint8Array): PruneState | { reason: string } {
  const nl = buf.indexOf(10);
  if (nl < 0 || nl > 4096) return { reason: "no header line" };
  let h: Header;
  try {
    h = JSON.parse(Buffer.from(buf.buffer, buf.byteOffset, nl).toString("latin1")) as Header;
  } catch {
    return { reason: "the header is not JSON" };
  }
  if (h?.schema !== PRUNE_STATE_SCHEMA) return { reason: "another schema" };
  if (h.kerncap !== TOOL_VERSION) return { reason: `made by kerncap ${String(h.kerncap)}` };
  const base = nl + 1;
  if (base % 8 !== 0 || typeof h.sections !== "object" || !h.sections) return { reason: "a damaged header" };
  const body = buf.subarray(base);
  if (String(Bun.hash(body)) !== h.check) return { reason: "its checksum differs (a damaged or partial file)" };
  // the typed arrays must start at a multiple of their element size: a section is viewed in place
  // where it does (a file read into its own buffer: the writer aligned it), else copied out
  const sec = (name: keyof Header["sections"]): Uint8Array => {
    const s = h.sections[name];
    if (!Array.isArray(s) || !Number.isInteger(s[0]) || !Number.isInteger(s[1]) || s[0] < 0 || s[1] < 0 || s[0] + s[1] > body.length)
      throw new Error(`section ${name} is out of the file`);
    return (body.byteOffset + s[0]) % 8 === 0 ? body.subarray(s[0], s[0] + s[1]) : body.slice(s[0], s[0] + s[1]);
  };
  try {
    const textBytes = sec("text");
    if (sha256(textBytes) !== h.textSha256) return { reason: "its text's sha256 differs" };
    const text = Buffer.from(textBytes.buffer, textBytes.byteOffset, textBytes.length).toString("latin1");
    const n = h.tokens;
    const i32 = (name: keyof Header["sections"], len: number) => {
      const b = sec(name);
      if (b.length !== len * 4) throw new Error(`section ${name} has ${b.length} bytes, not ${len * 4}`);
      return new Int32Array(b.buffer, b.byteOffset, len);
    };
    const kind = sec("kind");
    if (!Number.isInteger(n) || kind.length !== n) throw new Error("the token count differs");
    const start = i32("start", n),
      end = i32("end", n),
      ids = i32("ids", n);
    const strLens = sec("strLens");
    const lens = new Int32Array(strLens.buffer, strLens.byteOffset, strLens.length >> 2);
    const strBytes = sec("strBytes");
    const all = Buffer.from(strBytes.buffer, strBytes.byteOffset, strBytes.length).toString("latin1");
    const strings: string[] = new Array(lens.length);
    let p = 0;
    for (let i = 0; i < lens.length; i++) {
      strings[i] = all.slice(p, p + lens[i]!);
      p += lens[i]!;
    }
    if (p !== all.length) throw new Error("the string table's lengths do not add up");
    const str = (i: number) => {
      const s = strings[i];
      if (s === undefined) throw new Error(`string ${i} is out of the table`);
      return s;
    };
    const tokenText: string[] = new Array(n);
    for (let i = 0; i < n; i++) {
      // a token's text is its span of the text: checked, so a state can say nothing the text does not
      const s = str(ids[i]!);
      if (end[i]! - start[i]! !== s.length || end[i]! > text.length || start[i]! < 0) throw new Error(`token ${i} is out of its text`);
      tokenText[i] = s;
    }
    // copies: a pruner given this state writes its next tokens into these arrays (tokenize's
    // prior), which must not be the caller's bytes (one buffer decoded twice, a Buffer's pool)
    const t: Tokens = { kind: new Uint8Array(kind), start: new Int32Array(start), end: new Int32Array(end), text: tokenText, n };
    const iw = i32("items", h.items * 4);
    const items: Item[] = new Array(h.items);
    for (let i = 0; i < h.items; i++) {
      const k = ITEM_KINDS[iw[i * 4]!];
      const a = iw[i * 4 + 1]!,
        b = iw[i * 4 + 2]!;
      if (!k || a < 0 || b < a || b > n) throw new Error(`item ${i} is out of the tokens`);
      items[i] = { kind: k, a, b, nest: iw[i * 4 + 3]! };
    }
    const info = decodeDecls(sec("decls"), sec("gateKeys"), items, t, str, strings.length);
    const state: PruneState = { text, t, items, info, namespaces: String(h.namespaces) };
    known.set(state, { ids, strings: Strings.of(strings) });
    return state;
  } catch (e) {
    return { reason: e instanceof Error ? e.message : String(e) };
  }
}

/**
 * A declaration's analysis read back from a state file. Its refs and body are made when first
 * read (the prune reads them for the declarations it keeps and the gates it computes again, a
 * fraction of the TU's): a fresh validate's restore was spending a third of its time on them.
 * The refs' string ids are checked against the table at the load all the same.
 */
class StoredDecl implements DeclInfo {
  defs: Set<string>;
  stub: number | "drop" | undefined;
  classlike: boolean;
  deviceVar: boolean;
  kernel: boolean;
  using: { ns: string; name: string } | undefined;
  gate?: Set<string>;
  op?: { names: Set<string>; all: boolean };
  gateKey?: number;
  private refsSet: Set<string> | undefined;
  private bodyWords: string[] | undefined;
  constructor(
    fields: Omit<DeclInfo, "refs" | "body">,
    /** Where the refs' ids are in `w` (its count, then the ids), and what a body is made from. */
    private readonly from: { w: Int32Array; at: number; str: (i: number) => string; t: Tokens; a: number; b: number },
  ) {
    this.defs = fields.defs;
    this.stub = fields.stub;
    this.classlike = fields.classlike;
    this.deviceVar = fields.deviceVar;
    this.kernel = fields.kernel;
    this.using = fields.using;
  }
  get refs(): Set<string> {
    if (!this.refsSet) {
      const { w, at, str } = this.from;
      this.refsSet = new Set();
      for (let i = 1; i <= w[at]!; i++) this.refsSet.add(str(w[at + i]!));
    }
    return this.refsSet;
  }
  set refs(v: Set<string>) {
    this.refsSet = v;
  }
  get body(): string[] {
    return (this.bodyWords ??= words(this.from.t, this.from.a, this.from.b));
  }
  set body(v: string[]) {
    this.bodyWords = v;
  }
}

/** The declarations' analyses: each record as encodePruneState wrote it; each body is its tokens' texts again (words), made when first read. */
function decodeDecls(
  declBytes: Uint8Array,
  keyBytes: Uint8Array,
  items: Item[],
  t: Tokens,
  str: (i: number) => string,
  nStrings: number,
): (DeclInfo | undefined)[] {
  const w = new Int32Array(declBytes.buffer, declBytes.byteOffset, declBytes.length >> 2);
  const keys = new Float64Array(keyBytes.buffer, keyBytes.byteOffset, keyBytes.length >> 3);
  const info: (DeclInfo | undefined)[] = [];
  let p = 0,
    k = 0;
  const next = () => {
    if (p >= w.length) throw new Error("the declarations' records end early");
    return w[p++]!;
  };
  const set = () => {
    const s = new Set<string>();
    for (let c = next(); c > 0; c--) s.add(str(next()));
    return s;
  };
  // a set read later: its ids checked now (a damaged record is found at the load, not in the prune)
  const skipSet = () => {
    const at = p;
    for (let c = next(); c > 0; c--) {
      const id = next();
      if (id < 0 || id >= nStrings) throw new Error(`string ${id} is out of the table`);
    }
    return at;
  };
  while (p < w.length) {
    const idx = next(),
      flags = next(),
      stub = next();
    const it = items[idx];
    if (!it || it.kind !== "decl" || info[idx]) throw new Error(`a record names item ${idx}, not a declaration`);
    const using = flags & F.using ? { ns: str(next()), name: str(next()) } : undefined;
    const defs = set();
    const refsAt = skipSet();
    const d = new StoredDecl(
      {
        defs,
        stub: stub === -1 ? undefined : stub === -2 ? "drop" : stub,
        classlike: !!(flags & F.classlike),
        deviceVar: !!(flags & F.deviceVar),
        kernel: !!(flags & F.kernel),
        using,
      },
      { w, at: refsAt, str, t, a: it.a, b: it.b },
    );
    if (typeof d.stub === "number" && (d.stub < it.a || d.stub >= it.b)) throw new Error(`item ${idx}'s body is out of it`);
    if (flags & F.gate) d.gate = set();
    if (flags & F.op) d.op = { names: set(), all: !!(flags & F.opAll) };
    if (flags & F.gateKey) {
      if (k >= keys.length) throw new Error("the gate keys end early");
      d.gateKey = keys[k++]!;
    }
    info[idx] = d;
  }
  for (let i = 0; i < items.length; i++) if (items[i]!.kind === "decl" && !info[i]) throw new Error(`declaration ${i} has no record`);
  return info;
}

/**
 * Write the state file (no fsync: a scratch file, remade when lost).
 * @param prev the state loaded or saved before in this process (encodePruneState)
 * @param root the folder the write walks from with no link followed (the capture folder)
 * @throws KerncapError E_UNSAFE_PATH, E_IO (src/util/write-file.ts)
 */
export function savePruneState(path: string, st: PruneState, prev?: PruneState, root?: string): void {
  const key = userResultsKey();
  const opts = { sync: false, ...(root ? { root } : {}) };
  rmSync(`${path}${SEAL}`, { force: true }); // unsealed while it is written
  if (!key) return void rmSync(path, { force: true }); // no key of the user's: nothing kept (src/format/state-seal.ts)
  const bytes = encodePruneState(st, prev);
  writeFileAtomic(path, bytes, opts);
  writeFileAtomic(`${path}${SEAL}`, stateSeal(SEAL_SCHEMA, dirname(path), [bytes], key), opts);
}

/** The seal file's text: a regular file opened with no link followed and without waiting (a FIFO is none), at most 1 KiB; undefined otherwise. */
function readSeal(path: string): string | undefined {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile() || st.size > 1024) return undefined;
    const buf = Buffer.alloc(st.size);
    return readSync(fd, buf, 0, buf.length, 0) === buf.length ? buf.toString("utf8") : undefined;
  } finally {
    closeSync(fd);
  }
}

/** The seal beside the state file (src/format/state-seal.ts), and the document id it covers. */
const SEAL = ".seal";
const SEAL_SCHEMA = "kerncap.prune-state/1";

/**
 * Read a state file: used only when it is a regular file of this user's that nobody else may
 * write, opened with no link followed, and decodePruneState accepts it.
 * @returns the state, or why there is none (a sentence: the debug log's)
 */
export function loadPruneState(path: string): PruneState | { reason: string } {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (e) {
    return { reason: (e as NodeJS.ErrnoException).code === "ENOENT" ? "none saved" : `cannot be opened (${(e as Error).message})` };
  }
  try {
    const st = fstatSync(fd);
    const uid = process.geteuid?.();
    if (!st.isFile()) return { reason: "not a regular file" };
    if (uid !== undefined && st.uid !== uid) return { reason: `owned by uid ${st.uid}, not this user's` };
    if (st.mode & 0o022) return { reason: "others may write it" };
    if (st.size > MAX_BYTES) return { reason: `${st.size} bytes, over the bound` };
    const buf = new Uint8Array(st.size);
    for (let done = 0; done < buf.length; ) {
      const r = readSync(fd, buf, done, buf.length - done, done);
      if (r === 0) return { reason: "shorter than when opened" };
      done += r;
    }
    // sealed for this folder by this user's kerncap (adversary 57: its check field is an unkeyed hash a sender can make)
    const key = userResultsKey();
    if (!key) return { reason: "no results key of this user's to check its seal with" };
    const seal = readSeal(`${path}${SEAL}`);
    if (seal === undefined) return { reason: "not sealed" };
    if (seal !== stateSeal(SEAL_SCHEMA, dirname(path), [buf], key)) return { reason: "its seal does not hold (written elsewhere, by another, or changed)" };
    return decodePruneState(buf);
  } finally {
    closeSync(fd);
  }
}
