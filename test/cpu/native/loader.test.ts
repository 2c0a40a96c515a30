import { expect, test } from "bun:test";
import { libraryLoads } from "../../../src/native/loader.ts";

test("a runtime library is detected by loading it with one symbol (Bun's dlopen refuses an empty table)", () => {
  expect(libraryLoads(["libc.so.6"], "getpid")).toBe(true);
  expect(libraryLoads(["libkerncap-no-such-library.so.1", "libc.so.6"], "getpid")).toBe(true);
  expect(libraryLoads(["libkerncap-no-such-library.so.1"], "getpid")).toBe(false);
  expect(libraryLoads(["libc.so.6"], "kerncap_no_such_symbol")).toBe(false);
});
