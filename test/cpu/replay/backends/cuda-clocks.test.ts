import { expect, test } from "bun:test";
import { describeClocks } from "../../../../src/cli/format.ts";
import { CLOCK_QUERY, parseClocks } from "../../../../src/replay/backends/cuda-clocks.ts";

test("nvidia-smi's clock answer (MHz, no units) and its [N/A]s; anything else is no answer", () => {
  const c = parseClocks("1980, 3201, 1785, 1980\n");
  expect(c).toEqual({ smMHz: 1980, memMHz: 3201, applicationsSmMHz: 1785, maxSmMHz: 1980, source: "nvidia-smi during the timed launches" });
  expect(describeClocks(c!)).toBe("clocks while timed: SM 1980 MHz (application 1785, max 1980), memory 3201 MHz");
  expect(parseClocks("345, 1593, [N/A], [Not Supported]")).toMatchObject({ smMHz: 345, memMHz: 1593, applicationsSmMHz: null, maxSmMHz: null });
  for (const bad of ["", "No devices were found", "1980, 3201"]) expect(parseClocks(bad)).toBeNull();
  // the query asks the four fields parseClocks reads, in that order, without units
  expect(CLOCK_QUERY).toEqual(["--query-gpu=clocks.sm,clocks.mem,clocks.applications.graphics,clocks.max.sm", "--format=csv,noheader,nounits"]);
});
