// device probe: cuMemHostRegister on Bun.mmap views (shared/private), holes vs dense
import { cuda } from "../../src/native/libcuda.ts";
import { openSync, writeSync, closeSync, ftruncateSync } from "node:fs";
const [mode, file] = [process.argv[2]!, process.argv[3]!];
const GiB = 1 << 30;
if (mode === "make") {
  const fd = openSync(file, "w");
  const buf = new Uint8Array(64 << 20);
  for (let i = 0; i < buf.length; i += 4096) buf[i] = ((i >> 12) & 0xff) | 1;
  for (let o = 0; o < 4 * GiB; o += buf.length) writeSync(fd, buf, 0, buf.length, o);
  closeSync(fd);
  const fd2 = openSync(file + ".sparse", "w");
  ftruncateSync(fd2, 4 * GiB);
  writeSync(fd2, buf, 0, buf.length, 0);
  closeSync(fd2);
  process.exit(0);
}
const cu = cuda(0);
const d = cu.memAlloc(GiB);
const t0 = performance.now();
let regT = 0,
  cpT = 0;
for (let w = 0; w < 4; w++) {
  const view = Bun.mmap(file, { shared: mode.includes("shared"), offset: w * GiB, size: GiB });
  const a = performance.now();
  const ok = mode.includes("stage") ? false : cu.hostRegister(view, true);
  const b = performance.now();
  if (mode.includes("stage")) {
    const h = cu.hostAlloc(64 << 20);
    for (let o = 0; o < GiB; o += 64 << 20) {
      h.set(view.subarray(o, o + (64 << 20)));
      cu.htod(d + BigInt(o), h);
    }
  } else if (!ok) {
    console.log(mode, "register refused");
    process.exit(3);
  } else {
    cu.htod(d, view);
    cu.hostUnregister(view);
  }
  regT += b - a;
  cpT += performance.now() - b;
}
const s = (performance.now() - t0) / 1000;
console.log(
  `${mode} ${file}: 4 GiB in ${s.toFixed(2)} s = ${((4 * GiB) / 1e9 / s).toFixed(1)} GB/s (register ${(regT / 1000).toFixed(2)} s, copy ${(cpT / 1000).toFixed(2)} s)`,
);
