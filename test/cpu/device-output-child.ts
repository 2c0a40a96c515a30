// A child of data-channel.test.ts: what a kernel's printf does (the driver writes to fd 1, through libc's buffer
// and by a program that inherits fd 1), around a verb's own text on the data channel.
import { dlopen, FFIType } from "bun:ffi";
import { spawnSync } from "node:child_process";
import { keepStdoutForData, printText } from "../../src/cli/args.ts";

keepStdoutForData();
const hostile = "\x1b]52;c;ZWNobyBQV05FRA==\x07\x1b[2Jthread 0 says \u202eevil\n";
// libc's stdout buffer, as the CUDA driver's printf buffer is written (flushed by kerncap, not by libc at exit)
const { puts } = dlopen("libc.so.6", { puts: { args: [FFIType.cstring], returns: FFIType.i32 } }).symbols;
puts(Buffer.from(`buffered ${hostile}\0`));
// a program that inherits fd 1
spawnSync("printf", ["%s", `inherited ${hostile}`], { stdio: ["ignore", "inherit", "inherit"] });
printText("the verdict\n");
if (process.argv[2] === "wait") await Bun.sleep(600); // the periodic copy, not the one at exit
