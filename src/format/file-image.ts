/**
 * Read-only access to a capture's memory image (memory/before.bin, memory/after.bin) of any size,
 * through mmap windows. Bun.mmap maps at most 4 GiB at once: a larger file throws
 * "RangeError: Out of memory" (Bun 1.4.5; seen on a capture of a 4 GiB PyTorch app, and
 * reproduced with a sparse 5 GiB file). Windows are mapped with Bun.mmap's offset/size options;
 * a view stays valid while it is referenced (the mapping is released when it is collected).
 *
 * Bun.mmap opens the file read-write (Bun 1.4.5: `EACCES ... open` as an unprivileged user on a
 * 0444 file, checked with setpriv --reuid=nobody), so a capture folder the user cannot write to
 * (someone else's, chmod -R a-w, a read-only mount) cannot be mapped. Then FileImage reads the
 * requested ranges with pread (fs.readSync on a descriptor opened "r") into heap buffers instead:
 * a window of min(windowBytes, READ_WINDOW_BYTES) bytes (or the view's size when larger) at a
 * time, never the whole file. `mapped` says which way the last window came.
 */
import { closeSync, existsSync, fstatSync, openSync, readSync, statSync } from "node:fs";
import { openInCapture } from "./paths.ts";

/** Bytes of one mmap window (1 GiB): few mappings, far below the 4 GiB limit. */
export const WINDOW_BYTES = 1 << 30;
/** Bytes a caller should ask for at once (64 MiB): the size of staging copies and hash updates. */
export const PIECE_BYTES = 64 << 20;

/** Bytes read at once when the file cannot be mapped (64 MiB: the size callers ask for, PIECE_BYTES). */
export const READ_WINDOW_BYTES = 64 << 20;

/**
 * Bytes [off, off + n) of the file at `path`, read with pread into a new heap buffer (the
 * fallback of FileImage when Bun.mmap cannot open the file: it needs write access).
 * @throws Error (EACCES, ENOENT) when the file cannot be opened for reading; RangeError when the
 *   file is shorter than off + n (it changed since its size was taken).
 */
export function readRange(path: string, off: number, n: number): Uint8Array {
  const fd = openSync(path, "r");
  try {
    return readFd(fd, path, off, n);
  } finally {
    closeSync(fd);
  }
}

/** Bytes [off, off + n) of the open file `fd` (named `path` in the error), read with pread. @throws RangeError when it ends sooner (cut short since its size was taken) */
function readFd(fd: number, path: string, off: number, n: number): Uint8Array {
  const out = new Uint8Array(n);
  for (let done = 0; done < n; ) {
    const got = readSync(fd, out, done, Math.min(n - done, 1 << 30), off + done);
    if (got === 0) throw new RangeError(`${path} ended at byte ${off + done}, ${n - done} bytes short of ${off + n}`);
    done += got;
  }
  return out;
}

/** A memory image already open (src/format/capture-dir.ts openImageInCapture): read from this descriptor only, never reopened by name. */
export interface OpenedImage {
  fd: number;
  /** Bytes, from the fstat of the open descriptor. */
  size: number;
  /**
   * Whether windows may be mapped (through /proc/self/fd/N: the file opened, whatever its name
   * now): only a file this user owns that no one else may write. A mapping of a file another user
   * can cut short dies of SIGBUS at the first read past its new end, which no handler of Bun's
   * survives (adversary 66: `inspect --verify` exit 135); such a file is read with pread, where a
   * short read is an error kerncap says.
   */
  mappable: boolean;
}

export class FileImage {
  /** File size in bytes (0 when the file is absent: an empty image). */
  readonly size: number;
  private win: Uint8Array = new Uint8Array(0);
  private winOff = 0;
  /** Called with each new window as it is mapped (the restore pins windows); not called for windows read with pread. */
  onWindow?: (win: Uint8Array) => void;
  /** False once Bun.mmap failed on this file (no write access): windows are then read with pread (readRange). */
  mapped = true;
  /** Called once when mapping fails and FileImage falls back to reading, with the mmap error. */
  onReadFallback?: (err: Error) => void;

  /**
   * @param shared map MAP_SHARED (Bun.mmap's `shared`): needed to pin a view with cuMemHostRegister.
   *   Measured on the H200 node (driver 580, scripts/probe/register.ts): registering a MAP_PRIVATE
   *   file mapping never returned (killed after 60 s); a MAP_SHARED one registered 4 GiB in 0.14 s
   *   and copied at 35 GB/s. The default stays private (readers that never pin).
   */
  constructor(
    readonly path: string,
    private readonly windowBytes = WINDOW_BYTES,
    private readonly shared = false,
    private readonly opened?: OpenedImage,
  ) {
    this.size = opened ? opened.size : existsSync(path) ? statSync(path).size : 0;
    if (opened && !opened.mappable) this.mapped = false;
  }

