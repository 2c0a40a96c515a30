/**
 * The one tagged logger. It writes to stderr so that stdout carries only data (--json). Every
 * string it prints goes through escapeForTerminal first (src/escape.ts): a kernel name, an
 * archive's warning or a compiler's message that carries ESC, C1 or bidi controls reaches the
 * terminal as text, whoever logs it. And as written: consola's fancy reporter (on a terminal)
 * reads `…` as colour and ` _…_ ` as underline and drops the marks (a kernel name ``a `id` b``
 * showed as `a id b`), so its formatting is given the text with those marks hidden and they are
 * put back after it.
 */
import { createConsola, type ConsolaReporter, type LogObject } from "consola";
import { verboseFromEnv } from "./env.ts";
import { escapeForTerminal } from "./escape.ts";

/** Stand-ins for ` and _ while consola formats a line (noncharacters: no text holds them; one that does is written \u{FDD0}). */
const TICK = "\uFDD0";
const LOW = "\uFDD1";

/** `a` escaped for the terminal, its backquotes and underscores hidden from consola's markup. */
function hideMarks(a: unknown): unknown {
  if (typeof a !== "string") return a;
  return escapeForTerminal(a)
    .replace(/[\uFDD0\uFDD1]/g, (c) => `\\u{${c.codePointAt(0)!.toString(16).toUpperCase()}}`)
    .replaceAll("`", TICK)
    .replaceAll("_", LOW);
}

/** A reporter that prints each argument escaped and literally (consola's markup never applied to it). */
function literal(r: ConsolaReporter): ConsolaReporter {
  const formats = r as ConsolaReporter & { formatLogObj?: (o: LogObject, opts: unknown) => string };
  const fmt = formats.formatLogObj;
  if (typeof fmt === "function") formats.formatLogObj = (o, opts) => fmt.call(r, o, opts).replaceAll(TICK, "`").replaceAll(LOW, "_");
  return { log: (obj, ctx) => r.log({ ...obj, args: obj.args.map(hideMarks) }, ctx) };
}

/**
 * A kerncap logger writing to `stream` (default stderr): `fancy` as consola decides it (a
 * terminal: fancy) unless given. For the tests of what a terminal shows.
 */
export function createLog(o: { stream?: NodeJS.WritableStream; fancy?: boolean } = {}) {
  const stream = (o.stream ?? process.stderr) as NodeJS.WriteStream;
  const consola = createConsola({
    stdout: stream,
    stderr: stream,
    level: verboseFromEnv() ? 4 : 3,
    formatOptions: { date: false },
    ...(o.fancy === undefined ? {} : { fancy: o.fancy }),
  });
  consola.setReporters(consola.options.reporters.map(literal));
  return consola.withTag("kerncap");
}

export const log = createLog();

export function setVerbose(on: boolean): void {
  log.level = on ? 4 : 3;
}

/** The warning lists being filled (collectWarnings): each log.warn's text is added to every one. */
const warningSinks = new Set<string[]>();
{
  const warn = log.warn.bind(log);
  log.warn = ((...a: unknown[]) => {
    if (warningSinks.size) {
      const text = a.map((x) => (x instanceof Error ? x.message : String(x))).join(" ");
      for (const s of warningSinks) s.push(text);
    }
    return warn(...(a as Parameters<typeof warn>));
  }) as typeof log.warn;
}

/**
 * Every warning logged (log.warn) from now until `stop()`, as text (the message as given, not
 * escaped: a document's reader escapes it): what a verb's `--json` document gives as `warnings`,
 * so that each WARN line on stderr is also an entry of it.
 */
export function collectWarnings(): { list: string[]; stop: () => string[] } {
  const list: string[] = [];
  warningSinks.add(list);
  return {
    list,
    stop: () => {
      warningSinks.delete(list);
      return list;
    },
  };
}
