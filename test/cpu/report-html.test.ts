/**
 * check --report/--csv and tune --report/--csv (src/check/html.ts, src/tune/html.ts over
 * src/util/html-report.ts): what the page holds and escapes, the CSV, the verbs' options end to
 * end, and, where Debian's Chromium is installed (`apt-get install chromium`; .ci/run installs it),
 * the page rendered headless: the screenshot has the chart's coloured pixels, which the same page
 * without its SVG lacks.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { inflateSync } from "node:zlib";
import { checkCsv, checkHtml } from "../../src/check/html.ts";
import { exitCodeOf, ordered, summarize } from "../../src/check/report.ts";
import type { CheckReport } from "../../src/check/check.ts";
import type { CheckRecord } from "../../src/format/check-record.ts";
import { configParams, tuneCsv, tuneHtml, varyingParams } from "../../src/tune/html.ts";
import type { TuneConfig, TuneResult, TuneRow } from "../../src/frontends/tune.ts";
import { csv, esc } from "../../src/util/html-report.ts";
import { makeCapture, recordLine, tempDir } from "./fixtures.ts";

const EVIL = `<script>alert(1)</script><img src=x onerror="alert(2)">&'`;

function record(id: string, status: CheckRecord["status"], ratio: number | null, o: Partial<CheckRecord> = {}): CheckRecord {
  return {
    id,
    path: `/corpus/${id}`,
    kernel: "scale(float*, int)",
    outcome: "done",
    verdict: status === "mismatch" ? "mismatch" : "match",
    numerics: "bit-exact",
    reason: null,
    code: null,
    note: null,
    captured: null,
    device: null,
    rebuild: null,
    timing: { medianUs: 10 * (ratio ?? 1), samplesUs: [] },
    seconds: 1,
    replaySeconds: 0.5,
    at: "2026-12-03T00:00:00Z",
    status,
    time:
      ratio === null
        ? null
        : {
            verdict: status === "slower" ? "slower" : ratio < 0.9 ? "faster" : "same",
            ratio,
            low: ratio * 0.97,
            high: ratio * 1.03,
            baselineMedianUs: 10,
            slowerPct: 10,
            reason: status === "slower" ? "interval above 1.10×" : null,
          },
    worker: 0,
    gpu: null,
    ...o,
  };
}

function checkReport(): CheckReport {
  const records = [
    record("a/one", "ok", 1.01),
    record("a/two", "slower", 1.3),
    record("b", "ok", 0.8),
    record(EVIL, "mismatch", null, {
      kernel: `k${EVIL}`,
      reason: `1 of 2 regions differ from the app's after state: 0x7f0000000000 (changed), 4 bytes from byte 8 ${EVIL}`,
    }),
    record("c", "error", null, { outcome: "error", code: "E_CHECKSUM", reason: "checksum mismatch in memory/before.bin" }),
  ];
  return {
    results: null,
    baseline: "baseline.json",
    shard: null,
    workers: 1,
    rebuild: false,
    slowerPct: 10,
    captures: ordered(records),
    summary: summarize(records),
    exitCode: exitCodeOf(records),
    seconds: 3.2,
  };
}

function tuneResult(): TuneResult<TuneConfig> {
  const row = (kw: Record<string, number>, us: number | null, verdict: TuneRow["verdict"] = "match", captured = false): TuneRow<TuneConfig> => ({
    config: { kwargs: { BLOCK_M: kw.BLOCK_M! }, options: { num_warps: kw.num_warps! } },
    label: `BLOCK_M=${kw.BLOCK_M} num_warps=${kw.num_warps}`,
    captured,
    verdict,
    medianUs: us,
    speedup: us ? 20 / us : null,
    ...(verdict === "compile-error" ? { error: `out of resources ${EVIL}` } : {}),
  });
  const rows = [
    row({ BLOCK_M: 64, num_warps: 4 }, 20, "match", true),
    row({ BLOCK_M: 32, num_warps: 4 }, 25),
    row({ BLOCK_M: 64, num_warps: 8 }, 15),
    row({ BLOCK_M: 128, num_warps: 4 }, 18),
    row({ BLOCK_M: 128, num_warps: 8 }, null, "compile-error"),
    row({ BLOCK_M: 32, num_warps: 8 }, 30, "mismatch"),
  ];
  return {
    dir: "/caps/mm",
    frontend: "triton",
    kernel: "matmul_kernel",
    symbol: "matmul_kernel",
    grid: null,
    rows,
    winner: rows[2]!,
    paste: 'triton.Config({"BLOCK_M": 64}, num_warps=8)',
    seconds: { compile: 12.5, replay: 3.1 },
  };
}

describe("HTML reports", () => {
  test("check: counts, one interval per timed capture, the table, the first differing region; every string escaped; nothing fetched", () => {
    const html = checkHtml(checkReport(), "corpus/");
    expect(html).toStartWith("<!DOCTYPE html>");
    expect(html).toContain(`content="default-src 'none'; style-src 'unsafe-inline'; img-src data:"`);
    // nothing that runs or loads: no script, no src/href, no url(
    expect(html).not.toMatch(/<script|<[^>]*\s(src|href)=|url\(|@import/i);
    expect(html).toContain(esc(EVIL));
    expect(html).not.toContain(EVIL);
    expect(html.match(/<circle /g)).toHaveLength(3); // a/one, a/two, b: the captures with a ratio
    expect(html).toContain("5 captures checked (3.2 s of checks): 1 mismatch, 1 slower, 1 error, 2 ok (1 faster than the baseline)");
    expect(html).toContain("First differing region: <code>1 of 2 regions differ from the app&#39;s after state: 0x7f0000000000 (changed), 4 bytes from byte 8");
    expect(html).toContain("Error E_CHECKSUM: <code>checksum mismatch in memory/before.bin</code>");
    // regressions first, as the terminal's table
    expect(html.indexOf(">mismatch</span>")).toBeLessThan(html.indexOf(">slower</span>"));
  });

  test("tune: the table, a bar per config with its time, a heatmap when two parameters vary, none otherwise", () => {
    const r = tuneResult();
    expect(varyingParams(r.rows)).toEqual(["BLOCK_M", "num_warps"]);
    const html = tuneHtml(r);
    expect(html).not.toMatch(/<script|<[^>]*\s(src|href)=/i);
    expect(html).not.toContain(EVIL);
    expect(html).toContain("BLOCK_M × num_warps");
    // bars: one per config with a time (4 matched or mismatched with a median), the compile error said in its row
    expect(html.match(/<rect x="\d+" y="[\d.]+" width="[\d.]+" height="16" fill/g)).toHaveLength(5);
    expect(html).toContain(">compile-error</text>");
    // heatmap: 3 BLOCK_M × 2 num_warps cells, the app's own config among them
    expect(html.match(/<rect x="\d+" y="\d+" width="\d+" height="28" fill/g)).toHaveLength(6);
    expect(html).toContain(">15.0 µs</text>");
    expect(html).toContain("BLOCK_M=64 num_warps=4: 20.0 µs</title>"); // the app's config's cell
    expect(html).toContain(esc('triton.Config({"BLOCK_M": 64}, num_warps=8)'));
    const one = { ...r, rows: r.rows.filter((x) => configParams(x.config).num_warps === "4") };
    expect(varyingParams(one.rows)).toEqual(["BLOCK_M"]);
    expect(tuneHtml(one)).not.toContain("×</h2>");
    // CUDA configs: macros, maxrregcount and the extra flags as parameters
    expect(configParams({ defines: { TILE: "16" }, maxrregcount: 32, flags: ["-Xptxas=-O1"] })).toEqual({
      TILE: "16",
      maxrregcount: "32",
      flags: "-Xptxas=-O1",
    });
  });

  test("CSV: RFC 4180 quoting, formula-like text made inert, numbers as they are", () => {
    expect(csv([["a", 'b"c', "x,y", "=HYPERLINK(1)", "-1.5", -2, null, "@x"]])).toBe('a,"b""c","x,y",\'=HYPERLINK(1),-1.5,-2,,\'@x\r\n');
    // a semicolon is a separator in semicolon locales' spreadsheets: quoted, so `;=6*7;` never starts a formula cell (adversary 74)
    // and a field after a `;` (where a `;`-separated reading starts one, quotes or not) is no formula either
    expect(csv([["saxpy(Saxpy const*);=6*7;", "x"]])).toBe('"saxpy(Saxpy const*);\'=6*7;",x\r\n');
    expect(csv([["a; +cmd|x", "b;@SUM(1)"]])).toBe('"a; \'+cmd|x","b;\'@SUM(1)"\r\n');
    const c = checkCsv(checkReport()).split("\r\n");
    expect(c[0]).toBe("status,ratio,ratio_low,ratio_high,time_verdict,median_us,baseline_median_us,capture,path,kernel,numerics,code,reason");
    expect(c.filter(Boolean)).toHaveLength(6);
    expect(c.find((l) => l.startsWith("slower,1.3,"))).toBeDefined();
    const t = tuneCsv(tuneResult()).split("\r\n");
    expect(t[0]).toBe("config,captured,BLOCK_M,num_warps,verdict,median_us,speedup,registers,error");
    expect(t[1]).toBe("BLOCK_M=64 num_warps=4,yes,64,4,match,20,1,,");
  });

  test("the verbs: check --merge --report/--csv write both files; a report in a missing folder is refused before any work", async () => {
    const { runCli } = await import("../../src/cli/main.ts");
    const d = tempDir();
    const results = join(d, "results.jsonl");
    writeFileSync(
      results,
      checkReport()
        .captures.map((r) => recordLine("check-record", r))
        .join(""),
    );
    const quiet = async (argv: string[]) => {
      const w = process.stdout.write;
      (process.stdout as any).write = () => true;
      try {
        return await runCli(argv);
      } finally {
        (process.stdout as any).write = w;
      }
    };
    expect(await quiet(["check", "--merge", results, "--report", join(d, "r.html"), "--csv", join(d, "r.csv")])).toBe(1); // a mismatch and a slower capture
    expect(readFileSync(join(d, "r.html"), "utf8")).toContain("<svg");
    expect(readFileSync(join(d, "r.csv"), "utf8").split("\r\n")[0]).toStartWith("status,ratio,");
    // (no --json in this process: it would set stdout aside for documents for the rest of the test run)
    expect(await quiet(["check", "--merge", results, "--report", join(d, "no/such/r.html")])).toBe(2);
    const cap = join(d, "cap");
    await makeCapture(cap);
    expect(await quiet(["tune", cap, "--csv", join(d, "no/such.csv")])).toBe(2);
  });
});

/** RGBA pixels of an 8-bit, non-interlaced RGB or RGBA PNG (what Chromium's --screenshot writes). */
function decodePng(buf: Uint8Array): { width: number; height: number; px: Uint8Array } {
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  let o = 8;
  let width = 0,
    height = 0,
    type = 0;
  const idat: Uint8Array[] = [];
  while (o < buf.length) {
    const len = dv.getUint32(o);
    const kind = new TextDecoder().decode(buf.subarray(o + 4, o + 8));
    const body = buf.subarray(o + 8, o + 8 + len);
    if (kind === "IHDR") {
      width = dv.getUint32(o + 8);
      height = dv.getUint32(o + 12);
      type = body[9]!;
      if (body[8] !== 8 || body[12] !== 0 || (type !== 2 && type !== 6))
        throw new Error(`PNG: bit depth ${body[8]}, colour type ${type}, interlace ${body[12]}`);
    } else if (kind === "IDAT") idat.push(body);
    o += 12 + len;
  }
  const data = inflateSync(Buffer.concat(idat));
  const bpp = type === 6 ? 4 : 3;
  const stride = width * bpp;
  const px = new Uint8Array(width * height * 4);
  let prev = new Uint8Array(stride);
  for (let y = 0; y < height; y++) {
    const f = data[y * (stride + 1)]!;
    const line = data.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    const cur = new Uint8Array(stride);
    for (let i = 0; i < stride; i++) {
      const a = i >= bpp ? cur[i - bpp]! : 0,
        b = prev[i]!,
        c = i >= bpp ? prev[i - bpp]! : 0;
      const p = a + b - c,
        pa = Math.abs(p - a),
        pb = Math.abs(p - b),
        pc = Math.abs(p - c);
      const pred = f === 0 ? 0 : f === 1 ? a : f === 2 ? b : f === 3 ? (a + b) >> 1 : pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
      cur[i] = (line[i]! + pred) & 0xff;
    }
    for (let x = 0; x < width; x++) px.set([cur[x * bpp]!, cur[x * bpp + 1]!, cur[x * bpp + 2]!, bpp === 4 ? cur[x * bpp + 3]! : 255], (y * width + x) * 4);
    prev = cur;
  }
  return { width, height, px };
}

