// rsocket-js encodes frames with Node's Buffer; the browser has none, so
// esbuild injects this one (the `buffer` package) wherever `Buffer` is used.
export { Buffer } from "buffer";
