/**
 * JUnit XML of a check (`--junit FILE`), the shape CI servers read (Jenkins, GitLab, GitHub
 * test reporters; the common junit-10 XSD): one <testsuites> holding one <testsuite> with
 * name, tests, failures, errors, skipped, time, timestamp and hostname; one <testcase> per capture
 * (classname: the folder part of its identity, name: the rest, time: seconds) holding
 * <failure> (a mismatch, slower beyond its interval), <error> (it could not be checked) or
 * <skipped> (refused by name: another architecture without a source to rebuild from), each with
 * a message attribute; the measurements in <system-out>.
 */
import { hostname as machineName } from "node:os";
import type { CheckRecord } from "../format/check-record.ts";
import { builderWords, rowReason } from "./report.ts";
import { escapeBidi } from "../escape.ts";

/**
 * Text as XML 1.0 character data or attribute value: & < > " ' escaped; characters XML 1.0 does
 * not allow at all (C0 controls but tab, newline and carriage return; lone surrogates; U+FFFE,
 * U+FFFF) and DEL and the C1 controls (allowed, but a CSI to a terminal that shows the file) written as the text \xHH / \uHHHH, so a kernel name or compiler message can never make
 * the file unreadable; format characters (bidi, zero-width, tags) and line separators as \uNNNN (src/escape.ts escapeBidi). Newlines
 * are kept in text and written as &#10; in attributes.
 */
export function xmlEscape(raw: string, attribute = false): string {
  // format characters and line separators as the text \uNNNN first (a CI viewer would show a name reversed, or two alike)
  const text = escapeBidi(raw);
  let out = "";
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const ch = text[i]!;
    if (ch === "&") out += "&amp;";
    else if (ch === "<") out += "&lt;";
    else if (ch === ">") out += "&gt;";
    else if (ch === '"') out += "&quot;";
    else if (ch === "'") out += "&apos;";
    else if (c === 0x9 || c === 0xa || c === 0xd) out += attribute ? `&#${c};` : ch;
    else if (c < 0x20 || (c >= 0x7f && c <= 0x9f))
      out += `\\x${c.toString(16).padStart(2, "0")}`; // C1 too: U+009B is a CSI to a terminal that shows the file
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length && text.charCodeAt(i + 1) >= 0xdc00 && text.charCodeAt(i + 1) <= 0xdfff) out += ch + text[++i];
    else if ((c >= 0xd800 && c <= 0xdfff) || c === 0xfffe || c === 0xffff) out += `\\u${c.toString(16).padStart(4, "0")}`;
    else out += ch;
  }
  return out;
}

const attr = (name: string, value: string | number) => ` ${name}="${xmlEscape(String(value), true)}"`;
const secs = (s: number) => (Number.isFinite(s) ? s.toFixed(3) : "0");

/** One line of measurements for a capture's <system-out>. */
function measurements(r: CheckRecord): string {
  const parts = [`status ${r.status}`, `kernel ${r.kernel ?? "?"}`];
  if (r.numerics) parts.push(`numerics ${r.numerics}`);
  if (r.timing) parts.push(`median ${r.timing.medianUs.toFixed(2)} us over ${r.timing.samplesUs.length} launches`);
  if (r.time?.ratio != null)
    parts.push(
      `time ratio ${r.time.ratio.toFixed(3)} [${r.time.low!.toFixed(3)}, ${r.time.high!.toFixed(3)}] vs baseline ${r.time.baselineMedianUs!.toFixed(2)} us`,
    );
  else if (r.time) parts.push(`time ${r.time.verdict}`);
  if (r.device) parts.push(`replayed on ${r.device.name} (${r.device.arch})`);
  // a build-only record's note says the build ("built by build.sh in 0.37 s; not replayed"): not said twice (nu14 #10)
  if (r.rebuild && r.verdict !== "built")
    parts.push(
      `rebuilt by ${builderWords(r.rebuild.builder)} in ${r.rebuild.seconds.toFixed(2)} s${r.rebuild.targetArch ? ` for ${r.rebuild.targetArch}` : ""}`,
    );
  if (r.note) parts.push(r.note);
  return parts.join("; ");
}