/** Pixels of a strong colour (the charts' greens, oranges, reds, blues), not the page's greys. */
function colouredPixels(png: { px: Uint8Array }): number {
  let n = 0;
  for (let i = 0; i < png.px.length; i += 4) {
    const [r, g, b] = [png.px[i]!, png.px[i + 1]!, png.px[i + 2]!];
    if (Math.max(r, g, b) - Math.min(r, g, b) > 60) n++;
  }
  return n;
}

const CHROMIUM = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find(existsSync);
if (!CHROMIUM) console.warn("[report-html] the screenshot test skipped: needs Debian's chromium (apt-get install chromium)");

describe.skipIf(!CHROMIUM)("the report in a real browser (headless Chromium)", () => {
  function screenshot(html: string, name: string): number {
    const d = tempDir();
    const page = join(d, `${name}.html`);
    writeFileSync(page, html);
    const png = join(d, `${name}.png`);
    const p = Bun.spawnSync(
      [
        CHROMIUM!,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        `--user-data-dir=${join(d, "profile")}`,
        `--screenshot=${png}`,
        "--window-size=1200,1000",
        `file://${resolve(page)}`,
      ],
      { stdout: "pipe", stderr: "pipe", timeout: 60_000 },
    );
    expect(existsSync(png), p.stderr.toString()).toBe(true);
    return colouredPixels(decodePng(readFileSync(png)));
  }
  const withoutCharts = (html: string) => html.replace(/<svg[\s\S]*?<\/svg>/g, "");

  test("check's chart is drawn: its coloured intervals and points are on the screenshot", () => {
    const html = checkHtml(checkReport(), "corpus/");
    const full = screenshot(html, "check");
    const bare = screenshot(withoutCharts(html), "check-bare");
    expect(full - bare).toBeGreaterThan(500); // three intervals and points (the tags of the table are in both)
  }, 120_000);

  test("tune's bar chart and heatmap are drawn", () => {
    const html = tuneHtml(tuneResult());
    const full = screenshot(html, "tune");
    const bare = screenshot(withoutCharts(html), "tune-bare");
    expect(full - bare).toBeGreaterThan(5000); // five bars and six heatmap cells
  }, 120_000);
});
