/**
 * kerncap's stdout set aside from what else writes to fd 1: a kernel's device-side printf reaches
 * the process's fd 1 from inside the CUDA driver (seen on the H200: `validate --json` of a kernel
 * with printf printed its lines before the document), and a received module's strings are whoever
 * made it (ESC ] 52 writes the terminal's clipboard, ESC [2J clears it: adversary 60). fd 1 is
 * duplicated for the data channel (the JSON document, a verb's text: src/cli/args.ts writeData)
 * and pointed at a private file, whose text is copied to stderr with every control character,
 * format character and line separator escaped (src/escape.ts; newlines and tabs kept).
 * A file, not a pipe: the driver writes while kerncap's one thread is inside a launch, and a full
 * pipe would hold it there.
 */
import { constants, fstatSync, openSync, readSync, rmSync, writeSync } from "node:fs";
import { join } from "node:path";
import { privateTempFolder } from "../cache.ts";
import { escapeForTerminal } from "../escape.ts";
import { libc } from "./libc.ts";

/** The duplicate of the original fd 1 (the data channel) once set aside. */
let dataFd: number | undefined;
/** The private file fd 1 points at, and how much of it was copied to stderr (bytes). */
let deviceOutput: { fd: number; copied: number; decoder: TextDecoder } | undefined;

/** The data channel's fd once setStdoutAside ran (the original stdout), else undefined: stdout is fd 1. */
export function dataChannelFd(): number | undefined {
  return dataFd;
}

/**
 * Set fd 1 aside (once per process): dup it for the data channel, point fd 1 at a file of the
 * process's own (a memfd: no path, gone with the process; else a 0600 file in a private folder under
 * TMPDIR, O_EXCL|O_NOFOLLOW), and copy what lands there to stderr, escaped, every 250 ms while
 * kerncap waits and at exit (libc's buffers flushed first: flushDeviceOutput). Called under --json
 * and in workers before anything runs, and where a replay backend opened
 * (src/replay/backends/factory.ts): before a module's printf can run. Where neither file can be
 * made, fd 1 is pointed at /dev/null and a warning says device output is not shown (never at
 * stderr raw); where libc cannot be loaded, nothing changes.
 */
export function setStdoutAside(): void {
  if (dataFd !== undefined) return;
  try {
    const { dup, dup2 } = libc();
    const saved = dup(1);
    if (saved < 0) return;
    const made = outputFile();
    const fd = made?.fd ?? openSync("/dev/null", constants.O_WRONLY);
    if (dup2(fd, 1) < 0) return;
    dataFd = saved;
    if (!made) {
      writeSync(2, "kerncap: warning: the kernel's device output (printf) is not shown: no private file for it (memfd_create and TMPDIR both failed)\n");
      return;
    }
    deviceOutput = { fd: made.fd, copied: 0, decoder: new TextDecoder() };
    setInterval(flushDeviceOutput, 250).unref();
    process.on("exit", () => {
      flushDeviceOutput();
      if (made.folder) rmSync(made.folder, { recursive: true, force: true });
    });
  } catch {
    /* stdout stays as it is */
  }
}

/** A file for fd 1 that no other user can open: a memfd, else a file in a private folder (its folder, to remove); undefined when neither can be made. */
function outputFile(): { fd: number; folder?: string } | undefined {
  try {
    const fd = libc().memfd_create(Buffer.from("kerncap-device-output\0"), MFD_CLOEXEC); // the one dup'd to fd 1 is inherited
    if (fd >= 0) return { fd };
  } catch {
    /* an older libc: a file under TMPDIR */
  }
  try {
    const folder = privateTempFolder("kerncap-device-output-");
    const flags = constants.O_RDWR | constants.O_CREAT | constants.O_EXCL | constants.O_APPEND | constants.O_NOFOLLOW;
    return { fd: openSync(join(folder, "stdout"), flags, 0o600), folder };
  } catch {
    return undefined;
  }
}

/** memfd_create(2)'s MFD_CLOEXEC. */
const MFD_CLOEXEC = 1;

/**
 * Copy what was written to fd 1 since the last call (a kernel's printf, through libc's buffers)
 * to stderr, escaped for a terminal. A no-op unless setStdoutAside() pointed fd 1 at its file.
 */
export function flushDeviceOutput(): void {
  const out = deviceOutput;
  if (!out) return;
  try {
    libc().fflush(null);
    const size = fstatSync(out.fd).size;
    if (size <= out.copied) return;
    const bytes = Buffer.alloc(Math.min(size - out.copied, 1 << 24));
    const n = readSync(out.fd, bytes, 0, bytes.length, out.copied);
    out.copied += n;
    const text = out.decoder.decode(bytes.subarray(0, n), { stream: true });
    if (text) writeSync(2, escapeForTerminal(text));
  } catch {
    /* stderr gone: nothing to show it on */
  }
}
