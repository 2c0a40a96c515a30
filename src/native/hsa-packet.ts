/**
 * Pure helpers of the HSA replay backend (no runtime needed; tested in test/cpu/native/libhsa.test.ts): the AQL
 * kernel dispatch packet (hsa.h hsa_kernel_dispatch_packet_t).
 */
const HSA_PACKET_TYPE_KERNEL_DISPATCH = 2;
const HSA_FENCE_SCOPE_SYSTEM = 2;

export interface DispatchPacket {
  /** Grid size in work-items per dimension (the captured launch.grid of an HSA capture). */
  grid: readonly [number, number, number];
  /** Workgroup size in work-items. */
  block: readonly [number, number, number];
  /** Bytes of group (LDS) and private (scratch) memory per work-group / work-item. */
  groupSegmentSize: number;
  privateSegmentSize: number;
  kernelObject: bigint;
  kernargAddress: bigint;
  completionSignal: bigint;
}

/**
 * The 64-byte hsa_kernel_dispatch_packet_t (hsa.h) and, separately, its first 32-bit word
 * (header | setup << 16), which must be stored last, atomically, to hand the packet to the GPU.
 */
export function encodeDispatchPacket(p: DispatchPacket): { bytes: Uint8Array; headerWord: number } {
  const b = new Uint8Array(64);
  const dv = new DataView(b.buffer);
  const dims = p.grid[2] > 1 || p.block[2] > 1 ? 3 : p.grid[1] > 1 || p.block[1] > 1 ? 2 : 1;
  dv.setUint16(4, p.block[0], true);
  dv.setUint16(6, p.block[1], true);
  dv.setUint16(8, p.block[2], true);
  dv.setUint32(12, p.grid[0], true);
  dv.setUint32(16, p.grid[1], true);
  dv.setUint32(20, p.grid[2], true);
  dv.setUint32(24, p.privateSegmentSize, true);
  dv.setUint32(28, p.groupSegmentSize, true);
  dv.setBigUint64(32, p.kernelObject, true);
  dv.setBigUint64(40, p.kernargAddress, true);
  dv.setBigUint64(56, p.completionSignal, true);
  const header = (HSA_PACKET_TYPE_KERNEL_DISPATCH << 0) | (1 << 8) | (HSA_FENCE_SCOPE_SYSTEM << 9) | (HSA_FENCE_SCOPE_SYSTEM << 11);
  const headerWord = (header | (dims << 16)) >>> 0;
  return { bytes: b, headerWord };
}