  private closed = false;

  /** Close the descriptor of an opened image (nothing for one read by name); a second call does nothing (the number may be another file's by then). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.opened && this.opened.fd >= 0) closeSync(this.opened.fd);
  }

  /** Whether this image and `other` are one file (device and inode of their open descriptors); false for an image read by name. */
  sameFile(other: FileImage): boolean {
    const a = this.fd;
    const b = other.fd;
    if (a === undefined || b === undefined) return false;
    const x = fstatSync(a);
    const y = fstatSync(b);
    return x.dev === y.dev && x.ino === y.ino;
  }

  /** The open descriptor of an opened image (OpenedImage), undefined for one read by name or absent. */
  get fd(): number | undefined {
    return this.opened && this.opened.fd >= 0 && !this.closed ? this.opened.fd : undefined;
  }

  /**
   * Bytes [off, off + n) of the file, zero-copy.
   * @param n at most 2 GiB; callers use PIECE_BYTES pieces (see pieces()).
   * @throws RangeError when the range is outside the file.
   */
  view(off: number, n: number): Uint8Array {
    if (n === 0) return new Uint8Array(0);
    if (off < 0 || n < 0 || off + n > this.size) throw new RangeError(`bytes ${off}..${off + n} are outside ${this.path} (${this.size} bytes)`);
    if (off < this.winOff || off + n > this.winOff + this.win.byteLength) {
      const start = off - (off % 65536); // windows start on 64 KiB (page-aligned, pinnable)
      if (this.mapped) {
        try {
          this.win = Bun.mmap(this.opened ? `/proc/self/fd/${this.opened.fd}` : this.path, {
            shared: this.shared,
            offset: start,
            size: Math.min(Math.max(this.windowBytes, n + off - start), this.size - start),
          });
          this.winOff = start;
          this.onWindow?.(this.win);
          return this.win.subarray(off - this.winOff, off - this.winOff + n);
        } catch (e) {
          this.mapped = false;
          this.onReadFallback?.(e as Error);
        }
      }
      const len = Math.min(Math.max(Math.min(this.windowBytes, READ_WINDOW_BYTES), n + off - start), this.size - start);
      this.win = this.opened ? readFd(this.opened.fd, this.path, start, len) : readRange(this.path, start, len);
      this.winOff = start;
    }
    return this.win.subarray(off - this.winOff, off - this.winOff + n);
  }
}

/**
 * Split [0, size) into pieces of at most `piece` bytes and call fn(start, length) for each, in order.
 * @param size bytes; piece bytes (default PIECE_BYTES).
 */
export function pieces(size: number, fn: (start: number, n: number) => void, piece = PIECE_BYTES): void {
  for (let done = 0; done < size; done += piece) fn(done, Math.min(piece, size - done));
}

/** SHA-256 (hex) of bytes [off, off + n) of an image, hashed in pieces. */
export function sha256Range(img: FileImage, off: number, n: number): string {
  const h = new Bun.CryptoHasher("sha256");
  pieces(n, (s, k) => h.update(img.view(off + s, k)));
  return h.digest("hex");
}

/**
 * The memory image `rel` of capture folder `dir`, opened once by the capture path rule
 * (src/format/paths.ts openInCapture: no link followed, O_NONBLOCK, the file the check saw) and
 * read from that descriptor only (OpenedImage): a FIFO or link renamed over the name afterwards is
 * never opened (adversary 66: a FIFO swapped in hung `check` for ever), and a file another user
 * may write is read with pread, never mapped (mappable). The caller closes it (FileImage.close).
 * @param shared map windows MAP_SHARED (the replay's restore pins them: FileImage's constructor)
 * @returns an empty image (size 0) when there is no such file
 * @throws KerncapError E_UNSAFE_PATH (a link, a FIFO, a hard link, a swap), E_IO
 */
export function openImageInCapture(dir: string, rel: string, shared = false): FileImage {
  const o = openInCapture(dir, rel, Number.MAX_SAFE_INTEGER);
  if (!o) return new FileImage(`${dir}/${rel}`, WINDOW_BYTES, shared, { fd: -1, size: 0, mappable: false });
  const st = fstatSync(o.fd);
  const mine = st.uid === (process.geteuid?.() ?? process.getuid?.()) && (st.mode & 0o022) === 0;
  return new FileImage(o.path, WINDOW_BYTES, shared, { fd: o.fd, size: o.size, mappable: mine });
}
