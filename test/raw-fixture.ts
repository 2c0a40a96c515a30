/**
 * raw_version 2 ranges (docs/raw-capture.md) for synthetic raw captures in tests: each range's
 * bytes are laid whole at `offset` (a multiple of 65536) in DIR/memory/before.bin and, when the
 * launch changed it, in DIR/memory/after.bin. The stored states are computed here on the CPU as a
 * capture library computes them (c/common/kc_raw.c kc_item_cpu_pass): before = the non-zero chunks,
 * after = the chunks whose kc64 differs; the extents point into the same files (no byte moves).
 */
import { join } from "node:path";
import { chunkCount, chunkLen } from "../src/format/chunks.ts";
import { FileImage } from "../src/format/file-image.ts";
import { kc64 } from "../src/format/kc64.ts";
import type { Raw } from "../src/capture/raw.ts";

export interface WholeRange {
  va: string;
  size: number;
  kind: Raw["regions"][number]["kind"];
  /** File offset (bytes) of the range in both memory files. */
  offset: number;
  changed: boolean;
  name?: string;
}

type Stored = Raw["regions"][number]["before"];

/** The raw.json `memory`, `regions` and `globals` of ranges laid whole in dir's memory files. */
export function chunkedRanges(
  dir: string,
  regions: WholeRange[],
  globals: WholeRange[] = [],
  chunkBytes = 1 << 20,
): Pick<Raw, "memory" | "regions" | "globals"> {
  const before = new FileImage(join(dir, "memory/before.bin"));
  const after = new FileImage(join(dir, "memory/after.bin"));
  let stored = [0, 0];
  const conv = (r: WholeRange): Raw["regions"][number] => {
    const b: Stored = { extents: [], hashes: "" };
    const a: Stored = { extents: [], hashes: "" };
    let changedChunks = 0;
    let changedBytes = 0;
    const push = (st: Stored, c: number, hex: string, len: number, which: 0 | 1) => {
      const last = st.extents[st.extents.length - 1];
      if (last && last[0] + last[1] === c) last[1]++;
      else st.extents.push([c, 1, r.offset + c * chunkBytes]);
      st.hashes += hex;
      stored[which]! += len;
    };
    for (let c = 0; c < chunkCount(r.size, chunkBytes); c++) {
      const len = chunkLen(r.size, c, chunkBytes);
      const hb = kc64(before.view(r.offset + c * chunkBytes, len));
      if (hb.nonzero) push(b, c, hb.hex, len, 0);
      if (!r.changed) continue;
      const ha = kc64(after.view(r.offset + c * chunkBytes, len));
      if (ha.hex === hb.hex) continue;
      push(a, c, ha.hex, len, 1);
      changedChunks++;
      changedBytes += len;
    }
    return {
      ...(r.name ? { name: r.name } : {}),
      va: r.va,
      size: r.size,
      kind: r.kind,
      hashed_on: "cpu",
      changed: changedChunks > 0,
      changed_chunks: changedChunks,
      changed_bytes: changedBytes,
      before: b,
      after: a,
    };
  };
  const out = { regions: regions.map(conv), globals: globals.map(conv) };
  const live = [...regions, ...globals].reduce((s, r) => s + r.size, 0);
  return {
    memory: {
      chunk_bytes: chunkBytes,
      hash: "kc64/1",
      align: 65536,
      live_bytes: live,
      stored_before_bytes: stored[0]!,
      stored_after_bytes: stored[1]!,
      hashed_on_gpu: false,
      gpu_scan_unavailable: "synthetic test capture: hashed on the CPU",
    },
    ...out,
  };
}
