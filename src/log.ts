/**
 * The one tagged logger. It writes to stderr so that stdout carries only data (--json). Every
 * string it prints goes through escapeForTerminal first (src/escape.ts): a kernel name, an
 * archive's warning or a compiler's message that carries ESC, C1 or bidi controls reaches the
 * terminal as text, whoever logs it.
 */
import { createConsola, type ConsolaReporter } from "consola";
import { verboseFromEnv } from "./env.ts";
import { escapeForTerminal } from "./escape.ts";

const consola = createConsola({
  stdout: process.stderr,
  stderr: process.stderr,
  level: verboseFromEnv() ? 4 : 3,
  formatOptions: { date: false },
});
// consola's own reporters (fancy on a terminal, basic elsewhere), each given escaped arguments
consola.setReporters(
  consola.options.reporters.map(
    (r): ConsolaReporter => ({ log: (obj, ctx) => r.log({ ...obj, args: obj.args.map((a) => (typeof a === "string" ? escapeForTerminal(a) : a)) }, ctx) }),
  ),
);

export const log = consola.withTag("kerncap");

export function setVerbose(on: boolean): void {
  log.level = on ? 4 : 3;
}
