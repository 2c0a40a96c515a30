/** The one tagged logger. It writes to stderr so that stdout carries only data (--json). */
import { createConsola } from "consola";
import { verboseFromEnv } from "./env.ts";

export const log = createConsola({
  stdout: process.stderr,
  stderr: process.stderr,
  level: verboseFromEnv() ? 4 : 3,
  formatOptions: { date: false },
}).withTag("kerncap");

export function setVerbose(on: boolean): void {
  log.level = on ? 4 : 3;
}
