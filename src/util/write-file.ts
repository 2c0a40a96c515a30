/** Files kerncap writes outside a capture folder (a report, a baseline) at a path the user named. */
import { renameSync, rmSync, writeFileSync } from "node:fs";

/**
 * Write `text` to `path` through `path.tmp-PID` and a rename, so a reader never sees half a file;
 * the temp is removed when the write or the rename fails.
 * @throws the file system's error (ENOENT for a missing folder, EISDIR…)
 */
export function writeFileAtomic(path: string, text: string): void {
  const tmp = `${path}.tmp-${process.pid}`;
  try {
    writeFileSync(tmp, text);
    renameSync(tmp, path);
  } finally {
    rmSync(tmp, { force: true }); // gone after the rename; left by a failed one
  }
}