/**
 * The JUnit XML document of `records`.
 * @param o.seconds the whole check's wall time; o.timestamp ISO 8601 without zone offset (the XSD's
 *   xs:dateTime pattern), default now; o.hostname default the machine's
 */
export function junitXml(
  records: CheckRecord[],
  o: {
    name?: string;
    seconds: number;
    timestamp?: string;
    hostname?: string;
    properties?: Record<string, string>;
    /** Captures the run did not reach (it was interrupted): each an <error> of `code` with `why`, so that a CI reading the file sees the run incomplete. */
    notChecked?: { ids: string[]; code: string; why: string };
  },
): string {
  const name = o.name ?? "kerncap check";
  const count = (s: CheckRecord["status"][]) => records.filter((r) => s.includes(r.status)).length;
  const left = o.notChecked?.ids ?? [];
  const failures = count(["mismatch", "slower"]);
  const errors = count(["error"]) + left.length;
  const skipped = count(["skipped"]);
  const totals =
    attr("tests", records.length + left.length) +
    attr("failures", failures) +
    attr("errors", errors) +
    attr("skipped", skipped) +
    attr("time", secs(o.seconds));
  const timestamp = o.timestamp ?? new Date().toISOString().replace(/\.\d+Z$/, "");
  const hostname = o.hostname ?? machineName();
  const L = [
    `<?xml version="1.0" encoding="UTF-8"?>`,
    `<testsuites${attr("name", name)}${totals}>`,
    `  <testsuite${attr("name", name)}${totals}${attr("timestamp", timestamp)}${attr("hostname", hostname)}>`,
  ];
  const props = Object.entries(o.properties ?? {});
  if (props.length) {
    L.push("    <properties>");
    for (const [k, v] of props) L.push(`      <property${attr("name", k)}${attr("value", v)}/>`);
    L.push("    </properties>");
  }
  const testcase = (id: string, seconds: number) => {
    const cut = id.lastIndexOf("/");
    const classname = cut < 0 ? "kerncap" : id.slice(0, cut).replaceAll("/", ".");
    const test = cut < 0 ? id : id.slice(cut + 1);
    L.push(`    <testcase${attr("classname", classname)}${attr("name", test)}${attr("time", secs(seconds))}>`);
  };
  for (const r of records) {
    testcase(r.id, r.seconds);
    const why = r.reason ?? r.status;
    if (r.status === "mismatch") L.push(`      <failure${attr("message", `mismatch: ${why}`)}${attr("type", "mismatch")}>${xmlEscape(why)}</failure>`);
    else if (r.status === "slower")
      L.push(`      <failure${attr("message", `slower: ${r.time?.reason ?? why}`)}${attr("type", "slower")}>${xmlEscape(r.time?.reason ?? why)}</failure>`);
    // the row's reason as the table says it (no GPU: short), the whole message once, in the element's text
    else if (r.status === "error") L.push(`      <error${attr("message", rowReason(r) ?? why)}${attr("type", r.code ?? "error")}>${xmlEscape(why)}</error>`);
    else if (r.status === "skipped") L.push(`      <skipped${attr("message", why)}/>`);
    L.push(`      <system-out>${xmlEscape(measurements(r))}</system-out>`);
    L.push("    </testcase>");
  }
  for (const id of left) {
    testcase(id, 0);
    L.push(`      <error${attr("message", o.notChecked!.why)}${attr("type", o.notChecked!.code)}>${xmlEscape(o.notChecked!.why)}</error>`, "    </testcase>");
  }
  L.push("  </testsuite>", "</testsuites>");
  return L.join("\n") + "\n";
}
