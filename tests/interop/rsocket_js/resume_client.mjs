// rsocket-js 1.0 (alpha) resumable client against a sansrs serve_resumable
// server; driven by tests/interop/test_rsocket_js_resume.py.
//
//   node resume_client.mjs <ws://host:port/path | wss://... | tcp://host:port> <mode> <items> [ca.pem]
//
// wss://: the server's certificate is checked against ca.pem (the test's
// throwaway CA, given to the `ws` package's TLS options), host name included.
//
// mode "stream": asks for a stream of <items> items (the test's proxy cuts
// the links under it; each reconnection follows 20 ms after a loss), then
// prints one JSON line, {"items": [...], "answer": "..."}, once every item
// and a request-response after them arrived. mode "forgotten": opens a
// stream and takes its first item, then prints "ready"; after a loss it
// reconnects only when a line arrives on stdin (the test makes the server
// forget the session first), then prints {"closed": "<the stream's
// error>"} when the session ends.
import { RSocketConnector } from "rsocket-core";
import { TcpClientTransport } from "rsocket-tcp-client";
import { WebsocketClientTransport } from "rsocket-websocket-client";
import WebSocket from "ws";
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";

const [url, mode, items, caFile] = process.argv.slice(2);
const tls = caFile ? { ca: readFileSync(caFile) } : {};
const lines = createInterface({ input: process.stdin });
const nextLine = () => new Promise((resolve) => lines.once("line", resolve));
const parsed = new URL(url);
const transport =
  parsed.protocol === "tcp:"
    ? new TcpClientTransport({
        connectionOptions: { host: parsed.hostname, port: Number(parsed.port) },
      })
    : new WebsocketClientTransport({ url, wsCreator: (u) => new WebSocket(u, tls) });

const connector = new RSocketConnector({
  setup: { keepAlive: 100, lifetime: 2000, dataMimeType: "application/octet-stream",
           metadataMimeType: "application/octet-stream" },
  transport,
  resume: {
    tokenGenerator: () => randomBytes(16),
    reconnectFunction: () =>
      mode === "forgotten" ? nextLine() : new Promise((resolve) => setTimeout(resolve, 20)),
  },
});

const print = (line) => process.stdout.write(line + "\n");
// process.exit() drops what a pipe has not taken yet (over 64 KiB): exit
// once the last line is written.
const printAndExit = (line, code) => process.stdout.write(line + "\n", () => process.exit(code));
const watchdog = setTimeout(() => { print(JSON.stringify({ error: "timed out" })); process.exit(2); }, 25000);

function requestResponse(rsocket, data) {
  return new Promise((resolve, reject) => {
    rsocket.requestResponse({ data: Buffer.from(data) }, {
      onNext: (payload) => resolve(payload.data.toString()),
      onError: reject,
      onComplete: () => {},
      onExtension: () => {},
    });
  });
}

const rsocket = await connector.connect();
if (mode === "stream") {
  const got = [];
  await new Promise((resolve, reject) => {
    rsocket.requestStream({ data: Buffer.from(items) }, 2147483647, {
      onNext: (payload, isComplete) => {
        got.push(payload.data.toString());
        if (got.length === 1) print("started");
        if (isComplete) resolve();
      },
      onError: reject,
      onComplete: resolve,
      onExtension: () => {},
    });
  });
  const answer = await requestResponse(rsocket, "after");
  clearTimeout(watchdog);
  printAndExit(JSON.stringify({ items: got, answer }), 0);
} else {
  // A stream kept open (one item asked for, two to come): it outlives
  // transports while the session lives, and fails when the session ends.
  rsocket.requestStream({ data: Buffer.from("2") }, 1, {
    onNext: () => print("ready"),
    onError: (error) => {
      print(JSON.stringify({ closed: String(error && error.message) }));
      clearTimeout(watchdog);
      process.exit(0);
    },
    onComplete: () => {
      print(JSON.stringify({ error: "the stream completed" }));
      process.exit(1);
    },
    onExtension: () => {},
  });
}
